// What the wgmma attention kernels share (forward rungs 7 and 8, the backward's wgmma rung): the
// shared-memory layout a wgmma descriptor reads and the two products, S-like (both operands
// from shared memory, K-major) and O-like (A from registers, B transposed by the instruction),
// in half or bfloat16.
// A library, not a rung. Build for sm_90a.
#ifndef LADDER_ATTENTION_WGMMA_CUH
#define LADDER_ATTENTION_WGMMA_CUH
#include "../gemm/hopper.cuh"  // smem_addr, desc, wgmma's register lists, fence / commit / wait

// Byte offset of 16-byte chunk `chunk` of row `row` in a tile of ROWS rows: 64-half column
// blocks of ROWS x 128 bytes, chunks swizzled within a row as the 128-byte swizzle lays them.
template <int ROWS>
__device__ __forceinline__ unsigned tile_offset(int row, int chunk) {
  return (chunk / 8) * (ROWS * 128) + row * 128 + (((chunk & 7) ^ (row & 7)) << 4);
}

// The operands' element type, half or __nv_bfloat16 (wgmma's .f16 or .bf16), and two FP32
// values rounded to it and packed in 32 bits (the element pairs of a register A fragment).
template <typename T>
constexpr bool is_bf16 = false;
template <>
constexpr bool is_bf16<__nv_bfloat16> = true;

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

// Two FP32 values rounded to T and stored at dst (4-byte aligned), with T's own pair type
template <typename T>
__device__ __forceinline__ void store2(T* dst, float lo, float hi) {
  if constexpr (is_bf16<T>) {
    *reinterpret_cast<__nv_bfloat162*>(dst) = __floats2bfloat162_rn(lo, hi);
  } else {
    *reinterpret_cast<__half2*>(dst) = __floats2half2_rn(lo, hi);
  }
}

// S (64 x N) += A (64 x 16, descriptor, K-major) * B (16 x N, descriptor, K-major: Kᵀ)
#define LADDER_WGMMA_SS(SHAPE, TYPE, REGS, OPERANDS, A_AND_B)                          \
  asm volatile("wgmma.mma_async.sync.aligned." SHAPE ".f32." TYPE "." TYPE "\n" REGS  \
               ",\n " A_AND_B ", 1, 1, 1, 0, 0;\n"                                    \
               : OPERANDS                                                             \
               : "l"(a), "l"(b))
template <int N, typename T = half>
__device__ __forceinline__ void wgmma_ss(float* d, unsigned long long a, unsigned long long b) {
  static_assert(N == 64 || N == 128, "the S-like product's widths");
  if constexpr (N == 64 && is_bf16<T>) {
    LADDER_WGMMA_SS("m64n64k16", "bf16", WGMMA_D32_REGS, WGMMA_D32_OPERANDS, "%32, %33");
  } else if constexpr (N == 64) {
    LADDER_WGMMA_SS("m64n64k16", "f16", WGMMA_D32_REGS, WGMMA_D32_OPERANDS, "%32, %33");
  } else if constexpr (is_bf16<T>) {
    LADDER_WGMMA_SS("m64n128k16", "bf16", WGMMA_D64_REGS, WGMMA_D64_OPERANDS, "%64, %65");
  } else {
    LADDER_WGMMA_SS("m64n128k16", "f16", WGMMA_D64_REGS, WGMMA_D64_OPERANDS, "%64, %65");
  }
}
// O (64 x N) += P (64 x 16, this warp's 16 rows in 4 registers) * V (16 x N, descriptor,
// N-major: the last immediate transposes it)
#define LADDER_WGMMA_RS(SHAPE, TYPE, REGS, OPERANDS, A_AND_B)                          \
  asm volatile("wgmma.mma_async.sync.aligned." SHAPE ".f32." TYPE "." TYPE "\n" REGS  \
               ",\n " A_AND_B ", 1, 1, 1, 1;\n"                                       \
               : OPERANDS                                                             \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b))
template <int N, typename T = half>
__device__ __forceinline__ void wgmma_rs(float* d, const unsigned (&a)[4], unsigned long long b) {
  static_assert(N == 64 || N == 128, "the O-like product's widths");
  if constexpr (N == 64 && is_bf16<T>) {
    LADDER_WGMMA_RS("m64n64k16", "bf16", WGMMA_D32_REGS, WGMMA_D32_OPERANDS,
                    "{%32, %33, %34, %35}, %36");
  } else if constexpr (N == 64) {
    LADDER_WGMMA_RS("m64n64k16", "f16", WGMMA_D32_REGS, WGMMA_D32_OPERANDS,
                    "{%32, %33, %34, %35}, %36");
  } else if constexpr (is_bf16<T>) {
    LADDER_WGMMA_RS("m64n128k16", "bf16", WGMMA_D64_REGS, WGMMA_D64_OPERANDS,
                    "{%64, %65, %66, %67}, %68");
  } else {
    LADDER_WGMMA_RS("m64n128k16", "f16", WGMMA_D64_REGS, WGMMA_D64_OPERANDS,
                    "{%64, %65, %66, %67}, %68");
  }
}

// Pins registers an asynchronous wgmma writes (its accumulators) at this point of the program:
// the compiler may not move their reads or writes across it (CUTLASS's
// warpgroup_fence_operand). Placed right after a wgmma wait, it keeps the code that reads the
// product after the wait.
template <int N>
__device__ __forceinline__ void fence_operands(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}

// Stores v to shared memory at addr, so that the code v depends on runs before the next
// wgmma wait: ptxas moves a wait up past arithmetic where nothing forces an order, and (as
// observed with CUDA 13.0's ptxas, not a documented rule) not past a shared-memory store.
// Rung 8 stores the row sums, which need every exponential.
__device__ __forceinline__ void store_before_wait(unsigned addr, float v) {
  asm volatile("st.shared.f32 [%0], %1;" ::"r"(addr), "f"(v) : "memory");
}

#endif  // LADDER_ATTENTION_WGMMA_CUH
