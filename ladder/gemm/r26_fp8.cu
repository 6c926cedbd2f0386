// fp8: persistent in 8-bit floats: A and B in e4m3 (or both in e5m2), per-tensor scales,
// FP32 accumulation, C in bfloat16: C = (scale_a * scale_b) * (A @ B).
// A (M x K) row-major, B (K x N) column-major, that is B^T (N x K) row-major, as cuBLASLt's
// FP8 GEMM takes it. Build for sm_90a. The launcher pads M to a multiple of 128, N of 256 and
// K of 128, and launches min(SMs, tiles) blocks.
//
// Against persistent: (1) wgmma m64n256k32 on 8-bit operands, twice the multiplies per
// instruction; (2) a K tile of 128 elements, still 128 bytes a row, so a stage is the same
// 48 KB and one copy of a 128-byte row still fills one swizzle line; (3) B comes K-major (an
// 8-bit wgmma operand cannot be transposed), so its stage is one 256 x 128-byte box laid
// out as A's, and its descriptor is A's; (4) the epilogue multiplies by the two scales.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

constexpr int BM = 128, BN = 256, BK = 128;  // block tile of C; a stage's K tile: 128 bytes
constexpr int STAGES = 4;                   // 4 x 48 KB of shared memory in flight
constexpr int CONSUMERS = 2;                // math warpgroups, 64 rows of C each
constexpr int THREADS = 128 * (CONSUMERS + 1);  // + one producer warpgroup
constexpr int A_BYTES = BM * BK;            // 16 KB: 128 rows of 128 bytes
constexpr int B_BYTES = BN * BK;            // 32 KB: 256 rows (n) of 128 bytes, one copy
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

template <bool E5M2>
__device__ __forceinline__ void gemm(const TensorMap& tmA, const TensorMap& tmB,
                                     __nv_bfloat16* __restrict__ C, const float* scale_a,
                                     const float* scale_b, int M, int N, int K) {
  using T = __nv_bfloat16;
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
          tma_load(sb, &tmB, bar, kt * BK, n0);  // B^T's rows n0 .. n0 + 255
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
  const float scale = *scale_a * *scale_b;
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
      for (int kk = 0; kk < BK / 32; ++kk)  // both K-major: a k32 slice is 32 bytes a row
        wgmma_ss_fp8<256, E5M2>(d, wgmma_desc(sa + kk * 32, 16, 1024),
                                wgmma_desc(sb + kk * 32, 16, 1024));
      wgmma_commit();
      wgmma_wait<1>();
      if (kt > 0) mbar_arrive(smem_addr(&empty[(it - 1) % STAGES]));
    }
    wgmma_wait<0>();
    mbar_arrive(smem_addr(&empty[(it - 1) % STAGES]));  // the tile's last stage, new here

    // The epilogue: persistent's, each accumulator times the two scales.
    int m0, n0;
    tile_corner(t, tiles_m, tiles_n, m0, n0);
    T* out = C + (size_t)(m0 + c * 64) * N + n0;
#pragma unroll
    for (int h = 0; h < BN / ROUND_COLS; ++h) {
#pragma unroll
      for (int u = 0; u < UNITS_PER_ROW; ++u) {  // 8-column group j = 16h + u of the tile
        const int j = h * UNITS_PER_ROW + u;
        store2(reinterpret_cast<T*>(stage_c + staged(r0, u) + (lane % 4) * 4), scale * d[4 * j],
               scale * d[4 * j + 1]);
        store2(reinterpret_cast<T*>(stage_c + staged(r0 + 8, u) + (lane % 4) * 4),
               scale * d[4 * j + 2], scale * d[4 * j + 3]);
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

#define ENTRY(name, E5M2)                                                                   \
  extern "C" __global__ void __launch_bounds__(THREADS, 1)                                  \
  name(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,        \
       __nv_bfloat16* __restrict__ C, const float* scale_a, const float* scale_b, int M,    \
       int N, int K) {                                                                      \
    gemm<E5M2>(tmA, tmB, C, scale_a, scale_b, M, N, K);                                     \
  }

ENTRY(fp8_e4m3, false)
ENTRY(fp8_e5m2, true)
