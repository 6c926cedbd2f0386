// wgmma (sm_90a only): the warpgroup's asynchronous matrix multiply-accumulate, its operands'
// shared-memory descriptors, and the fences, commits and waits that order it. Part of
// ladder/core/cuda (see memory.cuh). A kernel that calls these is built for sm_90a.
//
// A warpgroup (4 consecutive warps, 128 threads) issues one wgmma.mma_async.m64nNk16 together:
// D (64 x N, FP32, N / 2 registers per thread) += A (64 x 16) * B (16 x N). B, and A in the
// "ss" form, are read from shared memory through a 64-bit matrix descriptor; in the "rs" form A
// comes from registers, each warp's 16 rows in mma.sync's m16n8k16 A fragment. D's layout: warp
// w holds rows 16w .. 16w + 15, and d[4j .. 4j + 3] are columns 8j + 2 (lane % 4) + {0, 1} of
// rows lane / 4 and lane / 4 + 8 (mma.sync's D fragment, N / 8 times).
//
// The multiply runs asynchronously from the threads that issued it. wgmma_fence orders the
// registers written before it (accumulators, A fragments) before the multiplies after it;
// wgmma_commit closes a group of multiplies; wgmma_wait<N> waits until at most N groups are
// still running. Until then the accumulators and A registers of a running group must not be
// read or written, and the compiler does not know it: fence_operands says so.
#ifndef LADDER_CUDA_WGMMA_CUH
#define LADDER_CUDA_WGMMA_CUH
#include "ladder/core/cuda/convert.cuh"

// Swizzle modes of a descriptor (bits 62-63): none (the canonical interleaved layout of 8 x 16
// byte core matrices), or the 128-byte swizzle that TMA writes (16-byte unit u of row r at
// u ^ (r % 8) within each 1024-byte, 8-row atom).
enum WgmmaSwizzle : unsigned { WGMMA_SWIZZLE_NONE = 0, WGMMA_SWIZZLE_128B = 1 };

// The shared-memory matrix descriptor of an operand at shared address addr: the start address,
// the leading-dimension byte offset (lbo) and the stride byte offset (sbo), each in 16-byte units
// (bits 0-13, 16-29, 32-45), and the swizzle mode. Shared addresses stay below 2^18, so the
// address field holds all of them; lbo and sbo must be below 2^18 too.
__device__ __forceinline__ unsigned long long wgmma_desc(
    unsigned addr, unsigned lbo, unsigned sbo, WgmmaSwizzle swizzle = WGMMA_SWIZZLE_128B) {
  return (unsigned long long)((addr & 0x3FFFF) >> 4) | (unsigned long long)(lbo >> 4) << 16 |
         (unsigned long long)(sbo >> 4) << 32 | (unsigned long long)swizzle << 62;
}

// The asm text of each width N: D's N / 2 registers (R: %0 .. %(N/2 - 1), each list the one
// before and more; D: in braces) and their operands with the constraint C ("+f": accumulate;
// "=f": overwritten), then the operands after them: for the rs form A's registers, B's
// descriptor, scale-d, imm-scale-a = imm-scale-b = 1 and imm-trans-b; for the ss form both
// descriptors, scale-d, the scales, imm-trans-a and imm-trans-b (8-bit types have no transpose:
// SS256_NO_TRANS, the one width they use).
#define LADDER_WGMMA_R8 "%0, %1, %2, %3"
#define LADDER_WGMMA_D8_OPERANDS(C) C(d[0]), C(d[1]), C(d[2]), C(d[3])
#define LADDER_WGMMA_D8 "{" LADDER_WGMMA_R8 "}"
#define LADDER_WGMMA_RS8(SCALE_D) "{%4, %5, %6, %7}, %8, " SCALE_D ", 1, 1, %9"
#define LADDER_WGMMA_SS8(SCALE_D) "%4, %5, " SCALE_D ", 1, 1, %6, %7"

#define LADDER_WGMMA_R16 \
  LADDER_WGMMA_R8 ", " \
  "%4, %5, %6, %7"
#define LADDER_WGMMA_D16_OPERANDS(C) \
  LADDER_WGMMA_D8_OPERANDS(C), \
  C(d[4]), C(d[5]), C(d[6]), C(d[7])
