// Rung 11 (conv): rung 10 with one wgmma group per job and a sliding rewrite (sm_90a only).
//
// Rung 10 issues one window per channel: load the window's quads, fence, 4 multiplies (T = 1),
// commit, wait. On conv2 (4 channels) that is four waits per job, and each window pays its
// loop control, address arithmetic and predicates for only 4 multiplies. Here the channel
// count is a compile-time constant, CH = C (1 to 4, with K <= 7 so that one window covers a
// channel: QC == PB == 1), and a job loads every channel's quads at once (C x 4 registers of
// 16 bytes at T = 1: 64 registers for conv2), fences once, issues all C x 4 x T multiplies and
// waits once: the address of every quad and every descriptor is a constant offset from the
// job's first (one_group_job in tc/wgmma_jobs.cuh).
//
// Two of the per-image costs around the multiplies shrink too:
// - the rewrite (raw input -> quads): a thread walks a third of one quad column down instead of
//   taking quads THREADS apart, so that it loads two new pair words per quad (quad k + 1 shares
//   two of quad k's four rows) and does no walk arithmetic per quad (rewrite_quads_sliding);
// - the epilogue: one pointer per filter (rung 10 computes one per n8 tile, two per filter) and
//   the row offsets and tests once per job (store_lean).
//
// No channel chunks here: a shape this rung does not cover (C > 4, K > 7, channels that do not
// fit in shared memory at once) runs rung 10's kernels (r11_one_group.py).
#include "tc/epilogue.cuh"
#include "tc/staging.cuh"
#include "tc/wgmma_jobs.cuh"

template <int CH, int T, int NT>
__device__ __forceinline__ void conv_one_group(const Conv& p) {
  constexpr int PACK = 2;
  constexpr int ROWS = 4 * T;  // output rows of a job (a sub-band)
  constexpr int CSTEP = 2;     // input columns per quad column
  constexpr int JOB_WARPS = 4, SLOTS = NWARPS / JOB_WARPS;
  extern __shared__ __align__(16) unsigned char smem[];
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const int slot = warp / JOB_WARPS, member = warp % JOB_WARPS;
  const int Ho = p.Ho, Wn = p.Wn, NTP = p.NTP, NFG = p.NFG;
  const int items = p.items;
  // packed pairs are 4-byte aligned everywhere (see store_packed)
  const bool pairs_aligned = (p.Wo & 1) == 0 && (reinterpret_cast<size_t>(p.y) & 3) == 0;

  // shared memory: B core matrices | the input's A quads | raw input slots
  uint4* quads = reinterpret_cast<uint4*>(smem + p.quads_at);
  unsigned short* raw = reinterpret_cast<unsigned short*>(smem + p.raw_at);
  const unsigned raw_shared = (unsigned)__cvta_generic_to_shared(raw);

  // One cp.async group pending at a time, as on rung 8: the first barrier makes the item's
  // input visible and retires every warp's reads of the previous quads; after the second the
  // raw slots are free, and the next item's copy is issued at once.
  auto stage = [&](int item, int next_item) {
    cp_async_wait<0>();
    __syncthreads();
    if ((p.W & 1) == 0)  // the sliding rewrite reads whole 32-bit pair words
      rewrite_quads_sliding(p, quads, raw, item, 0, tid);
    else
      rewrite_quads<PACK>(p, quads, raw, item, 0, tid);
    __syncthreads();
    if (next_item < items) copy_band_async(p, raw, raw_shared, next_item, 0, tid);
  };

  stage_core_matrices<PACK>(p, smem, 0, min(p.chunk_channels, p.C));
  if ((int)blockIdx.x < items) copy_band_async(p, raw, raw_shared, blockIdx.x, 0, tid);

  for (int item = blockIdx.x; item < items; item += gridDim.x) {
    int b, h0;
    origin(p, item, b, h0);
    const int sub_bands = (min(p.band_rows, Ho - h0) + ROWS - 1) / ROWS;
    const int columns = sub_bands * Wn, groups = (columns + 7) / 8;
    const int supergroups = (groups + JOB_WARPS - 1) / JOB_WARPS;
    const int jobs = supergroups * NFG, rounds = (jobs + SLOTS - 1) / SLOTS;
    stage(item, item + gridDim.x);
    // job = round * SLOTS + slot = fg * supergroups + sg, kept by subtraction (no division)
    for (int round = 0, fg = 0, sg = slot; round < rounds; ++round, sg += SLOTS) {
      while (sg >= supergroups) {
        sg -= supergroups;
        ++fg;
      }
      const int group = sg * JOB_WARPS + member;
      const bool active = round * SLOTS + slot < jobs;  // uniform over the job's warps

      const int n = group * 8 + g;
      const bool n_live = n < columns;
      const int sb = n_live ? fast_div(n, p.wn_magic, p.wn_shift) : 0;
      const int col = n_live ? n - sb * Wn : 0;
      const uint4* lane_quads =
          quads + (col + 2 * t / CSTEP) * p.quad_stride + sb * (ROWS / 2);

      // every channel's window in one group: channel c's quads are cols quad_stride further
      float acc[T][NT][4] = {};
      if (active) {
        one_group_job<CH, T, NT>(acc, lane_quads, smem, fg * NT, NTP, p.cols * p.quad_stride,
                                 min(P_BLOCK, p.K + 1));
        wgmma_finish(acc);
      }
      if (!active) continue;
      if (pairs_aligned)
        store_lean<T, NT>(p, acc, packed_out(p, b, h0 + sb * ROWS, col), fg, t, n_live);
      else
        store_general<T, NT, PACK>(p, acc, b, h0, sb, col, group, fg, n_live, columns, g, t);
    }
  }
  cp_async_wait<0>();  // nothing may be in flight at exit
}

// C channels, T tiles (4T output rows x 64 output columns x 2 NT filters per warpgroup job):
// T = 2 only for one channel (C (2T + 2) quads of 4 registers each per lane; at C = 2, T = 2,
// N = 64 ptxas serializes the wgmma for want of registers, C7512)
#define CONV_ONE_GROUP(CH, T, NT)                    \
  CONV_KERNEL(conv_wgj_c##CH##_t##T##_n##NT) {       \
    CONV_PARAMS_STRUCT(p);                           \
    conv_one_group<CH, T, NT>(p);                    \
  }
#define CONV_ONE_GROUP_KERNELS(CH, T) \
  CONV_ONE_GROUP(CH, T, 2)            \
  CONV_ONE_GROUP(CH, T, 4)            \
  CONV_ONE_GROUP(CH, T, 8)
CONV_ONE_GROUP_KERNELS(1, 1)
CONV_ONE_GROUP_KERNELS(1, 2)
CONV_ONE_GROUP_KERNELS(2, 1)
CONV_ONE_GROUP_KERNELS(3, 1)
CONV_ONE_GROUP_KERNELS(4, 1)
