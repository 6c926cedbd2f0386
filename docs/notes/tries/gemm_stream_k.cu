// A try, not a rung (docs/notes/gemm.md, "Tries that did not stay"): rung 20 with its last
// waves split along K (stream-K), so that no SM idles at the end.
// C = A @ B, A (M x K) and B (K x N) row-major half (or bfloat16), FP32 accumulation, C in
// the inputs' type. Build for sm_90a. The launcher pads M to a multiple of 128, N of 256 and
// K of 64, launches G = min(SMs, tiles) blocks and passes a workspace: G x 128 KB of partial
// sums and 4 ints per block, zero before the first launch (each launch leaves them zero).
//
// Against rung 20: (1) the schedule: when the tiles are not a multiple of G, the first
// tiles - G - tiles % G tiles go out whole as in rung 20 (block b: b, b + G, ...), and the
// rest, between one and two waves of them, are cut into their K tiles: block b takes the
// iterations [b W / G, (b + 1) W / G) of their W = tiles' x K tiles, so every block has the
// same number of K tiles within one (its epilogues and partial sums aside); (2) a tile cut between blocks b and b + 1 is summed in
// pairs: the first of the two consumers to finish its part writes its 64 x 256 partial sums
// to the workspace and leaves; the second adds them to its own and writes the tile out.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

constexpr int BM = 128, BN = 256, BK = 64;  // block tile of C and the K tile of a stage
constexpr int STAGES = 4;                   // 4 x 48 KB of shared memory in flight
constexpr int CONSUMERS = 2;                // math warpgroups, 64 rows of C each
constexpr int THREADS = 128 * (CONSUMERS + 1);  // + one producer warpgroup
constexpr int A_BYTES = BM * BK * 2;        // 16 KB: 128 rows of 128 bytes
constexpr int B_CHUNK = 64;                 // columns of B per copy: 64 halves = 128 bytes
constexpr int B_CHUNK_BYTES = BK * B_CHUNK * 2;  // 8 KB: 64 rows (k) of 128 bytes
constexpr int B_BYTES = BK * BN * 2;        // 32 KB: BN / 64 = 4 chunks
constexpr int STAGE_BYTES = A_BYTES + B_BYTES;  // 48 KB
constexpr int GROUP_M = 8;                  // block-row groups for L2 reuse
// The epilogue's staging, after the ring: per consumer 64 rows x 128 columns (one round), as
// 2 chunks of 64 columns (64 rows of 128 bytes, 8 KB each), rung 19's swizzled layout.
constexpr int C_CHUNK_BYTES = 64 * 128;     // 8 KB
constexpr int ROUND_COLS = 128;             // columns of C per round
constexpr int C_BYTES = 64 * ROUND_COLS * 2;  // 16 KB per consumer
constexpr int UNITS_PER_ROW = ROUND_COLS * 2 / 16;  // 16 16-byte units in a round's row
constexpr int RING_BYTES = STAGES * STAGE_BYTES;  // 192 KB

#include "hopper.cuh"  // TMA, mbarriers, descriptors, wgmma: the library

__device__ static inline void named_barrier(int id, int count) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(count) : "memory");
}
// rung 19's staged layout: unit u of row r, unit index XOR row % 8, in 64-column chunks
__device__ static inline int staged(int r, int u) {
  return (u / 8) * C_CHUNK_BYTES + r * 128 + (((u % 8) ^ (r % 8)) * 16);
}
// rung 19's grouped order, for tile t instead of blockIdx.x
__device__ static inline void tile_corner(int t, int tiles_m, int tiles_n, int& m0, int& n0) {
  const int per_group = GROUP_M * tiles_n;
  const int first_m = t / per_group * GROUP_M;
  const int rows_in_group = min(tiles_m - first_m, GROUP_M);
  const int in_group = t % per_group;
  m0 = (first_m + in_group % rows_in_group) * BM;
  n0 = (in_group / rows_in_group) * BN;
}

