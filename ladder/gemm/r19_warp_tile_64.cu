// Warp tile 64: swizzle's kernel on 128 x 256 block tiles of 64 x 64 warp tiles, fragments
// double-buffered in registers, blocks in grouped order. C = A @ B, A (M x K) and B (K x N)
// row-major half, FP32 accumulation, C half. The launcher pads M to a multiple of 128, N of 256
// and K of 32, and aligns the pointers to 16 bytes, so the kernel has no bounds checks.
//
// A block computes a 128 x 256 tile of C with 8 warps (2 x 4), each warp a 64 x 64 tile: 4 x 8
// mma.m16n8k16 tiles, 128 FP32 accumulators per thread. Shared memory per stage: A 128 x 32
// (8 KB), B 32 x 256 (16 KB), both stored in 16-byte chunks placed by an XOR swizzle:
//
//   A, rows of 64 bytes (4 chunks):   chunk' = chunk ^ ((row >> 1) & 3)
//   B, rows of 512 bytes (32 chunks): chunk' = chunk ^ (row & 7)
//
// Shared memory has 32 banks of 4 bytes, so a 16-byte chunk covers 4 banks and the bank group
// of byte address x is (x / 16) % 8. An ldmatrix 8 x 8 matrix is 8 rows of one chunk each and is
// served in one pass when its 8 chunks fall in 8 different bank groups; a cp.async of 8
// consecutive threads likewise. Unswizzled, 8 consecutive A rows at one k chunk fall in 2 groups
// (row % 2 picks the half of a 128-byte line), 4-way conflicts, and 8 B rows at one n chunk all
// in 1 group, 8-way. The XOR spreads them: for A, (row % 2, (row >> 1) & 3) takes all 8 values
// over 8 consecutive rows; for B, row & 7 does. Copies stay conflict-free because the XOR only
// permutes the chunks of one row (A: the 4 chunks of a row pair's two rows fill 8 groups; B: 8
// consecutive chunks of one row stay 8 distinct groups). Unlike padding, no byte is wasted.
#include <cuda_fp16.h>

#include "ladder/core/cuda/cp_async.cuh"  // cp_async16, cp_async_commit, cp_async_wait
#include "ladder/core/cuda/ldmatrix.cuh"  // ldmatrix_x4, ldmatrix_x4_trans
#include "ladder/core/cuda/mma_sync.cuh"  // mma_16816: its fragment layout is written there

constexpr int BM = 128, BN = 256, BK = 32;                 // a block's tile of C, and the K step
constexpr int STAGES = 4;                                  // cp.async ring depth
constexpr int WARPS_M = 2, WARPS_N = 4;                    // 8 warps
constexpr int THREADS = 32 * WARPS_M * WARPS_N;            // 256
constexpr int WM = BM / WARPS_M, WN = BN / WARPS_N;        // a warp's tile of C: 64 x 64
constexpr int MI = WM / 16, NI = WN / 8;                   // 4 x 8 m16n8k16 tiles per warp
constexpr int KSTEPS = BK / 16;                            // k16 steps per K tile
constexpr int A_ROW = BK * 2, B_ROW = BN * 2;              // bytes per shared row: 64, 512
constexpr int A_STAGE = BM * A_ROW, B_STAGE = BK * B_ROW;  // 8 KB, 16 KB
constexpr int STAGE_BYTES = A_STAGE + B_STAGE;             // 24 KB; 4 stages: 96 KB
constexpr int GROUP_M = 16;                                // rasterization: block rows per group

static_assert(KSTEPS % 2 == 0, "fragment double buffering alternates by k16 step parity");
static_assert(BK == 32 && BN % 64 == 0, "swizzles: 4-chunk A rows, B rows of 128-byte lines");
static_assert(BM * BK / 8 == 2 * THREADS && BK * BN / 8 == 4 * THREADS, "copy mapping");

