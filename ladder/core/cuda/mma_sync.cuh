// mma.sync (sm_80 on): one warp's matrix multiply-accumulate on the tensor cores, operands and
// accumulators in registers. Part of ladder/core/cuda (see memory.cuh).
//
// Fragment layouts (PTX ISA, "Matrix Fragments for mma.m16n8k16"), with g = lane / 4 and
// t = lane % 4, each register holding two 16-bit elements, the first in the low half:
//   a[0] = A[g][2t, 2t+1],    a[1] = A[g+8][2t, 2t+1]
//   a[2] = A[g][2t+8, 2t+9],  a[3] = A[g+8][2t+8, 2t+9]
//   b[0] = B[2t, 2t+1][g],    b[1] = B[2t+8, 2t+9][g]
//   d[0], d[1] = D[g][2t, 2t+1],  d[2], d[3] = D[g+8][2t, 2t+1]
#ifndef LADDER_CUDA_MMA_SYNC_CUH
#define LADDER_CUDA_MMA_SYNC_CUH
#include "ladder/core/cuda/convert.cuh"

// d (16 x 8, FP32) += a (16 x 16, row) * b (16 x 8, col), T half or __nv_bfloat16
template <typename T = half>
__device__ __forceinline__ void mma_16816(float (&d)[4], const unsigned (&a)[4],
                                          const unsigned (&b)[2]) {
  if constexpr (is_bf16<T>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
}

// d (16 x 8, FP32) += a (16 x 8, row, half) * b (8 x 8, col, half): the first k8 half of
// m16n8k16, a[0], a[1] and b as a[0], a[1] and b[0] there; for an odd last k8 step.
__device__ __forceinline__ void mma_1688(float (&d)[4], const unsigned (&a)[2], unsigned b) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 "
      "{%0, %1, %2, %3}, {%4, %5}, {%6}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(b));
}

#endif  // LADDER_CUDA_MMA_SYNC_CUH
