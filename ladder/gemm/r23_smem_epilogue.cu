// smem-epilogue: wgmma with its epilogue through shared memory, C written in whole 16-byte lines.
// C = A @ B, A (M x K) and B (K x N) row-major half (or bfloat16), FP32 accumulation, C in
// the inputs' type. Build for sm_90a. The launcher pads M to a multiple of 128, N of 256 and
// K of 64. The main loop is wgmma's (r22_wgmma.cu, untransposed operands only); the diff is
// the epilogue at the end.
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
// The epilogue's staging: each consumer's 64 x 256 part of C, as 4 chunks of 64 columns
// (64 rows of 128 bytes, 8 KB each), in the ring's memory, which no copy or wgmma uses by then.
constexpr int C_CHUNK_BYTES = 64 * 128;     // 8 KB
constexpr int C_BYTES = 64 * BN * 2;        // 32 KB per consumer
constexpr int UNITS_PER_ROW = BN * 2 / 16;  // 32 16-byte units in a row of 256 halves
static_assert(CONSUMERS * C_BYTES <= STAGES * STAGE_BYTES, "C fits in the ring it replaces");

#include "ladder/core/cuda/convert.cuh"    // store2
#include "ladder/core/cuda/mbarrier.cuh"   // the full and empty barriers
#include "ladder/core/cuda/memory.cuh"     // smem_addr
#include "ladder/core/cuda/tma.cuh"        // the tensor map, the bulk tensor copy
#include "ladder/core/cuda/warpgroup.cuh"  // setmaxnreg, named barriers
#include "ladder/core/cuda/wgmma.cuh"      // descriptors, wgmma, fence / commit / wait

// Threads `count` (warps whole) of the block wait for each other at barrier `id` (0 is
// __syncthreads'): a barrier for some warpgroups only.

// Row r's 16-byte unit u (8 halves) of a consumer's staged C: the 128-byte swizzle of the TMA
// tiles (unit index XOR row % 8), so the writes below (8 rows, one unit) and the reads (one
// row, 8 units per quarter-warp) each touch 32 different banks.
__device__ static inline int staged(int r, int u) {
  return (u / 8) * C_CHUNK_BYTES + r * 128 + (((u % 8) ^ (r % 8)) * 16);
}

template <typename T>
__device__ __forceinline__ void gemm(const TensorMap& tmA, const TensorMap& tmB,
                                     T* __restrict__ C, int M, int N, int K) {
  extern __shared__ unsigned char smem_raw[];
  __shared__ alignas(8) unsigned long long full[STAGES], empty[STAGES];
  unsigned char* smem = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
  const unsigned smem0 = smem_addr(smem);

  const int tiles_m = M / BM, tiles_n = N / BN;  // wgmma's grouped order of blocks
  const int per_group = GROUP_M * tiles_n;
  const int group = blockIdx.x / per_group;
  const int first_m = group * GROUP_M;
  const int rows_in_group = min(tiles_m - first_m, GROUP_M);
  const int in_group = blockIdx.x % per_group;
  const int m0 = (first_m + in_group % rows_in_group) * BM;
  const int n0 = (in_group / rows_in_group) * BN;
  const int k_tiles = K / BK;

  const int wg = threadIdx.x / 128;  // warpgroup 0 produces, 1 .. CONSUMERS compute
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(smem_addr(&full[s]), 1);
      mbar_init(smem_addr(&empty[s]), CONSUMERS * 128);
    }
    mbar_fence_init();
  }
  __syncthreads();

  if (wg == 0) {  // wgmma's producer
    setmaxnreg_dec<40>();
    if (threadIdx.x == 0) {
      for (int kt = 0; kt < k_tiles; ++kt) {
        const int s = kt % STAGES;
        if (kt >= STAGES) mbar_wait(smem_addr(&empty[s]), ((kt / STAGES) + 1) & 1);
        const unsigned bar = smem_addr(&full[s]);
        const unsigned sa = smem0 + s * STAGE_BYTES, sb = sa + A_BYTES;
        mbar_arrive_expect_tx(bar, STAGE_BYTES);
        tma_load(sa, &tmA, bar, kt * BK, m0);
#pragma unroll
        for (int j = 0; j < BN / B_CHUNK; ++j)
          tma_load(sb + j * B_CHUNK_BYTES, &tmB, bar, n0 + j * B_CHUNK, kt * BK);
      }
    }
    return;
  }
  setmaxnreg_inc<232>();
  const int c = wg - 1;  // this warpgroup's 64 rows of the block tile
  float d[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) d[i] = 0.0f;
  for (int kt = 0; kt < k_tiles; ++kt) {  // wgmma's consumer loop
    const int s = kt % STAGES;
    mbar_wait(smem_addr(&full[s]), (kt / STAGES) & 1);
    const unsigned sa = smem0 + s * STAGE_BYTES + c * 64 * 128;
    const unsigned sb = smem0 + s * STAGE_BYTES + A_BYTES;
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk)
      wgmma_ss<256, T, 0, 1>(d, wgmma_desc(sa + kk * 32, 16, 1024),
                             wgmma_desc(sb + kk * 16 * 128, B_CHUNK_BYTES, 1024));
    wgmma_commit();
    wgmma_wait<1>();
    if (kt > 0) mbar_arrive(smem_addr(&empty[(kt - 1) % STAGES]));
  }
  wgmma_wait<0>();

  // ---- the epilogue, new in this rung ----
  // 1. Both consumers are past their last wgmma, so no one reads the ring any more (every copy
  //    into it has landed: each was waited for). Each consumer stages its part of C there.
  bar_sync(1, CONSUMERS * 128);
  unsigned char* tile = smem + c * C_BYTES;
  const int warp = (threadIdx.x % 128) / 32, lane = threadIdx.x % 32;
  const int r0 = warp * 16 + lane / 4;  // the accumulator's rows r0 and r0 + 8 (as wgmma)
#pragma unroll
  for (int j = 0; j < BN / 8; ++j) {  // 8-column group j is 16-byte unit j of the row
    store2(reinterpret_cast<T*>(tile + staged(r0, j) + (lane % 4) * 4), d[4 * j], d[4 * j + 1]);
    store2(reinterpret_cast<T*>(tile + staged(r0 + 8, j) + (lane % 4) * 4), d[4 * j + 2],
           d[4 * j + 3]);
  }
  bar_sync(2 + c, 128);  // this warpgroup's part is staged
  // 2. Read it back a row at a time: a warp writes one whole 512-byte row of C per instruction,
  //    16 bytes per thread, where wgmma's stores wrote 16 bytes into each of 8 rows.
  T* out = C + (size_t)(m0 + c * 64) * N + n0;
#pragma unroll 4
  for (int i = threadIdx.x % 128; i < 64 * UNITS_PER_ROW; i += 128) {
    const int r = i / UNITS_PER_ROW, u = i % UNITS_PER_ROW;
    *reinterpret_cast<uint4*>(out + (size_t)r * N + u * 8) =
        *reinterpret_cast<const uint4*>(tile + staged(r, u));
  }
}

#define ENTRY(name, T)                                                                      \
  extern "C" __global__ void __launch_bounds__(THREADS, 1)                                  \
  name(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,        \
       T* __restrict__ C, int M, int N, int K) {                                            \
    gemm<T>(tmA, tmB, C, M, N, K);                                                          \
  }

ENTRY(smem_epilogue, half)
ENTRY(smem_epilogue_bf16, __nv_bfloat16)
