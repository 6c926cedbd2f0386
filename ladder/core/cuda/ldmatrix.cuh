// ldmatrix and movmatrix (sm_75/sm_80 on): 8 x 8 matrices of 16-bit elements moved into or within
// the fragment layout of mma.sync, a warp at a time. Part of ladder/core/cuda (see memory.cuh).
//
// The fragment layout: lane l = 4 g + t holds row g, elements 2t and 2t + 1, in one 32-bit
// register. Loading it with ordinary loads takes a 4-byte load per lane per matrix from scattered
// rows; ldmatrix takes a row address per lane and loads four matrices in one instruction, 16
// bytes a row, and (.trans) transposes them on the way, which a B operand stored row-major needs.
#ifndef LADDER_CUDA_LDMATRIX_CUH
#define LADDER_CUDA_LDMATRIX_CUH

// Four 8 x 8 matrices of b16 from shared memory: lanes 8i .. 8i + 7 give the (16-byte aligned)
// row addresses of matrix i, and lane l receives, in r[i], row l / 4, elements 2 (l % 4) and
// 2 (l % 4) + 1 of matrix i.
__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}
// The same, each matrix transposed: lane l receives column l / 4, rows 2 (l % 4) and
// 2 (l % 4) + 1 (of the matrix as its rows lie in memory).
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}

// The transpose of an 8 x 8 b16 matrix in fragment layout, in registers (movmatrix, sm_80 on):
// lane (g, t) holds row g, columns 2t, 2t + 1 before, and rows 2t, 2t + 1 of column g after.
__device__ __forceinline__ unsigned movmatrix_trans(unsigned a) {
  unsigned d;
  asm("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(d) : "r"(a));
  return d;
}

#endif  // LADDER_CUDA_LDMATRIX_CUH
