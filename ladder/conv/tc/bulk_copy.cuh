// Bulk copies (cp.async.bulk, the Tensor Memory Accelerator) and the mbarrier they complete on,
// for the conv rungs that copy whole runs of 16-byte chunks between global and shared memory
// without threads: rung 12 (r12_bulk.cu: copy_band_bulk and the output buffer) and rung 13
// (r13_filters_on_m.cu). All addresses of shared memory are 32-bit shared-window addresses.
#ifndef CONV_BULK_COPY_CUH  // one copy when several sources inline it
#define CONV_BULK_COPY_CUH

struct BulkCopy {
  // The mbarrier: one arrival per phase (the thread that issues the copies), plus their bytes.
  static __device__ __forceinline__ void init(unsigned bar) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(bar) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    fence_async();
  }
  // Generic-proxy shared memory accesses before this thread's later async-proxy ones (and,
  // through a barrier, before another thread's).
  static __device__ __forceinline__ void fence_async() {
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  }
  // global -> shared, `bytes` (a multiple of 16, both ends 16-byte aligned), counted on bar
  static __device__ __forceinline__ void load(unsigned bar, unsigned dst, const void* src,
                                              unsigned bytes) {
    asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;\n" ::"r"(bar),
                 "r"(bytes)
                 : "memory");
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, "
        "[%3];\n" ::"r"(dst),
        "l"(src), "r"(bytes), "r"(bar)
        : "memory");
  }
  static __device__ __forceinline__ void arrive(unsigned bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
  }
  // Until the phase of this parity has completed (its arrival and all its bytes).
  static __device__ __forceinline__ void wait(unsigned bar, unsigned parity) {
    unsigned done;
    do {
      asm volatile(
          "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
          " selp.u32 %0, 1, 0, p;\n}\n"
          : "=r"(done)
          : "r"(bar), "r"(parity)
          : "memory");
    } while (!done);
  }
  // shared -> global, one bulk group
  static __device__ __forceinline__ void store(void* dst, unsigned src, unsigned bytes) {
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;\n" ::"l"(dst),
                 "r"(src), "r"(bytes)
                 : "memory");
    asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
  }
  // until every bulk group has read its source (shared memory may be written again)
  static __device__ __forceinline__ void wait_read() {
    asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
  }
  // until every bulk group has completed (its writes are done)
  static __device__ __forceinline__ void wait_all() {
    asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
  }
};

#endif  // CONV_BULK_COPY_CUH