// The work of one block, in order: whole tiles first, then its range of the cut tiles'
// K iterations, as (tile, first K tile, end K tile) pieces. The producer and the consumers
// walk the same pieces, so the K-tile counter that sets a stage and its phase agrees.
struct Schedule {
  int tiles, k_tiles, whole, cut;  // all tiles; K tiles a tile; tiles dealt out whole; cut
  __device__ Schedule(int tiles_, int k_tiles_) : tiles(tiles_), k_tiles(k_tiles_) {
    const int g = gridDim.x;
    cut = (tiles > g && tiles % g != 0) ? g + tiles % g : 0;
    whole = tiles - cut;
  }
  // the iteration range [begin, end) of the cut tiles' K tiles that block b takes
  __device__ long long begin(int b) const { return (long long)b * cut * k_tiles / gridDim.x; }
};

template <typename F>
__device__ __forceinline__ void for_each_piece(const Schedule& s, F&& piece) {
  for (int t = blockIdx.x; t < s.whole; t += gridDim.x) piece(t, 0, s.k_tiles);
  const long long end = s.begin(blockIdx.x + 1);
  for (long long i = s.begin(blockIdx.x); i < end;) {
    const int t = (int)(i / s.k_tiles), kb = (int)(i % s.k_tiles);
    const int ke = (int)min((long long)s.k_tiles, kb + (end - i));
    piece(s.whole + t, kb, ke);
    i += ke - kb;
  }
}

