// TMA: warp-tile-64's math (ldmatrix + mma.sync, 64 x 64 warp tiles), its tiles now brought by
// the bulk tensor copy engine (TMA) and counted in on an mbarrier. C = A @ B, A (M x K) and
// B (K x N) row-major half (or bfloat16), FP32 accumulation, C in the inputs' type. Build for
// sm_90 (no sm_90a-only instruction here). The launcher pads M to a multiple of 128, N of 256
// and K of 64, and passes two tensor maps made on the host (ladder/gemm/hopper.py).
//
// Warp-tile-64 had each of 256 threads issue 6 cp.async per K tile, computing 6 addresses and an
// XOR swizzle for each. Here one thread issues 5 copies per K tile (A's 128 x 64 tile, B's four
// 64 x 64 chunks); the copy engine computes every address and writes the 128-byte swizzle
// itself. A stage is 128-byte rows (64 halves), so BK is 64, and its layout is the one the
// wgmma rungs read:
//
//   A: 128 rows (m) of 128 bytes                 unit' = unit ^ (row & 7)
//   B: 4 chunks of 64 columns, each 64 rows (k) of 128 bytes, the same XOR
//
// (a unit is 16 bytes, 8 halves; the XOR is warp-tile-64's B swizzle, applied by the hardware).
// Completion: the "full" mbarrier of a stage is armed with the stage's byte count
// (expect_tx); each copy counts its bytes off as it lands; a thread that waits on the barrier's
// phase parity knows the whole tile is in shared memory. No cp.async.wait_group, no commit
// groups. A stage is refilled, as in warp-tile-64, only after a __syncthreads has retired every
// warp's reads of it.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "ladder/core/cuda/convert.cuh"   // store2
#include "ladder/core/cuda/ldmatrix.cuh"  // ldmatrix_x4, ldmatrix_x4_trans, as warp-tile-64
#include "ladder/core/cuda/mbarrier.cuh"  // the mbarriers
#include "ladder/core/cuda/memory.cuh"    // smem_addr
#include "ladder/core/cuda/mma_sync.cuh"  // mma_16816, as warp-tile-64, for the operands' type
#include "ladder/core/cuda/tma.cuh"       // the tensor map, the bulk tensor copy

constexpr int BM = 128, BN = 256, BK = 64;                 // a block's tile of C, and the K step
constexpr int STAGES = 4;                                  // 4 x 48 KB; copies 3 tiles ahead
constexpr int WARPS_M = 2, WARPS_N = 4;                    // 8 warps
constexpr int THREADS = 32 * WARPS_M * WARPS_N;            // 256
constexpr int WM = BM / WARPS_M, WN = BN / WARPS_N;        // a warp's tile of C: 64 x 64
constexpr int MI = WM / 16, NI = WN / 8;                   // 4 x 8 m16n8k16 tiles per warp
constexpr int KSTEPS = BK / 16;                            // 4 k16 steps per K tile
constexpr int ROW = 128;                                   // bytes per shared row (64 halves)
constexpr int A_BYTES = BM * BK * 2;                       // 16 KB
constexpr int B_CHUNK = 64;                                // columns of B per copy
constexpr int B_CHUNK_BYTES = BK * B_CHUNK * 2;            // 8 KB
constexpr int STAGE_BYTES = A_BYTES + BK * BN * 2;         // 48 KB
constexpr int GROUP_M = 16;                                // rasterization: block rows per group

static_assert(KSTEPS % 2 == 0, "fragment double buffering alternates by k16 step parity");

