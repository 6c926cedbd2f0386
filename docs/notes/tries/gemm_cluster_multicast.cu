// A try, not a rung (docs/notes/gemm.md, "Tries that did not stay"): GEMM rung 18's kernel in
// clusters of two blocks that share B's tile by TMA multicast. Built and timed by
// gemm_tries.py beside this file. C = A @ B, A (M x K) and B (K x N) row-major half (or
// bfloat16); M a multiple of 256 (two block rows per cluster), N of 256, K of 64. The diff
// from r18_wgmma.cu: the cluster, the two halves of B's copies, and the release of a stage,
// which tells both blocks.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

constexpr int BM = 128, BN = 256, BK = 64;  // block tile of C and the K tile of a stage
constexpr int STAGES = 4;                   // 4 x 48 KB of shared memory in flight
constexpr int CONSUMERS = 2;                // math warpgroups, 64 rows of C each
constexpr int THREADS = 128 * (CONSUMERS + 1);  // + one producer warpgroup
constexpr int CLUSTER = 2;  // blocks per cluster: block rows m0 and m0 + BM, the same n0
constexpr int A_BYTES = BM * BK * 2;        // 16 KB: 128 rows of 128 bytes
constexpr int B_CHUNK = 64;                 // columns of B per copy: 64 halves = 128 bytes
constexpr int B_CHUNK_BYTES = BK * B_CHUNK * 2;  // 8 KB: 64 rows (k) of 128 bytes
constexpr int B_BYTES = BK * BN * 2;        // 32 KB: BN / 64 = 4 chunks
constexpr int STAGE_BYTES = A_BYTES + B_BYTES;  // 48 KB land in each block per stage
constexpr int MY_CHUNKS = BN / B_CHUNK / CLUSTER;  // B chunks each block copies for both
constexpr int GROUP_M = 8;  // even, so a cluster's two blocks fall in one group of block rows
constexpr int RELEASES = CLUSTER * CONSUMERS * 4;  // a stage is free when every consumer warp
                                                   // of both blocks has said so
static_assert(GROUP_M % CLUSTER == 0, "a cluster's blocks must be neighbours in a group");

#include "hopper.cuh"  // TMA, mbarriers, descriptors, wgmma: the library

// ---- thread-block clusters: blocks that see each other's shared memory ----
__device__ static inline unsigned cluster_rank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
// Every thread of every block of the cluster arrives, then waits for all the others.
__device__ static inline void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;" ::: "memory");
}
// Arrive on the mbarrier at the same shared-memory offset in block `cta` of the cluster
// (`mapa` turns this block's address into that block's). The arrive keeps its default
// semantics (release at CTA scope), as CUTLASS's cluster barrier does: `.release.cluster`
// made this kernel 2.2x slower on an H100 (docs/notes/gemm.md).
__device__ static inline void mbar_arrive_cluster(unsigned bar, unsigned cta) {
  asm volatile(
      "{\n .reg .b32 remote;\n"
      " mapa.shared::cluster.u32 remote, %0, %1;\n"
      " mbarrier.arrive.shared::cluster.b64 _, [remote];\n}" ::"r"(bar),
      "r"(cta)
      : "memory");
}
// tma_load into every block of `mask` (bit i: cluster rank i), at the same shared-memory offset,
// each copy counted on that block's mbarrier at the offset of `bar`.
__device__ static inline void tma_load_multicast(unsigned dst, const TensorMap* map, unsigned bar,
                                                 int c0, int c1, unsigned short mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      ".multicast::cluster [%0], [%1, {%3, %4}], [%2], %5;" ::"r"(dst),
      "l"(reinterpret_cast<unsigned long long>(map)), "r"(bar), "r"(c0), "r"(c1), "h"(mask)
      : "memory");
}

