// Hopper's warpgroup MMA (wgmma, sm_90a only) for the conv rungs 9 to 12: a job's multiply of
// one quad (the instruction's register-A form, ladder/core/cuda/wgmma.cuh), B's descriptor, the
// weights staged as core matrices, and the two ways a job issues its multiplies (a window per
// channel, rungs 9 and 10; one group per job, rungs 11 and 12).
//
// A job belongs to a warpgroup (4 warps): warp w of the group takes column group 4 sg + w, and
// one wgmma.m64nNk16 multiplies the group's 4 x 16 A rows (each warp's own 16, from its own
// registers: the A fragment of wgmma's register form is mma.sync's m16n8k16 A fragment) by a
// k16 x N slice of the weights, N = 8 NT, read from shared memory through a descriptor.
// Accumulators are laid out as NT m16n8 tiles, as for mma.sync, so the epilogues are shared.
#ifndef CONV_TC_WGMMA_JOBS_CUH
#define CONV_TC_WGMMA_JOBS_CUH
#include "ladder/core/cuda/memory.cuh"  // fence_proxy_async
#include "ladder/core/cuda/wgmma.cuh"   // wgmma_desc, wgmma_rs and their order

#include "layout.cuh"

// D (64 x 8 NT, FP32, NT m16n8 tiles) += A (64 x 16, this warp's 16 rows: one quad) * B
// (16 x 8 NT, by descriptor, K-major as stored: no transpose).
template <int NT>
__device__ __forceinline__ void wgmma_quad(float (&d)[NT][4], uint4 a, unsigned long long b) {
  wgmma_rs<8 * NT, half, 0>(&d[0][0], {a.x, a.y, a.z, a.w}, b);
}

constexpr unsigned CORE_BYTES = 128;  // one 8 x 8 core matrix: 8 rows of 16 bytes

// The descriptor of a weight entry at shared address `addr`: its two core matrices (the k8
// halves) CORE_BYTES apart (LBO), the n8 tiles FRAG_BYTES apart (SBO), no swizzle.
__device__ __forceinline__ unsigned long long weight_desc(unsigned addr) {
  return wgmma_desc(addr, CORE_BYTES, FRAG_BYTES, WGMMA_SWIZZLE_NONE);
}

// Weights -> core matrices for channels [c0, c0 + cc): row u of 16 bytes is entry u / 16,
// k8 half u / 8 % 2, n row u % 8, holding B[8 half + 0..7][n].
template <int PACK>
__device__ void stage_core_matrices(const Conv& p, unsigned char* smem, int c0, int cc) {
  uint4* rows = reinterpret_cast<uint4*>(smem);
  const int count = cc * p.QC * p.PB * PAIRS * p.NTP * (FRAG_BYTES / 16);
  for (int u = threadIdx.x; u < count; u += THREADS) {
    const WeightBlock b(p, u / 16, c0);
    const int half = u / 8 % 2, n = u % 8;
    unsigned v[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int k = 8 * half + 2 * i;
      v[i] = b.tap<PACK>(n, k) | b.tap<PACK>(n, k + 1) << 16;
    }
    rows[u] = make_uint4(v[0], v[1], v[2], v[3]);
  }
  // wgmma reads B through the async proxy; these stores went through the generic one. The
  // proxy fence (then the staging barrier) makes them visible to it: without it rung 9 read
  // stale weights.
  fence_proxy_async();
}

// One window (taps filter rows of one channel and one 8-column chunk, as rung 8's window): the
// quads are loaded first, then one fence, then every (tile, step) multiply, committed as one
// group. entry + j NTP is row pair j's weights. Every window issues all PAIRS k16 steps: a step
// past the filter's last row (j >= ceil(taps / 2)) reads an entry whose rows 8 pb + 2j, + 1 are
// past K, all zero, and A quads that are not loaded (they may lie past the staged ones) but set to
// zero. The alternatives cost more: a multiply under a run-time branch makes ptxas serialize every
// wgmma (warning C7520), and one window per taps (as rung 8's) keeps each case's A registers alive
// across windows (125 registers for T = 1; T = 2 serialized, C7511). No waste for K = 7 (ceil(7 /
// 2) = PAIRS), up to 4x for a 1 x 1 filter. The (tile i, step j) multiply reads quad DIAGONAL i +
// j: 1 for rung 9's 2-row tiles, 2 for rung 10's 4-row tiles.
template <int T, int NT, int DIAGONAL>
__device__ __forceinline__ void wgmma_window(float (&acc)[T][NT][4], const uint4* src,
                                             const unsigned char* smem, int entry,
                                             int frag_stride, int taps) {
  constexpr int QUADS = DIAGONAL * (T - 1) + PAIRS;
  constexpr int ALWAYS = DIAGONAL * (T - 1) + 1;  // quads step 0 reads (taps >= 1)
  const int loaded = DIAGONAL * (T - 1) + (taps + 1) / 2;  // the quads the rows reach
  // row pair j's descriptor is pair 0's plus j NTP entries (in the 16-byte units of its
  // address field, which cannot carry: shared addresses stay below 2^18)
  const unsigned long long desc0 =
      weight_desc((unsigned)__cvta_generic_to_shared(smem) + entry * FRAG_BYTES);
  const unsigned step = frag_stride * (FRAG_BYTES >> 4);
  uint4 a[QUADS];
#pragma unroll
  for (int k = 0; k < QUADS; ++k)  // the first ALWAYS are loaded without a test
    a[k] = k < ALWAYS || k < loaded ? src[k] : make_uint4(0, 0, 0, 0);
  wgmma_fence();
#pragma unroll
  for (int j = 0; j < PAIRS; ++j) {
    const unsigned long long desc = desc0 + j * step;
#pragma unroll
    for (int i = 0; i < T; ++i) wgmma_quad<NT>(acc[i], a[DIAGONAL * i + j], desc);
  }
  wgmma_commit();
  // The next window loads its quads into the same registers (a run-time loop), and PTX
  // forbids writing an A register before the wgmma that reads it has completed.
  wgmma_wait<0>();
}

