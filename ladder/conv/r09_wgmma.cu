// Rung 9 (conv): rung 8's fused convolution with Hopper's warpgroup MMA (wgmma) instead of
// mma.sync. Build for sm_90a: wgmma exists only there.
//
// What changes from rung 8 (r08_tensor_core.cu):
// - A job belongs to a warpgroup (4 warps), not to a warp: warp w of the group takes column
//   group 4 sg + w, and one wgmma.m64nNk16 multiplies the group's 4 x 16 A rows (each warp's
//   own 16, from its own registers) by a k16 x N slice of the weights, N = 8 NT. Accumulators
//   are laid out as NT m16n8 tiles, as before, so the epilogues are rung 8's.
// - B is not loaded into registers at all: wgmma reads it from shared memory through a matrix
//   descriptor. Each 256-byte weight entry is two 8 x 8 "core matrices" (8 n rows of 16 bytes:
//   8 k), the k8 halves 128 bytes apart (LBO) and the n8 tiles 256 bytes apart (SBO), no
//   swizzle: the canonical K-major layout (stage_core_matrices in tc/wgmma_jobs.cuh).
// - wgmma is asynchronous. A window loads its quads, fences (the registers just written are
//   ordered before the multiplies that read them), issues its multiplies and commits them as
//   one group, then waits for it: the next window loads its quads into the same registers, and
//   an A register must not be written while a wgmma that reads it is in flight
//   (wgmma_window in tc/wgmma_jobs.cuh).
// - There is no k8 wgmma for half: an odd last filter row (K = 7: row 6) is a k16 step whose
//   second row has zero weights. Its A registers hold the next input row, which is staged.
// - Every job is packed (4 filters x 2 column shifts per n8 tile), whatever M.
#include "tc/epilogue.cuh"
#include "tc/staging.cuh"
#include "tc/wgmma_jobs.cuh"

