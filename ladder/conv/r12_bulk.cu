// Rung 12 (conv): rung 11 with the Tensor Memory Accelerator's bulk copies for the input and
// the output (sm_90a only).
//
// Rung 11's profile of conv2 put 1,285 of its 11,223 warp instructions per image in the copy of
// the next input (every thread issuing 16-byte cp.async chunks, with their addresses and
// tests) and 3,690 in the epilogue (a 64-bit address, a test and a 4-byte global store per
// output pair). A bulk copy (cp.async.bulk) moves a contiguous run of 16-byte chunks between
// global and shared memory without threads: the TMA unit does the addressing. conv_tc's BULK
// paths (r08_tensor_core.cu):
// - in: one thread issues one bulk copy per channel into rung 8's raw slots (the same chunks,
//   the same skew) and arrives on an mbarrier that counts their bytes; every thread waits on it
//   where rung 11 waited for its cp.async group;
// - out (when the plan has room for a whole image's output in shared memory, Wo is even and
//   M Ho Wo a multiple of 8): the jobs store their pairs into a buffer laid out as the image's
//   output (a 32-bit shared store per pair, its address a register plus a row offset), and at
//   the next image's first staging barrier one thread writes the buffer out with one bulk copy,
//   waiting for the copy to have read it before the second barrier (after which the next jobs
//   write it again). Otherwise the jobs store to global memory as on rung 11.
// Generic-proxy accesses (the rewrite's reads of the slots, the jobs' stores into the buffer)
// are ordered before the bulk copies' accesses (the async proxy) by fence.proxy.async.
#define CONV_WGJ_LIBRARY
#include "r11_one_group.cu"
#include "bulk_copy.cuh"

template <int CH>
struct WgmmaBulk : WgmmaJob<CH>, BulkCopy {
  static constexpr bool BULK = true;
};

// As rung 11's kernels (C channels, T tiles, 2 NT filters), with the bulk copies
#define CONV_WGK_KERNELS(CH, T)                                                  \
  CONV_TC_KERNEL(conv_wgk_c##CH##_t##T##_n2, T, 2, false, 2, WgmmaBulk<CH>) \
  CONV_TC_KERNEL(conv_wgk_c##CH##_t##T##_n4, T, 4, false, 2, WgmmaBulk<CH>) \
  CONV_TC_KERNEL(conv_wgk_c##CH##_t##T##_n8, T, 8, false, 2, WgmmaBulk<CH>)
CONV_WGK_KERNELS(1, 1)
CONV_WGK_KERNELS(1, 2)
CONV_WGK_KERNELS(2, 1)
CONV_WGK_KERNELS(3, 1)
CONV_WGK_KERNELS(4, 1)
