// wmma: one warp per 16 x 16 tile of C, fragments loaded straight from global memory.
// C = A @ B, A (M x K) and B (K x N) row-major half, FP32 accumulation, C half.
// The launcher pads M and N to multiples of 32 and K to a multiple of 16.
#include <cuda_fp16.h>
#include <mma.h>

using namespace nvcuda;

constexpr int WARPS_M = 2, WARPS_N = 2;  // a block: 2 x 2 warps, a 32 x 32 tile of C

extern "C" __global__ void __launch_bounds__(128)
wmma_naive(const half* __restrict__ A, const half* __restrict__ B, half* __restrict__ C,
           int M, int N, int K) {
  __shared__ float staging[WARPS_M * WARPS_N][16 * 16];  // accumulators on their way to half
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int row = (blockIdx.y * WARPS_M + warp / WARPS_N) * 16;
  const int col = (blockIdx.x * WARPS_N + warp % WARPS_N) * 16;

  wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::row_major> b;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  wmma::fill_fragment(acc, 0.0f);
  for (int k = 0; k < K; k += 16) {
    // every fragment load reads global memory (or L1/L2): nothing is shared between warps
    wmma::load_matrix_sync(a, A + (size_t)row * K + k, K);
    wmma::load_matrix_sync(b, B + (size_t)k * N + col, N);
    wmma::mma_sync(acc, a, b, acc);
  }
  // the accumulator's layout inside the warp is opaque: go through shared memory to convert
  float* tile = staging[warp];
  wmma::store_matrix_sync(tile, acc, 16, wmma::mem_row_major);
  __syncwarp();
  for (int i = lane; i < 16 * 8; i += 32) {  // 8 pairs of columns per row
    const int r = i / 8, c = (i % 8) * 2;
    *reinterpret_cast<__half2*>(C + (size_t)(row + r) * N + col + c) =
        __floats2half2_rn(tile[r * 16 + c], tile[r * 16 + c + 1]);
  }
}
