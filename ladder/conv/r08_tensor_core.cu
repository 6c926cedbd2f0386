// Rung 8 (conv): the convolution as one fused implicit GEMM on tensor cores, mma.sync in
// inline PTX. x (B, C, H, W) and w (M, C, K, K) half, y (B, M, Ho, Wo) half, FP32 sums:
// out[pixel][filter] = sum over k of X[pixel][k] W[k][filter], pixels on the M side of
// mma.m16n8k16 (A), filters on the N side (B), no im2col in memory (r08_tensor_core.py tells
// why; ladder/conv/tc/ holds the staging and the epilogues, ladder/core/cuda the primitives).
//
// Work: an item is one band of output rows of one image (the whole image for the ECE408
// layers). Blocks are persistent (grid = resident blocks, items strided over them); a block
// stages an item's input rows (a chunk of channels at a time, usually all of them) in shared
// memory and its warps take jobs, round after round. A job is 8 "columns" x 2T output rows x
// 8 NT filters: T m16 tiles stacked down the image, each 8 columns x 2 rows (A row g: row 2i,
// column g; A row g + 8: row 2i + 1, column g). Columns are numbered sub-band by sub-band,
// n = sub_band * Wn + w, so 8 consecutive columns can wrap from one sub-band to the next and no
// lane idles when Wo is not a multiple of 8. PACK (at most 4 filters, as conv1): a column is a
// pair of output columns and an n8 tile holds 4 filters x 2 column shifts,
// B'[(p, q)][(f, s)] = w[f][p][q - s], so one mma covers 16 output columns instead of 8 and
// lane (g, t) ends with two adjacent pixels of filter t; only even input columns are staged.
//
// The main loop runs over diagonals: the A registers of tile i at k16 step j (filter rows
// p = 8 pb + 2j, p + 1) are the pair words of input rows (2k, 2k + 1, 2k + 1, 2k + 2),
// k = i + j, so one quad (one 16-byte load) feeds every (tile, step) on its diagonal. When the
// 8-row block has an odd number of filter rows left (K = 7: p = 6), the last step is an
// m16n8k8 on (rows 2k, 2k + 1).
//
// Weights: every B fragment the block needs (k16 x n8, 32 lanes x 2 registers = 256 bytes) is
// built once in shared memory in fragment order, so a lane fetches its (b0, b1) with one 64-bit
// load: entry ((((c * QC + qc) * PB + pb) * PAIRS + pair) * NTP + tile) * 32 + lane.
//
// Barriers: the raw slots, the input quads and the B fragments are each written between the
// two barriers of a staging step and read only after the second; the first barrier of the next
// step is also where every warp has finished reading them. cp.async.wait_group 0 before the
// first barrier completes this thread's copies, the barrier everyone's.
#include "ladder/core/cuda/cp_async.cuh"  // cp_async_wait
#include "ladder/core/cuda/mma_sync.cuh"  // mma_16816, mma_1688: their fragment layouts are there

#include "tc/epilogue.cuh"
#include "tc/staging.cuh"

// Weights -> B fragments for channels [c0, c0 + cc): entry e holds lane (g, t)'s
// (b0, b1) = (B[2t, 2t + 1][g], B[2t + 8, 2t + 9][g]) at uint2 e * 32 + lane.
template <int PACK>
__device__ void stage_fragments(const Conv& p, unsigned char* smem, int c0, int cc) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  uint2* frags = reinterpret_cast<uint2*>(smem);
  const int count = cc * p.QC * p.PB * PAIRS * p.NTP;
  for (int e = warp; e < count; e += NWARPS) {
    const WeightBlock b(p, e, c0);
    frags[e * 32 + lane] =
        make_uint2(b.tap<PACK>(g, 2 * t) | b.tap<PACK>(g, 2 * t + 1) << 16,
                   b.tap<PACK>(g, 2 * t + 8) | b.tap<PACK>(g, 2 * t + 9) << 16);
  }
}

// One window: TAPS filter rows (8, or fewer in the last 8-row block of a filter) of one
// channel and one 8-column chunk, for the warp's T tiles and NT n8 tiles. src points at this
// lane's column's quad at the window's first input row, entry at the B entry of row pair 0.
// Quad k, (F(2k), F(2k + 1), F(2k + 1), F(2k + 2)), is the A fragment of tile i at step
// j = k - i: one 16-byte load, used by every tile it serves, straight from the four registers
// it lands in.
template <int T, int NT, int TAPS>
__device__ __forceinline__ void window(float (&acc)[T][NT][4], const uint4* src,
                                       const unsigned char* smem, int entry, int frag_stride) {
  const uint2* frag = reinterpret_cast<const uint2*>(smem) + entry * 32 + threadIdx.x % 32;
  constexpr int STEPS = TAPS / 2;         // k16 steps: filter rows (2j, 2j + 1)
  constexpr int USED = STEPS + TAPS % 2;  // plus one k8 step on the odd last row
  constexpr int QUADS = T + USED - 1;
  uint2 bw[USED][NT];
#pragma unroll
  for (int j = 0; j < USED; ++j)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) bw[j][nt] = frag[(j * frag_stride + nt) * 32];
#pragma unroll
  for (int k = 0; k < QUADS; ++k) {
    const uint4 a = src[k];
#pragma unroll
    for (int j = 0; j < USED; ++j) {
      const int i = k - j;
      if (i < 0 || i >= T) continue;
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        if (j < STEPS)
          mma_16816(acc[i][nt], {a.x, a.y, a.z, a.w}, {bw[j][nt].x, bw[j][nt].y});
        else
          mma_1688(acc[i][nt], {a.x, a.y}, bw[j][nt].x);
      }
    }
  }
}