#define LADDER_WGMMA_D16 "{" LADDER_WGMMA_R16 "}"
#define LADDER_WGMMA_RS16(SCALE_D) "{%8, %9, %10, %11}, %12, " SCALE_D ", 1, 1, %13"
#define LADDER_WGMMA_SS16(SCALE_D) "%8, %9, " SCALE_D ", 1, 1, %10, %11"

#define LADDER_WGMMA_R32 \
  LADDER_WGMMA_R16 ", " \
  "%8, %9, %10, %11, %12, %13, %14, %15"
#define LADDER_WGMMA_D32_OPERANDS(C) \
  LADDER_WGMMA_D16_OPERANDS(C), \
  C(d[8]), C(d[9]), C(d[10]), C(d[11]), C(d[12]), C(d[13]), C(d[14]), C(d[15])
#define LADDER_WGMMA_D32 "{" LADDER_WGMMA_R32 "}"
#define LADDER_WGMMA_RS32(SCALE_D) "{%16, %17, %18, %19}, %20, " SCALE_D ", 1, 1, %21"
#define LADDER_WGMMA_SS32(SCALE_D) "%16, %17, " SCALE_D ", 1, 1, %18, %19"

#define LADDER_WGMMA_R64 \
  LADDER_WGMMA_R32 ", " \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define LADDER_WGMMA_D64_OPERANDS(C) \
  LADDER_WGMMA_D32_OPERANDS(C), \
  C(d[16]), C(d[17]), C(d[18]), C(d[19]), C(d[20]), C(d[21]), C(d[22]), C(d[23]), C(d[24]), \
  C(d[25]), C(d[26]), C(d[27]), C(d[28]), C(d[29]), C(d[30]), C(d[31])
#define LADDER_WGMMA_D64 "{" LADDER_WGMMA_R64 "}"
#define LADDER_WGMMA_RS64(SCALE_D) "{%32, %33, %34, %35}, %36, " SCALE_D ", 1, 1, %37"
#define LADDER_WGMMA_SS64(SCALE_D) "%32, %33, " SCALE_D ", 1, 1, %34, %35"

#define LADDER_WGMMA_R128 \
  LADDER_WGMMA_R64 ", " \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, " \
  "%50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define LADDER_WGMMA_D128_OPERANDS(C) \
  LADDER_WGMMA_D64_OPERANDS(C), \
  C(d[32]), C(d[33]), C(d[34]), C(d[35]), C(d[36]), C(d[37]), C(d[38]), C(d[39]), C(d[40]), \
  C(d[41]), C(d[42]), C(d[43]), C(d[44]), C(d[45]), C(d[46]), C(d[47]), C(d[48]), C(d[49]), \
  C(d[50]), C(d[51]), C(d[52]), C(d[53]), C(d[54]), C(d[55]), C(d[56]), C(d[57]), C(d[58]), \
  C(d[59]), C(d[60]), C(d[61]), C(d[62]), C(d[63])
#define LADDER_WGMMA_D128 "{" LADDER_WGMMA_R128 "}"
#define LADDER_WGMMA_RS128(SCALE_D) "{%64, %65, %66, %67}, %68, " SCALE_D ", 1, 1, %69"
#define LADDER_WGMMA_SS128(SCALE_D) "%64, %65, " SCALE_D ", 1, 1, %66, %67"

#define LADDER_WGMMA_R152 \
  LADDER_WGMMA_R128 ", " \
  "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75"
#define LADDER_WGMMA_D152_OPERANDS(C) \
  LADDER_WGMMA_D128_OPERANDS(C), \
  C(d[64]), C(d[65]), C(d[66]), C(d[67]), C(d[68]), C(d[69]), C(d[70]), C(d[71]), C(d[72]), \
  C(d[73]), C(d[74]), C(d[75])
#define LADDER_WGMMA_D152 "{" LADDER_WGMMA_R152 "}"
#define LADDER_WGMMA_RS152(SCALE_D) "{%76, %77, %78, %79}, %80, " SCALE_D ", 1, 1, %81"
#define LADDER_WGMMA_SS152(SCALE_D) "%76, %77, " SCALE_D ", 1, 1, %78, %79"

#define LADDER_WGMMA_R256 \
  LADDER_WGMMA_R152 ", " \
  "%76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, " \
  "%94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, " \
  "%110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, " \
  "%125, %126, %127"
