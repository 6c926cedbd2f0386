// mbarriers (sm_90 on): barriers in shared memory that count arrivals and bytes, completing one
// phase at a time. Part of ladder/core/cuda (see memory.cuh).
//
// An mbarrier is a 64-bit word in shared memory (8-byte aligned). A phase completes when its
// expected arrivals have arrived and its expected transaction bytes (expect_tx) have been
// counted off by the asynchronous copies that complete on it (cp.async.bulk, TMA); then the
// next phase starts with the same arrival count. A waiter names the phase by its parity: the
// k-th use of a barrier (k = 0, 1, ...) completes phase k, so a wait for parity k & 1 returns
// once it has. Unlike __syncthreads it lets some threads wait for data while others work, and it
// is what an asynchronous copy can signal.
#ifndef LADDER_CUDA_MBARRIER_CUH
#define LADDER_CUDA_MBARRIER_CUH

// A barrier at shared address bar, expecting `count` arrivals per phase (a register), or COUNT
// (an immediate in the instruction: mbar_init<COUNT>(bar)).
__device__ __forceinline__ void mbar_init(unsigned bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
template <unsigned COUNT>
__device__ __forceinline__ void mbar_init(unsigned bar) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "n"(COUNT) : "memory");
}
// Makes the initializations above visible to the async proxy (the copies that will complete on
// them) and, through a barrier after it, to the other threads. It exists only as
// .release.cluster: a block launched without a cluster is a cluster of one.
__device__ __forceinline__ void mbar_fence_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
// One arrival, and `bytes` more expected in this phase: how a producer arms a stage before
// issuing the copies that will land its bytes.
__device__ __forceinline__ void mbar_arrive_expect_tx(unsigned bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
               : "memory");
}
// `bytes` more expected in this phase, without an arrival (the arrival comes later, mbar_arrive)
__device__ __forceinline__ void mbar_expect_tx(unsigned bar, unsigned bytes) {
  asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;\n" ::"r"(bar),
               "r"(bytes)
               : "memory");
}
// One arrival (release: this thread's earlier accesses happen before the phase completes)
__device__ __forceinline__ void mbar_arrive(unsigned bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
// Until the phase of this parity has completed (acquire: what the arrivals and the copies wrote
// is visible afterwards). try_wait suspends the thread for a while in the hardware before it
// says no, so the loop does not spin on shared memory.
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

#endif  // LADDER_CUDA_MBARRIER_CUH
