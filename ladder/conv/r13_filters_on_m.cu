// Rung 13 (conv): the operands swapped. Filters (x 2 x 2 output shifts) on wgmma's M, their
// weights in registers for the whole kernel; pixels on a wide N, read by descriptor from a
// copy of the input laid out so that wgmma can address it (sm_90a only).
//
// The GEMM. An output block is 2 x 2 pixels, (2Y + dy, 2n + dx). Its 8 x 8 input window
// starts at (2Y, 2n), and
//   D[(f, dy, dx)][g] = sum over k = (c, p, q) of A[(f, dy, dx)][k] B[k][g],
//   A[(f, dy, dx)][(c, p, q)] = w[f][c][p - dy][q - dx] (zero outside the filter),
//   B[(c, p, q)][g] = x[c][2Y + p][2n + q],  g = Y NP + n  (NP = ceil(Wo / 2) blocks a row)
// gives D[(f, dy, dx)][g] = y[f][2Y + dy][2n + dx]. 16 filters x 4 shifts are wgmma's 64 rows;
// k = (c, p, q) is 8 x 8 per channel, four k16 steps (rows p = 2j and 2j + 1), 49 of 64 taps
// non-zero; N = 152 blocks per job, two jobs for conv2's 17 x 17 blocks (5% padding).
//
// A in registers. A thread's A fragment at step (c, j) is four registers of weights that never
// change: all 4C steps (64 registers for C = 4) are loaded once, before the first image, and
// every multiply of every image reuses them. Rungs 8 to 12 put pixels on A and loaded their
// fragments from shared memory for every job.
//
// B by descriptor. wgmma reads B as 8 x 8 core matrices (K-major, no swizzle: 8 rows of N,
// each 16 bytes = 8 consecutive k), so row g of the k8 half (c, p) must be the 16 bytes
// x[c][2Y + p][2n .. 2n + 7]. The rewrite stores, per channel and input row r, the NP chunks
// x[c][r][2n .. 2n + 7] (each input element 4 times) at chunk ((c R + s(r)) NP + n), with the
// rows ordered by parity, s(r) = (r % 2) R/2 + r / 2. Then input row 2Y + p of block g is chunk
// (c R + (p % 2) R/2 + p / 2) NP + g: the chunks of one k8 half are consecutive in g across
// block rows (the core matrices are contiguous, SBO = 128 bytes), and the odd half of a step is
// always R/2 NP chunks after the even one (LBO). R = 2 NY + 6 rows are rewritten (NY =
// ceil(Ho / 2)), zeros past the image, so every step of every block reads rewritten chunks;
// padding blocks (g >= G) read a zeroed tail.
//
// Epilogue. Lane (i, t) of warp wq holds rows 16 wq + i (dx = 0) and + 8 (dx = 1) of the
// accumulator, at columns g, g + 1 of each n8 block: the rows are ordered so that these are
// filter f = 4 (i % 4) + wq, shift dy = i / 4, and so (dx = 0, dx = 1) of one column are two
// adjacent outputs: one 32-bit store of a half2 into the image's output buffer (shared
// memory), at an offset read from a table per (dy, g) built once per block. With Wo odd the
// halves are stored apart. One bulk copy (TMA) writes the whole image out.
//
// Work: a block is one warpgroup and takes whole images, strided. The raw input comes in by
// one bulk copy per image, two slots ahead, completing on an mbarrier per slot (or, when the
// image is not 16-byte aligned or needs padding, through the threads). Per image: rewrite,
// barrier, then per pair of jobs: both jobs' multiplies (a commit group each), then job 0's wait
// and epilogue (under job 1's multiplies) and job 1's; barrier, bulk store. Two blocks per SM:
// one block's rewrite and epilogues also run under the other's multiplies.
//
// Proxies: the rewrite and the epilogue write shared memory through the generic proxy, and
// wgmma and the bulk copies read it through the async proxy: every writing thread fences
// (fence.proxy.async) before the barrier after which they read.
#include <cuda_fp16.h>