// The window for TAPS filter rows, chosen at run time (taps is warp-uniform).
template <int T, int NT>
__device__ __forceinline__ void window(float (&acc)[T][NT][4], const uint4* src,
                                       const unsigned char* smem, int entry, int frag_stride,
                                       int taps) {
  switch (taps) {
    case 8: window<T, NT, 8>(acc, src, smem, entry, frag_stride); break;
    case 7: window<T, NT, 7>(acc, src, smem, entry, frag_stride); break;
    case 6: window<T, NT, 6>(acc, src, smem, entry, frag_stride); break;
    case 5: window<T, NT, 5>(acc, src, smem, entry, frag_stride); break;
    case 4: window<T, NT, 4>(acc, src, smem, entry, frag_stride); break;
    case 3: window<T, NT, 3>(acc, src, smem, entry, frag_stride); break;
    case 2: window<T, NT, 2>(acc, src, smem, entry, frag_stride); break;
    default: window<T, NT, 1>(acc, src, smem, entry, frag_stride); break;
  }
}

// CHUNKED: the channels do not fit in shared memory at once; they are staged in chunks inside
// each round (accumulators live across the staging). Otherwise a band is staged once, with
// all of its channels and weights, and every round reads it.
template <int T, int NT, bool CHUNKED, int PACK>
__device__ __forceinline__ void conv_mma_sync(const Conv& p) {
  constexpr int ROWS = 2 * T;          // output rows of a job (a sub-band)
  constexpr int CSTEP = PACK ? 2 : 1;  // input columns per quad column
  extern __shared__ __align__(16) unsigned char smem[];
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const int Ho = p.Ho, Wn = p.Wn, QC = p.QC, PB = p.PB, NTP = p.NTP, NFG = p.NFG;
  const int items = p.items;
  // packed pairs are 4-byte aligned everywhere (see store_packed)
  const bool pairs_aligned = (p.Wo & 1) == 0 && (reinterpret_cast<size_t>(p.y) & 3) == 0;

  // shared memory: B fragments | the input's A quads | raw input slots
  uint4* quads = reinterpret_cast<uint4*>(smem + p.quads_at);
  unsigned short* raw = reinterpret_cast<unsigned short*>(smem + p.raw_at);
  const unsigned raw_shared = (unsigned)__cvta_generic_to_shared(raw);

  // Accumulate channels [chunk * chunk_channels, + cc) of a warp's job into acc.
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
          window<T, NT>(acc, src, smem, entry, NTP, taps);
        }
      }
    }
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
      stage_fragments<PACK>(p, smem, c0, min(p.chunk_channels, p.C - c0));
    }
    __syncthreads();
    if (next_item < items) copy_band_async(p, raw, raw_shared, next_item, next_chunk, tid);
  };

  if (!CHUNKED) stage_fragments<PACK>(p, smem, 0, min(p.chunk_channels, p.C));
  if ((int)blockIdx.x < items) copy_band_async(p, raw, raw_shared, blockIdx.x, 0, tid);

  for (int item = blockIdx.x; item < items; item += gridDim.x) {
    int b, h0;
    origin(p, item, b, h0);
    const int sub_bands = (min(p.band_rows, Ho - h0) + ROWS - 1) / ROWS;
    const int columns = sub_bands * Wn, groups = (columns + 7) / 8;
    const int jobs = groups * NFG, rounds = (jobs + NWARPS - 1) / NWARPS;
    if (!CHUNKED) stage(item, 0, item + gridDim.x, 0);
    // job = round * NWARPS + warp = fg * groups + group, kept by subtraction (no division)
    for (int round = 0, fg = 0, group = warp; round < rounds; ++round, group += NWARPS) {
      while (group >= groups) {
        group -= groups;
        ++fg;
      }
      const bool active = round * NWARPS + warp < jobs;

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
      if (PACK && pairs_aligned)
        store_packed<T, NT, PACK>(p, acc, packed_out(p, b, h0 + sb * ROWS, col), fg, t, n_live);
      else
        store_general<T, NT, PACK>(p, acc, b, h0, sb, col, group, fg, n_live, columns, g, t);
    }
  }
  cp_async_wait<0>();  // nothing may be in flight at exit
}

#define CONV_MMA_SYNC(NAME, T, NT, CHUNKED, PACK) \
  CONV_KERNEL(NAME) {                             \
    CONV_PARAMS_STRUCT(p);                        \
    conv_mma_sync<T, NT, CHUNKED, PACK>(p);       \
  }
// (T, NT): T m16 tiles (2T output rows) and NT n8 tiles (8 NT filters) per warp job
CONV_MMA_SYNC(conv_tc_t2_n1, 2, 1, false, 0)
CONV_MMA_SYNC(conv_tc_t6_n1, 6, 1, false, 0)
CONV_MMA_SYNC(conv_tc_t10_n1, 10, 1, false, 0)
CONV_MMA_SYNC(conv_tc_t2_n2, 2, 2, false, 0)
CONV_MMA_SYNC(conv_tc_t6_n2, 6, 2, false, 0)
CONV_MMA_SYNC(conv_tc_chunked_t2_n1, 2, 1, true, 0)
CONV_MMA_SYNC(conv_tc_chunked_t2_n2, 2, 2, true, 0)
// packed: 2T rows x 16 columns x 4 filters per job
CONV_MMA_SYNC(conv_tc_pack_t2_n1, 2, 1, false, 1)
CONV_MMA_SYNC(conv_tc_pack_t6_n1, 6, 1, false, 1)
CONV_MMA_SYNC(conv_tc_pack_t10_n1, 10, 1, false, 1)
