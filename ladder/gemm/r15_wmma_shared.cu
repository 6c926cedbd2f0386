// wmma-shared: WMMA from shared memory. A block stages 128 x 32 of A and 32 x 128 of B in shared
// memory per K step; its 8 warps (2 x 4) each compute a 64 x 32 warp tile of C, 4 x 2 fragments.
// C = A @ B, A (M x K) and B (K x N) row-major half, FP32 accumulation, C half.
// The launcher pads M and N to multiples of 128 and K to a multiple of 32, 16-byte aligned.
#include <cuda_fp16.h>
#include <mma.h>

using namespace nvcuda;

constexpr int BM = 128, BN = 128, BK = 32;         // a block's tile of C, and the K step
constexpr int WARPS_M = 2, WARPS_N = 4;            // 8 warps: 2 along M, 4 along N
constexpr int THREADS = 32 * WARPS_M * WARPS_N;    // 256
constexpr int WM = BM / WARPS_M, WN = BN / WARPS_N;  // a warp's tile of C: 64 x 32
constexpr int FM = WM / 16, FN = WN / 16;          // 4 x 2 accumulator fragments per warp
constexpr int PAD = 8;                             // halves (16 bytes) added to each shared row
constexpr int LDA = BK + PAD, LDB = BN + PAD;      // 40 and 136 halves: 80- and 272-byte rows
constexpr int LDS = WN + 8;                        // the epilogue's staging rows: 40 floats
constexpr int CHUNK = 8;                           // halves per 16-byte copy
constexpr int A_CHUNKS = BM * BK / CHUNK / THREADS;  // 2 copies of A per thread per K step
constexpr int B_CHUNKS = BK * BN / CHUNK / THREADS;  // 2 copies of B per thread per K step
constexpr int TILE_BYTES = (BM * LDA + BK * LDB) * 2;        // 10,240 + 8,704 = 18,944
constexpr int STAGING_BYTES = WARPS_M * WARPS_N * 16 * LDS * 4;  // 8 x 2,560 = 20,480
constexpr int SMEM_BYTES = TILE_BYTES > STAGING_BYTES ? TILE_BYTES : STAGING_BYTES;

__device__ __forceinline__ unsigned pack_half2(float lo, float hi) {  // two floats -> 4 bytes
  __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<unsigned*>(&h);
}

extern "C" __global__ void __launch_bounds__(THREADS, 2)  // 2 blocks per SM: <= 128 registers
wmma_shared(const half* __restrict__ A, const half* __restrict__ B, half* __restrict__ C,
            int M, int N, int K) {
  // the A and B tiles, and after the K loop the accumulators on their way to half
  __shared__ __align__(128) unsigned char smem[SMEM_BYTES];
  half* As = reinterpret_cast<half*>(smem);  // BM rows of LDA halves
  half* Bs = As + BM * LDA;                  // BK rows of LDB halves
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int wm = warp / WARPS_N, wn = warp % WARPS_N;  // this warp's place in the block
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;

  wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> a[FM];
  wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::row_major> b[FN];
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[FM][FN];
#pragma unroll
  for (int i = 0; i < FM; ++i)
#pragma unroll
    for (int j = 0; j < FN; ++j) wmma::fill_fragment(acc[i][j], 0.0f);

  for (int k0 = 0; k0 < K; k0 += BK) {
    // Global -> registers -> shared, 16 bytes per access, all four loads issued before any
    // store. Consecutive threads take consecutive 16-byte chunks of a row: A's rows are 4
    // chunks (a warp copies 8 rows x 64 bytes), B's 16 chunks (a warp copies 2 x 256 bytes).
    uint4 ra[A_CHUNKS], rb[B_CHUNKS];
#pragma unroll
    for (int i = 0; i < A_CHUNKS; ++i) {
      const int c = tid + i * THREADS;
      const int row = c / (BK / CHUNK), col = c % (BK / CHUNK) * CHUNK;
      ra[i] = *reinterpret_cast<const uint4*>(A + (size_t)(m0 + row) * K + k0 + col);
    }
#pragma unroll
    for (int i = 0; i < B_CHUNKS; ++i) {
      const int c = tid + i * THREADS;
      const int row = c / (BN / CHUNK), col = c % (BN / CHUNK) * CHUNK;
      rb[i] = *reinterpret_cast<const uint4*>(B + (size_t)(k0 + row) * N + n0 + col);
    }
#pragma unroll
    for (int i = 0; i < A_CHUNKS; ++i) {
      const int c = tid + i * THREADS;
      const int row = c / (BK / CHUNK), col = c % (BK / CHUNK) * CHUNK;
      *reinterpret_cast<uint4*>(As + row * LDA + col) = ra[i];
    }
#pragma unroll
    for (int i = 0; i < B_CHUNKS; ++i) {
      const int c = tid + i * THREADS;
      const int row = c / (BN / CHUNK), col = c % (BN / CHUNK) * CHUNK;
      *reinterpret_cast<uint4*>(Bs + row * LDB + col) = rb[i];
    }
    __syncthreads();  // the tiles are complete

    // Two 16-deep steps per tile: 4 A and 2 B fragments feed 8 mma_sync, so each A fragment
    // is used twice and each B fragment four times (wmma: every fragment once).
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
    __syncthreads();  // every warp is done with the tiles before the next K step overwrites them
  }

  // Epilogue. The barrier that ended the last K step lets the tiles' memory be reused: each
  // warp stages one 16 x 32 strip of its accumulators at a time (2,560 bytes a warp), converts
  // it to half and writes it to C, a quarter warp per 64-byte row segment, 8 bytes a lane.
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
          make_uint2(pack_half2(v.x, v.y), pack_half2(v.z, v.w));
    }
    __syncwarp();  // the strip is read before the next fragments overwrite it
  }
}
