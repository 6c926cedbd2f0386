// The Tensor Memory Accelerator (sm_90 on): bulk copies between global and shared memory that no
// thread addresses, completing on an mbarrier (mbarrier.cuh) or in bulk groups. Part of
// ladder/core/cuda (see memory.cuh).
//
// One thread issues a copy of a whole tile and the copy engine computes every address: the
// threads that would have issued a cp.async per 16 bytes are free. Two kinds: the bulk tensor
// copy (cp.async.bulk.tensor) moves a box of a 2-D or 3-D array described by a tensor map
// (made on the host, ladder/gemm/hopper.py), zero-filling what lies outside the array and
// writing shared memory in a swizzled layout if the map says so; the plain bulk copy
// (cp.async.bulk) moves a contiguous run of 16-byte chunks. Shared addresses are 32-bit
// shared-window addresses (smem_addr). The copies read and write shared memory through the
// async proxy: fence_proxy_async (memory.cuh) orders ordinary accesses before them.
#ifndef LADDER_CUDA_TMA_CUH
#define LADDER_CUDA_TMA_CUH

// The driver's CUtensorMap: 128 opaque bytes, made by cuTensorMapEncodeTiled on the host and
// passed as a __grid_constant__ kernel parameter (the copy reads it from there).
struct alignas(64) TensorMap {
  unsigned long long opaque[16];
};

// The box of a 2-D map at coordinates (c0, c1), innermost first, to shared address dst,
// completing its bytes on the mbarrier bar. The PTX form writes to `.shared::cluster` addresses:
// a block launched without a cluster is a cluster of one, so it names this block's own memory.
__device__ __forceinline__ void tma_load(unsigned dst, const TensorMap* map, unsigned bar, int c0,
                                         int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4}], [%2];" ::"r"(dst),
      "l"(reinterpret_cast<unsigned long long>(map)), "r"(bar), "r"(c0), "r"(c1)
      : "memory");
}
// The same for a 3-D map (a stack of matrices: the experts' weights), coordinates (c0, c1, c2)
__device__ __forceinline__ void tma_load_3d(unsigned dst, const TensorMap* map, unsigned bar,
                                            int c0, int c1, int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4, %5}], [%2];" ::"r"(dst),
      "l"(reinterpret_cast<unsigned long long>(map)), "r"(bar), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}

// global -> shared, `bytes` (a multiple of 16, both ends 16-byte aligned), counted off on bar
// (which must expect them: mbar_expect_tx or mbar_arrive_expect_tx)
__device__ __forceinline__ void bulk_load(unsigned dst, const void* src, unsigned bytes,
                                          unsigned bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, "
      "[%3];\n" ::"r"(dst),
      "l"(src), "r"(bytes), "r"(bar)
      : "memory");
}
// shared -> global, `bytes` (a multiple of 16, both ends 16-byte aligned), into the current bulk
// group (bulk_commit closes it)
__device__ __forceinline__ void bulk_store(void* dst, unsigned src, unsigned bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;\n" ::"l"(dst),
               "r"(src), "r"(bytes)
               : "memory");
}
// The bulk stores issued since the last commit become one bulk group.
__device__ __forceinline__ void bulk_commit() {
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
}
// Until at most PENDING bulk groups have not read their source: shared memory may be written
// again, though the writes to global memory may still be in flight.
template <int PENDING>
__device__ __forceinline__ void bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(PENDING) : "memory");
}
// Until at most PENDING bulk groups have not completed (0: every write is done, as it must be
// before the kernel exits).
template <int PENDING>
__device__ __forceinline__ void bulk_wait() {
  asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(PENDING) : "memory");
}

#endif  // LADDER_CUDA_TMA_CUH
