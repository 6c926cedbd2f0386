// D_i = Σ_c dO_ic O_ic for every query row of half O and dO (rows x D, D in {64, 128}), into
// a float workspace: the term dS = P ∘ (dP - D) subtracts, for the backward's CUDA C++ rungs.
// One warp per row: lane l reads columns 2l, 2l + 1 (+ 64), and five xor shuffles add them.
#include <cuda_fp16.h>

template <int D>
__device__ __forceinline__ void delta_rows(const half* __restrict__ O, const half* __restrict__ dO,
                                           float* __restrict__ delta, int rows) {
  const int row = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x % 32;
  if (row >= rows) return;
  float acc = 0.f;
#pragma unroll
  for (int c = 2 * lane; c < D; c += 64) {
    const float2 o = __half22float2(*reinterpret_cast<const __half2*>(O + (size_t)row * D + c));
    const float2 g = __half22float2(*reinterpret_cast<const __half2*>(dO + (size_t)row * D + c));
    acc += o.x * g.x + o.y * g.y;
  }
#pragma unroll
  for (int step = 16; step > 0; step /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, step);
  if (lane == 0) delta[row] = acc;
}

#define DELTA_ENTRY(D)                                                                         \
  extern "C" __global__ void backward_delta_d##D(const half* __restrict__ O,                  \
                                                 const half* __restrict__ dO,                 \
                                                 float* __restrict__ delta, int rows) {       \
    delta_rows<D>(O, dO, delta, rows);                                                         \
  }

DELTA_ENTRY(64)
DELTA_ENTRY(128)