extern "C" __global__ void __launch_bounds__(THREADS, 1)
mma_sync_gemm(const half* __restrict__ A, const half* __restrict__ B, half* __restrict__ C,
              int M, int N, int K) {
  extern __shared__ __align__(128) unsigned char smem[];  // STAGES x (A tile, B tile)
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;

  // Grouped rasterization of the 1-D grid: consecutive blocks walk down GROUP_M block rows
  // before moving right, so the ~132 blocks resident at once cover about 16 x 8 tiles, a
  // 2048 x 2048 square of C, and share its A rows and B columns in L2.
  const int grid_m = M / BM, grid_n = N / BN;
  const int per_group = GROUP_M * grid_n;
  const int first_m = (int)blockIdx.x / per_group * GROUP_M;
  const int rows = min(grid_m - first_m, GROUP_M);
  const int in_group = (int)blockIdx.x % per_group;
  const int bm = first_m + in_group % rows, bn = in_group / rows;

  const unsigned smem0 = (unsigned)__cvta_generic_to_shared(smem);

  // Global -> shared: a thread copies 2 chunks of A (rows tid/4 and tid/4 + 64, chunk tid%4)
  // and 4 of B (rows tid/32 + 8i, chunk tid%32) per K tile; the swizzle terms do not change
  // between a thread's rows, so one destination offset serves them all.
  const int a_row = tid / 4, a_chunk = tid % 4;
  const half* a_src = A + (size_t)(bm * BM + a_row) * K + a_chunk * 8;
  const unsigned a_dst = a_row * A_ROW + ((a_chunk ^ ((a_row >> 1) & 3)) << 4);
  const int b_row = tid / 32, b_chunk = tid % 32;
  const half* b_src = B + (size_t)b_row * N + bn * BN + b_chunk * 8;
  const unsigned b_dst = b_row * B_ROW + ((b_chunk ^ (b_row & 7)) << 4);

  auto load_tile = [&](int kt, int stage) {
    const unsigned sa = smem0 + stage * STAGE_BYTES, sb = sa + A_STAGE;
    const half* a = a_src + kt * BK;
    const half* b = b_src + (size_t)kt * BK * N;
#pragma unroll
    for (int i = 0; i < 2; ++i) cp_async16(sa + a_dst + i * 64 * A_ROW, a + (size_t)i * 64 * K);
#pragma unroll
    for (int i = 0; i < 4; ++i) cp_async16(sb + b_dst + i * 8 * B_ROW, b + (size_t)i * 8 * N);
  };

  // Shared -> registers: for A, lane l addresses row l % 16 of an m16 tile at k chunk l / 16 of
  // the k16 step (matrices: rows 0-7 k 0-7, rows 8-15 k 0-7, rows 0-7 k 8-15, rows 8-15 k 8-15,
  // which are a[0..3] of mma); for B (.trans), k row l % 16 of the k16 step at n chunk l / 16 of
  // a pair of n8 tiles (matrices: k 0-7 and k 8-15 of tile 2p, then of tile 2p + 1, which are
  // b[0..1] of the two tiles). The swizzles read only row bits that the lane fixes (below 16),
  // so the XORs are done once, here: A offsets differ per k step, B offsets per tile pair.
  const int warp_m = warp / WARPS_N * WM, warp_n = warp % WARPS_N * WN;
  const int lrow = lane % 16, lchunk = lane / 16;
  unsigned a_off[KSTEPS], b_off[NI / 2];
#pragma unroll
  for (int kk = 0; kk < KSTEPS; ++kk)
    a_off[kk] = (warp_m + lrow) * A_ROW + (((kk * 2 + lchunk) ^ ((lrow >> 1) & 3)) << 4);
#pragma unroll
  for (int p = 0; p < NI / 2; ++p)
    b_off[p] = A_STAGE + lrow * B_ROW + (((warp_n / 8 + p * 2 + lchunk) ^ (lrow & 7)) << 4);

  float acc[MI][NI][4] = {};
  unsigned af[2][MI][4], bf[2][NI][2];  // fragments, double-buffered across k16 steps

  auto load_frags = [&](int buf, int stage, int kk) {
    const unsigned s = smem0 + stage * STAGE_BYTES;
#pragma unroll
    for (int i = 0; i < MI; ++i) ldmatrix_x4(af[buf][i], s + a_off[kk] + i * 16 * A_ROW);
#pragma unroll
    for (int p = 0; p < NI / 2; ++p) {
      unsigned r[4];
      ldmatrix_x4_trans(r, s + b_off[p] + kk * 16 * B_ROW);
      bf[buf][2 * p][0] = r[0];
      bf[buf][2 * p][1] = r[1];
      bf[buf][2 * p + 1][0] = r[2];
      bf[buf][2 * p + 1][1] = r[3];
    }
  };

  // Prologue: tiles 0 .. STAGES-2 in flight, one commit group each (empty past the end of K).
  const int KT = K / BK;
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < KT) load_tile(s, s);
    cp_async_commit();
  }
  cp_async_wait<STAGES - 2>();  // tile 0 has landed (this thread's part) ...
  __syncthreads();              // ... and everyone's
  int read_stage = 0, write_stage = STAGES - 1;
  load_frags(0, read_stage, 0);

  for (int kt = 0; kt < KT; ++kt) {
#pragma unroll
    for (int kk = 0; kk < KSTEPS; ++kk) {
      if (kk == KSTEPS - 1) {
        // Commit groups so far: STAGES - 1 + kt + 1, tile g in group g. Waiting until at most
        // STAGES - 2 are pending completes tile kt + 1. The barrier publishes it and retires
        // every warp's reads of tile kt's stage (its last fragments are already in registers),
        // which the next iteration refills with tile kt + STAGES.
        cp_async_wait<STAGES - 2>();
        __syncthreads();
        read_stage = read_stage == STAGES - 1 ? 0 : read_stage + 1;
      }
      // The next k16 step's fragments (on the last step of the last tile: a harmless dead read)
      load_frags((kk + 1) % 2, read_stage, (kk + 1) % KSTEPS);
      if (kk == 0) {
        // Refill the stage that tile kt - 1 used: tile kt + STAGES - 1.
        if (kt + STAGES - 1 < KT) load_tile(kt + STAGES - 1, write_stage);
        cp_async_commit();
        write_stage = write_stage == STAGES - 1 ? 0 : write_stage + 1;
      }
#pragma unroll
      for (int i = 0; i < MI; ++i)
#pragma unroll
        for (int j = 0; j < NI; ++j) mma_16816(acc[i][j], af[kk % 2][i], bf[kk % 2][j]);
    }
  }
  cp_async_wait<0>();  // only empty groups remain; nothing may be left in flight at exit

  // Epilogue straight from registers: lane (g, t) holds rows g and g + 8, columns 2t and 2t + 1
  // of each m16n8 tile, written as half2. A warp's store covers 8 rows x 16 bytes; the adjacent
  // tile j + 1 fills the other half of each 32-byte sector in L2. C is 64 KB per block, 2% of
  // the 3 MB of A and B a block reads at K = 4096: staging C for 16-byte stores saves little.
  const int g = lane / 4, t = lane % 4;
  half* c = C + (size_t)(bm * BM + warp_m + g) * N + bn * BN + warp_n + t * 2;
#pragma unroll
  for (int i = 0; i < MI; ++i) {
#pragma unroll
    for (int j = 0; j < NI; ++j) {
      half* p = c + (size_t)(i * 16) * N + j * 8;
      *reinterpret_cast<__half2*>(p) = __floats2half2_rn(acc[i][j][0], acc[i][j][1]);
      *reinterpret_cast<__half2*>(p + (size_t)8 * N) =
          __floats2half2_rn(acc[i][j][2], acc[i][j][3]);
    }
  }
}