#include "ladder/core/cuda/mbarrier.cuh"  // the raw slots' mbarriers
#include "ladder/core/cuda/memory.cuh"    // fence_proxy_async, st_shared_*
#include "ladder/core/cuda/tma.cuh"       // the bulk copies in and out
#include "ladder/core/cuda/wgmma.cuh"     // wgmma_desc, wgmma_rs and their order

// Set by the launcher (r13_filters_on_m.py, DEFINES: one source for Python and C++):
// FM_THREADS (a block is one warpgroup), FM_NT (pixel blocks per job: wgmma's N), FM_JOBS
// (jobs in flight: one's epilogue runs under the next one's multiplies), FM_RAW_SLOTS (raw
// images in flight per block), FM_BARS_BYTES (the mbarriers, at the start of shared memory),
// FM_INVALID and FM_HI_INVALID (table flags: (dy, g) outside the output; x + 1 outside, odd
// Wo), FM_BULK_IN, FM_BULK_OUT, FM_PAIRED (the kernel's flags), and the parameter list
// FM_PARAMETERS / FM_ARGUMENTS.
constexpr int FM_NJ = FM_NT / 8;  // n8 column blocks of a job
constexpr int FM_AHEAD = 2;  // table entries the epilogue loads ahead of its stores
static_assert(8 * FM_RAW_SLOTS <= FM_BARS_BYTES, "an mbarrier (8 bytes) per raw slot");
constexpr unsigned FM_CORE_BYTES = 128;  // a core matrix: 8 rows of 16 bytes (n8 blocks apart)
constexpr unsigned FM_OFFSET = 0x3FFFFFFFu;      // table: the byte offset in a plane

// The descriptor of B at shared address `addr`: K-major core matrices without swizzle, the k8
// halves of a step `lbo` bytes apart, n8 blocks 128 bytes apart.
__device__ __forceinline__ unsigned long long chunk_desc(unsigned addr, unsigned lbo) {
  return wgmma_desc(addr, lbo, FM_CORE_BYTES, WGMMA_SWIZZLE_NONE);
}

__device__ __forceinline__ unsigned short half_bits(const __half* p, long long at, bool inside) {
  return inside ? __half_as_ushort(p[at]) : 0;
}

// Weights w[f][c][p][q] of a (filter, tap) pair (q, q + 1), zero outside the filter.
__device__ __forceinline__ unsigned weight_pair(const __half* w, int f, int c, int p, int q,
                                                int M, int C, int K) {
  const bool row = f < M && p >= 0 && p < K;
  const long long at = ((long long)(f * C + c) * K + p) * K + q;
  return half_bits(w, at, row && q >= 0 && q < K) |
         (unsigned)half_bits(w, at + 1, row && q + 1 >= 0 && q + 1 < K) << 16;
}

// One job's multiplies into d: 4 C k16 steps, one commit group. Step (c, j) reads the even k8
// half at chunk (c R + j) NP of the job's first block, the odd one R/2 NP chunks later (LBO).
// D (64 x FM_NT, FP32) (+)= A (64 x 16, this warp's 16 rows in a) * B (16 x FM_NT, by
// descriptor): the first step ignores D's old contents (ACCUMULATE false), so that the
// registers are dead between jobs (the rewrite and the epilogue then have them).
template <int S>
__device__ __forceinline__ void issue_job(float (&d)[FM_NT / 2], const unsigned (&a)[S][4],
                                          unsigned long long desc, int R, int NP) {
  wgmma_rs<FM_NT, half, 0, false>(d, a[0], desc);
#pragma unroll
  for (int s = 1; s < S; ++s)
    wgmma_rs<FM_NT, half, 0>(d, a[s], desc + ((s / 4) * R + s % 4) * NP);
  wgmma_commit();
}

