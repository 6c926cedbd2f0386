// Rung 5: the grouped expert GEMM on Hopper's tensor cores. GEMM wgmma's kernel (wgmma fed by
// TMA, one producer and two consumer warpgroups, a ring of 4 stages of 48 KB) with three changes:
// - the block's tile comes from a schedule: the grid walks every expert's row tiles in turn
//   (tile_starts, made by the routing's scan), and block row b works for the expert whose
//   tiles include b; blocks past the last tile return at once;
// - B is a stack of E matrices (w1 or w2, E x K x N): a 3-D tensor map, the expert a coordinate;
// - the epilogue masks rows past the expert's last and columns past N, and either applies SiLU
//   (the first GEMM, h = silu(rows @ w1[e])), or multiplies by the row's gate and stores to the
//   row's (token, slot) place (the second GEMM), or stores as it is (the grouped GEMM alone).
// A row tile may run past its expert's rows into the next expert's: those rows are loaded and
// multiplied, then not stored. Rows (A) are K-contiguous, as TMA needs: the gather stays a copy.
// The kernel trusts offsets (0 to M, never decreasing) and tile_starts to agree: the routing's
// scan makes both; for the grouped GEMM alone, tile_starts_of (common.py) checks the caller's
// offsets first and gives bad ones an empty schedule (tile_starts[E] = 0: every block returns
// before it reads an offset), reporting them to the launcher.
// Build for sm_90a.
#include "ladder/core/cuda/convert.cuh"    // store2
#include "ladder/core/cuda/mbarrier.cuh"   // the full and empty barriers
#include "ladder/core/cuda/memory.cuh"     // smem_addr
#include "ladder/core/cuda/tma.cuh"        // the tensor map, the bulk tensor copy
#include "ladder/core/cuda/warpgroup.cuh"  // setmaxnreg, named barriers
#include "ladder/core/cuda/wgmma.cuh"      // descriptors, wgmma, fence / commit / wait

constexpr int BM = 128, BN = 256, BK = 64;  // block tile of the output and the K tile
constexpr int STAGES = 4;
constexpr int CONSUMERS = 2;
constexpr int THREADS = 128 * (CONSUMERS + 1);
constexpr int A_BYTES = BM * BK * 2;             // 16 KB: 128 rows of 128 bytes
constexpr int B_CHUNK = 64;                      // columns of B per copy (128 bytes)
constexpr int B_CHUNK_BYTES = BK * B_CHUNK * 2;  // 8 KB
constexpr int B_BYTES = BK * BN * 2;             // 32 KB
constexpr int STAGE_BYTES = A_BYTES + B_BYTES;   // 48 KB
constexpr int GROUP_M = 8;                       // row tiles walked together, for L2 reuse

enum Epilogue { STORE = 0, SILU = 1, GATE_SCATTER = 2 };

__device__ static inline float silu(float z) { return z / (1.0f + __expf(-z)); }

