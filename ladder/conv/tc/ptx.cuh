// The instructions the convolution's tensor-core rungs 8 to 12 are built from, one wrapper
// each: cp.async, mma.sync, movmatrix, fast division, a few stores (the wgmma wrappers are in
// wgmma.cuh, the bulk copies in bulk_copy.cuh). A library, not a rung: each rung's .cu
// includes what it uses and holds its own kernel: the order it stages, its job loop and main
// loop, and which epilogue it calls. Fragment layouts use lane = 4 g + t (g = lane / 4).
#ifndef CONV_TC_PTX_CUH
#define CONV_TC_PTX_CUH
#include <cuda_fp16.h>

// ---- cp.async: 16-byte copies global -> shared that land without the thread waiting ----
__device__ __forceinline__ void cp_async16(unsigned dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
__device__ __forceinline__ void cp_async_wait_all() {
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");
}

// ---- mma.sync (sm_80 on): one warp's 16 x 8 tile of D ----
// d += a (16 x 16, row) * b (16 x 8, col). With g = lane / 4, t = lane % 4:
//   a0 = A[g][2t, 2t+1], a1 = A[g+8][2t, 2t+1], a2 = A[g][2t+8, 2t+9], a3 = A[g+8][2t+8, 2t+9]
//   b0 = B[2t, 2t+1][g], b1 = B[2t+8, 2t+9][g]
//   d0, d1 = D[g][2t, 2t+1], d2, d3 = D[g+8][2t, 2t+1]          (low half = first element)
__device__ __forceinline__ void mma_16816(float (&d)[4], unsigned a0, unsigned a1, unsigned a2,
                                          unsigned a3, unsigned b0, unsigned b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
// d += a (16 x 8, row) * b (8 x 8, col): a0 = A[g][2t, 2t+1], a1 = A[g+8][2t, 2t+1],
// b0 = B[2t, 2t+1][g]; d as for m16n8k16 (the first k8 half of it).
__device__ __forceinline__ void mma_1688(float (&d)[4], unsigned a0, unsigned a1, unsigned b0) {
  asm("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 "
      "{%0, %1, %2, %3}, {%4, %5}, {%6}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(b0));
}

// The transpose of an 8 x 8 b16 matrix in fragment layout (lane (g, t) holds row g, columns
// 2t, 2t + 1): afterwards lane (g, t) holds rows 2t, 2t + 1 of column g.
__device__ __forceinline__ unsigned transpose_8x8(unsigned a) {
  unsigned d;
  asm("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(d) : "r"(a));
  return d;
}

// ---- small helpers ----
// n / d for 0 <= n < 2^31 with one multiply-high instead of a division: the GPU has no integer
// divider, and a run-time `n / d` compiles to about 25 instructions through a float reciprocal.
// The launcher computes (magic, shift) for each divisor (tc/plan.py, fast_division):
// with l = ceil(log2 d), magic = ceil(2^(32 + l) / d) - 2^32 and shift = l, and
// n / d = (umulhi(n, magic) + n) >> l (Granlund and Montgomery's 33-bit multiplier, exact for
// every n < 2^32 because magic d + 2^32 d - 2^(32 + l) < d <= 2^l; the sum stays below 2^32 for
// n < 2^31). d = 1 needs no special case: magic = 0, shift = 0. As kernel parameters they stay
// in the constant bank: no registers.
__device__ __forceinline__ int fast_div(int n, unsigned magic, int shift) {
  return (int)((__umulhi((unsigned)n, magic) + (unsigned)n) >> shift);
}

// The pointer, through an empty asm: the compiler cannot fold the arithmetic that made it into
// the addresses computed from it (which it otherwise redoes in 64 bits at every store).
template <class P>
__device__ __forceinline__ P* opaque(P* ptr) {
  asm("" : "+l"(ptr));
  return ptr;
}

// A 32-bit store to global memory (through an opaque pointer the compiler no longer knows is
// global, and would store through the generic address space).
__device__ __forceinline__ void st_global(unsigned* ptr, unsigned value) {
  asm volatile("st.global.b32 [%0], %1;\n" ::"l"(ptr), "r"(value) : "memory");
}

// (lo, hi) rounded to half, lo in the low 16 bits.
__device__ __forceinline__ unsigned pack_half2(float lo, float hi) {
  const __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const unsigned*>(&h);
}

#endif  // CONV_TC_PTX_CUH
