// cp-async: wmma-shared's tiles and warps, but global -> shared copies are asynchronous
// (cp.async.cg, 16 bytes each) into a 4-stage ring in dynamic shared memory: while the tensor
// cores work on K tile t, the copies of tiles t + 1 .. t + 3 are in flight.
// C = A @ B, A (M x K) and B (K x N) row-major half, FP32 accumulation, C half.
// The launcher pads M and N to multiples of 128 and K to a multiple of 32, 16-byte aligned,
// and raises the kernel's dynamic shared memory limit to SMEM_BYTES (75,776).
#include <cuda_fp16.h>
#include <mma.h>

using namespace nvcuda;

constexpr int BM = 128, BN = 128, BK = 32;         // a block's tile of C, and the K step
constexpr int STAGES = 4;                          // K tiles resident in shared memory
constexpr int WARPS_M = 2, WARPS_N = 4;            // 8 warps: 2 along M, 4 along N
constexpr int THREADS = 32 * WARPS_M * WARPS_N;    // 256
constexpr int WM = BM / WARPS_M, WN = BN / WARPS_N;  // a warp's tile of C: 64 x 32
constexpr int FM = WM / 16, FN = WN / 16;          // 4 x 2 accumulator fragments per warp
constexpr int PAD = 8;                             // halves (16 bytes) added to each shared row
constexpr int LDA = BK + PAD, LDB = BN + PAD;      // 40 and 136 halves: 80- and 272-byte rows
constexpr int LDS = WN + 8;                        // the epilogue's staging rows: 40 floats
constexpr int CHUNK = 8;                           // halves per 16-byte copy
constexpr int A_CHUNKS = BM * BK / CHUNK / THREADS;  // 2 copies of A per thread per K tile
constexpr int B_CHUNKS = BK * BN / CHUNK / THREADS;  // 2 copies of B per thread per K tile
constexpr int STAGE_HALVES = BM * LDA + BK * LDB;  // 5,120 + 4,352 = 9,472 (18,944 bytes)
constexpr int SMEM_BYTES = STAGES * STAGE_HALVES * 2;  // 75,776: the launcher must match
static_assert(WARPS_M * WARPS_N * 16 * LDS * 4 <= SMEM_BYTES, "epilogue staging fits the ring");

// cp.async (sm_80+): a 16-byte copy from global to shared memory that does not pass through
// registers; .cg caches it in L2 only. Copies issued since the last commit form one group.
#include "ladder/core/cuda/convert.cuh"   // pack2
#include "ladder/core/cuda/cp_async.cuh"  // cp_async16, cp_async_commit, cp_async_wait
#include "ladder/core/cuda/memory.cuh"    // smem_addr, gmem_addr

// The copies below name their elements by pointer: the library's cp_async16 takes the
// shared-window address, and the global one.
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
  const unsigned dst = smem_addr(smem);
  cp_async16(dst, gmem_addr(gmem));
}

// Issue the copies of K tile kt into ring stage s, with wmma-shared's thread -> chunk map:
// consecutive threads take consecutive 16-byte chunks of a row, A's rows being 4 chunks
// (a warp copies 8 rows x 64 bytes) and B's 16 (a warp copies 2 x 256 bytes).
__device__ __forceinline__ void load_tile(half* ring, int s, int kt, const half* __restrict__ A,
                                          const half* __restrict__ B, int N, int K, int m0,
                                          int n0, int tid) {
  half* As = ring + s * STAGE_HALVES;
  half* Bs = As + BM * LDA;
  const int k0 = kt * BK;
#pragma unroll
  for (int i = 0; i < A_CHUNKS; ++i) {
    const int c = tid + i * THREADS;
    const int row = c / (BK / CHUNK), col = c % (BK / CHUNK) * CHUNK;
    cp_async16(As + row * LDA + col, A + (size_t)(m0 + row) * K + k0 + col);
  }
#pragma unroll
  for (int i = 0; i < B_CHUNKS; ++i) {
    const int c = tid + i * THREADS;
    const int row = c / (BN / CHUNK), col = c % (BN / CHUNK) * CHUNK;
    cp_async16(Bs + row * LDB + col, B + (size_t)(k0 + row) * N + n0 + col);
  }
}

