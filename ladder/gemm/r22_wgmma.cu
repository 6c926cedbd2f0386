// wgmma: wgmma-descriptors' wgmma and TMA ring, warp-specialized: one warpgroup copies, two
// multiply.
// C = A @ B, A (M x K) and B (K x N) row-major half (or bfloat16), FP32 accumulation, C in
// the inputs' type. Two entry points, wgmma_tma (half) and wgmma_tma_bf16, share one template.
// Build for sm_90a: wgmma and setmaxnreg exist only there. The launcher pads M to a multiple of
// 128, N of 256 and K of 64, and passes two tensor maps made on the host. Against
// wgmma-descriptors: the producer warpgroup (registers cut to 40 by setmaxnreg) issues every copy;
// the consumers (raised to 232) only multiply; wgmma-descriptors' __syncthreads per K tile becomes
// an "empty" mbarrier per stage that the consumers arrive on and the producer waits for. Two more
// entry points per type read an operand transposed where it lies (wgmma reads 16-bit operands in
// either major order): *_tn, C = A^T B with A given K x M; *_nt, C = A B^T with B given N x K
// (ladder.ops' GEMM backward, dB = A^T dC and dA = dC B^T, with no transposing copy).
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
constexpr int GROUP_M = 8;                  // block-row groups for L2 reuse (see below)
constexpr int A_CHUNK = 64;                 // _tn: rows of A^T (columns of the given A) per copy
constexpr int A_CHUNK_BYTES = BK * A_CHUNK * 2;  // 8 KB: 64 rows (k) of 128 bytes
#ifndef B_LBO
#define B_LBO B_CHUNK_BYTES  // B descriptor: bytes between 64-column chunks
#endif
#ifndef B_SBO
#define B_SBO 1024  // B descriptor: bytes between groups of 8 k-rows
#endif

#include "ladder/core/cuda/convert.cuh"    // store2
#include "ladder/core/cuda/mbarrier.cuh"   // the full and empty barriers
#include "ladder/core/cuda/memory.cuh"     // smem_addr
#include "ladder/core/cuda/tma.cuh"        // the tensor map, the bulk tensor copy
#include "ladder/core/cuda/warpgroup.cuh"  // setmaxnreg, named barriers
#include "ladder/core/cuda/wgmma.cuh"      // descriptors, wgmma, fence / commit / wait