template <typename T>
__device__ __forceinline__ void cluster_gemm(const TensorMap& tmA, const TensorMap& tmB,
                                             T* __restrict__ C, int M, int N, int K) {
  extern __shared__ unsigned char smem_raw[];
  __shared__ alignas(8) unsigned long long full[STAGES], empty[STAGES];
  // 128-byte swizzled tiles must start on a 1024-byte boundary; both blocks of a cluster get
  // the same offsets (same kernel, same static shared memory), which multicast relies on
  unsigned char* smem = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
  const unsigned smem0 = smem_addr(smem);

  // Rung 18's grouped order. Blocks 2i and 2i + 1 (one cluster) get block rows 2j and 2j + 1
  // of the same block column: M is padded to 256 and GROUP_M is even.
  const int tiles_m = M / BM, tiles_n = N / BN;
  const int per_group = GROUP_M * tiles_n;
  const int group = blockIdx.x / per_group;
  const int first_m = group * GROUP_M;
  const int rows_in_group = min(tiles_m - first_m, GROUP_M);
  const int in_group = blockIdx.x % per_group;
  const int m0 = (first_m + in_group % rows_in_group) * BM;
  const int n0 = (in_group / rows_in_group) * BN;
  const int k_tiles = K / BK;
  const unsigned rank = cluster_rank();

  const int wg = threadIdx.x / 128;  // warpgroup 0 produces, 1 .. CONSUMERS compute
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(smem_addr(&full[s]), 1);  // this block's producer's expect_tx arrival
      mbar_init(smem_addr(&empty[s]), RELEASES);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  cluster_sync();  // both blocks' barriers exist before either copies into or arrives on them

  if (wg == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
    if (threadIdx.x == 0) {
      for (int kt = 0; kt < k_tiles; ++kt) {
        const int s = kt % STAGES;
        // both blocks' consumers are done with stage s: this block writes into both
        if (kt >= STAGES) mbar_wait(smem_addr(&empty[s]), ((kt / STAGES) + 1) & 1);
        const unsigned bar = smem_addr(&full[s]);
        const unsigned sa = smem0 + s * STAGE_BYTES, sb = sa + A_BYTES;
        mbar_expect_tx(bar, STAGE_BYTES);  // its A, its half of B and the other block's half
        tma_load(sa, &tmA, bar, kt * BK, m0);  // A: this block's rows only
#pragma unroll
        for (int j = 0; j < MY_CHUNKS; ++j) {  // B: this block's half, into both blocks
          const int chunk = rank * MY_CHUNKS + j;
          tma_load_multicast(sb + chunk * B_CHUNK_BYTES, &tmB, bar, n0 + chunk * B_CHUNK,
                             kt * BK, (1u << CLUSTER) - 1);
        }
      }
    }
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
    const int c = wg - 1;  // this warpgroup's 64 rows of the block tile
    const int lane = threadIdx.x % 32;
    float d[128];
#pragma unroll
    for (int i = 0; i < 128; ++i) d[i] = 0.0f;
    for (int kt = 0; kt < k_tiles; ++kt) {
      const int s = kt % STAGES;
      mbar_wait(smem_addr(&full[s]), (kt / STAGES) & 1);
      const unsigned sa = smem0 + s * STAGE_BYTES + c * 64 * 128;
      const unsigned sb = smem0 + s * STAGE_BYTES + A_BYTES;
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < BK / 16; ++kk) {  // the descriptors of rung 18 (row-major A, B)
        wgmma_m64n256k16<T, 0, 1>(d, desc(sa + kk * 32, 16, 1024),
                                  desc(sb + kk * 16 * 128, B_CHUNK_BYTES, 1024));
      }
      wgmma_commit();
      wgmma_wait<1>();  // the previous tile's MMAs are done: release its stage in both blocks
      if (kt > 0 && lane == 0) {
        const unsigned bar = smem_addr(&empty[(kt - 1) % STAGES]);
#pragma unroll
        for (unsigned r = 0; r < CLUSTER; ++r) mbar_arrive_cluster(bar, r);
      }
    }
    wgmma_wait<0>();
#pragma unroll
    for (int i = 0; i < 128; ++i) asm volatile("" : "+f"(d[i])::"memory");

    // rung 18's epilogue: warp w holds rows 16w .. 16w + 15 of the warpgroup's 64
    const int warp = (threadIdx.x % 128) / 32;
    const int row = m0 + c * 64 + warp * 16 + lane / 4;
    T* c0 = C + (size_t)row * N + n0 + (lane % 4) * 2;
    T* c8 = c0 + (size_t)8 * N;
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
      store2(c0 + j * 8, d[4 * j], d[4 * j + 1]);
      store2(c8 + j * 8, d[4 * j + 2], d[4 * j + 3]);
    }
  }
  cluster_sync();  // neither block leaves while the other may still arrive on its barriers
}

#define ENTRY(name, T)                                                                      \
  extern "C" __global__ void __cluster_dims__(CLUSTER, 1, 1) __launch_bounds__(THREADS, 1)  \
  name(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,        \
       T* __restrict__ C, int M, int N, int K) {                                            \
    cluster_gemm<T>(tmA, tmB, C, M, N, K);                                                  \
  }

ENTRY(cluster_multicast, half)
ENTRY(cluster_multicast_bf16, __nv_bfloat16)
