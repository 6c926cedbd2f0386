// A try, not a rung: rung 20 with its two consumer warpgroups on different tiles ("ping-pong").
// C = A @ B, A (M x K) and B (K x N) row-major half, FP32 accumulation, C half; M, N multiples
// of 128, K of 64. Build for sm_90a.
//
// Against rung 20: each consumer warpgroup owns a whole 128 x 128 tile (two m64n128k16 wgmma
// per k16 step, 128 accumulators a thread, as before); the block's tiles alternate between the
// two. The producer fills one ring in tile order, so the warpgroups take their stages in turn:
// while one multiplies its tile, the other writes its last one out. A stage is 32 KB (A 128 x 64,
// B 64 x 128), the ring 6 deep; each consumer stages C in 16 KB, two rounds of 64 columns.
// The main loops take turns: a warpgroup starts tile i only once the other has finished tile
// i - 1's multiplies (an mbarrier each, "done"). Without that turn-taking a warpgroup would
// wait on a stage's phase two fills ahead of the barrier, which a parity wait cannot tell from
// the fill before: it would read the other warpgroup's data.
#include <cuda_fp16.h>

constexpr int BM = 128, BN = 128, BK = 64;
constexpr int STAGES = 6;
constexpr int CONSUMERS = 2;
constexpr int THREADS = 128 * (CONSUMERS + 1);
constexpr int A_BYTES = BM * BK * 2;        // 16 KB
constexpr int B_CHUNK = 64;
constexpr int B_CHUNK_BYTES = BK * B_CHUNK * 2;  // 8 KB
constexpr int B_BYTES = BK * BN * 2;        // 16 KB: 2 chunks
constexpr int STAGE_BYTES = A_BYTES + B_BYTES;  // 32 KB
constexpr int GROUP_M = 8;
constexpr int ROUND_COLS = 64;              // columns of C per round
constexpr int C_BYTES = BM * ROUND_COLS * 2;  // 16 KB per consumer
constexpr int UNITS_PER_ROW = ROUND_COLS * 2 / 16;  // 8
constexpr int RING_BYTES = STAGES * STAGE_BYTES;  // 192 KB

#include "hopper.cuh"

// D (64 x 128, FP32, 64 registers a thread) += A (64 x 16, K-major) * B (16 x 128, N-major)
__device__ __forceinline__ void wgmma_m64n128k16(float* d, unsigned long long da,
                                                 unsigned long long db) {
  asm volatile("wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16\n" WGMMA_D64_REGS
               ",\n %64, %65, 1, 1, 1, 0, 1;\n"
               : WGMMA_D64_OPERANDS
               : "l"(da), "l"(db));
}

__device__ static inline void named_barrier(int id, int count) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(count) : "memory");
}
__device__ static inline int staged(int r, int u) { return r * 128 + (((u % 8) ^ (r % 8)) * 16); }
__device__ static inline void tile_corner(int t, int tiles_m, int tiles_n, int& m0, int& n0) {
  const int per_group = GROUP_M * tiles_n;
  const int first_m = t / per_group * GROUP_M;
  const int rows_in_group = min(tiles_m - first_m, GROUP_M);
  const int in_group = t % per_group;
  m0 = (first_m + in_group % rows_in_group) * BM;
  n0 = (in_group / rows_in_group) * BN;
}