template <typename T>
__device__ __forceinline__ void tma_gemm(const TensorMap& tmA, const TensorMap& tmB,
                                         T* __restrict__ C, int M, int N, int K) {
  extern __shared__ unsigned char smem_raw[];
  __shared__ alignas(8) unsigned long long full[STAGES];
  // 128-byte swizzled tiles must start on a 1024-byte boundary (the XOR pattern's period)
  unsigned char* smem = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
  const unsigned smem0 = smem_addr(smem);
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;

  // Grouped rasterization of the 1-D grid, as in warp-tile-64
  const int grid_m = M / BM, grid_n = N / BN;
  const int per_group = GROUP_M * grid_n;
  const int first_m = (int)blockIdx.x / per_group * GROUP_M;
  const int rows = min(grid_m - first_m, GROUP_M);
  const int in_group = (int)blockIdx.x % per_group;
  const int bm = first_m + in_group % rows, bn = in_group / rows;

  if (tid == 0) {
    for (int s = 0; s < STAGES; ++s) mbar_init(smem_addr(&full[s]), 1);  // expect_tx's arrival
    mbar_fence_init();
  }
  __syncthreads();

  // Global -> shared: thread 0 alone. One expect_tx arms the stage with its 48 KB; five copies
  // (coordinates innermost first) count those bytes off as they land.
  auto load_tile = [&](int kt, int stage) {
    const unsigned bar = smem_addr(&full[stage]);
    const unsigned sa = smem0 + stage * STAGE_BYTES, sb = sa + A_BYTES;
    mbar_arrive_expect_tx(bar, STAGE_BYTES);
    tma_load(sa, &tmA, bar, kt * BK, bm * BM);  // (k, m)
#pragma unroll
    for (int j = 0; j < BN / B_CHUNK; ++j)
      tma_load(sb + j * B_CHUNK_BYTES, &tmB, bar, bn * BN + j * B_CHUNK, kt * BK);  // (n, k)
  };

  // Shared -> registers, warp-tile-64's lane mapping in the new layout. A: row warp_m + 16i + lrow,
  // unit 2kk + lchunk of its 128-byte row. B (.trans): k row 16kk + lrow of the chunk that
  // holds columns warp_n + 16p .. + 15, unit (warp_n / 8 + 2p + lchunk) % 8 of that row. Every
  // row term the swizzle reads (row & 7) is lrow & 7, so the XORs are done once, here.
  const int warp_m = warp / WARPS_N * WM, warp_n = warp % WARPS_N * WN;
  const int lrow = lane % 16, lchunk = lane / 16;
  unsigned a_off[KSTEPS], b_off[NI / 2];
#pragma unroll
  for (int kk = 0; kk < KSTEPS; ++kk)
    a_off[kk] = (warp_m + lrow) * ROW + (((kk * 2 + lchunk) ^ (lrow & 7)) << 4);
#pragma unroll
  for (int p = 0; p < NI / 2; ++p) {
    const int unit = warp_n / 8 + p * 2 + lchunk;  // 16-byte unit of the 512-byte row of B
    b_off[p] = A_BYTES + (unit / 8) * B_CHUNK_BYTES + lrow * ROW + (((unit % 8) ^ (lrow & 7)) << 4);
  }

  float acc[MI][NI][4] = {};
  unsigned af[2][MI][4], bf[2][NI][2];  // fragments, double-buffered across k16 steps

  auto load_frags = [&](int buf, int stage, int kk) {
    const unsigned s = smem0 + stage * STAGE_BYTES;
#pragma unroll
    for (int i = 0; i < MI; ++i) ldmatrix_x4(af[buf][i], s + a_off[kk] + i * 16 * ROW);
#pragma unroll
    for (int p = 0; p < NI / 2; ++p) {
      unsigned r[4];
      ldmatrix_x4_trans(r, s + b_off[p] + kk * 16 * ROW);
      bf[buf][2 * p][0] = r[0];
      bf[buf][2 * p][1] = r[1];
      bf[buf][2 * p + 1][0] = r[2];
      bf[buf][2 * p + 1][1] = r[3];
    }
  };

  // Prologue: tiles 0 .. STAGES-2 in flight. Tile t lands in stage t % STAGES, and its barrier
  // completes phase t / STAGES: a wait on parity (t / STAGES) & 1 returns once it has landed.
  const int KT = K / BK;
  if (tid == 0)
    for (int s = 0; s < STAGES - 1 && s < KT; ++s) load_tile(s, s);
  mbar_wait(smem_addr(&full[0]), 0);
  int read_stage = 0, write_stage = STAGES - 1;
  load_frags(0, read_stage, 0);

  for (int kt = 0; kt < KT; ++kt) {
#pragma unroll
    for (int kk = 0; kk < KSTEPS; ++kk) {
      if (kk == KSTEPS - 1) {
        // The barrier retires every warp's reads of tile kt's stage (its last fragments are in
        // registers), which the next iteration refills; then tile kt + 1 must have landed.
        __syncthreads();
        read_stage = read_stage == STAGES - 1 ? 0 : read_stage + 1;
        if (kt + 1 < KT) mbar_wait(smem_addr(&full[read_stage]), ((kt + 1) / STAGES) & 1);
      }
      // The next k16 step's fragments (on the last step of the last tile: a harmless dead read)
      load_frags((kk + 1) % 2, read_stage, (kk + 1) % KSTEPS);
      if (kk == 0) {
        // Refill the stage that tile kt - 1 used: tile kt + STAGES - 1.
        if (tid == 0 && kt + STAGES - 1 < KT) load_tile(kt + STAGES - 1, write_stage);
        write_stage = write_stage == STAGES - 1 ? 0 : write_stage + 1;
      }
#pragma unroll
      for (int i = 0; i < MI; ++i)
#pragma unroll
        for (int j = 0; j < NI; ++j) mma_16816<T>(acc[i][j], af[kk % 2][i], bf[kk % 2][j]);
    }
  }

  // Epilogue straight from registers, as in warp-tile-64
  const int g = lane / 4, t = lane % 4;
  T* c = C + (size_t)(bm * BM + warp_m + g) * N + bn * BN + warp_n + t * 2;
#pragma unroll
  for (int i = 0; i < MI; ++i) {
#pragma unroll
    for (int j = 0; j < NI; ++j) {
      T* p = c + (size_t)(i * 16) * N + j * 8;
      store2(p, acc[i][j][0], acc[i][j][1]);
      store2(p + (size_t)8 * N, acc[i][j][2], acc[i][j][3]);
    }
  }
}

extern "C" __global__ void __launch_bounds__(THREADS, 1)
tma_gemm_f16(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,
             half* __restrict__ C, int M, int N, int K) {
  tma_gemm<half>(tmA, tmB, C, M, N, K);
}
extern "C" __global__ void __launch_bounds__(THREADS, 1)
tma_gemm_bf16(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,
              __nv_bfloat16* __restrict__ C, int M, int N, int K) {
  tma_gemm<__nv_bfloat16>(tmA, tmB, C, M, N, K);
}
