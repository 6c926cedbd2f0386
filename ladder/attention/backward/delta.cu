// D_i = Σ_c dO_ic O_ic for every query row of half (or bfloat16) O and dO (rows x D, D in
// {64, 128}), into a float workspace: the term dS = P ∘ (dP - D) subtracts, for the backward's
// CUDA C++ rungs. One warp per row: lane l reads columns 2l, 2l + 1 (+ 64), and five xor
// shuffles add them.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

__device__ __forceinline__ float2 to_float2(__half2 x) { return __half22float2(x); }
__device__ __forceinline__ float2 to_float2(__nv_bfloat162 x) { return __bfloat1622float2(x); }

// T2: the type of two elements (__half2 or __nv_bfloat162)
template <typename T, typename T2, int D>
__device__ __forceinline__ void delta_rows(const T* __restrict__ O, const T* __restrict__ dO,
                                           float* __restrict__ delta, int rows) {
  const int row = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x % 32;
  if (row >= rows) return;
  float acc = 0.f;
#pragma unroll
  for (int c = 2 * lane; c < D; c += 64) {
    const float2 o = to_float2(*reinterpret_cast<const T2*>(O + (size_t)row * D + c));
    const float2 g = to_float2(*reinterpret_cast<const T2*>(dO + (size_t)row * D + c));
    acc += o.x * g.x + o.y * g.y;
  }
#pragma unroll
  for (int step = 16; step > 0; step /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, step);
  if (lane == 0) delta[row] = acc;
}

#define DELTA_ENTRY(NAME, T, T2, D)                                                            \
  extern "C" __global__ void backward_delta_##NAME(const T* __restrict__ O,                     \
                                                   const T* __restrict__ dO,                    \
                                                   float* __restrict__ delta, int rows) {       \
    delta_rows<T, T2, D>(O, dO, delta, rows);                                                   \
  }

DELTA_ENTRY(d64, half, __half2, 64)
DELTA_ENTRY(d128, half, __half2, 128)
DELTA_ENTRY(d64_bf16, __nv_bfloat16, __nv_bfloat162, 64)
DELTA_ENTRY(d128_bf16, __nv_bfloat16, __nv_bfloat162, 128)