__device__ static inline int load_acquire(const int* p) {
  int v;
  asm volatile("ld.acquire.gpu.global.b32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ static inline void store_release(int* p, int v) {
  asm volatile("st.release.gpu.global.b32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

template <typename T>
__device__ __forceinline__ void gemm(const TensorMap& tmA, const TensorMap& tmB,
                                     T* __restrict__ C, int M, int N, int K,
                                     float4* __restrict__ work, int* __restrict__ flags) {
  extern __shared__ unsigned char smem_raw[];
  __shared__ alignas(8) unsigned long long full[STAGES], empty[STAGES];
  __shared__ int arrived[CONSUMERS];  // how many of a cut tile's two halves were done before
  unsigned char* smem = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
  const unsigned smem0 = smem_addr(smem);

  const int tiles_m = M / BM, tiles_n = N / BN, tiles = tiles_m * tiles_n;
  const int k_tiles = K / BK;
  const Schedule sched(tiles, k_tiles);

  const int wg = threadIdx.x / 128;  // warpgroup 0 produces, 1 .. CONSUMERS compute
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(smem_addr(&full[s]), 1);
      mbar_init(smem_addr(&empty[s]), CONSUMERS * 128);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();

  if (wg == 0) {  // the producer: rung 19's, over every K tile of every tile of this block
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
    if (threadIdx.x == 0) {
      int it = 0;  // K tiles copied so far, across pieces: stage it % STAGES
      for_each_piece(sched, [&](int t, int kb, int ke) {
        int m0, n0;
        tile_corner(t, tiles_m, tiles_n, m0, n0);
        for (int kt = kb; kt < ke; ++kt, ++it) {
          const int s = it % STAGES;
          if (it >= STAGES) mbar_wait(smem_addr(&empty[s]), ((it / STAGES) + 1) & 1);
          const unsigned bar = smem_addr(&full[s]);
          const unsigned sa = smem0 + s * STAGE_BYTES, sb = sa + A_BYTES;
          mbar_expect_tx(bar, STAGE_BYTES);
          tma_load(sa, &tmA, bar, kt * BK, m0);
#pragma unroll
          for (int j = 0; j < BN / B_CHUNK; ++j)
            tma_load(sb + j * B_CHUNK_BYTES, &tmB, bar, n0 + j * B_CHUNK, kt * BK);
        }
      });
    }
    return;
  }
  asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
  const int c = wg - 1;  // this warpgroup's 64 rows of the block tile
  unsigned char* stage_c = smem + RING_BYTES + c * C_BYTES;
  const int warp = (threadIdx.x % 128) / 32, lane = threadIdx.x % 32;
  const int r0 = warp * 16 + lane / 4;  // the accumulator's rows r0 and r0 + 8
  float d[128];
  int it = 0;  // K tiles consumed so far, across pieces, as the producer counts them
  for_each_piece(sched, [&](int t, int kb, int ke) {
#pragma unroll
    for (int i = 0; i < 128; ++i) d[i] = 0.0f;
    for (int kt = kb; kt < ke; ++kt, ++it) {  // rung 20's consumer loop
      const int s = it % STAGES;
      mbar_wait(smem_addr(&full[s]), (it / STAGES) & 1);
      const unsigned sa = smem0 + s * STAGE_BYTES + c * 64 * 128;
      const unsigned sb = smem0 + s * STAGE_BYTES + A_BYTES;
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < BK / 16; ++kk)
        wgmma_m64n256k16<T, 0, 1>(d, desc(sa + kk * 32, 16, 1024),
                                  desc(sb + kk * 16 * 128, B_CHUNK_BYTES, 1024));
      wgmma_commit();
      wgmma_wait<1>();
      if (kt > kb) mbar_arrive(smem_addr(&empty[(it - 1) % STAGES]));
    }
    wgmma_wait<0>();
    mbar_arrive(smem_addr(&empty[(it - 1) % STAGES]));

    if (kb > 0 || ke < k_tiles) {  // a cut tile: the boundary between blocks `pair`, pair + 1
      const int pair = kb > 0 ? blockIdx.x - 1 : blockIdx.x;
      int* count = flags + 4 * pair + 2 * c;  // [arrivals, partial sums ready] per consumer
      float4* part = work + ((size_t)pair * CONSUMERS + c) * (64 * 256 / 4);
      const int me = threadIdx.x % 128;
      if (me == 0) arrived[c] = atomicAdd(count, 1);
      named_barrier(2 + c, 128);
      if (arrived[c] == 0) {  // first: leave the partial sums for the other half
#pragma unroll
        for (int j = 0; j < 32; ++j)
          __stcg(part + j * 128 + me, make_float4(d[4 * j], d[4 * j + 1], d[4 * j + 2], d[4 * j + 3]));
        __threadfence();
        named_barrier(2 + c, 128);
        if (me == 0) store_release(count + 1, 1);
        return;  // the other block writes this tile
      }
      if (me == 0) {  // second: wait until the first's sums are all written, then add them
        while (load_acquire(count + 1) == 0) {
        }
        count[0] = 0;  // both halves are in: zero the pair's flags for the next launch
        count[1] = 0;
      }
      named_barrier(2 + c, 128);
#pragma unroll
      for (int j = 0; j < 32; ++j) {
        const float4 p = __ldcg(part + j * 128 + me);
        d[4 * j] += p.x, d[4 * j + 1] += p.y, d[4 * j + 2] += p.z, d[4 * j + 3] += p.w;
      }
    }

    // The epilogue: rung 19's, in two rounds of 128 columns through this consumer's buffer.
    int m0, n0;
    tile_corner(t, tiles_m, tiles_n, m0, n0);
    T* out = C + (size_t)(m0 + c * 64) * N + n0;
#pragma unroll
    for (int h = 0; h < BN / ROUND_COLS; ++h) {
#pragma unroll
      for (int u = 0; u < UNITS_PER_ROW; ++u) {  // 8-column group j = 16h + u of the tile
        const int j = h * UNITS_PER_ROW + u;
        store2(reinterpret_cast<T*>(stage_c + staged(r0, u) + (lane % 4) * 4), d[4 * j],
               d[4 * j + 1]);
        store2(reinterpret_cast<T*>(stage_c + staged(r0 + 8, u) + (lane % 4) * 4), d[4 * j + 2],
               d[4 * j + 3]);
      }
      named_barrier(2 + c, 128);  // this round is staged
#pragma unroll 4
      for (int i = threadIdx.x % 128; i < 64 * UNITS_PER_ROW; i += 128) {
        const int r = i / UNITS_PER_ROW, u = i % UNITS_PER_ROW;
        *reinterpret_cast<uint4*>(out + (size_t)r * N + h * ROUND_COLS + u * 8) =
            *reinterpret_cast<const uint4*>(stage_c + staged(r, u));
      }
      named_barrier(2 + c, 128);  // read back: the buffer is free for the next round
    }
  });
}

#define ENTRY(name, T)                                                                      \
  extern "C" __global__ void __launch_bounds__(THREADS, 1)                                  \
  name(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,        \
       T* __restrict__ C, int M, int N, int K, float4* work, int* flags) {                   \
    gemm<T>(tmA, tmB, C, M, N, K, work, flags);                                             \
  }

ENTRY(stream_k, half)
ENTRY(stream_k_bf16, __nv_bfloat16)
