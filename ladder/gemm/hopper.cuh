// Hopper's primitives for the TMA and wgmma rungs: the tensor map, mbarriers, the bulk tensor
// copy (TMA), shared-memory matrix descriptors and wgmma itself (m64n256k16 in half or
// bfloat16, m64n256k32 in 8-bit floats, and the register lists of narrower shapes). A library,
// not a rung: GEMM rungs 16 to 21, attention rung 7 and the mixture-of-experts grouped GEMM
// include it and hold their own kernels. The mbarriers and the copy need sm_90; wgmma needs
// sm_90a, so a kernel that calls it is built for sm_90a (rung 16, which does not, builds for
// sm_90: templates that are never instantiated are never compiled).
#ifndef LADDER_GEMM_HOPPER_CUH
#define LADDER_GEMM_HOPPER_CUH
#include <cuda_bf16.h>
#include <cuda_fp16.h>

// The driver's CUtensorMap: 128 opaque bytes, made by cuTensorMapEncodeTiled on the host.
struct alignas(64) TensorMap {
  unsigned long long opaque[16];
};

__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// ---- mbarriers: a 64-bit word in shared memory that counts arrivals and bytes ----
__device__ __forceinline__ void mbar_init(unsigned bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count));
}
__device__ __forceinline__ void mbar_expect_tx(unsigned bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void mbar_arrive(unsigned bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity) {
  unsigned done = 0;
  while (!done) {
    asm volatile(
        "{\n .reg .pred p;\n"
        " mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        " selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  }
}

// ---- the bulk tensor copy: one instruction moves a whole 2-D box into shared memory ----
// The copy's PTX form writes to `.shared::cluster` addresses, and `fence.mbarrier_init`
// exists only as `.release.cluster`: a block launched without a cluster is a cluster of one,
// so both name this block's own shared memory in the kernels that use no clusters.
__device__ __forceinline__ void tma_load(unsigned dst, const TensorMap* map, unsigned bar, int c0,
                                       int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4}], [%2];" ::"r"(dst),
      "l"(reinterpret_cast<unsigned long long>(map)), "r"(bar), "r"(c0), "r"(c1)
      : "memory");
}

// The same for a 3-D map (a stack of matrices: the experts' weights), coordinates (c0, c1, c2)
__device__ __forceinline__ void tma_load_3d(unsigned dst, const TensorMap* map, unsigned bar, int c0,
                                            int c1, int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4, %5}], [%2];" ::"r"(dst),
      "l"(reinterpret_cast<unsigned long long>(map)), "r"(bar), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}

// ---- wgmma ----
// Shared-memory matrix descriptor: start address, leading and stride byte offsets (all >> 4)
// and the swizzle mode (1 = 128-byte swizzle), as the PTX ISA lays them out.
__device__ __forceinline__ unsigned long long desc(unsigned addr, unsigned lbo, unsigned sbo) {
  return (unsigned long long)((addr & 0x3FFFF) >> 4) |
         ((unsigned long long)((lbo & 0x3FFFF) >> 4) << 16) |
         ((unsigned long long)((sbo & 0x3FFFF) >> 4) << 32) | (1ull << 62);
}

// The 128 FP32 accumulators of a m64n256 wgmma (D, 64 x 256 over a warpgroup's 128 threads)
// as the asm's register list and its in-out operands, %0 to %127.
#define WGMMA_D_REGS \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}"
#define WGMMA_D_OPERANDS \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]),\
  "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),\
  "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]),\
  "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),\
  "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]),\
  "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),\
  "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),\
  "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),\
  "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),\
  "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),\
  "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]),\
  "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),\
  "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]),\
  "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),\
  "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]),\
  "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),\
  "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]),\
  "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),\
  "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]),\
  "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),\
  "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]),\
  "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),\
  "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]),\
  "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),\
  "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]),\
  "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),\
  "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]),\
  "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),\
  "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]),\
  "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),\
  "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]),\
  "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])

// The same for the narrower shapes other kernels use: m64n64 (32 accumulators) and m64n128 (64)
#define WGMMA_D32_REGS "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define WGMMA_D32_OPERANDS \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]),\
  "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),\
  "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]),\
  "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),\
  "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]),\
  "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),\
  "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),\
  "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
#define WGMMA_D64_REGS "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"
#define WGMMA_D64_OPERANDS \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]),\
  "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),\
  "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]),\
  "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),\
  "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]),\
  "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),\
  "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),\
  "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),\
  "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),\
  "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),\
  "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]),\
  "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),\
  "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]),\
  "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),\
  "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]),\
  "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])

// D (64 x 256, FP32, 128 registers per thread) += A (64 x 16) * B (16 x 256). The last two
// immediates say each operand's major order: imm-trans-a = TA (0: K-major, as row-major A
// lies; 1: M-major, as A^T lies), imm-trans-b = TB (1: N-major, as row-major B lies; 0:
// K-major, as B^T lies).
template <typename T> struct IsHalf { static constexpr bool value = false; };
template <> struct IsHalf<half> { static constexpr bool value = true; };

template <typename T, int TA, int TB>
__device__ __forceinline__ void wgmma_m64n256k16(float* d, unsigned long long da,
                                               unsigned long long db) {
  if constexpr (IsHalf<T>::value) {
    asm volatile("wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16\n" WGMMA_D_REGS
                 ",\n %128, %129, 1, 1, 1, %130, %131;\n"
                 : WGMMA_D_OPERANDS
                 : "l"(da), "l"(db), "n"(TA), "n"(TB));
  } else {
    asm volatile("wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16\n" WGMMA_D_REGS
                 ",\n %128, %129, 1, 1, 1, %130, %131;\n"
                 : WGMMA_D_OPERANDS
                 : "l"(da), "l"(db), "n"(TA), "n"(TB));
  }
}

// D (64 x 256, FP32) += A (64 x 32) * B (32 x 256) in 8-bit floats, both operands e4m3 (E5M2
// false) or both e5m2. There is no transpose immediate: an 8-bit operand must lie K-major in
// shared memory (A row-major, B as B^T is), a k32 slice being 32 bytes of each row, as a k16
// slice of half is.
template <bool E5M2>
__device__ __forceinline__ void wgmma_m64n256k32_fp8(float* d, unsigned long long da,
                                                   unsigned long long db) {
  if constexpr (E5M2) {
    asm volatile("wgmma.mma_async.sync.aligned.m64n256k32.f32.e5m2.e5m2\n" WGMMA_D_REGS
                 ",\n %128, %129, 1, 1, 1;\n"
                 : WGMMA_D_OPERANDS
                 : "l"(da), "l"(db));
  } else {
    asm volatile("wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3\n" WGMMA_D_REGS
                 ",\n %128, %129, 1, 1, 1;\n"
                 : WGMMA_D_OPERANDS
                 : "l"(da), "l"(db));
  }
}

// two FP32 accumulators -> two adjacent outputs of C (4 bytes)
__device__ __forceinline__ void store2(half* p, float a, float b) {
  *reinterpret_cast<__half2*>(p) = __floats2half2_rn(a, b);
}
__device__ __forceinline__ void store2(__nv_bfloat16* p, float a, float b) {
  *reinterpret_cast<__nv_bfloat162*>(p) = __floats2bfloat162_rn(a, b);
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}

#endif  // LADDER_GEMM_HOPPER_CUH