extern "C" __global__ void __launch_bounds__(THREADS, 2)  // 2 blocks per SM: <= 128 registers
wmma_cp_async(const half* __restrict__ A, const half* __restrict__ B, half* __restrict__ C,
              int M, int N, int K) {
  // STAGES x (A tile, B tile); after the K loop, the accumulators on their way to half
  extern __shared__ __align__(128) unsigned char smem[];
  half* ring = reinterpret_cast<half*>(smem);
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int wm = warp / WARPS_N, wn = warp % WARPS_N;  // this warp's place in the block
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  const int tiles = K / BK;

  wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> a[FM];
  wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::row_major> b[FN];
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[FM][FN];
#pragma unroll
  for (int i = 0; i < FM; ++i)
#pragma unroll
    for (int j = 0; j < FN; ++j) wmma::fill_fragment(acc[i][j], 0.0f);

  // Prologue: tiles 0 .. STAGES - 2 in flight, one commit group each. A group is committed
  // even when there is no tile left to copy (K < (STAGES - 1) x BK), so that group g always
  // holds tile g and the wait counts below stay the same at every iteration.
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < tiles) load_tile(ring, s, s, A, B, N, K, m0, n0, tid);
    cp_async_commit();
  }

  for (int kt = 0; kt < tiles; ++kt) {
    // STAGES - 1 + kt groups are committed; allowing the newest STAGES - 2 to be pending
    // means groups 0 .. kt are complete: this thread's copies of tile kt have landed.
    cp_async_wait<STAGES - 2>();
    // Every thread's copies of tile kt are visible to all, and every warp has finished tile
    // kt - 1, so its stage, (kt - 1) % STAGES, may be refilled.
    __syncthreads();
    const int next = kt + STAGES - 1;  // lands in stage next % STAGES == (kt - 1) % STAGES
    if (next < tiles) load_tile(ring, next % STAGES, next, A, B, N, K, m0, n0, tid);
    cp_async_commit();  // possibly empty, to keep one group per iteration

    const half* As = ring + (kt % STAGES) * STAGE_HALVES;
    const half* Bs = As + BM * LDA;
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
#pragma unroll
      for (int i = 0; i < FM; ++i)
        wmma::load_matrix_sync(a[i], As + (wm * WM + i * 16) * LDA + kk, LDA);
#pragma unroll
      for (int j = 0; j < FN; ++j)
        wmma::load_matrix_sync(b[j], Bs + kk * LDB + wn * WN + j * 16, LDB);
#pragma unroll
      for (int i = 0; i < FM; ++i)
#pragma unroll
        for (int j = 0; j < FN; ++j) wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
    }
  }
  // Only empty groups can still be pending; wait for them anyway, and for every warp to be
  // done with the ring before the epilogue reuses its first 20,480 bytes.
  cp_async_wait<0>();
  __syncthreads();

  // Epilogue, as in wmma-shared: each warp stages one 16 x 32 strip of accumulators at a time,
  // converts it to half and writes it to C, a quarter warp per 64-byte row segment.
  float* strip = reinterpret_cast<float*>(smem) + warp * 16 * LDS;
#pragma unroll
  for (int i = 0; i < FM; ++i) {
#pragma unroll
    for (int j = 0; j < FN; ++j)
      wmma::store_matrix_sync(strip + j * 16, acc[i][j], LDS, wmma::mem_row_major);
    __syncwarp();
    const int row0 = m0 + wm * WM + i * 16, col0 = n0 + wn * WN;
#pragma unroll
    for (int it = 0; it < 16 * WN / 4 / 32; ++it) {  // 128 groups of 4 floats, 4 per lane
      const int e = lane + it * 32, r = e / (WN / 4), c = e % (WN / 4) * 4;
      const float4 v = *reinterpret_cast<const float4*>(strip + r * LDS + c);
      *reinterpret_cast<uint2*>(C + (size_t)(row0 + r) * N + col0 + c) =
          make_uint2(pack2<half>(v.x, v.y), pack2<half>(v.z, v.w));
    }
    __syncwarp();  // the strip is read before the next fragments overwrite it
  }
}
