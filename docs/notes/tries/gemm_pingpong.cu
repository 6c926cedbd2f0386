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

#define WGMMA_D64_REGS "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"
#define WGMMA_D64_OPERANDS \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]),\
  "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),\
  "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]),\
  "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),\
  "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]),\
  "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),\
  "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),\
  "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),\
  "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),\
  "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),\
  "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]),\
  "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),\
  "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]),\
  "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),\
  "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]),\
  "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])

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
