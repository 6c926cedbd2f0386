// split-k: persistent's kernel over units of (tile, K range): where C has fewer tiles than the
// GPU has SMs, or a last wave that leaves most SMs idle, each tile's K loop is split among
// `splits` blocks, and the last of them to finish adds the others' partial sums to its own and
// writes the tile. C = A @ B, A (M x K) and B (K x N) row-major half (or bfloat16), FP32
// accumulation, C in the inputs' type. Build for sm_90a. The launcher pads M to a multiple of
// 128, N of 256 and K of 64, chooses `splits` and launches min(SMs, units) blocks.
//
// Against persistent: (1) the loop walks units u = blockIdx.x, blockIdx.x + gridDim.x, ...:
// tile u / splits, its K tiles [s * k_tiles / splits, (s + 1) * k_tiles / splits) for
// s = u % splits; (2) with splits > 1, after its K range a block's consumers store their FP32
// accumulators to the workspace W (splits x M x N), fence, and count the tile's finished blocks
// (counters, one per tile, zeroed by the launcher before each launch); (3) only the last block
// of a tile goes on: it adds the other blocks' partials (L2 reads, __ldcg) to its accumulators
// and writes the tile with persistent's epilogue. With splits = 1 it is persistent's kernel.
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
// 2 chunks of 64 columns (64 rows of 128 bytes, 8 KB each), smem-epilogue's swizzled layout.
constexpr int C_CHUNK_BYTES = 64 * 128;     // 8 KB
constexpr int ROUND_COLS = 128;             // columns of C per round
constexpr int C_BYTES = 64 * ROUND_COLS * 2;  // 16 KB per consumer
constexpr int UNITS_PER_ROW = ROUND_COLS * 2 / 16;  // 16 16-byte units in a round's row
constexpr int RING_BYTES = STAGES * STAGE_BYTES;  // 192 KB

#include "ladder/core/cuda/convert.cuh"    // store2
#include "ladder/core/cuda/mbarrier.cuh"   // the full and empty barriers
#include "ladder/core/cuda/memory.cuh"     // smem_addr
#include "ladder/core/cuda/tma.cuh"        // the tensor map, the bulk tensor copy
#include "ladder/core/cuda/warpgroup.cuh"  // setmaxnreg, named barriers
#include "ladder/core/cuda/wgmma.cuh"      // descriptors, wgmma, fence / commit / wait

// smem-epilogue's staged layout: unit u of row r, unit index XOR row % 8, in 64-column chunks
__device__ static inline int staged(int r, int u) {
  return (u / 8) * C_CHUNK_BYTES + r * 128 + (((u % 8) ^ (r % 8)) * 16);
}
// smem-epilogue's grouped order, for tile t instead of blockIdx.x
__device__ static inline void tile_corner(int t, int tiles_m, int tiles_n, int& m0, int& n0) {
  const int per_group = GROUP_M * tiles_n;
  const int first_m = t / per_group * GROUP_M;
  const int rows_in_group = min(tiles_m - first_m, GROUP_M);
  const int in_group = t % per_group;
  m0 = (first_m + in_group % rows_in_group) * BM;
  n0 = (in_group / rows_in_group) * BN;
}

// The K tiles [first, last) of split s of k_tiles, in `splits` near-equal ranges.
__device__ static inline void k_range(int s, int splits, int k_tiles, int& first, int& last) {
  first = (int)((long long)s * k_tiles / splits);
  last = (int)((long long)(s + 1) * k_tiles / splits);
}

