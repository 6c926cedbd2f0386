// Splitting a block into roles (warp specialization, sm_90a): named barriers for some warps
// only, and registers moved from one warpgroup to another. Part of ladder/core/cuda (see
// memory.cuh).
#ifndef LADDER_CUDA_WARPGROUP_CUH
#define LADDER_CUDA_WARPGROUP_CUH

// bar.sync on hardware barrier `id` (1 to 15; __syncthreads is barrier 0) until `count` threads
// (a multiple of 32) have arrived: a barrier for some warps only, say one warpgroup's, while the
// others keep working.
__device__ __forceinline__ void bar_sync(int id, int count) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(count) : "memory");
}
// bar.arrive: counts this warp towards barrier `id`'s `count` without waiting for it: a signal
// that another group of warps waits for with bar_sync (a turn passed between warpgroups).
__device__ __forceinline__ void bar_arrive(int id, int count) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(count) : "memory");
}

// setmaxnreg (sm_90a): every thread of the warpgroup now holds at most REGS registers (a
// multiple of 8, 24 to 256), the rest returned to the SM's pool; the increase waits until the
// pool has them. A producer warpgroup that only issues copies gives its registers to the
// consumers, whose accumulators need them. The kernel is compiled for the launch bound's
// registers per thread; the warpgroups then move away from it, all together.
template <int REGS>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(REGS));
}
template <int REGS>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(REGS));
}

#endif  // LADDER_CUDA_WARPGROUP_CUH
