// bias-gelu: persistent with the epilogue of a linear layer: C = gelu(A @ B + bias), the bias
// added and GELU (its erf form) applied to the FP32 accumulators before they are rounded to
// the inputs' type. A (M x K) and B (K x N) row-major half (or bfloat16), bias (N) of that
// type. Build for sm_90a. The launcher pads M to a multiple of 128, N of 256 and K of 64 (the
// bias with zeros) and launches min(SMs, tiles) blocks.
//
// Against persistent: the kernel takes the bias; each consumer thread reads the bias of its
// 64 columns once per tile (32 pairs, the columns its accumulator fragment holds) and applies
// gelu(d + bias) to its 128 accumulators as it stages them. Nothing else: the main loop, the
// ring and the stores are persistent's.
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

// GELU, the erf form, in FP32: x Φ(x)
__device__ __forceinline__ float gelu(float x) {
  return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
}
// Two adjacent bias entries (a 4-byte-aligned pair of T) as FP32.
__device__ __forceinline__ float2 bias2(const half* p) {
  return __half22float2(*reinterpret_cast<const __half2*>(p));
}
__device__ __forceinline__ float2 bias2(const __nv_bfloat16* p) {
  return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(p));
}

template <typename T>
__device__ __forceinline__ void gemm(const TensorMap& tmA, const TensorMap& tmB,
                                     T* __restrict__ C, const T* __restrict__ bias, int M, int N,
                                     int K) {
  extern __shared__ unsigned char smem_raw[];
  __shared__ alignas(8) unsigned long long full[STAGES], empty[STAGES];
  unsigned char* smem = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
  const unsigned smem0 = smem_addr(smem);

  const int tiles_m = M / BM, tiles_n = N / BN, tiles = tiles_m * tiles_n;
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

  if (wg == 0) {  // the producer: smem-epilogue's, over every K tile of every tile of this block
    setmaxnreg_dec<40>();
    if (threadIdx.x == 0) {
      int it = 0;  // K tiles copied so far, across tiles: stage it % STAGES
      for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
        int m0, n0;
        tile_corner(t, tiles_m, tiles_n, m0, n0);
        for (int kt = 0; kt < k_tiles; ++kt, ++it) {
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
  int it = 0;  // K tiles consumed so far, across tiles, as the producer counts them
  for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
#pragma unroll
    for (int i = 0; i < 128; ++i) d[i] = 0.0f;
    for (int kt = 0; kt < k_tiles; ++kt, ++it) {  // smem-epilogue's consumer loop
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
      if (kt > 0) mbar_arrive(smem_addr(&empty[(it - 1) % STAGES]));
    }
    wgmma_wait<0>();
    mbar_arrive(smem_addr(&empty[(it - 1) % STAGES]));  // the tile's last stage, new here

    // The epilogue: persistent's, in two rounds of 128 columns through this consumer's buffer,
    // each accumulator first given its column's bias and GELU.
    int m0, n0;
    tile_corner(t, tiles_m, tiles_n, m0, n0);
    T* out = C + (size_t)(m0 + c * 64) * N + n0;
    const T* bias_tile = bias + n0 + (lane % 4) * 2;  // this thread's columns: 8j + 2 (lane % 4)
#pragma unroll
    for (int h = 0; h < BN / ROUND_COLS; ++h) {
#pragma unroll
      for (int u = 0; u < UNITS_PER_ROW; ++u) {  // 8-column group j = 16h + u of the tile
        const int j = h * UNITS_PER_ROW + u;
        const float2 b = bias2(bias_tile + 8 * j);
        store2(reinterpret_cast<T*>(stage_c + staged(r0, u) + (lane % 4) * 4),
               gelu(d[4 * j] + b.x), gelu(d[4 * j + 1] + b.y));
        store2(reinterpret_cast<T*>(stage_c + staged(r0 + 8, u) + (lane % 4) * 4),
               gelu(d[4 * j + 2] + b.x), gelu(d[4 * j + 3] + b.y));
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
       T* __restrict__ C, const T* __restrict__ bias, int M, int N, int K) {                \
    gemm<T>(tmA, tmB, C, bias, M, N, K);                                                    \
  }

ENTRY(bias_gelu, half)
ENTRY(bias_gelu_bf16, __nv_bfloat16)
