// FP32 results to the 16-bit element types of the tensor cores' operands and outputs, two at a
// time (the pairs a fragment holds in one 32-bit register). Part of ladder/core/cuda (see
// memory.cuh).
#ifndef LADDER_CUDA_CONVERT_CUH
#define LADDER_CUDA_CONVERT_CUH
#include <cuda_bf16.h>
#include <cuda_fp16.h>

// The operands' element type, half or __nv_bfloat16: which of an instruction's .f16 and .bf16
// forms a template takes.
template <typename T>
constexpr bool is_bf16 = false;
template <>
constexpr bool is_bf16<__nv_bfloat16> = true;

// Two FP32 values rounded to T (half or __nv_bfloat16) and packed in 32 bits, lo in the low 16
// bits: an A fragment's register, built from an FP32 accumulator fragment.
template <typename T>
__device__ __forceinline__ unsigned pack2(float lo, float hi) {
  if constexpr (is_bf16<T>) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const unsigned*>(&h);
  } else {
    const __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const unsigned*>(&h);
  }
}

// Two FP32 accumulators rounded and stored as two adjacent outputs (4 bytes, 4-byte aligned),
// with the element type's own pair type.
__device__ __forceinline__ void store2(half* p, float a, float b) {
  *reinterpret_cast<__half2*>(p) = __floats2half2_rn(a, b);
}
__device__ __forceinline__ void store2(__nv_bfloat16* p, float a, float b) {
  *reinterpret_cast<__nv_bfloat162*>(p) = __floats2bfloat162_rn(a, b);
}

#endif  // LADDER_CUDA_CONVERT_CUH