extern "C" __global__ void __launch_bounds__(THREADS, 1)
pingpong(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,
         half* __restrict__ C, int M, int N, int K) {
  extern __shared__ unsigned char smem_raw[];
  __shared__ alignas(8) unsigned long long full[STAGES], empty[STAGES], done[CONSUMERS];
  unsigned char* smem = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
  const unsigned smem0 = smem_addr(smem);
  const int tiles_m = M / BM, tiles_n = N / BN, tiles = tiles_m * tiles_n;
  const int k_tiles = K / BK;
  const int wg = threadIdx.x / 128;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(smem_addr(&full[s]), 1);
      mbar_init(smem_addr(&empty[s]), 128);  // one warpgroup takes each stage
    }
    for (int w = 0; w < CONSUMERS; ++w) mbar_init(smem_addr(&done[w]), 128);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();

  if (wg == 0) {  // the producer: every K tile of every tile of this block, in tile order
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
    if (threadIdx.x == 0) {
      int it = 0;
      for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
        int m0, n0;
        tile_corner(t, tiles_m, tiles_n, m0, n0);
        for (int kt = 0; kt < k_tiles; ++kt, ++it) {
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
      }
    }
    return;
  }
  asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
  const int c = wg - 1;  // this warpgroup takes the block's tiles c, c + 2, c + 4, ...
  unsigned char* stage_c = smem + RING_BYTES + c * C_BYTES;
  const int warp = (threadIdx.x % 128) / 32, lane = threadIdx.x % 32;
  const int r0 = warp * 16 + lane / 4;
  float d0[64], d1[64];  // rows 0-63 and 64-127 of the tile
  int i = c;             // this tile's place in the block's sequence
  for (int t = blockIdx.x + c * gridDim.x; t < tiles; t += 2 * gridDim.x, i += 2) {
#pragma unroll
    for (int x = 0; x < 64; ++x) d0[x] = d1[x] = 0.0f;
    if (i > 0) mbar_wait(smem_addr(&done[1 - c]), ((i - 1) / 2) & 1);  // tile i - 1 multiplied
    int it = i * k_tiles;  // the producer's count at this tile's first K tile
    for (int kt = 0; kt < k_tiles; ++kt, ++it) {
      const int s = it % STAGES;
      mbar_wait(smem_addr(&full[s]), (it / STAGES) & 1);
      const unsigned sa = smem0 + s * STAGE_BYTES, sb = sa + A_BYTES;
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < BK / 16; ++kk) {
        const unsigned long long db = desc(sb + kk * 16 * 128, B_CHUNK_BYTES, 1024);
        wgmma_m64n128k16(d0, desc(sa + kk * 32, 16, 1024), db);
        wgmma_m64n128k16(d1, desc(sa + 64 * 128 + kk * 32, 16, 1024), db);
      }
      wgmma_commit();
      wgmma_wait<1>();
      if (kt > 0) mbar_arrive(smem_addr(&empty[(it - 1) % STAGES]));
    }
    wgmma_wait<0>();
    mbar_arrive(smem_addr(&empty[(it - 1) % STAGES]));
    mbar_arrive(smem_addr(&done[c]));  // the other warpgroup may start its next tile

    int m0, n0;
    tile_corner(t, tiles_m, tiles_n, m0, n0);
    half* out = C + (size_t)m0 * N + n0;
#pragma unroll
    for (int h = 0; h < BN / ROUND_COLS; ++h) {
#pragma unroll
      for (int u = 0; u < UNITS_PER_ROW; ++u) {
        const int j = h * UNITS_PER_ROW + u;
        const int col = (lane % 4) * 4;
        store2(reinterpret_cast<half*>(stage_c + staged(r0, u) + col), d0[4 * j], d0[4 * j + 1]);
        store2(reinterpret_cast<half*>(stage_c + staged(r0 + 8, u) + col), d0[4 * j + 2],
               d0[4 * j + 3]);
        store2(reinterpret_cast<half*>(stage_c + staged(r0 + 64, u) + col), d1[4 * j],
               d1[4 * j + 1]);
        store2(reinterpret_cast<half*>(stage_c + staged(r0 + 72, u) + col), d1[4 * j + 2],
               d1[4 * j + 3]);
      }
      named_barrier(2 + c, 128);
#pragma unroll 4
      for (int x = threadIdx.x % 128; x < BM * UNITS_PER_ROW; x += 128) {
        const int r = x / UNITS_PER_ROW, u = x % UNITS_PER_ROW;
        *reinterpret_cast<uint4*>(out + (size_t)r * N + h * ROUND_COLS + u * 8) =
            *reinterpret_cast<const uint4*>(stage_c + staged(r, u));
      }
      named_barrier(2 + c, 128);
    }
  }
}
