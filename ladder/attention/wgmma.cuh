// What the wgmma attention kernels share (forward rung 7, the backward's wgmma rung): the
// shared-memory layout a wgmma descriptor reads and the two products, S-like (both operands
// from shared memory, K-major) and O-like (A from registers, B transposed by the instruction).
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

// S (64 x 64) += A (64 x 16, descriptor, K-major) * B (16 x 64, descriptor, K-major: Kᵀ)
__device__ __forceinline__ void wgmma_ss_n64(float* d, unsigned long long a, unsigned long long b) {
  asm volatile("wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16\n" WGMMA_D32_REGS
               ",\n %32, %33, 1, 1, 1, 0, 0;\n"
               : WGMMA_D32_OPERANDS
               : "l"(a), "l"(b));
}
// O (64 x N) += P (64 x 16, this warp's 16 rows in 4 registers) * V (16 x N, descriptor,
// N-major: the last immediate transposes it)
template <int N>
__device__ __forceinline__ void wgmma_rs(float* d, const unsigned (&a)[4], unsigned long long b);
template <>
__device__ __forceinline__ void wgmma_rs<64>(float* d, const unsigned (&a)[4],
                                             unsigned long long b) {
  asm volatile("wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16\n" WGMMA_D32_REGS
               ",\n {%32, %33, %34, %35}, %36, 1, 1, 1, 1;\n"
               : WGMMA_D32_OPERANDS
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
}
template <>
__device__ __forceinline__ void wgmma_rs<128>(float* d, const unsigned (&a)[4],
                                              unsigned long long b) {
  asm volatile("wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16\n" WGMMA_D64_REGS
               ",\n {%64, %65, %66, %67}, %68, 1, 1, 1, 1;\n"
               : WGMMA_D64_OPERANDS
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
}

#endif  // LADDER_ATTENTION_WGMMA_CUH
