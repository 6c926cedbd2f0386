// Rung 11 (conv): rung 10 with one wgmma group per job and a sliding rewrite (sm_90a only).
//
// Rung 10 issues one window per channel: load the window's quads, fence, 4 multiplies (T = 1),
// commit, wait. On conv2 (4 channels) that is four waits per job, and each window pays its
// loop control, address arithmetic and predicates for only 4 multiplies. Here the channel
// count is a compile-time constant, JOB_CHANNELS = C (1 to 4, with K <= 7 so that one window
// covers a channel: QC == PB == 1), and a job loads every channel's quads at once (C x 4
// registers of 16 bytes at T = 1: 64 registers for conv2), fences once, issues all C x 4 x T
// multiplies and waits once: the address of every quad and every descriptor is a constant
// offset from the job's first.
//
// Two of the per-image costs around the multiplies shrink too (conv_tc's LEAN paths):
// - the rewrite (raw input -> quads): a thread walks a third of one quad column down instead of
//   taking quads THREADS apart, so that it loads two new pair words per quad (quad k + 1 shares
//   two of quad k's four rows) and does no walk arithmetic per quad;
// - the epilogue: one pointer per filter (rung 10 computes one per n8 tile, two per filter) and
//   the row offsets and tests once per job.
//
// Everything else (staging, weights, the planner's bands) is rung 10's; a shape rung 11 does
// not cover (C > 4, K > 7, channel chunks) runs rung 10's kernels (r11_one_group.py).
#define CONV_WGB_LIBRARY
#include "r10_row_shifts.cu"

template <int CH>
struct WgmmaJob : WgmmaBlocks {
  static constexpr int JOB_CHANNELS = CH;

  // The whole job, all CH channels in one group: src points at this lane's column's quads
  // at the sub-band's top row in channel 0 (channel c's are channel_quads further), entry at
  // channel 0's B entry of row pair 0 (channel c's is c PAIRS frag_stride entries further,
  // row pair j's j frag_stride). As WgmmaBlocks::window otherwise: tile i at step j reads
  // quad 2i + j, and a quad past the rows the taps reach is zero, not loaded.
  template <int T, int NT>
  static __device__ __forceinline__ void job(float (&acc)[T][NT][4], const uint4* src,
                                             const unsigned char* smem, int entry,
                                             int frag_stride, int channel_quads, int taps) {
    constexpr int QUADS = 2 * (T - 1) + PAIRS;
    constexpr int ALWAYS = 2 * (T - 1) + 1;  // quads step 0 reads (taps >= 1)
    const int loaded = 2 * (T - 1) + (taps + 1) / 2;
    // the descriptors in 32 bits: their high word (SBO) is a constant, and an entry's address
    // field cannot carry into the LBO above it (shared addresses stay below 2^18)
    const unsigned desc0 = (unsigned)weight_desc((unsigned)__cvta_generic_to_shared(smem) +
                                                 entry * FRAG_BYTES),
                   high = (unsigned)(weight_desc(0) >> 32);
    const unsigned step = frag_stride * (FRAG_BYTES >> 4);
    uint4 a[CH][QUADS];
    if (loaded == QUADS) {  // every quad holds live rows (K = 6 or 7): no tests
#pragma unroll
      for (int c = 0; c < CH; ++c)
#pragma unroll
        for (int k = 0; k < QUADS; ++k) a[c][k] = src[c * channel_quads + k];
    } else {
#pragma unroll
      for (int c = 0; c < CH; ++c)
#pragma unroll
        for (int k = 0; k < QUADS; ++k)
          a[c][k] = k < ALWAYS || k < loaded ? src[c * channel_quads + k] : make_uint4(0, 0, 0, 0);
    }
    // The accumulators are zeros here (one job, one group), and the compiler would set them
    // between the fence and the multiplies that read them, where ptxas then injects waits
    // and serializes the wgmma (C7517 to C7520, at T = 2): they are set before the fence.
#pragma unroll
    for (int i = 0; i < T; ++i)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) asm volatile("" : "+f"(acc[i][nt][e]));
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
    for (int c = 0; c < CH; ++c)
#pragma unroll
      for (int j = 0; j < PAIRS; ++j) {
        const unsigned long long desc =
            (unsigned long long)high << 32 | (desc0 + (c * PAIRS + j) * step);
#pragma unroll
        for (int i = 0; i < T; ++i) wgmma_rs<NT>(acc[i], a[c][2 * i + j], desc);
      }
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
  }
};

#ifndef CONV_WGJ_LIBRARY  // r12_bulk.cu includes this file for WgmmaJob
// C channels, T tiles (4T output rows x 64 output columns x 2 NT filters per warpgroup job):
// T = 2 only for one channel (C (2T + 2) quads of 4 registers each per lane; at C = 2, T = 2,
// N = 64 ptxas serializes the wgmma for want of registers, C7512)
#define CONV_WGJ_KERNELS(CH, T)                                                 \
  CONV_TC_KERNEL(conv_wgj_c##CH##_t##T##_n2, T, 2, false, 2, WgmmaJob<CH>) \
  CONV_TC_KERNEL(conv_wgj_c##CH##_t##T##_n4, T, 4, false, 2, WgmmaJob<CH>) \
  CONV_TC_KERNEL(conv_wgj_c##CH##_t##T##_n8, T, 8, false, 2, WgmmaJob<CH>)
CONV_WGJ_KERNELS(1, 1)
CONV_WGJ_KERNELS(1, 2)
CONV_WGJ_KERNELS(2, 1)
CONV_WGJ_KERNELS(3, 1)
CONV_WGJ_KERNELS(4, 1)
#endif  // CONV_WGJ_LIBRARY
