// wgmma-descriptors: tma's TMA ring, its math now on wgmma: a warpgroup's multiply reads A and B
// straight from shared memory through descriptors. C = A @ B, A (M x K) and B (K x N)
// row-major half (or bfloat16), FP32 accumulation, C in the inputs' type. Build for sm_90a.
// The launcher pads M to a multiple of 128, N of 256 and K of 64.
//
// The stage layout, the copies, the full barriers and the one __syncthreads per K tile are
// tma's. What goes: ldmatrix, the fragments in registers, the 8 warps' 64 x 64 tiles and
// their 32 mma.sync per k16 step. What comes: two warpgroups (4 warps each), each owning 64
// rows x 256 columns of C, issue one wgmma.mma_async m64n256k16 per k16 step: 4 per K tile.
// A descriptor (wgmma_desc, ladder/core/cuda/wgmma.cuh) tells the tensor cores where a 64 x 16
// slice of A and a 16 x 256 slice of B lie in shared memory and that they are 128-byte
// swizzled; the accumulator, 64 x 256 FP32, is 128 registers per thread. wgmma is asynchronous: a
// warpgroup commits the K tile's 4 multiplies as one group and waits only for the group
// before (wait_group 1), so one tile's multiplies are still running while the next is issued.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

constexpr int BM = 128, BN = 256, BK = 64;  // block tile of C and the K tile of a stage
constexpr int STAGES = 4;                   // 4 stages of 48 KB; copies run 3 tiles ahead
constexpr int WARPGROUPS = 2;               // 64 rows of C each
constexpr int THREADS = 128 * WARPGROUPS;   // 256, as tma
constexpr int A_BYTES = BM * BK * 2;        // 16 KB: 128 rows of 128 bytes
constexpr int B_CHUNK = 64;                 // columns of B per copy: 64 halves = 128 bytes
constexpr int B_CHUNK_BYTES = BK * B_CHUNK * 2;  // 8 KB: 64 rows (k) of 128 bytes
constexpr int STAGE_BYTES = A_BYTES + BK * BN * 2;  // 48 KB
constexpr int GROUP_M = 16;                 // rasterization: block rows per group, as tma

#include "ladder/core/cuda/convert.cuh"    // store2
#include "ladder/core/cuda/mbarrier.cuh"   // the full and empty barriers
#include "ladder/core/cuda/memory.cuh"     // smem_addr
#include "ladder/core/cuda/tma.cuh"        // the tensor map, the bulk tensor copy
#include "ladder/core/cuda/wgmma.cuh"      // descriptors, wgmma, fence / commit / wait

template <typename T>
__device__ __forceinline__ void wgmma_gemm(const TensorMap& tmA, const TensorMap& tmB,
                                           T* __restrict__ C, int M, int N, int K) {
  extern __shared__ unsigned char smem_raw[];
  __shared__ alignas(8) unsigned long long full[STAGES];
  // 128-byte swizzled tiles must start on a 1024-byte boundary
  unsigned char* smem = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
  const unsigned smem0 = smem_addr(smem);
  const int tid = threadIdx.x;

  const int grid_m = M / BM, grid_n = N / BN;
  const int per_group = GROUP_M * grid_n;
  const int first_m = (int)blockIdx.x / per_group * GROUP_M;
  const int rows = min(grid_m - first_m, GROUP_M);
  const int in_group = (int)blockIdx.x % per_group;
  const int bm = first_m + in_group % rows, bn = in_group / rows;
  // The tile's corner, computed once, before the loop. Written inline instead (bm * BM in the
  // copies and again in the epilogue), the same arithmetic made ptxas serialize every wgmma,
  // and its report said so: "C7515 ... wgmma.mma_async instructions are serialized".
  const int m0 = bm * BM, n0 = bn * BN;

  if (tid == 0) {
    for (int s = 0; s < STAGES; ++s) mbar_init(smem_addr(&full[s]), 1);
    mbar_fence_init();
  }
  __syncthreads();

  auto load_tile = [&](int kt, int stage) {  // tma's
    const unsigned bar = smem_addr(&full[stage]);
    const unsigned sa = smem0 + stage * STAGE_BYTES, sb = sa + A_BYTES;
    mbar_arrive_expect_tx(bar, STAGE_BYTES);
    tma_load(sa, &tmA, bar, kt * BK, m0);  // (k, m)
#pragma unroll
    for (int j = 0; j < BN / B_CHUNK; ++j)
      tma_load(sb + j * B_CHUNK_BYTES, &tmB, bar, n0 + j * B_CHUNK, kt * BK);  // (n, k)
  };

  const int wg = tid / 128;  // this warpgroup's 64 rows of the block tile
  float d[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) d[i] = 0.0f;

  const int KT = K / BK;
  if (tid == 0)
    for (int s = 0; s < STAGES - 1 && s < KT; ++s) load_tile(s, s);
  for (int kt = 0; kt < KT; ++kt) {
    const int s = kt % STAGES;
    mbar_wait(smem_addr(&full[s]), (kt / STAGES) & 1);
    const unsigned sa = smem0 + s * STAGE_BYTES + wg * 64 * 128, sb = smem0 + s * STAGE_BYTES + A_BYTES;
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk) {
      // A: K-major, 128-byte rows, 8-row swizzle atoms 1024 bytes apart (SBO); a k16 step is
      // 32 bytes along the row. B: N-major chunks of 64 columns, B_CHUNK_BYTES apart (LBO),
      // 8 k-rows per atom, atoms 1024 bytes apart (SBO); a k16 step is 16 rows.
      const unsigned long long da = wgmma_desc(sa + kk * 32, 16, 1024);
      const unsigned long long db = wgmma_desc(sb + kk * 16 * 128, B_CHUNK_BYTES, 1024);
      wgmma_ss<256, T, 0, 1>(d, da, db);
    }
    wgmma_commit();
    wgmma_wait<1>();  // this warpgroup's multiplies of tile kt - 1 are done ...
    __syncthreads();  // ... and the other's: tile kt - 1's stage is free
    if (tid == 0 && kt + STAGES - 1 < KT) load_tile(kt + STAGES - 1, (kt + STAGES - 1) % STAGES);
  }
  wgmma_wait<0>();
  fence_operands(d);

  // Accumulator layout of m64nNk16: warp w of the warpgroup holds rows 16w .. 16w + 15;
  // d[4j .. 4j + 3] are columns 8j + 2(lane % 4) + {0, 1} of rows lane / 4 and lane / 4 + 8.
  const int warp = (tid % 128) / 32, lane = tid % 32;
  const int row = m0 + wg * 64 + warp * 16 + lane / 4;
  T* c0 = C + (size_t)row * N + n0 + (lane % 4) * 2;
  T* c8 = c0 + (size_t)8 * N;
#pragma unroll
  for (int j = 0; j < BN / 8; ++j) {
    store2(c0 + j * 8, d[4 * j], d[4 * j + 1]);
    store2(c8 + j * 8, d[4 * j + 2], d[4 * j + 3]);
  }
}

extern "C" __global__ void __launch_bounds__(THREADS, 1)
wgmma_descriptors(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,
                  half* __restrict__ C, int M, int N, int K) {
  wgmma_gemm<half>(tmA, tmB, C, M, N, K);
}
extern "C" __global__ void __launch_bounds__(THREADS, 1)
wgmma_descriptors_bf16(const __grid_constant__ TensorMap tmA,
                       const __grid_constant__ TensorMap tmB, __nv_bfloat16* __restrict__ C,
                       int M, int N, int K) {
  wgmma_gemm<__nv_bfloat16>(tmA, tmB, C, M, N, K);
}
