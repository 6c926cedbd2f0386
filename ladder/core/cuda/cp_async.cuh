// cp.async (sm_80 on): asynchronous 16-byte copies from global to shared memory. Part of
// ladder/core/cuda (see memory.cuh).
//
// A cp.async does not pass through registers and the issuing thread does not wait for it: it can
// issue the copies of a later tile and compute on an earlier one while they are in flight. .cg
// caches the data in L2 only (it is read once from shared memory, not again from L1). The copies
// a thread issues between two commits form one group; waiting is per group, and only for this
// thread's own copies: a barrier after the wait makes every thread's copies visible.
#ifndef LADDER_CUDA_CP_ASYNC_CUH
#define LADDER_CUDA_CP_ASYNC_CUH

// 16 bytes from src (global, 16-byte aligned) to shared address dst (16-byte aligned)
__device__ __forceinline__ void cp_async16(unsigned dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src) : "memory");
}
// The same, or (valid false) no read at all and 16 zero bytes written: the src-size operand 0
// zero-fills, so rows past the end of a matrix need no branch (src must still be a valid
// address; pass the matrix's first row).
__device__ __forceinline__ void cp_async16(unsigned dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(valid ? 16 : 0)
               : "memory");
}
// The copies issued since the last commit become one group.
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
// Until at most PENDING of this thread's groups are still in flight (0: all have landed).
template <int PENDING>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(PENDING) : "memory");
}

#endif  // LADDER_CUDA_CP_ASYNC_CUH