template <typename T, int EPI>
__device__ __forceinline__ void grouped_gemm(const TensorMap& tmA, const TensorMap& tmB,
                                             T* __restrict__ out, const int* __restrict__ offsets,
                                             const int* __restrict__ tile_starts,
                                             const int* __restrict__ perm_slot,
                                             const float* __restrict__ gates, int E, int M,
                                             int N, int K) {
  extern __shared__ unsigned char smem_raw[];
  __shared__ alignas(8) unsigned long long full[STAGES], empty[STAGES];
  unsigned char* smem = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
  const unsigned smem0 = smem_addr(smem);

  // GEMM wgmma's grouped order, over the row tiles of all experts one after the other.
  const int tiles_m = tile_starts[E], tiles_n = (N + BN - 1) / BN;
  const int per_group = GROUP_M * tiles_n;
  const int first_m = (blockIdx.x / per_group) * GROUP_M;
  if (first_m >= tiles_m) return;  // the whole block, before any barrier: past the last tile
  const int rows_in_group = min(tiles_m - first_m, GROUP_M);
  const int in_group = blockIdx.x % per_group;
  const int tile = first_m + in_group % rows_in_group;
  const int n0 = (in_group / rows_in_group) * BN;
  if (n0 >= N) return;  // a short last group: fewer blocks than the grid has for it
  int e = 0;
  while (tile_starts[e + 1] <= tile) ++e;
  const int m0 = offsets[e] + (tile - tile_starts[e]) * BM;
  const int row_end = min(offsets[e + 1], M);
  const int k_tiles = (K + BK - 1) / BK;

  const int wg = threadIdx.x / 128;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(smem_addr(&full[s]), 1);
      mbar_init(smem_addr(&empty[s]), CONSUMERS * 128);
    }
    mbar_fence_init();
  }
  __syncthreads();

  if (wg == 0) {
    setmaxnreg_dec<40>();
    if (threadIdx.x == 0) {
      for (int kt = 0; kt < k_tiles; ++kt) {
        const int s = kt % STAGES;
        if (kt >= STAGES) mbar_wait(smem_addr(&empty[s]), ((kt / STAGES) + 1) & 1);
        const unsigned bar = smem_addr(&full[s]);
        const unsigned sa = smem0 + s * STAGE_BYTES, sb = sa + A_BYTES;
        mbar_arrive_expect_tx(bar, STAGE_BYTES);  // out-of-bounds parts are zero-filled and counted
        tma_load(sa, &tmA, bar, kt * BK, m0);
#pragma unroll
        for (int j = 0; j < BN / B_CHUNK; ++j)
          tma_load_3d(sb + j * B_CHUNK_BYTES, &tmB, bar, n0 + j * B_CHUNK, kt * BK, e);
      }
    }
  } else {
    setmaxnreg_inc<232>();
    const int c = wg - 1;
    float d[128];
#pragma unroll
    for (int i = 0; i < 128; ++i) d[i] = 0.0f;
    for (int kt = 0; kt < k_tiles; ++kt) {
      const int s = kt % STAGES;
      mbar_wait(smem_addr(&full[s]), (kt / STAGES) & 1);
      const unsigned sa = smem0 + s * STAGE_BYTES + c * 64 * 128, sb = smem0 + s * STAGE_BYTES + A_BYTES;
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
    fence_operands(d);

    // GEMM wgmma's accumulator layout: rows r and r + 8, columns 8j + 2 (lane % 4) + {0, 1}
    const int warp = (threadIdx.x % 128) / 32, lane = threadIdx.x % 32;
    const int col0 = n0 + (lane % 4) * 2;
#pragma unroll
    for (int half_ = 0; half_ < 2; ++half_) {
      const int row = m0 + c * 64 + warp * 16 + lane / 4 + 8 * half_;
      if (row >= row_end) continue;
      float scale = 1.0f;
      size_t dest = row;
      if constexpr (EPI == GATE_SCATTER) {
        const int pair = perm_slot[row];  // token pair / k, slot pair % k; gates is T x k
        scale = gates[pair];
        dest = pair;
      }
      T* p = out + dest * N + col0;
#pragma unroll
      for (int j = 0; j < BN / 8; ++j) {
        if (col0 + j * 8 >= N) break;  // N is even (a multiple of 8): pairs never straddle it
        float a = d[4 * j + 2 * half_], b = d[4 * j + 2 * half_ + 1];
        if constexpr (EPI == SILU) {
          a = silu(a);
          b = silu(b);
        }
        store2(p + j * 8, scale * a, scale * b);
      }
    }
  }
}

#define ENTRY(name, T, EPI)                                                                  \
  extern "C" __global__ void __launch_bounds__(THREADS, 1)                                   \
  name(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,         \
       T* __restrict__ out, const int* offsets, const int* tile_starts, const int* perm_slot, \
       const float* gates, int E, int M, int N, int K) {                                     \
    grouped_gemm<T, EPI>(tmA, tmB, out, offsets, tile_starts, perm_slot, gates, E, M, N, K);  \
  }

ENTRY(grouped_store, half, STORE)
ENTRY(grouped_silu, half, SILU)
ENTRY(grouped_gate_scatter, half, GATE_SCATTER)
ENTRY(grouped_store_bf16, __nv_bfloat16, STORE)
ENTRY(grouped_silu_bf16, __nv_bfloat16, SILU)
ENTRY(grouped_gate_scatter_bf16, __nv_bfloat16, GATE_SCATTER)