// As rung 8's kernel, packed always (PACK = 1), with warpgroup jobs: SLOTS = NWARPS / 4 jobs
// per round, warp `member` of a job's 4 taking column group 4 sg + member. CHUNKED: channels
// staged in chunks inside each round, as on rung 8.
template <int T, int NT, bool CHUNKED>
__device__ __forceinline__ void conv_wgmma(const Conv& p) {
  constexpr int PACK = 1;
  constexpr int ROWS = 2 * T;  // output rows of a job (a sub-band)
  constexpr int CSTEP = 2;     // input columns per quad column
  constexpr int JOB_WARPS = 4, SLOTS = NWARPS / JOB_WARPS;
  extern __shared__ __align__(16) unsigned char smem[];
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const int slot = warp / JOB_WARPS, member = warp % JOB_WARPS;
  const int Ho = p.Ho, Wn = p.Wn, QC = p.QC, PB = p.PB, NTP = p.NTP, NFG = p.NFG;
  const int items = p.items;
  // packed pairs are 4-byte aligned everywhere (see store_packed)
  const bool pairs_aligned = (p.Wo & 1) == 0 && (reinterpret_cast<size_t>(p.y) & 3) == 0;

  // shared memory: B core matrices | the input's A quads | raw input slots
  uint4* quads = reinterpret_cast<uint4*>(smem + p.quads_at);
  unsigned short* raw = reinterpret_cast<unsigned short*>(smem + p.raw_at);
  const unsigned raw_shared = (unsigned)__cvta_generic_to_shared(raw);

  // Accumulate channels [chunk * chunk_channels, + cc) of a job into acc.
  auto accumulate = [&](float (&acc)[T][NT][4], const uint4* lane_quads, int fg, int chunk) {
    const int cc = min(p.chunk_channels, p.C - chunk * p.chunk_channels);
    for (int cl = 0; cl < cc; ++cl) {
      for (int qc = 0; qc < QC; ++qc) {
        for (int pb = 0; pb < PB; ++pb) {
          const int taps = min(P_BLOCK, p.K - pb * P_BLOCK);  // filter rows of the block
          // this lane's column's quads from the sub-band's top row + 8 pb
          const uint4* src = lane_quads + (cl * p.cols + qc * Q_CHUNK / CSTEP) * p.quad_stride +
                             pb * (P_BLOCK / 2);
          const int entry = ((cl * QC + qc) * PB + pb) * PAIRS * NTP + fg * NT;
          wgmma_window<T, NT, 1>(acc, src, smem, entry, NTP, taps);
        }
      }
    }
    wgmma_finish(acc);  // the accumulators are complete, shared memory free to restage
  };

  // Only one commit group is ever pending: the load of (item, chunk). The first barrier makes
  // it visible and retires every warp's reads of the previous quads and fragments; after the
  // second the raw slots are free, and the load that follows is issued at once.
  auto stage = [&](int item, int chunk, int next_item, int next_chunk) {
    cp_async_wait<0>();
    __syncthreads();
    rewrite_quads<PACK>(p, quads, raw, item, chunk, tid);
    if (CHUNKED) {
      const int c0 = chunk * p.chunk_channels;
      stage_core_matrices<PACK>(p, smem, c0, min(p.chunk_channels, p.C - c0));
    }
    __syncthreads();
    if (next_item < items) copy_band_async(p, raw, raw_shared, next_item, next_chunk, tid);
  };

  if (!CHUNKED) stage_core_matrices<PACK>(p, smem, 0, min(p.chunk_channels, p.C));
  if ((int)blockIdx.x < items) copy_band_async(p, raw, raw_shared, blockIdx.x, 0, tid);

  for (int item = blockIdx.x; item < items; item += gridDim.x) {
    int b, h0;
    origin(p, item, b, h0);
    const int sub_bands = (min(p.band_rows, Ho - h0) + ROWS - 1) / ROWS;
    const int columns = sub_bands * Wn, groups = (columns + 7) / 8;
    const int supergroups = (groups + JOB_WARPS - 1) / JOB_WARPS;
    const int jobs = supergroups * NFG, rounds = (jobs + SLOTS - 1) / SLOTS;
    if (!CHUNKED) stage(item, 0, item + gridDim.x, 0);
    // job = round * SLOTS + slot = fg * supergroups + sg, kept by subtraction (no division)
    for (int round = 0, fg = 0, sg = slot; round < rounds; ++round, sg += SLOTS) {
      while (sg >= supergroups) {
        sg -= supergroups;
        ++fg;
      }
      const int group = sg * JOB_WARPS + member;
      const bool active = round * SLOTS + slot < jobs;  // uniform over the job's warps

      // This lane's column (A rows g and g + 8 of every tile; PACK: output column 2 col); a
      // dead lane reads column 0. Its fragment quads start at input column CSTEP col + 2t.
      const int n = group * 8 + g;
      const bool n_live = n < columns;
      const int sb = n_live ? fast_div(n, p.wn_magic, p.wn_shift) : 0;
      const int col = n_live ? n - sb * Wn : 0;
      const uint4* lane_quads =
          quads + (col + 2 * t / CSTEP) * p.quad_stride + sb * (ROWS / 2);

      float acc[T][NT][4] = {};
      if (CHUNKED) {
        // Channels in chunks: every round restages them all (the slow, general path).
        for (int chunk = 0; chunk < p.chunks; ++chunk) {
          const bool last = chunk + 1 == p.chunks;
          const int next_item = !last || round + 1 < rounds ? item : item + gridDim.x;
          stage(item, chunk, next_item, last ? 0 : chunk + 1);
          if (active) accumulate(acc, lane_quads, fg, chunk);
        }
      } else if (active) {
        accumulate(acc, lane_quads, fg, 0);
      }
      if (!active) continue;
      if (pairs_aligned)
        store_packed<T, NT, PACK>(p, acc, packed_out(p, b, h0 + sb * ROWS, col), fg, t, n_live);
      else
        store_general<T, NT, PACK>(p, acc, b, h0, sb, col, group, fg, n_live, columns, g, t);
    }
  }
  cp_async_wait<0>();  // nothing may be in flight at exit
}

#define CONV_WGMMA(NAME, T, NT, CHUNKED) \
  CONV_KERNEL(NAME) {                    \
    CONV_PARAMS_STRUCT(p);               \
    conv_wgmma<T, NT, CHUNKED>(p);       \
  }
// Packed (4 filters x 2 shifts per n8 tile): 2T rows x 64 output columns x 4 NT filters per
// warpgroup job.
CONV_WGMMA(conv_wg_t1_n1, 1, 1, false)
CONV_WGMMA(conv_wg_t1_n2, 1, 2, false)
CONV_WGMMA(conv_wg_t1_n4, 1, 4, false)
CONV_WGMMA(conv_wg_t2_n4, 2, 4, false)
CONV_WGMMA(conv_wg_t3_n4, 3, 4, false)
CONV_WGMMA(conv_wg_chunked_t1_n4, 1, 4, true)
