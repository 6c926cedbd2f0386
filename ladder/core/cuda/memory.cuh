// Shared-memory addresses, the async-proxy fence and explicit stores. Part of ladder/core/cuda,
// the one library of PTX wrappers the tensor-core rungs include (as
// "ladder/core/cuda/<header>.cuh"): each instruction is wrapped once, named after the instruction
// so that the PTX ISA finds it, with what it does and, where it matters, why the hardware wants it.
#ifndef LADDER_CUDA_MEMORY_CUH
#define LADDER_CUDA_MEMORY_CUH

// The 32-bit shared-window address of a pointer into shared memory (cvta.to.shared): the form
// the shared operands of ldmatrix, cp.async, mbarriers, bulk copies and wgmma descriptors take,
// one register instead of a 64-bit generic address's two.
__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// The global-window address of a generic pointer into global memory (cvta.to.global): the
// address space an instruction's .global operand names. The two coincide on every GPU so far,
// and instructions are given generic addresses too, but the conversion tells ptxas the space.
__device__ __forceinline__ const void* gmem_addr(const void* p) {
  return reinterpret_cast<const void*>(__cvta_generic_to_global(p));
}

// fence.proxy.async: this thread's earlier generic-proxy accesses of shared memory (ordinary
// loads and stores, cp.async's writes) are ordered before its later async-proxy ones (bulk
// copies, TMA and wgmma's operand reads), and, through a barrier after it, before any other
// thread's. The two proxies are separate paths into shared memory: without the fence a bulk
// copy or a wgmma may read what was there before the stores.
__device__ __forceinline__ void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// The pointer, through an empty asm: the compiler cannot fold the arithmetic that made it into
// the addresses computed from it (which it otherwise redoes in 64 bits at every store).
template <class P>
__device__ __forceinline__ P* opaque(P* ptr) {
  asm("" : "+l"(ptr));
  return ptr;
}

// st.global.b32: a 32-bit store to global memory, through a pointer the compiler no longer knows
// is global (opaque), which it would otherwise store through the generic address space.
__device__ __forceinline__ void st_global_b32(unsigned* ptr, unsigned value) {
  asm volatile("st.global.b32 [%0], %1;\n" ::"l"(ptr), "r"(value) : "memory");
}

// st.shared: stores to a 32-bit shared-window address (smem_addr), without the generic address
// (and its 64-bit arithmetic) that a C++ store through a pointer would need.
__device__ __forceinline__ void st_shared_b16(unsigned addr, unsigned short value) {
  asm volatile("st.shared.b16 [%0], %1;\n" ::"r"(addr), "h"(value) : "memory");
}
__device__ __forceinline__ void st_shared_b32(unsigned addr, unsigned value) {
  asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(addr), "r"(value) : "memory");
}
__device__ __forceinline__ void st_shared_f32(unsigned addr, float value) {
  asm volatile("st.shared.f32 [%0], %1;\n" ::"r"(addr), "f"(value) : "memory");
}
// 16 bytes (addr 16-byte aligned) in one instruction
__device__ __forceinline__ void st_shared_v4(unsigned addr, unsigned a, unsigned b, unsigned c,
                                             unsigned d) {
  asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(a), "r"(b), "r"(c),
               "r"(d)
               : "memory");
}

#endif  // LADDER_CUDA_MEMORY_CUH