template <typename T>
__device__ __forceinline__ void gemm(const TensorMap& tmA, const TensorMap& tmB,
                                     T* __restrict__ C, float* __restrict__ W,
                                     unsigned* __restrict__ counters, int M, int N, int K,
                                     int splits) {
  extern __shared__ unsigned char smem_raw[];
  __shared__ alignas(8) unsigned long long full[STAGES], empty[STAGES];
  __shared__ int is_last;  // whether this block finishes the current unit's tile
  unsigned char* smem = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
  const unsigned smem0 = smem_addr(smem);

  const int tiles_m = M / BM, tiles_n = N / BN, tiles = tiles_m * tiles_n;
  const int k_tiles = K / BK, units = tiles * splits;

  const int wg = threadIdx.x / 128;  // warpgroup 0 produces, 1 .. CONSUMERS compute
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(smem_addr(&full[s]), 1);
      mbar_init(smem_addr(&empty[s]), CONSUMERS * 128);
    }
    mbar_fence_init();
  }
  __syncthreads();

  if (wg == 0) {  // the producer: persistent's, over the K range of every unit of this block
    setmaxnreg_dec<40>();
    if (threadIdx.x == 0) {
      int it = 0;  // K tiles copied so far, across units: stage it % STAGES
      for (int u = blockIdx.x; u < units; u += gridDim.x) {
        int m0, n0, first, last;
        tile_corner(u / splits, tiles_m, tiles_n, m0, n0);
        k_range(u % splits, splits, k_tiles, first, last);
        for (int kt = first; kt < last; ++kt, ++it) {
          const int s = it % STAGES;
          if (it >= STAGES) mbar_wait(smem_addr(&empty[s]), ((it / STAGES) + 1) & 1);
          const unsigned bar = smem_addr(&full[s]);
          const unsigned sa = smem0 + s * STAGE_BYTES, sb = sa + A_BYTES;
          mbar_arrive_expect_tx(bar, STAGE_BYTES);
          tma_load(sa, &tmA, bar, kt * BK, m0);
#pragma unroll
          for (int j = 0; j < BN / B_CHUNK; ++j)
            tma_load(sb + j * B_CHUNK_BYTES, &tmB, bar, n0 + j * B_CHUNK, kt * BK);
        }
      }
    }
    return;
  }
  setmaxnreg_inc<232>();
  const int c = wg - 1;  // this warpgroup's 64 rows of the block tile
  unsigned char* stage_c = smem + RING_BYTES + c * C_BYTES;
  const int warp = (threadIdx.x % 128) / 32, lane = threadIdx.x % 32;
  const int r0 = warp * 16 + lane / 4;  // the accumulator's rows r0 and r0 + 8
  float d[128];
  int it = 0;  // K tiles consumed so far, across units, as the producer counts them
  for (int u = blockIdx.x; u < units; u += gridDim.x) {
    const int t = u / splits, s = u % splits;
    int m0, n0, first, last;
    tile_corner(t, tiles_m, tiles_n, m0, n0);
    k_range(s, splits, k_tiles, first, last);
#pragma unroll
    for (int i = 0; i < 128; ++i) d[i] = 0.0f;
    for (int kt = first; kt < last; ++kt, ++it) {  // persistent's consumer loop
      const bool started = kt > first;
      const int s = it % STAGES;
      mbar_wait(smem_addr(&full[s]), (it / STAGES) & 1);
      const unsigned sa = smem0 + s * STAGE_BYTES + c * 64 * 128;
      const unsigned sb = smem0 + s * STAGE_BYTES + A_BYTES;
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < BK / 16; ++kk)
        wgmma_ss<256, T, 0, 1>(d, wgmma_desc(sa + kk * 32, 16, 1024),
                               wgmma_desc(sb + kk * 16 * 128, B_CHUNK_BYTES, 1024));
      wgmma_commit();
      wgmma_wait<1>();
      if (started) mbar_arrive(smem_addr(&empty[(it - 1) % STAGES]));
    }
    wgmma_wait<0>();
    mbar_arrive(smem_addr(&empty[(it - 1) % STAGES]));  // the unit's last stage

    if (splits > 1) {  // publish this block's partial sums; only the tile's last block goes on
      // accumulator j of this thread: rows r0 (j % 4 < 2) and r0 + 8, column 8 (j / 4) + 2 (lane % 4)
      const int row = m0 + c * 64 + r0, col = n0 + (lane % 4) * 2;
      float* mine = W + ((size_t)s * M + row) * N + col;
#pragma unroll
      for (int j = 0; j < 32; ++j) {
        *reinterpret_cast<float2*>(mine + 8 * j) = make_float2(d[4 * j], d[4 * j + 1]);
        *reinterpret_cast<float2*>(mine + (size_t)8 * N + 8 * j) =
            make_float2(d[4 * j + 2], d[4 * j + 3]);
      }
      __threadfence();          // the partials reach L2 before the count says they are there
      bar_sync(1, 128 * CONSUMERS);  // both consumers have published
      if (threadIdx.x == 128) is_last = atomicAdd(&counters[t], 1u) == (unsigned)(splits - 1);
      bar_sync(1, 128 * CONSUMERS);
      if (!is_last) continue;   // another block of this tile writes it
      __threadfence();
      for (int other = 0; other < splits; ++other) {
        if (other == s) continue;
        const float* theirs = W + ((size_t)other * M + row) * N + col;
#pragma unroll
        for (int j = 0; j < 32; ++j) {
          const float2 a = __ldcg(reinterpret_cast<const float2*>(theirs + 8 * j));
          const float2 b = __ldcg(reinterpret_cast<const float2*>(theirs + (size_t)8 * N + 8 * j));
          d[4 * j] += a.x, d[4 * j + 1] += a.y, d[4 * j + 2] += b.x, d[4 * j + 3] += b.y;
        }
      }
    }

    // The epilogue: persistent's, in two rounds of 128 columns through this consumer's buffer.
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
      bar_sync(2 + c, 128);  // this round is staged
#pragma unroll 4
      for (int i = threadIdx.x % 128; i < 64 * UNITS_PER_ROW; i += 128) {
        const int r = i / UNITS_PER_ROW, u = i % UNITS_PER_ROW;
        *reinterpret_cast<uint4*>(out + (size_t)r * N + h * ROUND_COLS + u * 8) =
            *reinterpret_cast<const uint4*>(stage_c + staged(r, u));
      }
      bar_sync(2 + c, 128);  // read back: the buffer is free for the next round
    }
  }
}

#define ENTRY(name, T)                                                                      \
  extern "C" __global__ void __launch_bounds__(THREADS, 1)                                  \
  name(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,        \
       T* __restrict__ C, float* __restrict__ W, unsigned* __restrict__ counters, int M,    \
       int N, int K, int splits) {                                                          \
    gemm<T>(tmA, tmB, C, W, counters, M, N, K, splits);                                     \
  }

ENTRY(split_k, half)
ENTRY(split_k_bf16, __nv_bfloat16)