#define LADDER_WGMMA_D256_OPERANDS(C) \
  LADDER_WGMMA_D152_OPERANDS(C), \
  C(d[76]), C(d[77]), C(d[78]), C(d[79]), C(d[80]), C(d[81]), C(d[82]), C(d[83]), C(d[84]), \
  C(d[85]), C(d[86]), C(d[87]), C(d[88]), C(d[89]), C(d[90]), C(d[91]), C(d[92]), C(d[93]), \
  C(d[94]), C(d[95]), C(d[96]), C(d[97]), C(d[98]), C(d[99]), C(d[100]), C(d[101]), \
  C(d[102]), C(d[103]), C(d[104]), C(d[105]), C(d[106]), C(d[107]), C(d[108]), C(d[109]), \
  C(d[110]), C(d[111]), C(d[112]), C(d[113]), C(d[114]), C(d[115]), C(d[116]), C(d[117]), \
  C(d[118]), C(d[119]), C(d[120]), C(d[121]), C(d[122]), C(d[123]), C(d[124]), C(d[125]), \
  C(d[126]), C(d[127])
#define LADDER_WGMMA_D256 "{" LADDER_WGMMA_R256 "}"
#define LADDER_WGMMA_RS256(SCALE_D) "{%128, %129, %130, %131}, %132, " SCALE_D ", 1, 1, %133"
#define LADDER_WGMMA_SS256(SCALE_D) "%128, %129, " SCALE_D ", 1, 1, %130, %131"
#define LADDER_WGMMA_SS256_NO_TRANS(SCALE_D) "%128, %129, " SCALE_D ", 1, 1"

// One wgmma of width NN: depth K ("k16", "k32"), operand TYPE, the text of the operands after D
// (AFTER_D), D's constraint C, then the asm's inputs.
#define LADDER_WGMMA_ASM(NN, K, TYPE, AFTER_D, C, ...)                                        \
  asm volatile("wgmma.mma_async.sync.aligned.m64n" #NN K ".f32." TYPE "." TYPE " "             \
               LADDER_WGMMA_D##NN ", " AFTER_D ";\n"                                          \
               : LADDER_WGMMA_D##NN##_OPERANDS(C)                                             \
               : __VA_ARGS__)

// wgmma_ss: D (64 x N, FP32, N / 2 registers) += A (64 x 16, descriptor a) * B (16 x N,
// descriptor b), T half or __nv_bfloat16. TRANS_A and TRANS_B give each operand's major order
// in shared memory: 0 K-major (A as row-major A lies; B as B^T lies), 1 M- or N-major (A as A^T
// lies; B as row-major B lies): 16-bit operands may lie either way, the tensor cores transpose.
#define LADDER_WGMMA_SS_CASE(NN, TYPE)                                                        \
  if constexpr (N == NN)                                                                      \
  LADDER_WGMMA_ASM(NN, "k16", TYPE, LADDER_WGMMA_SS##NN("1"), "+f", "l"(a), "l"(b),           \
                   "n"(TRANS_A), "n"(TRANS_B))
template <int N, typename T, int TRANS_A, int TRANS_B>
__device__ __forceinline__ void wgmma_ss(float* d, unsigned long long a, unsigned long long b) {
  static_assert(N == 8 || N == 16 || N == 32 || N == 64 || N == 128 || N == 152 || N == 256,
                "wgmma_ss: widths 8, 16, 32, 64, 128, 152, 256");
  if constexpr (is_bf16<T>) {
    LADDER_WGMMA_SS_CASE(8, "bf16");
    LADDER_WGMMA_SS_CASE(16, "bf16");
    LADDER_WGMMA_SS_CASE(32, "bf16");
    LADDER_WGMMA_SS_CASE(64, "bf16");
    LADDER_WGMMA_SS_CASE(128, "bf16");
    LADDER_WGMMA_SS_CASE(152, "bf16");
    LADDER_WGMMA_SS_CASE(256, "bf16");
  } else {
    LADDER_WGMMA_SS_CASE(8, "f16");
    LADDER_WGMMA_SS_CASE(16, "f16");
    LADDER_WGMMA_SS_CASE(32, "f16");
    LADDER_WGMMA_SS_CASE(64, "f16");
    LADDER_WGMMA_SS_CASE(128, "f16");
    LADDER_WGMMA_SS_CASE(152, "f16");
    LADDER_WGMMA_SS_CASE(256, "f16");
  }
}
#undef LADDER_WGMMA_SS_CASE