// Until at most N groups of this warpgroup's multiplies are in flight; then d is final (the
// empty asm keeps the compiler from reading d above the wait).
template <int N>
__device__ __forceinline__ void wait_job(float (&d)[FM_NT / 2]) {
  wgmma_wait<N>();
  fence_operands(d);
}

// One job's epilogue into the output buffer. Lane (i, t) holds columns g = 8 jj + 2t, + 1 of
// rows (f, dy, dx = 0) and (dx = 1); entry points at its first column's table entry, plane at
// its filter's output plane. The entries are loaded FM_AHEAD n8 blocks ahead of the stores
// that use them: a load's latency is then spent under other stores, not waited for.
__device__ __forceinline__ void store_job(const float (&d)[FM_NT / 2], const unsigned* entry,
                                          unsigned plane, bool paired) {
  if (paired) {
    uint2 e[FM_NJ];
#pragma unroll
    for (int jj = 0; jj < FM_AHEAD; ++jj) e[jj] = *reinterpret_cast<const uint2*>(entry + 8 * jj);
#pragma unroll
    for (int jj = 0; jj < FM_NJ; ++jj) {
      if (jj + FM_AHEAD < FM_NJ)
        e[jj + FM_AHEAD] = *reinterpret_cast<const uint2*>(entry + 8 * (jj + FM_AHEAD));
      const __half2 v0 = __floats2half2_rn(d[4 * jj], d[4 * jj + 2]);
      const __half2 v1 = __floats2half2_rn(d[4 * jj + 1], d[4 * jj + 3]);
      if (!(e[jj].x & FM_INVALID))
        st_shared_b32(plane + e[jj].x, *reinterpret_cast<const unsigned*>(&v0));
      if (!(e[jj].y & FM_INVALID))
        st_shared_b32(plane + e[jj].y, *reinterpret_cast<const unsigned*>(&v1));
    }
  } else {  // odd Wo: the halves apart, x + 1 tested
#pragma unroll
    for (int jj = 0; jj < FM_NJ; ++jj) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const unsigned found = entry[8 * jj + e];
        const unsigned at = plane + (found & FM_OFFSET);
        if (!(found & FM_INVALID))
          st_shared_b16(at, __half_as_ushort(__float2half_rn(d[4 * jj + e])));
        if (!(found & (FM_INVALID | FM_HI_INVALID)))
          st_shared_b16(at + 2, __half_as_ushort(__float2half_rn(d[4 * jj + e + 2])));
      }
    }
  }
}

// One image's raw input into its slot by one bulk copy: its bytes expected on the slot's mbarrier
// bar, then the arrival (the phase's only one), after which the phase completes when they land.
__device__ __forceinline__ void load_raw(unsigned bar, unsigned dst, const __half* src,
                                         unsigned bytes) {
  mbar_expect_tx(bar, bytes);
  bulk_load(dst, src, bytes, bar);
  mbar_arrive(bar);
}