// Every committed group has completed: the accumulators may be read, shared memory reused.
// The empty asm that "modifies" each accumulator after the wait keeps the compiler from
// moving the epilogue's reads of them above it: to the compiler the wait touches no
// register, and without this the epilogue read unfinished sums (errors from 1e-3 to 26%,
// different on every run).
template <int T, int NT>
__device__ __forceinline__ void wgmma_finish(float (&acc)[T][NT][4]) {
  wgmma_wait<0>();
#pragma unroll
  for (int i = 0; i < T; ++i)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) fence_operands(acc[i][nt]);
}

// Rung 11's job (rungs 11 and 12). The whole job, all CH channels in one group: src points at this
// lane's column's quads at the sub-band's top row in channel 0 (channel c's are channel_quads
// further), entry at channel 0's B entry of row pair 0 (channel c's is c PAIRS frag_stride entries
// further, row pair j's j frag_stride). As wgmma_window with DIAGONAL 2 otherwise: tile i at step
// j reads quad 2i + j, and a quad past the rows the taps reach is zero, not loaded.
template <int CH, int T, int NT>
__device__ __forceinline__ void one_group_job(float (&acc)[T][NT][4], const uint4* src,
                                              const unsigned char* smem, int entry,
                                              int frag_stride, int channel_quads, int taps) {
  constexpr int QUADS = 2 * (T - 1) + PAIRS;
  constexpr int ALWAYS = 2 * (T - 1) + 1;  // quads step 0 reads (taps >= 1)
  const int loaded = 2 * (T - 1) + (taps + 1) / 2;
  // the descriptors in 32 bits: their high word (SBO) is a constant, and an entry's address
  // field cannot carry into the LBO above it (shared addresses stay below 2^18)
  const unsigned desc0 = (unsigned)weight_desc((unsigned)__cvta_generic_to_shared(smem) +
                                               entry * FRAG_BYTES),
                 high = (unsigned)(weight_desc(0) >> 32);
  const unsigned step = frag_stride * (FRAG_BYTES >> 4);
  uint4 a[CH][QUADS];
  if (loaded == QUADS) {  // every quad holds live rows (K = 6 or 7): no tests
#pragma unroll
    for (int c = 0; c < CH; ++c)
#pragma unroll
      for (int k = 0; k < QUADS; ++k) a[c][k] = src[c * channel_quads + k];
  } else {
#pragma unroll
    for (int c = 0; c < CH; ++c)
#pragma unroll
      for (int k = 0; k < QUADS; ++k)
        a[c][k] = k < ALWAYS || k < loaded ? src[c * channel_quads + k] : make_uint4(0, 0, 0, 0);
  }
  // The accumulators are zeros here (one job, one group), and the compiler would set them
  // between the fence and the multiplies that read them, where ptxas then injects waits
  // and serializes the wgmma (C7517 to C7520, at T = 2): they are set before the fence.
#pragma unroll
  for (int i = 0; i < T; ++i)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) fence_operands(acc[i][nt]);
  wgmma_fence();
#pragma unroll
  for (int c = 0; c < CH; ++c)
#pragma unroll
    for (int j = 0; j < PAIRS; ++j) {
      const unsigned long long desc =
          (unsigned long long)high << 32 | (desc0 + (c * PAIRS + j) * step);
#pragma unroll
      for (int i = 0; i < T; ++i) wgmma_quad<NT>(acc[i], a[c][2 * i + j], desc);
    }
  wgmma_commit();
  wgmma_wait<0>();
}

#endif  // CONV_TC_WGMMA_JOBS_CUH
