// Rung 10 (conv): rung 9 with row shifts packed too, so that a pixel is a 2 x 2 block of
// outputs and conv2's 16 filters fill wgmma's N = 64 (sm_90a only).
//
// What changes from rung 9 (r09_wgmma.cu); the layout's PACK == 2 paths in ladder/conv/tc/:
// - An n8 tile holds 4 filters x 2 column shifts at one row shift: B'[(p, q)][(f, s)] =
//   w[f][p - s_r][q - s], s_r = the tile's row shift (n8 tiles 2 f4 and 2 f4 + 1 are filters
//   4 f4 .. + 3 at row shifts 0 and 1). 16 filters are 8 n8 tiles, N = 64.
// - A row g of tile i is block row 2i (output rows 4i and 4i + 1, one per row shift), A row
//   g + 8 block row 2i + 1 (4i + 2, 4i + 3). A k16 step j reads input rows 2j and 2j + 1 below
//   each block row: (4i + 2j, 4i + 2j + 2) in its first k8 half and (4i + 2j + 1, 4i + 2j + 3)
//   in its second, so the A registers of (i, j) are the quad (F(2k), F(2k + 2), F(2k + 1),
//   F(2k + 3)) with k = 2i + j: the diagonal advances two quads per tile, and a window of T
//   tiles loads 2T + 2 quads for its 4T multiplies.
// - A window covers 8 input rows below each block row, filter rows 0 .. 7 at row shift 0 and
//   -1 .. 6 at shift 1: one window per channel and column chunk when K <= 7 (conv2), and
//   ceil((K + 1) / 8) windows per filter in general (as QC for the column shift).
// Per multiply, twice rung 9's outputs for the same A registers: half the wgmma instructions
// per output, and at the same T half the quad loads.
#include "tc/epilogue.cuh"
#include "tc/staging.cuh"
#include "tc/wgmma_jobs.cuh"

// Rung 9's kernel on 2 x 2 output blocks (PACK = 2): a job's T tiles cover 4T output rows, a
// window reads input rows 0 .. 7 below each block row (input rows up to K: filter row K - 1 at
// row shift 1) and tile i's step j reads quad 2i + j. The row-shift packing itself is in the
// layout's PACK == 2 paths: WeightBlock::tap (the row shift of an n8 tile, tc/layout.cuh),
// rewrite_quads (the quad order F(2k), F(2k + 2), F(2k + 1), F(2k + 3), tc/staging.cuh),
// store_packed and store_general (tile i's rows 4i + 2r + nt % 2, tc/epilogue.cuh), and
// Layout's PB, NFG and quad_stride (tc/plan.py).
template <int T, int NT, bool CHUNKED>
__device__ __forceinline__ void conv_wgmma_blocks(const Conv& p) {
  constexpr int PACK = 2;
  constexpr int ROWS = 4 * T;  // output rows of a job (a sub-band)
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
          // input rows of the block with nonzero weights: filter rows and row K (filter row
          // K - 1 of the row-shifted outputs)
          const int taps = min(P_BLOCK, p.K + 1 - pb * P_BLOCK);
          // this lane's column's quads from the sub-band's top row + 8 pb
          const uint4* src = lane_quads + (cl * p.cols + qc * Q_CHUNK / CSTEP) * p.quad_stride +
                             pb * (P_BLOCK / 2);
          const int entry = ((cl * QC + qc) * PB + pb) * PAIRS * NTP + fg * NT;
          wgmma_window<T, NT, 2>(acc, src, smem, entry, NTP, taps);
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

#define CONV_WGMMA_BLOCKS(NAME, T, NT, CHUNKED) \
  CONV_KERNEL(NAME) {                           \
    CONV_PARAMS_STRUCT(p);                      \
    conv_wgmma_blocks<T, NT, CHUNKED>(p);       \
  }
// 2 x 2 blocks (4 filters x 2 column shifts x 2 row shifts per pair of n8 tiles): 4T rows x
// 64 output columns x 2 NT filters per warpgroup job.
CONV_WGMMA_BLOCKS(conv_wgb_t1_n2, 1, 2, false)
CONV_WGMMA_BLOCKS(conv_wgb_t2_n2, 2, 2, false)
CONV_WGMMA_BLOCKS(conv_wgb_t1_n4, 1, 4, false)
CONV_WGMMA_BLOCKS(conv_wgb_t2_n4, 2, 4, false)
CONV_WGMMA_BLOCKS(conv_wgb_t1_n8, 1, 8, false)
CONV_WGMMA_BLOCKS(conv_wgb_t2_n8, 2, 8, false)
CONV_WGMMA_BLOCKS(conv_wgb_chunked_t1_n8, 1, 8, true)