// x (B, C, H, W), w (M, C, K, K), y (B, M, Ho, Wo), half. The layout offsets (bytes of dynamic
// shared memory) and the derived sizes come from the launcher's plan (r13_filters_on_m.py).
template <int C>
__device__ __forceinline__ void conv_fm(const __half* __restrict__ x, const __half* __restrict__ w,
                                        __half* __restrict__ y, int B, int M, int H, int W, int K,
                                        int Ho, int Wo, int NP, int G, int R, int RW, int tiles,
                                        int tab_at, int raw_at, int raw_bytes, int rep_at,
                                        int rep_chunks, int out_at, int flags) {
  extern __shared__ __align__(128) unsigned char smem[];
  constexpr int S = 4 * C;  // k16 steps: 4 per channel (filter rows 2j, 2j + 1)
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int i = lane / 4, t = lane % 4;
  const int f = 4 * (i % 4) + warp, dy = i / 4;  // this lane's accumulator rows (dx = 0, 1)
  const int GP = tiles * FM_NT, R2 = R / 2;
  const unsigned base = (unsigned)__cvta_generic_to_shared(smem);
  unsigned* tab = reinterpret_cast<unsigned*>(smem + tab_at);
  const unsigned rep = base + rep_at, out = base + out_at;
  const long long image_halves = (long long)C * H * W, out_halves = (long long)M * Ho * Wo;

  // the A fragments: step s = (c, j), a[s][r] = rows (dx = r & 1), k8 half r >> 1, k = 2t, 2t + 1
  unsigned a[S][4];
#pragma unroll
  for (int s = 0; s < S; ++s) {
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const int dx = r & 1, p = 2 * (s % 4) + (r >> 1);
      a[s][r] = weight_pair(w, f, s / 4, p - dy, 2 * t - dx, M, C, K);
    }
  }
  // the epilogue's table: (y, x) of (dy, g) as a byte offset in an output plane, or flags
  for (int e = tid; e < 2 * GP; e += FM_THREADS) {
    const int ddy = e / GP, g = e - ddy * GP, Y = g / NP, n = g - Y * NP;
    const int yy = 2 * Y + ddy, xx = 2 * n;
    tab[e] = g >= G || yy >= Ho ? FM_INVALID
                                : (unsigned)(yy * Wo + xx) * 2 | (xx + 1 >= Wo ? FM_HI_INVALID : 0);
  }
  // the tail that padding blocks read: zeros, never written again
  for (int u = C * R * NP + tid; u < rep_chunks; u += FM_THREADS)
    st_shared_v4(rep + 16 * u, 0, 0, 0, 0);
  const bool bulk_in = flags & FM_BULK_IN, bulk_out = flags & FM_BULK_OUT;
  if (bulk_in && tid == 0) {
    for (int slot = 0; slot < FM_RAW_SLOTS; ++slot) {  // one arrival a phase, and the bytes
      mbar_init<1>(base + 8 * slot);
      mbar_fence_init();
      fence_proxy_async();
    }
  }
  __syncthreads();
  if (bulk_in && tid == 0) {
    for (int slot = 0; slot < FM_RAW_SLOTS; ++slot) {
      const long long b = blockIdx.x + (long long)slot * gridDim.x;
      if (b < B) {
        load_raw(base + 8 * slot, base + raw_at + slot * raw_bytes, x + b * image_halves,
                 (unsigned)(image_halves * 2));
      }
    }
  }

  float acc[FM_JOBS][FM_NT / 2];
  const int NG = (NP + 3) / 4;  // groups of 4 chunks per rewritten row
  int k = 0;
  for (long long b = blockIdx.x; b < B; b += gridDim.x, ++k) {
    const int slot = k % FM_RAW_SLOTS;
    const unsigned char* raw = smem + raw_at + slot * raw_bytes;
    if (bulk_in) {
      mbar_wait(base + 8 * slot, (k / FM_RAW_SLOTS) & 1);
    } else {  // through the threads, with the zeros past the image the bulk path never needs
      __half* dst = reinterpret_cast<__half*>(smem + raw_at + slot * raw_bytes);
      const __half* src = x + b * image_halves;
      for (int e = tid; e < C * R * RW; e += FM_THREADS) {
        const int row = e / RW, col = e - row * RW, c = row / R, r = row - c * R;
        dst[e] = __ushort_as_half(
            half_bits(src, ((long long)c * H + r) * W + col, r < H && col < W));
      }
      __syncthreads();
    }
    // the rewrite. An item is half of one row: groups [0, NG / 2) or [NG / 2, NG) of 4 chunks
    // (chunk n is the 4-byte words n .. n + 3 of the row, so group q is 16-byte words q, q + 1);
    // consecutive threads take consecutive rows of one half (no bank conflicts), and each
    // loads the 16-byte word its next group needs before storing this group.
    for (int u = tid; u < 2 * C * R; u += FM_THREADS) {
      const int half = u >= C * R, row = u - half * C * R;
      const int c = (row >= R) + (row >= 2 * R) + (row >= 3 * R), r = row - c * R;
      const int first = half ? NG / 2 : 0, last = half ? NG : NG / 2;
      const uint4* src = reinterpret_cast<const uint4*>(raw + row * RW * 2);
      unsigned dst = rep + 16 * ((c * R + (r & 1) * R2 + (r >> 1)) * NP + 4 * first);
      uint4 cur = src[first], next = src[first + 1];
      for (int q = first; q < last; ++q, dst += 64) {
        const uint4 after = src[q + 2];  // up to 32 bytes past the row: the slot is padded
        const int n = 4 * q;
        st_shared_v4(dst, cur.x, cur.y, cur.z, cur.w);
        if (n + 1 < NP) st_shared_v4(dst + 16, cur.y, cur.z, cur.w, next.x);
        if (n + 2 < NP) st_shared_v4(dst + 32, cur.z, cur.w, next.x, next.y);
        if (n + 3 < NP) st_shared_v4(dst + 48, cur.w, next.x, next.y, next.z);
        cur = next, next = after;
      }
    }
    fence_proxy_async();  // the chunks (and the raw slot's reads) before the async proxy
    if (bulk_out && tid == 0) bulk_wait_read<0>();  // the last image's store has read the buffer
    __syncthreads();
    if (bulk_in && tid == 0 && b + FM_RAW_SLOTS * (long long)gridDim.x < B) {
      load_raw(base + 8 * slot, base + raw_at + slot * raw_bytes,
               x + (b + FM_RAW_SLOTS * (long long)gridDim.x) * image_halves,
               (unsigned)(image_halves * 2));
    }

    // the jobs, FM_JOBS at a time (the plan pads tiles to a multiple): every multiply is
    // issued, then each job's epilogue runs once its own group has completed
    for (int job = 0; job < tiles; job += FM_JOBS) {
      const unsigned long long desc = chunk_desc(rep + 16 * job * FM_NT, 16 * R2 * NP);
      wgmma_fence();
#pragma unroll
      for (int q = 0; q < FM_JOBS; ++q) issue_job<S>(acc[q], a, desc + q * FM_NT, R, NP);
      const unsigned* entry = tab + dy * GP + job * FM_NT + 2 * t;
      const unsigned plane = out + (unsigned)(f * Ho * Wo) * 2;
      wait_job<FM_JOBS - 1>(acc[0]);
      if (f < M) store_job(acc[0], entry, plane, flags & FM_PAIRED);
      if (FM_JOBS > 1) {
        wait_job<0>(acc[FM_JOBS - 1]);
        if (f < M) store_job(acc[FM_JOBS - 1], entry + FM_NT, plane, flags & FM_PAIRED);
      }
    }
    fence_proxy_async();  // the output buffer's stores before the bulk copy reads it
    __syncthreads();
    if (bulk_out) {
      if (tid == 0) {
        bulk_store(y + b * out_halves, out, (unsigned)(out_halves * 2));
        bulk_commit();
      }
    } else {  // through the threads; the next image's barrier orders these reads first
      const __half* buffer = reinterpret_cast<const __half*>(smem + out_at);
      for (long long e = tid; e < out_halves; e += FM_THREADS) y[b * out_halves + e] = buffer[e];
    }
  }
  if (bulk_out && tid == 0) bulk_wait<0>();
}

#define CONV_FM_KERNEL(NAME, CH)                                                              \
  extern "C" __global__ void __launch_bounds__(FM_THREADS, 1)                                \
      NAME(const __half* x, const __half* w, __half* y, FM_PARAMETERS, int flags) {          \
    conv_fm<CH>(x, w, y, FM_ARGUMENTS, flags);                                                \
  }
CONV_FM_KERNEL(conv_fm_c1, 1)
CONV_FM_KERNEL(conv_fm_c2, 2)
CONV_FM_KERNEL(conv_fm_c3, 3)
CONV_FM_KERNEL(conv_fm_c4, 4)
