// What the mma.sync attention kernels share (rung 5 and 6's forward, the backward ladder's
// tensor-core rung): cp.async copies of 16 bytes, ldmatrix, mma.m16n8k16 with FP32 accumulation,
// half2 packing and the XOR swizzle of shared rows. A library, not a rung: each instruction's
// fragment layout is written beside it, as the kernels that include it rely on.
#ifndef LADDER_ATTENTION_MMA_SYNC_CUH
#define LADDER_ATTENTION_MMA_SYNC_CUH
#include <cuda_fp16.h>

__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000); }

__device__ __forceinline__ void cp_async16(unsigned dst, const void* src, bool valid) {
  // src-size 0 copies nothing and fills the 16 bytes with zeros: rows past the end
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(valid ? 16 : 0)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int PENDING>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(PENDING) : "memory");
}
// Four 8 x 8 matrices of b16; lanes 8i..8i+7 give the row addresses of matrix i, and lane l
// receives, in r[i], row l / 4, elements 2 (l % 4) and 2 (l % 4) + 1 (of the transpose: .trans).
__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}
// d += a (16 x 16, row) * b (16 x 8, col). With g = lane / 4, t = lane % 4, a lane holds
//   a[0] = A[g][2t, 2t+1],    a[1] = A[g+8][2t, 2t+1]
//   a[2] = A[g][2t+8, 2t+9],  a[3] = A[g+8][2t+8, 2t+9]
//   b0 = B[2t, 2t+1][g],  b1 = B[2t+8, 2t+9][g]
//   d[0], d[1] = D[g][2t, 2t+1],  d[2], d[3] = D[g+8][2t, 2t+1]   (low half = first element)
__device__ __forceinline__ void mma_16816(float (&d)[4], const unsigned (&a)[4], unsigned b0,
                                          unsigned b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ unsigned pack_half2(float lo, float hi) {
  const __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const unsigned*>(&h);
}
// Byte offset of 16-byte chunk `chunk` of row `row` in a swizzled tile of ROW_BYTES-byte rows.
template <int ROW_BYTES>
__device__ __forceinline__ unsigned swizzle(int row, int chunk) {
  return row * ROW_BYTES + ((chunk ^ (row & 7)) << 4);
}

#endif  // LADDER_ATTENTION_MMA_SYNC_CUH
