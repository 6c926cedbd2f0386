// Rung 12 (conv): rung 11 with the Tensor Memory Accelerator's bulk copies for the input and
// the output (sm_90a only).
//
// A bulk copy (cp.async.bulk) moves a contiguous run of 16-byte chunks between global and
// shared memory without threads: the TMA unit does the addressing (ladder/core/cuda/tma.cuh). What
// changes from rung 11 (r11_one_group.cu):
// - in: one thread issues one bulk copy per channel into the raw slots (the same chunks, the
//   same skew) and arrives on an mbarrier that counts their bytes; every thread waits on it
//   where rung 11 waited for its cp.async group (copy_band_bulk);
// - out (when the plan has room for a whole image's output in shared memory, Wo is even and
//   M Ho Wo a multiple of 8): the jobs store their pairs into a buffer laid out as the image's
//   output (a 32-bit shared store per pair), and at the next image's first staging barrier one
//   thread writes the buffer out with one bulk copy, waiting for the copy to have read it
//   before the second barrier (after which the next jobs write it again). Otherwise the jobs
//   store to global memory as on rung 11.
// Generic-proxy accesses (the rewrite's reads of the slots, the jobs' stores into the buffer)
// are ordered before the bulk copies' accesses (the async proxy) by fence.proxy.async.
#include "ladder/core/cuda/mbarrier.cuh"  // the input's mbarrier
#include "ladder/core/cuda/memory.cuh"    // fence_proxy_async
#include "ladder/core/cuda/tma.cuh"       // the bulk copies in and out

#include "tc/epilogue.cuh"
#include "tc/staging.cuh"
#include "tc/wgmma_jobs.cuh"

// Global -> raw slots by bulk copies: the same chunks (and slots) as copy_band_async, but one
// bulk copy per channel, all issued by one thread and counted in bytes by the mbarrier, which
// the last arrival (after the copies) lets complete. The chunk past the end of x goes half by
// half (see copy_band_async).
__device__ __forceinline__ void copy_band_bulk(const Conv& p, unsigned short* raw,
                                               unsigned raw_shared, unsigned bar, int item,
                                               int tid) {
  if (tid != 0) return;
  int b, h0;
  origin(p, item, b, h0);
  const int cc = min(p.chunk_channels, p.C);
  const int length = min(p.RIN, p.H - h0) * p.W;
  const long long first_band = band_start(p, b, 0, h0), plane = (long long)p.H * p.W;
  fence_proxy_async();  // the rewrite's reads of the slots (generic) before these writes
  for (int cl = 0; cl < cc; ++cl) {
    const long long start = first_band + cl * plane, first = start & ~7LL;
    int n = ((int)(start - first) + length + 7) >> 3;  // 16-byte chunks
    const int slot = cl * p.slot_chunks;
    if (first + 8LL * n > p.x_halves) {
      --n;
      const long long at = first + 8LL * n;
      for (int e = 0; e < 8; ++e) raw[(slot + n) * 8 + e] = at + e < p.x_halves ? p.x[at + e] : 0;
    }
    if (n > 0) {
      mbar_expect_tx(bar, 16 * n);
      bulk_load(raw_shared + slot * 16, p.x + first, 16 * n, bar);
    }
  }
  mbar_arrive(bar);
}

template <int CH, int T, int NT>
__device__ __forceinline__ void conv_one_group_bulk(const Conv& p) {
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
  const unsigned bar = (unsigned)__cvta_generic_to_shared(smem + p.bar_at);
  // the output buffer, and y 16-byte aligned (every image then is: M Ho Wo % 8 == 0)
  const bool bulk_out = p.out_at != 0 && (reinterpret_cast<size_t>(p.y) & 15) == 0;
  unsigned* out_words = reinterpret_cast<unsigned*>(smem + p.out_at);
  unsigned loads = 0;  // input copies waited for (the mbarrier's phase)

  // Image `image`'s output buffer -> y, one bulk copy (one thread).
  auto store_out = [&](int image) {
    const long long halves = (long long)p.M * Ho * p.Wo;
    bulk_store(p.y + image * halves, (unsigned)__cvta_generic_to_shared(out_words),
               (unsigned)(2 * halves));
    bulk_commit();
  };

  // The mbarrier's phase completes when this item's input has landed. The first barrier also
  // completes the jobs' stores into the output buffer (each thread fences them for the async
  // proxy first), after which one thread copies the previous image out; it waits until the
  // copy has read the buffer before the second barrier, after which this image's jobs write it
  // again.
  auto stage = [&](int item, int next_item) {
    mbar_wait(bar, loads++ & 1);  // this item's input has landed
    if (bulk_out) fence_proxy_async();
    __syncthreads();
    if (bulk_out && tid == 0 && item != (int)blockIdx.x) store_out(item - gridDim.x);
    if ((p.W & 1) == 0)  // the sliding rewrite reads whole 32-bit pair words
      rewrite_quads_sliding(p, quads, raw, item, 0, tid);
    else
      rewrite_quads<PACK>(p, quads, raw, item, 0, tid);
    if (bulk_out && tid == 0) bulk_wait_read<0>();
    __syncthreads();
    if (next_item < items) copy_band_bulk(p, raw, raw_shared, bar, next_item, tid);
  };

  if (tid == 0) {  // one arrival a phase (the thread that issues the copies), and their bytes
    mbar_init<1>(bar);
    mbar_fence_init();
    fence_proxy_async();
  }
  __syncthreads();  // before any thread waits on it
  stage_core_matrices<PACK>(p, smem, 0, min(p.chunk_channels, p.C));
  if ((int)blockIdx.x < items) copy_band_bulk(p, raw, raw_shared, bar, blockIdx.x, tid);

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
        store_lean<T, NT>(p, acc, packed_out(p, b, h0 + sb * ROWS, col), fg, t, n_live, out_words,
                          bulk_out);
      else
        store_general<T, NT, PACK>(p, acc, b, h0, sb, col, group, fg, n_live, columns, g, t);
    }
  }
  if (bulk_out) {  // the last image out: its stores fenced and complete, then the copy
    fence_proxy_async();
    __syncthreads();
    if (tid == 0 && (int)blockIdx.x < items) {
      store_out(blockIdx.x + (items - 1 - blockIdx.x) / gridDim.x * gridDim.x);
      bulk_wait<0>();
    }
  }
}

// As rung 11's kernels (C channels, T tiles, 2 NT filters), with the bulk copies
#define CONV_BULK(CH, T, NT)                   \
  CONV_KERNEL(conv_wgk_c##CH##_t##T##_n##NT) {   \
    CONV_PARAMS_STRUCT(p);                       \
    conv_one_group_bulk<CH, T, NT>(p);           \
  }
#define CONV_BULK_KERNELS(CH, T) \
  CONV_BULK(CH, T, 2)            \
  CONV_BULK(CH, T, 4)            \
  CONV_BULK(CH, T, 8)
CONV_BULK_KERNELS(1, 1)
CONV_BULK_KERNELS(1, 2)
CONV_BULK_KERNELS(2, 1)
CONV_BULK_KERNELS(3, 1)
CONV_BULK_KERNELS(4, 1)