// wgmma_ss_fp8: D (64 x N, FP32) += A (64 x 32) * B (32 x N) in 8-bit floats, both operands e4m3
// (E5M2 false) or both e5m2. No transpose: an 8-bit operand must lie K-major in shared memory
// (A row-major, B as B^T lies), a k32 slice being 32 bytes of each row, as a k16 slice of half is.
template <int N, bool E5M2>
__device__ __forceinline__ void wgmma_ss_fp8(float* d, unsigned long long a,
                                             unsigned long long b) {
  static_assert(N == 256, "wgmma_ss_fp8: width 256");
  if constexpr (E5M2)
    LADDER_WGMMA_ASM(256, "k32", "e5m2", LADDER_WGMMA_SS256_NO_TRANS("1"), "+f", "l"(a), "l"(b));
  else
    LADDER_WGMMA_ASM(256, "k32", "e4m3", LADDER_WGMMA_SS256_NO_TRANS("1"), "+f", "l"(a), "l"(b));
}

// wgmma_rs: D (64 x N, FP32) (+)= A (64 x 16, this warp's 16 rows in a, mma.sync's A fragment)
// * B (16 x N, descriptor b), T half or __nv_bfloat16; TRANS_B as for wgmma_ss. ACCUMULATE
// false ignores D's old contents (scale-d 0) and makes d outputs only, so that the registers are
// dead before the first multiply of a sum (other code may have them in between).
#define LADDER_WGMMA_RS_CASE(NN, TYPE, SCALE_D, C)                                            \
  if constexpr (N == NN)                                                                      \
  LADDER_WGMMA_ASM(NN, "k16", TYPE, LADDER_WGMMA_RS##NN(SCALE_D), C, "r"(a[0]), "r"(a[1]),    \
                   "r"(a[2]), "r"(a[3]), "l"(b), "n"(TRANS_B))
#define LADDER_WGMMA_RS_CASES(TYPE, SCALE_D, C) \
  LADDER_WGMMA_RS_CASE(8, TYPE, SCALE_D, C);    \
  LADDER_WGMMA_RS_CASE(16, TYPE, SCALE_D, C);   \
  LADDER_WGMMA_RS_CASE(32, TYPE, SCALE_D, C);   \
  LADDER_WGMMA_RS_CASE(64, TYPE, SCALE_D, C);   \
  LADDER_WGMMA_RS_CASE(128, TYPE, SCALE_D, C);  \
  LADDER_WGMMA_RS_CASE(152, TYPE, SCALE_D, C);  \
  LADDER_WGMMA_RS_CASE(256, TYPE, SCALE_D, C)
template <int N, typename T, int TRANS_B, bool ACCUMULATE = true>
__device__ __forceinline__ void wgmma_rs(float* d, const unsigned (&a)[4], unsigned long long b) {
  static_assert(N == 8 || N == 16 || N == 32 || N == 64 || N == 128 || N == 152 || N == 256,
                "wgmma_rs: widths 8, 16, 32, 64, 128, 152, 256");
  if constexpr (is_bf16<T> && ACCUMULATE) {
    LADDER_WGMMA_RS_CASES("bf16", "1", "+f");
  } else if constexpr (is_bf16<T>) {
    LADDER_WGMMA_RS_CASES("bf16", "0", "=f");
  } else if constexpr (ACCUMULATE) {
    LADDER_WGMMA_RS_CASES("f16", "1", "+f");
  } else {
    LADDER_WGMMA_RS_CASES("f16", "0", "=f");
  }
}
#undef LADDER_WGMMA_RS_CASES
#undef LADDER_WGMMA_RS_CASE
#undef LADDER_WGMMA_ASM

// Orders the registers written before it (accumulators, A fragments) before the wgmma after it:
// required before the first wgmma, and between any write of those registers and a wgmma reading
// them.
__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
// The wgmma issued since the last commit become one group.
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
// Until at most PENDING of this warpgroup's groups are still running (0: all are done, their
// accumulators final, their shared memory free).
template <int PENDING>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(PENDING) : "memory");
}

// Pins registers an asynchronous wgmma writes (its accumulators) at this point of the program: to
// the compiler the wait touches no register, and without this it may move the code that reads
// the product above the wait, which then reads unfinished sums (CUTLASS's
// warpgroup_fence_operand). Placed right after a wgmma wait, or before a wgmma_fence.
template <int N>
__device__ __forceinline__ void fence_operands(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}

#endif  // LADDER_CUDA_WGMMA_CUH