// A_T: A given transposed (K x M, so M-major tiles); B_T: B given transposed (N x K, K-major)
template <typename T, bool A_T, bool B_T>
__device__ __forceinline__ void wgmma_gemm(const TensorMap& tmA, const TensorMap& tmB,
                                           T* __restrict__ C, int M, int N, int K) {
  extern __shared__ unsigned char smem_raw[];
  __shared__ alignas(8) unsigned long long full[STAGES], empty[STAGES];
  // 128-byte swizzled tiles must start on a 1024-byte boundary
  unsigned char* smem = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
  const unsigned smem0 = smem_addr(smem);

  // Grouped order of blocks: GROUP_M block rows are walked column by column, so the blocks
  // resident at one time share a few panels of A and of B in L2.
  const int tiles_m = M / BM, tiles_n = N / BN;
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
      mbar_init(smem_addr(&full[s]), 1);                // the producer's expect_tx arrival
      mbar_init(smem_addr(&empty[s]), CONSUMERS * 128);  // every consumer thread
    }
    mbar_fence_init();
  }
  __syncthreads();

  if (wg == 0) {
    // Producer: one thread issues every copy; the warpgroup gives its registers away.
    setmaxnreg_dec<40>();
    if (threadIdx.x == 0) {
      for (int kt = 0; kt < k_tiles; ++kt) {
        const int s = kt % STAGES;
        if (kt >= STAGES) mbar_wait(smem_addr(&empty[s]), ((kt / STAGES) + 1) & 1);
        const unsigned bar = smem_addr(&full[s]);
        const unsigned sa = smem0 + s * STAGE_BYTES, sb = sa + A_BYTES;
        mbar_arrive_expect_tx(bar, STAGE_BYTES);
        if constexpr (A_T) {  // A^T's tile as 64-column chunks of the given K x M matrix
#pragma unroll
          for (int j = 0; j < BM / A_CHUNK; ++j)
            tma_load(sa + j * A_CHUNK_BYTES, &tmA, bar, m0 + j * A_CHUNK, kt * BK);  // (m, k)
        } else {
          tma_load(sa, &tmA, bar, kt * BK, m0);  // coordinates innermost first: (k, m)
        }
        if constexpr (B_T) {  // B^T's tile: 256 rows (n) of 64 k, as A's tile lies
          tma_load(sb, &tmB, bar, kt * BK, n0);  // (k, n)
        } else {
#pragma unroll
          for (int j = 0; j < BN / B_CHUNK; ++j)
            tma_load(sb + j * B_CHUNK_BYTES, &tmB, bar, n0 + j * B_CHUNK, kt * BK);  // (n, k)
        }
      }
    }
  } else {
    setmaxnreg_inc<232>();
    const int c = wg - 1;  // this warpgroup's 64 rows of the block tile
    float d[128];
#pragma unroll
    for (int i = 0; i < 128; ++i) d[i] = 0.0f;
    for (int kt = 0; kt < k_tiles; ++kt) {
      const int s = kt % STAGES;
      mbar_wait(smem_addr(&full[s]), (kt / STAGES) & 1);
      // this warpgroup's 64 rows of A: 64 rows of 128 bytes, or (A_T) one 8 KB chunk
      static_assert(64 * 128 == A_CHUNK_BYTES, "a consumer's part of A is 8 KB either way");
      const unsigned sa = smem0 + s * STAGE_BYTES + c * 64 * 128, sb = smem0 + s * STAGE_BYTES + A_BYTES;
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < BK / 16; ++kk) {
        // A: K-major, 128-byte rows, 8-row swizzle atoms 1024 bytes apart (SBO); a k16 step
        // is 32 bytes along the row. B: N-major chunks of 64 columns, BK * 128 bytes apart
        // (LBO), 8 k-rows per atom, atoms 1024 bytes apart (SBO); a k16 step is 16 rows.
        // Transposed operands swap the two layouts: A^T's chunk is laid out as B's chunks
        // are (a k16 step is 16 rows), B^T's tile as A's (a k16 step is 32 bytes).
        const unsigned long long da = A_T ? wgmma_desc(sa + kk * 16 * 128, A_CHUNK_BYTES, 1024)
                                          : wgmma_desc(sa + kk * 32, 16, 1024);
        const unsigned long long db = B_T ? wgmma_desc(sb + kk * 32, 16, 1024)
                                          : wgmma_desc(sb + kk * 16 * 128, B_LBO, B_SBO);
        wgmma_ss<256, T, A_T ? 1 : 0, B_T ? 0 : 1>(d, da, db);
      }
      wgmma_commit();
      wgmma_wait<1>();  // the previous tile's MMAs are done: release its stage
      if (kt > 0) mbar_arrive(smem_addr(&empty[(kt - 1) % STAGES]));
    }
    wgmma_wait<0>();
    fence_operands(d);

    // Accumulator layout of m64nNk16: warp w of the warpgroup holds rows 16w .. 16w + 15;
    // d[4j .. 4j + 3] are columns 8j + 2(lane % 4) + {0, 1} of rows lane / 4 and lane / 4 + 8.
    const int warp = (threadIdx.x % 128) / 32, lane = threadIdx.x % 32;
    const int row = m0 + c * 64 + warp * 16 + lane / 4;
    T* c0 = C + (size_t)row * N + n0 + (lane % 4) * 2;
    T* c8 = c0 + (size_t)8 * N;
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
      store2(c0 + j * 8, d[4 * j], d[4 * j + 1]);
      store2(c8 + j * 8, d[4 * j + 2], d[4 * j + 3]);
    }
  }
}

#define ENTRY(name, T, A_T, B_T)                                                            \
  extern "C" __global__ void __launch_bounds__(THREADS, 1)                                  \
  name(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,        \
       T* __restrict__ C, int M, int N, int K) {                                            \
    wgmma_gemm<T, A_T, B_T>(tmA, tmB, C, M, N, K);                                          \
  }

ENTRY(wgmma_tma, half, false, false)
ENTRY(wgmma_tma_bf16, __nv_bfloat16, false, false)
ENTRY(wgmma_tma_tn, half, true, false)
ENTRY(wgmma_tma_tn_bf16, __nv_bfloat16, true, false)
ENTRY(wgmma_tma_nt, half, false, true)
ENTRY(wgmma_tma_nt_bf16, __nv_bfloat16, false, true)
