// Rung 8 (conv): fused implicit-GEMM convolution on tensor cores, mma.sync in inline PTX.
// y = conv2d(x, w): x (B, C, H, W) and w (M, C, K, K) half, y (B, M, Ho, Wo) half, FP32
// accumulation. The GEMM is out[pixel][filter] = sum over k of X[pixel][k] * W[k][filter]:
// pixels on the M side of mma.m16n8k16 (A), filters on the N side (B), no im2col in memory.
//
// Work: an item is one band of output rows of one image (the whole image for the ECE408
// layers). Blocks are persistent (grid = resident blocks, items strided over them); a block
// stages an item's input rows (a chunk of channels at a time, usually all of them) in shared
// memory and its warps take jobs, round after round. A job is 8 "columns" x 2T output rows x 8 NT
// filters: T m16 tiles stacked down the image, each 8 columns x 2 rows (A row g: row 2i, column g;
// A row g + 8: row 2i + 1, column g). A column is one output column of one sub-band of 2T rows;
// columns are numbered sub-band by sub-band, n = sub_band * Wo + w, so that 8 consecutive
// columns can wrap from the end of one sub-band to the start of the next and no lane idles
// when Wo is not a multiple of 8. With at most 4 filters (conv1) the kernel is PACKED: a column
// is a pair of output columns and an n8 tile holds 4 filters x 2 shifts (see conv_tc).
//
// k ordering. A k16 step is two filter rows (p, p + 1) of one channel, 8 filter columns each
// (q = 8 qc + 0..7; taps with q >= K or p >= K have zero weights). For pixel (h, w) the lane
// (g, t) needs X[pixel][k = 2t, 2t+1] = x[c][h + p][w + q], x[c][h + p][w + q + 1]: two
// neighbours of one input row, whatever the parity of w: a "pair word" F(r) of column col holds
// halves col and col + 1 of input row r. The four A registers of tile i at k16 step j (filter
// rows p = 8 pb + 2j, p + 1; tile rows 2i, 2i + 1) are
//   a0 = F(2i + p),  a1 = F(2i + 1 + p),  a2 = F(2i + p + 1),  a3 = F(2i + 1 + p + 1)
// with F of column w + q + 2t: rows (2k, 2k + 1, 2k + 1, 2k + 2) with k = i + j. The quad depends
// only on k, so the loop runs over k (the diagonals of the tile x step grid) and each quad feeds
// every (i, j = k - i). Shared memory holds the input as these quads, built once by the rewrite:
// quad (c, col, k), 16 bytes at ((c * cols + col) * quad_stride + k), so a lane loads each quad
// with one 16-byte load into four consecutive registers, which is what HMMA reads its A operand
// from (quad_stride is odd: a quarter warp's 8 columns fall in 8 different groups of 4 banks).
// T + 3 quad loads per 8 filter rows. When the 8-row block has an odd number of filter rows
// left (K = 7: p = 6), the last step is an m16n8k8 on (rows 2k, 2k + 1).
//
// Weights: every B fragment the block needs (k16 x n8, 32 lanes x 2 registers = 256 bytes) is
// built once in shared memory in fragment order, so a lane fetches its (b0, b1) with one 64-bit
// load: entry ((((c * QC + qc) * PB + pb) * PAIRS + pair) * NTP + tile) * 32 + lane holds
//   b0 = (w[8 tile + g][c][p][q], w[..][p][q + 1]),  b1 = the same at p + 1,
//   p = 8 pb + 2 pair, q = 8 qc + 2t.
//
// Input staging: each channel's band (min(RIN, H - h0) rows x W, contiguous in NCHW) is copied
// with 16-byte cp.async from the aligned chunk at or below its first element into a raw slot,
// then the warps rewrite it as quads of pair words, zeros past the image. The one chunk that
// would reach past the end of x (when B C H W is not a multiple of 8) is copied half by half:
// cp.async's src-size would zero-fill its tail, but the 16-byte access still crosses the end of
// the allocation, and compute-sanitizer's memcheck reports it (it did, on this rung). One raw
// buffer: the next load is issued right after the rewrite, so it lands while the warps compute.
//
// Output: the accumulator of lane (g, t) holds pixel g (and g + 8: the next row) at filters
// 2t, 2t + 1. Rounded to half, each 8 x 8 (pixels x filters) half of a tile is transposed in
// registers by movmatrix, after which the lane holds two adjacent pixels of one filter: one
// half2 store when they are contiguous and 4-byte aligned (else two halves). When a filter
// group has at most 4 live filters (the last group of M = 12, say), the second pixel row is
// first shuffled into the lanes of the dead filters, so one transpose and one store cover both
// rows of a tile. A PACKED tile needs no transpose: lane (g, t) holds filter t at two adjacent
// output columns.
//
// Barriers: the raw slots, the input quads and the B fragments are each written between the
// two barriers of a staging step and read only after the second; the first barrier of the next
// step is also where every warp has finished reading them. cp.async.wait_group 0 before the
// first barrier completes this thread's copies, the barrier everyone's.
#include <cuda_fp16.h>

constexpr int NWARPS = 8;                 // warps per block
constexpr int THREADS = 32 * NWARPS;      // 256
constexpr int P_BLOCK = 8;                // filter rows per window: 4 row pairs (k16 steps)
constexpr int PAIRS = P_BLOCK / 2;        // B fragment slots per window
constexpr int Q_CHUNK = 8;                // filter columns per k8 half of a k16 step
constexpr int FRAG_BYTES = 256;           // one B fragment: 32 lanes x (b0, b1)
constexpr int PACK_FILTERS = 4;           // filters of a packed n8 tile (x 2 column shifts)
constexpr int MIN_BLOCKS = 2;             // blocks per SM the register budget is fitted for
static_assert(FRAG_BYTES == 32 * sizeof(uint2), "a B fragment is one uint2 per lane");

__device__ __forceinline__ void cp_async16(unsigned dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
__device__ __forceinline__ void cp_async_wait_all() {
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");
}
// d += a (16 x 16, row) * b (16 x 8, col). With g = lane / 4, t = lane % 4:
//   a0 = A[g][2t, 2t+1], a1 = A[g+8][2t, 2t+1], a2 = A[g][2t+8, 2t+9], a3 = A[g+8][2t+8, 2t+9]
//   b0 = B[2t, 2t+1][g], b1 = B[2t+8, 2t+9][g]
//   d0, d1 = D[g][2t, 2t+1], d2, d3 = D[g+8][2t, 2t+1]          (low half = first element)
__device__ __forceinline__ void mma_16816(float (&d)[4], unsigned a0, unsigned a1, unsigned a2,
                                          unsigned a3, unsigned b0, unsigned b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
// d += a (16 x 8, row) * b (8 x 8, col): a0 = A[g][2t, 2t+1], a1 = A[g+8][2t, 2t+1],
// b0 = B[2t, 2t+1][g]; d as for m16n8k16 (the first k8 half of it).
__device__ __forceinline__ void mma_1688(float (&d)[4], unsigned a0, unsigned a1, unsigned b0) {
  asm("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 "
      "{%0, %1, %2, %3}, {%4, %5}, {%6}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(b0));
}

// n / d for 0 <= n < 2^31 with one multiply-high instead of a division: the GPU has no integer
// divider, and a run-time `n / d` compiles to about 25 instructions through a float reciprocal.
// The launcher computes (magic, shift) for each divisor (r08_tensor_core.py, fast_division):
// with l = ceil(log2 d), magic = ceil(2^(32 + l) / d) - 2^32 and shift = l, and
// n / d = (umulhi(n, magic) + n) >> l (Granlund and Montgomery's 33-bit multiplier, exact for
// every n < 2^32 because magic d + 2^32 d - 2^(32 + l) < d <= 2^l; the sum stays below 2^32 for
// n < 2^31). d = 1 needs no special case: magic = 0, shift = 0. As parameters they stay in the
// constant bank: no registers.
__device__ __forceinline__ int fast_div(int n, unsigned magic, int shift) {
  return (int)((__umulhi((unsigned)n, magic) + (unsigned)n) >> shift);
}

// The pointer, through an empty asm: the compiler cannot fold the arithmetic that made it into
// the addresses computed from it (which it otherwise redoes in 64 bits at every store).
template <class P>
__device__ __forceinline__ P* opaque(P* ptr) {
  asm("" : "+l"(ptr));
  return ptr;
}

// A 32-bit store to global memory (through an opaque pointer the compiler no longer knows is
// global, and would store through the generic address space).
__device__ __forceinline__ void st_global(unsigned* ptr, unsigned value) {
  asm volatile("st.global.b32 [%0], %1;\n" ::"l"(ptr), "r"(value) : "memory");
}

// (lo, hi) rounded to half, lo in the low 16 bits.
__device__ __forceinline__ unsigned pack_half2(float lo, float hi) {
  const __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const unsigned*>(&h);
}
// The transpose of an 8 x 8 b16 matrix in fragment layout (lane (g, t) holds row g, columns
// 2t, 2t + 1): afterwards lane (g, t) holds rows 2t, 2t + 1 of column g.
__device__ __forceinline__ unsigned transpose_8x8(unsigned a) {
  unsigned d;
  asm("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(d) : "r"(a));
  return d;
}

// The LEAN epilogue's stores of one filter (n8 tiles 2q and 2q + 1 of a BLOCKS job, row
// shifts 0 and 1): put(offset, pair) for each of the job's 4T output rows that is live.
struct GlobalPut {
  unsigned* at;
  __device__ __forceinline__ void operator()(unsigned offset, unsigned pair) const {
    st_global(at + offset, pair);
  }
};
struct SharedPut {  // rung 12: into shared memory (at points there)
  unsigned* at;
  __device__ __forceinline__ void operator()(unsigned offset, unsigned pair) const {
    at[offset] = pair;
  }
};
template <int T, int NT, class Put>
__device__ __forceinline__ void store_filter(const float (&acc)[T][NT][4], int q,
                                             const unsigned (&row_at)[4 * T],
                                             const bool (&row_live)[4 * T], Put put) {
#pragma unroll
  for (int i = 0; i < T; ++i)
#pragma unroll
    for (int r = 0; r < 2; ++r)
#pragma unroll
      for (int s = 0; s < 2; ++s) {
        const int rr = 4 * i + 2 * r + s;
        if (row_live[rr])
          put(row_at[rr], pack_half2(acc[i][2 * q + s][2 * r], acc[i][2 * q + s][2 * r + 1]));
      }
}

// The LEAN epilogue (rungs 11 and 12) of a BLOCKS job, NT n8 tiles: lane (g, t) holds filter
// 4 (q0 + q) + t in n8 tiles 2q and 2q + 1 (row shifts 0 and 1). One pointer per filter, at
// the lane's first word, and per output row of the job one offset and one test,
// loop-invariant: a store is then one wide multiply-add for its address, its rounding and
// itself (rung 10 recomputes a pointer per n8 tile and an offset and a test per store).
struct LeanOut {
  unsigned* y_image;  // the image's output in global memory, in words
  unsigned* buffer;   // rung 12: the image's output buffer in shared memory (same layout)
  long long plane;    // words per output plane
  int at, h, Ho, half_wo, M;  // the lane's first word in its plane, the job's first row, ...
  bool n_live, to_buffer;     // the lane's column is live; store into the buffer
};
template <int T, int NT>
__device__ __forceinline__ void store_lean(const float (&acc)[T][NT][4], int q0, int t,
                                           const LeanOut& o) {
  constexpr int JOB_ROWS = 4 * T;
  unsigned row_at[JOB_ROWS];  // unsigned: one IMAD.WIDE.U32 per address, no sign extension
  bool row_live[JOB_ROWS];
#pragma unroll
  for (int rr = 0; rr < JOB_ROWS; ++rr) {
    row_at[rr] = rr * o.half_wo;
    row_live[rr] = o.h + rr < o.Ho;
  }
#pragma unroll
  for (int q = 0; q < NT / 2; ++q) {
    const int f = (q0 + q) * PACK_FILTERS + t;
    if (!o.n_live || f >= o.M) continue;
    if (o.to_buffer)  // rung 12: into the image's buffer (same layout, h0 = 0)
      store_filter<T, NT>(acc, q, row_at, row_live,
                          SharedPut{o.buffer + ((int)(f * o.plane) + o.at)});
    else
      store_filter<T, NT>(acc, q, row_at, row_live,
                          GlobalPut{opaque(o.y_image + f * o.plane + o.at)});
  }
}

// The launch parameters; the derived ones are computed by the launcher (r08_tensor_core.py,
// Plan), so that they stay in the constant bank instead of taking registers.
struct Conv {
  const unsigned short* x;  // half bits; 16-byte aligned (the launcher copies it otherwise)
  const unsigned short* w;
  unsigned short* y;
  long long x_halves;  // B * C * H * W: the last chunk of x reads only this far
  int B, C, M, H, W, K, Ho, Wo;
  int QC;              // ceil(K / Q_CHUNK): 8-column chunks of a filter row
  int PB;              // ceil(K / P_BLOCK): 8-row blocks of a filter
  int Wn;              // columns per sub-band row: Wo, or (packed) ceil(Wo / 2) column pairs
  int NFG, NTP;        // filter groups of NT n8 tiles; NTP = NFG * NT
  int band_rows;       // output rows per item, a multiple of 2T
  int RIN;             // input rows per item: band_rows + K - 1
  int bands, items;    // bands per image; B * bands
  int chunk_channels;  // channels staged at once
  int chunks;          // ceil(C / chunk_channels)
  int cols;            // quad columns per channel (packed: even input columns only)
  int quad_stride;     // quads (16 bytes) per column: odd, >= ceil(RIN / 2)
  int slot_chunks;     // 16-byte chunks per channel's raw slot, >= (RIN * W + 14) / 8
  int quads_at, raw_at;  // byte offsets of the input quads and the raw slots in shared memory
  unsigned bands_magic;  // fast_div by bands, Wn, slot_chunks and cols
  int bands_shift;
  unsigned wn_magic;
  int wn_shift;
  unsigned slot_magic;
  int slot_shift;
  unsigned cols_magic;
  int cols_shift;
  int step_rows, step_cols;  // THREADS quads of a channel's relayout walk: rows and columns
  int out_at;  // rung 12: byte offset of the image's output buffer (0: none), see conv_tc
  int bar_at;  // rung 12: byte offset of the input copy's mbarrier
};

// One entry of the weights in shared memory: the k16 x n8 block of B for channel cl of the
// chunk, filter-column chunk qc, filter-row block pb, row pair `pair` and n8 tile `tile`
// (entry ((((cl * QC + qc) * PB + pb) * PAIRS + pair) * NTP + tile), 256 bytes).
// tap(n, k) is its element B[k][n]: k = 8 kh + kq is filter row 8 pb + 2 pair + kh, filter
// column 8 qc + kq; n is filter 8 tile + n, or (PACK) filter 4 tile + n / 2 at shift n % 2,
// whose weight sits one column to the right: w[f][p][q - shift]. PACK == 2 (rung 10) also
// shifts rows: n8 tile `tile` is filters 4 (tile / 2) + n / 2 at row shift tile % 2, whose
// weight sits one row down: w[f][p - row shift][q - shift]. Zero outside the filter and past M.
struct WeightBlock {
  const Conv& p;
  int c, qc, pb, pair, tile;
  __device__ WeightBlock(const Conv& conv, int e, int c0) : p(conv) {
    tile = e % p.NTP;
    e /= p.NTP;
    pair = e % PAIRS;
    e /= PAIRS;
    pb = e % p.PB;
    e /= p.PB;
    qc = e % p.QC;
    c = c0 + e / p.QC;
  }
  template <int PACK>
  __device__ unsigned tap(int n, int k) const {
    const int quad = PACK == 2 ? tile / 2 : tile, row_shift = PACK == 2 ? tile % 2 : 0;
    const int f = PACK ? quad * PACK_FILTERS + n / 2 : tile * 8 + n, shift = PACK ? n % 2 : 0;
    const int pp = pb * P_BLOCK + 2 * pair + k / Q_CHUNK - row_shift;
    const int qq = qc * Q_CHUNK + k % Q_CHUNK - shift;
    if (f >= p.M || pp < 0 || pp >= p.K || qq < 0 || qq >= p.K) return 0u;
    return p.w[(((long long)f * p.C + c) * p.K + pp) * p.K + qq];
  }
};

// The mma.sync policy: a warp job is one warp's (see conv_tc); B entries are fragments.
struct MmaSync {
  static constexpr int JOB_WARPS = 1;
  static constexpr int JOB_CHANNELS = 0;  // windows per channel (rung 11: one group per job)
  static constexpr bool BULK = false;     // rung 12: bulk copies in and out (r12_bulk.cu)

  // Weights -> B fragments for channels [c0, c0 + cc): entry e holds lane (g, t)'s
  // (b0, b1) = (B[2t, 2t + 1][g], B[2t + 8, 2t + 9][g]) at uint2 e * 32 + lane.
  template <int PACK>
  static __device__ void stage_weights(const Conv& p, unsigned char* smem, int c0, int cc) {
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
  // channel and one 8-column chunk, for the warp's T tiles and NT n8 tiles. src points at
  // this lane's column's quad at the window's first input row, entry at the B entry of row
  // pair 0. Quad k, (F(2k), F(2k + 1), F(2k + 1), F(2k + 2)), is the A fragment of tile i at
  // step j = k - i: one 16-byte load, used by every tile it serves, straight from the four
  // registers it lands in.
  template <int T, int NT, int TAPS>
  static __device__ __forceinline__ void window(float (&acc)[T][NT][4], const uint4* src,
                                                const unsigned char* smem, int entry,
                                                int frag_stride) {
    const uint2* frag = reinterpret_cast<const uint2*>(smem) + entry * 32 + threadIdx.x % 32;
    constexpr int STEPS = TAPS / 2;        // k16 steps: filter rows (2j, 2j + 1)
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
            mma_16816(acc[i][nt], a.x, a.y, a.z, a.w, bw[j][nt].x, bw[j][nt].y);
          else
            mma_1688(acc[i][nt], a.x, a.y, bw[j][nt].x);
        }
      }
    }
  }

  // The window for TAPS filter rows, chosen at run time (taps is warp-uniform).
  template <int T, int NT>
  static __device__ __forceinline__ void window(float (&acc)[T][NT][4], const uint4* src,
                                                const unsigned char* smem, int entry,
                                                int frag_stride, int taps) {
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

  template <int T, int NT>
  static __device__ __forceinline__ void finish(float (&)[T][NT][4]) {}
};

// CHUNKED: the channels do not fit in shared memory at once; they are staged in chunks inside
// each round (accumulators live across the staging). Otherwise a band is staged once, with
// all of its channels and weights, and every round reads it.
// Mma: the multiply policy, MmaSync here (a job is one warp's, B entries are per-lane fragments)
// or rung 9's Wgmma (r09_wgmma.cu: a job is a warpgroup's, B entries are core matrices).
// PACK (rung 8: at most 4 filters, NT = 1, whole bands; rung 9: always, any NT, chunked too):
// an n8 tile holds 4 filters x 2 column shifts,
// n = 2 f + s, with B'[(p, q)][(f, s)] = w[f][p][q - s] (zero outside 0 <= q - s < K), and A
// row g is output column 2 j (j: the lane's column pair), so D[g][(f, s)] = y[f][h][2 j + s].
// One mma covers 16 output columns instead of 8, and lane (g, t) ends with two adjacent pixels
// of filter t: no transpose before the store. A lane reads only even input columns (2 j + 8 qc
// + 2 t), so only the even columns' quads are staged: quad column u holds pair words of input
// columns 2 u and 2 u + 1.
// PACK == 2 (rung 10, r10_row_shifts.cu, wgmma only) packs row shifts too: a pixel is a 2 x 2
// block of outputs, tile i's A row g is block row 2i (output rows 4i, 4i + 1) and A row g + 8
// block row 2i + 1 (4i + 2, 4i + 3), and n8 tile 2 f4 + s_r holds filters 4 f4 .. + 3 at row
// shift s_r: a tile covers 4 output rows, a window's k16 step j reads input rows 2k .. 2k + 3
// with k = 2i + j, staged as quads (F(2k), F(2k + 2), F(2k + 1), F(2k + 3)) (see relayout).
template <int T, int NT, bool CHUNKED, int PACK, class Mma = MmaSync>
__device__ __forceinline__ void conv_tc(const Conv& p) {
  constexpr bool BLOCKS = PACK == 2;     // 2 x 2 output blocks (row shifts packed too)
  constexpr int TILE_ROWS = BLOCKS ? 4 : 2;  // output rows of an m16 tile
  constexpr int ROWS = TILE_ROWS * T;    // output rows of a job (a sub-band)
  constexpr int CSTEP = PACK ? 2 : 1;    // input columns per quad column
  // LEAN (rung 11, r11_one_group.cu): the rewrite slides down column segments (even W) and
  // the epilogue keeps one pointer per filter (see each)
  constexpr bool LEAN = BLOCKS && Mma::JOB_CHANNELS > 0;
  constexpr int SEGMENTS = 3;            // segments per column of the sliding rewrite
  // BULK (rung 12, r12_bulk.cu): the input arrives by bulk copies (one per channel, one
  // thread issues them, an mbarrier counts their bytes), and when the plan has an output buffer
  // (whole images) the jobs store into it and one bulk copy writes the image out
  constexpr bool BULK = Mma::BULK;
  extern __shared__ __align__(16) unsigned char smem[];
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  // A job is JOB_WARPS warps' (mma.sync: 1; wgmma: the 4 of a warpgroup); SLOTS jobs per round
  constexpr int JOB_WARPS = Mma::JOB_WARPS, SLOTS = NWARPS / JOB_WARPS;
  const int slot = warp / JOB_WARPS, member = warp % JOB_WARPS;

  const int Ho = p.Ho, Wo = p.Wo, Wn = p.Wn, QC = p.QC, PB = p.PB, NTP = p.NTP, NFG = p.NFG;
  const int RIN = p.RIN;
  const int items = p.items;
  // packed pairs are 4-byte aligned everywhere (see the epilogue)
  const bool pairs_aligned = (Wo & 1) == 0 && (reinterpret_cast<size_t>(p.y) & 3) == 0;

  // shared memory: B entries | the input's A quads | raw input slots
  uint4* quads = reinterpret_cast<uint4*>(smem + p.quads_at);
  unsigned short* raw = reinterpret_cast<unsigned short*>(smem + p.raw_at);
  const unsigned raw_shared = (unsigned)__cvta_generic_to_shared(raw);
  const unsigned bar = (unsigned)__cvta_generic_to_shared(smem + p.bar_at);  // BULK only
  // BULK: an output buffer, and y 16-byte aligned (every image then is: M Ho Wo % 8 == 0)
  const bool bulk_out = BULK && p.out_at != 0 && (reinterpret_cast<size_t>(p.y) & 15) == 0;
  unsigned* out_words = reinterpret_cast<unsigned*>(smem + p.out_at);
  unsigned loads = 0;  // BULK: input copies waited for (the mbarrier's phase)

  // The first element of channel c's band (rows from h0) of image b in x, in halves.
  auto band_start = [&](int b, int c, int h0) {
    return (((long long)b * p.C + c) * p.H + h0) * p.W;
  };

  // Item -> (image b, first output row h0).
  auto origin = [&](int item, int& b, int& h0) {
    b = fast_div(item, p.bands_magic, p.bands_shift);
    h0 = (item - b * p.bands) * p.band_rows;
  };

  // Global -> raw slots, 16-byte chunks; one commit group per call.
  auto issue_raw = [&](int item, int chunk) {
    int b, h0;
    origin(item, b, h0);
    const int c0 = chunk * p.chunk_channels, cc = min(p.chunk_channels, p.C - c0);
    const int length = min(RIN, p.H - h0) * p.W;
    const long long first_band = band_start(b, c0, h0), plane = (long long)p.H * p.W;
    if constexpr (BULK) {
      // Rung 12: the same chunks (and slots) as below, but one bulk copy per channel, all
      // issued by one thread and counted in bytes by the mbarrier, which the last arrival
      // (after the copies) lets complete. The chunk past the end of x goes half by half.
      if (tid == 0) {
        Mma::fence_async();  // the rewrite's reads of the slots (generic) before these writes
        for (int cl = 0; cl < cc; ++cl) {
          const long long start = first_band + cl * plane, first = start & ~7LL;
          int n = ((int)(start - first) + length + 7) >> 3;  // 16-byte chunks
          const int slot = cl * p.slot_chunks;
          if (first + 8LL * n > p.x_halves) {
            --n;
            const long long at = first + 8LL * n;
            for (int e = 0; e < 8; ++e)
              raw[(slot + n) * 8 + e] = at + e < p.x_halves ? p.x[at + e] : 0;
          }
          if (n > 0) Mma::load(bar, raw_shared + slot * 16, p.x + first, 16 * n);
        }
        Mma::arrive(bar);
      }
    } else {
      for (int i = tid; i < cc * p.slot_chunks; i += THREADS) {
        const int cl = fast_div(i, p.slot_magic, p.slot_shift), k = i - cl * p.slot_chunks;
        const long long start = first_band + cl * plane, first = start & ~7LL;
        if (k * 8 < (int)(start - first) + length) {
          const long long at = first + (long long)k * 8;
          const int slot = cl * p.slot_chunks + k;
          if (at + 8 <= p.x_halves) {
            cp_async16(raw_shared + slot * 16, p.x + at);
          } else {  // the last chunk of x: never read past its end (see the header)
            for (int e = 0; e < 8; ++e)
              raw[slot * 8 + e] = at + e < p.x_halves ? p.x[at + e] : 0;
          }
        }
      }
      cp_async_commit();
    }
  };

  // Raw slots -> A quads: quad (cl, col, k) holds the pair words F(2k), F(2k + 1), F(2k + 1),
  // F(2k + 2) of its column (BLOCKS: F(2k), F(2k + 2), F(2k + 1), F(2k + 3), every one of the
  // quad_stride quads), where F(r) holds x[c0 + cl][h0 + r][xc] and [xc + 1] with
  // xc = CSTEP col, zero past the image. All threads walk the quads_per_column x cols quads of a
  // channel, THREADS apart in row-major order (the step is added, not divided: no division in
  // the loop); lanes read consecutive halves and write quads quad_stride (odd) apart, so
  // neither side has bank conflicts.
  auto relayout = [&](int item, int chunk) {
    int b, h0;
    origin(item, b, h0);
    const int c0 = chunk * p.chunk_channels, cc = min(p.chunk_channels, p.C - c0);
    const int rows = min(RIN, p.H - h0);
    const long long first_band = band_start(b, c0, h0), plane = (long long)p.H * p.W;
    const int walk_row = fast_div(tid, p.cols_magic, p.cols_shift);
    const int walk_col = tid - walk_row * p.cols;
    // the last holds row RIN (zero) when RIN is odd; BLOCKS windows read every quad of a column
    const int quads_per_column = BLOCKS ? p.quad_stride : (RIN + 1) / 2;
    // Packed with an even W (conv1 and conv2): every row of the band starts at an even half (so
    // does the band, so its skew is even) and a packed column reads input columns 2 col and
    // 2 col + 1, so a pair word is one aligned 32-bit word of the raw slot, word r W / 2 + col,
    // live when its row is and col < W / 2: one load and one row test instead of two loads and
    // four tests (the general path below, for odd W or unpacked columns of any parity).
    const bool words = PACK && (p.W & 1) == 0;  // uniform over the block
    const int half_w = p.W >> 1;
    if (LEAN && words) {
      // Rung 11: a thread walks a segment of one column down, and since quad k + 1 is rows
      // 2k + 2 .. 2k + 5, it keeps two of quad k's words and loads two: two loads and one
      // store per quad, no walk arithmetic. A warp's lanes take consecutive columns (one
      // division per segment), so neither the loads nor the stores conflict.
      const int columns = cc * p.cols, seg_len = (quads_per_column + SEGMENTS - 1) / SEGMENTS;
      for (int u = tid; u < columns * SEGMENTS; u += THREADS) {
        const int seg = u / columns, column = u - seg * columns;
        const int cl = fast_div(column, p.cols_magic, p.cols_shift), col = column - cl * p.cols;
        const int skew = (int)((first_band + cl * plane) & 7);
        const unsigned* src =
            reinterpret_cast<const unsigned*>(raw + cl * p.slot_chunks * 8 + skew) + col;
        uint4* dst = quads + column * p.quad_stride;
        const bool live = col < half_w;
        auto word = [&](int r) { return live && r < rows ? src[r * half_w] : 0u; };
        int k = seg * seg_len;
        const int end = min(k + seg_len, quads_per_column);
        unsigned even = word(2 * k), odd = word(2 * k + 1);
        for (; k < end; ++k) {
          const unsigned even_next = word(2 * k + 2), odd_next = word(2 * k + 3);
          dst[k] = make_uint4(even, even_next, odd, odd_next);
          even = even_next;
          odd = odd_next;
        }
      }
      return;
    }
    for (int cl = 0; cl < cc; ++cl) {
      const int skew = (int)((first_band + cl * plane) & 7);
      const unsigned short* src = raw + cl * p.slot_chunks * 8 + skew;
      uint4* dst = quads + cl * p.cols * p.quad_stride;
      const unsigned* src_words = reinterpret_cast<const unsigned*>(src);  // used when even
      for (int k = walk_row, col = walk_col; k < quads_per_column;) {
        uint4 quad;
        if (words) {
          const unsigned* top = src_words + 2 * k * half_w + col;  // row 2k's word
          const bool live = col < half_w;
          const unsigned m = live && 2 * k + 1 < rows ? top[half_w] : 0u;
          const unsigned below = live && 2 * k + 2 < rows ? top[2 * half_w] : 0u;
          if (BLOCKS)
            quad = make_uint4(live && 2 * k < rows ? top[0] : 0u, below, m,
                              live && 2 * k + 3 < rows ? top[3 * half_w] : 0u);
          else
            quad = make_uint4(live && 2 * k < rows ? top[0] : 0u, m, m, below);
        } else {
          const int xc = CSTEP * col;
          auto pair_word = [&](int r) -> unsigned {
            const bool live = r < rows;
            const unsigned lo = live && xc < p.W ? src[r * p.W + xc] : 0u;
            const unsigned hi = live && xc + 1 < p.W ? src[r * p.W + xc + 1] : 0u;
            return lo | hi << 16;
          };
          const unsigned m = pair_word(2 * k + 1);
          if (BLOCKS)
            quad = make_uint4(pair_word(2 * k), pair_word(2 * k + 2), m, pair_word(2 * k + 3));
          else
            quad = make_uint4(pair_word(2 * k), m, m, pair_word(2 * k + 2));
        }
        dst[col * p.quad_stride + k] = quad;
        k += p.step_rows;
        col += p.step_cols;
        if (col >= p.cols) {
          col -= p.cols;
          ++k;
        }
      }
    }
  };

  // Weights -> B entries for channels [c0, c0 + cc) and every filter (the policy's layout).
  auto stage_weights = [&](int chunk) {
    const int c0 = chunk * p.chunk_channels;
    Mma::template stage_weights<PACK>(p, smem, c0, min(p.chunk_channels, p.C - c0));
  };

  // Accumulate channels [chunk * chunk_channels, + cc) of a warp's job into acc.
  auto accumulate = [&](float (&acc)[T][NT][4], const uint4* lane_quads, int fg, int chunk) {
    if constexpr (Mma::JOB_CHANNELS > 0) {
      // Rung 11: all channels (C == JOB_CHANNELS, one window each: QC == PB == 1) in one
      // group, behind one wait (r11_one_group.cu).
      Mma::template job<T, NT>(acc, lane_quads, smem, fg * NT, NTP, p.cols * p.quad_stride,
                               min(P_BLOCK, p.K + BLOCKS));
      Mma::finish(acc);
      return;
    }
    const int cc = min(p.chunk_channels, p.C - chunk * p.chunk_channels);
    for (int cl = 0; cl < cc; ++cl) {
      for (int qc = 0; qc < QC; ++qc) {
        for (int pb = 0; pb < PB; ++pb) {
          // input rows of the block with nonzero weights: filter rows (BLOCKS: and row K,
          // filter row K - 1 of the row-shifted outputs)
          const int taps = min(P_BLOCK, p.K + BLOCKS - pb * P_BLOCK);
          // this lane's column's quads from the sub-band's top row + 8 pb
          const uint4* src = lane_quads + (cl * p.cols + qc * Q_CHUNK / CSTEP) * p.quad_stride +
                             pb * (P_BLOCK / 2);
          const int entry = ((cl * QC + qc) * PB + pb) * PAIRS * NTP + fg * NT;
          Mma::template window<T, NT>(acc, src, smem, entry, NTP, taps);
        }
      }
    }
    Mma::finish(acc);  // the accumulators are complete (wgmma: its asynchronous groups retired)
  };

  // Only one commit group is ever pending: the load of (item, chunk). The first barrier makes
  // it visible and retires every warp's reads of the previous quads and fragments; after the
  // second the raw slots are free, and the load that follows is issued at once.
  // BULK with an output buffer: the first barrier also completes the jobs' stores into it
  // (each thread fences them for the async proxy first), after which one thread copies the
  // previous image out; it waits until the copy has read the buffer before the second
  // barrier, after which this image's jobs write it again.
  auto store_out = [&](int image) {
    if constexpr (BULK) {
      const long long halves = (long long)p.M * Ho * Wo;
      Mma::store(p.y + image * halves, (unsigned)__cvta_generic_to_shared(out_words),
                 (unsigned)(2 * halves));
    }
  };
  auto stage = [&](int item, int chunk, int next_item, int next_chunk) {
    if constexpr (BULK) {
      Mma::wait(bar, loads++ & 1);  // this item's input has landed
      if (bulk_out) Mma::fence_async();
    } else {
      cp_async_wait_all();
    }
    __syncthreads();
    if (bulk_out && tid == 0 && item != (int)blockIdx.x) store_out(item - gridDim.x);
    relayout(item, chunk);
    if (CHUNKED) stage_weights(chunk);
    if constexpr (BULK)
      if (bulk_out && tid == 0) Mma::wait_read();
    __syncthreads();
    if (next_item < items) issue_raw(next_item, next_chunk);
  };

  if constexpr (BULK) {
    if (tid == 0) Mma::init(bar);
    __syncthreads();  // before any thread waits on it
  }
  if (!CHUNKED) stage_weights(0);  // published by the first item's barriers
  if ((int)blockIdx.x < items) issue_raw(blockIdx.x, 0);

  for (int item = blockIdx.x; item < items; item += gridDim.x) {
    int b, h0;
    origin(item, b, h0);
    const int sub_bands = (min(p.band_rows, Ho - h0) + ROWS - 1) / ROWS;
    const int columns = sub_bands * Wn, groups = (columns + 7) / 8;
    const int supergroups = (groups + JOB_WARPS - 1) / JOB_WARPS;
    const int jobs = supergroups * NFG, rounds = (jobs + SLOTS - 1) / SLOTS;
    if (!CHUNKED) stage(item, 0, item + gridDim.x, 0);
    // job = round * SLOTS + slot = fg * supergroups + sg, kept by subtraction (no division);
    // warp `member` of the job's JOB_WARPS takes column group sg * JOB_WARPS + member
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

      // The packed epilogue when every pair is aligned (Wo even, y 4-byte aligned: conv1 and
      // conv2): lane (g, t) holds filter f = 4 (fg NT + nt) + t at output columns 2 col and
      // 2 col + 1 of rows h + 2i and h + 2i + 1, always in one row (2 col < Wo) and at a
      // 4-byte boundary (every plane, row and 2 col is even). So each store is one 32-bit
      // store whose only test is its row (and, per n8 tile, the filter): per job one base
      // pointer, per tile and row a constant offset in words. The general epilogue below
      // tests both halves, their row and their alignment at every store. BLOCKS: n8 tile nt
      // is filters 4 ((fg NT + nt) / 2) + t at row shift nt % 2, and the tile's rows are
      // 4i + 2r + nt % 2.
      if (PACK && pairs_aligned) {
        const int h = h0 + sb * ROWS, half_wo = Wo >> 1;
        const long long plane = (long long)Ho * half_wo;  // words
        const int at = h * half_wo + col;  // the lane's first word in its plane
        unsigned* y_image = reinterpret_cast<unsigned*>(p.y) + (long long)b * p.M * plane;
        if constexpr (LEAN) {
          store_lean<T, NT>(acc, fg * (NT / 2), t,
                            {y_image, out_words, plane, at, h, Ho, half_wo, p.M, n_live, bulk_out});
        } else {
#pragma unroll
          for (int nt = 0; nt < NT; ++nt) {
            const int f = ((fg * NT + nt) >> BLOCKS) * PACK_FILTERS + t;
            const bool live = n_live && f < p.M;
            // per filter a 64-bit pointer, per store a 32-bit offset in its plane (one add and
            // one wide multiply-add); opaque, or the compiler redoes it all in 64 bits per store
            unsigned* yf = opaque(y_image + (live ? f : 0) * plane);
#pragma unroll
            for (int i = 0; i < T; ++i)
#pragma unroll
              for (int r = 0; r < 2; ++r) {
                const int row = BLOCKS ? 4 * i + 2 * r + nt % 2 : 2 * i + r;
                if (live && h + row < Ho)
                  st_global(yf + (at + row * half_wo),
                            pack_half2(acc[i][nt][2 * r], acc[i][nt][2 * r + 1]));
              }
          }
        }
        continue;
      }

      // Epilogue: an 8 x 8 (pixels x filters) half of a tile goes out as one movmatrix
      // transpose, after which lane (g, t) holds one filter at columns (na, na + 1) = 2t, 2t + 1
      // of the group: one half2 store when the two are adjacent in a row and 4-byte aligned.
      // With at most 4 live filters in the group (conv1: M = 4), lanes t >= 2 hold padding, so
      // the tile's second pixel row (d2, d3) is moved into them first (one shuffle) and one
      // transpose and store serve both rows: lane (g, t) then holds filter g % 4 of row g / 4.
      // PACK needs no transpose: lane (g, t) already holds filter t at output columns 2 col and
      // 2 col + 1 of its own rows (the second is past the image when Wo is odd).
      // Rows and pointers are set per job; per tile only the row offset (2i + r) * Wo
      // changes, and with it neither the pair's contiguity nor (for even r) its alignment.
      bool la, lb, same_row;
      int wa, wb, ha0, hb0;  // columns and rows of tile 0 of the lane's two outputs
      if (PACK) {
        la = n_live;
        lb = la && 2 * col + 1 < Wo;
        same_row = lb;
        wa = 2 * col;
        wb = wa + 1;
        ha0 = hb0 = h0 + sb * ROWS;
      } else {
        const int na = group * 8 + 2 * t, nb = na + 1;
        la = na < columns;
        lb = nb < columns;
        const int sba = la ? fast_div(na, p.wn_magic, p.wn_shift) : 0;
        wa = la ? na - sba * Wo : 0;
        // nb = na + 1 is the next column, or the first of the next sub-band (lb implies la)
        const bool wraps = lb && wa + 1 == Wo;
        const int sbb = lb ? sba + wraps : 0;
        wb = lb && !wraps ? wa + 1 : 0;
        ha0 = h0 + sba * ROWS;
        hb0 = h0 + sbb * ROWS;
        same_row = la && lb && sba == sbb;
      }
      const bool narrow = !PACK && NT == 1 && p.M - fg * 8 <= 4;  // warp-uniform
      const int step = TILE_ROWS * Wo;                     // elements between tiles
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        const int row_shift = narrow ? g / 4 : 0;  // the pixel row a lane stores, per tile
        const int f = PACK ? ((fg * NT + nt) >> BLOCKS) * PACK_FILTERS + t
                           : (fg * NT + nt) * 8 + (narrow ? g % 4 : g);
        const int row_at = BLOCKS ? nt % 2 : 0;  // BLOCKS: the n8 tile's row shift
        const bool f_live = f < p.M;
        unsigned short* plane = p.y + ((long long)b * p.M + (f_live ? f : 0)) * Ho * Wo;
        unsigned short* ya = plane + (ha0 + row_shift) * Wo + wa;
        const int b_at = (hb0 - ha0) * Wo + wb - wa;  // column nb, from ya (two-halves path)
        const bool even = (reinterpret_cast<size_t>(ya) & 3) == 0;  // at tile 0's row
        // One store of lane (g, t)'s pair for pixel row 2i + r of the tile.
        auto store = [&](unsigned pair, int r, int offset, bool aligned) {
          const bool va = f_live && la && ha0 + r < Ho, vb = f_live && lb && hb0 + r < Ho;
          if (same_row && va && aligned) {
            *reinterpret_cast<unsigned*>(ya + offset) = pair;
          } else {
            if (va) ya[offset] = (unsigned short)(pair & 0xffff);
            if (vb) ya[offset + b_at] = (unsigned short)(pair >> 16);
          }
        };
        if (narrow) {
#pragma unroll
          for (int i = 0; i < T; ++i, ya += step) {
            const unsigned first = pack_half2(acc[i][nt][0], acc[i][nt][1]);
            const unsigned second = __shfl_xor_sync(0xffffffffu,
                                                    pack_half2(acc[i][nt][2], acc[i][nt][3]), 2);
            store(transpose_8x8(t < 2 ? first : second), 2 * i + row_shift, 0, even);
          }
        } else {
#pragma unroll
          for (int i = 0; i < T; ++i, ya += step) {
#pragma unroll
            for (int half_row = 0; half_row < 2; ++half_row) {
              const unsigned rounded =
                  pack_half2(acc[i][nt][2 * half_row], acc[i][nt][2 * half_row + 1]);
              const unsigned pair = PACK ? rounded : transpose_8x8(rounded);
              // BLOCKS: the second A row is the next block row, two output rows down
              const int r = (BLOCKS ? 2 : 1) * half_row + row_at;
              store(pair, TILE_ROWS * i + r, r * Wo, (r * Wo) & 1 ? !even : even);
            }
          }
        }
      }
    }
  }
  if constexpr (BULK) {
    if (bulk_out) {  // the last image out: its stores fenced and complete, then the copy
      Mma::fence_async();
      __syncthreads();
      if (tid == 0 && (int)blockIdx.x < items) {
        store_out(blockIdx.x + (items - 1 - blockIdx.x) / gridDim.x * gridDim.x);
        Mma::wait_all();
      }
    }
  }
  cp_async_wait_all();  // nothing may be in flight at exit
}

// The launcher passes the fields of Conv in order, as scalars (r08_tensor_core.py, Plan.args).
#define CONV_TC_KERNEL(NAME, T, NT, CHUNKED, PACK, MMA)                                     \
  extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)                         \
      NAME(const unsigned short* x, const unsigned short* w, unsigned short* y,             \
           long long x_halves, int B, int C, int M, int H, int W, int K, int Ho, int Wo,    \
           int QC, int PB, int Wn, int NFG, int NTP, int band_rows, int RIN, int bands,     \
           int items, int chunk_channels, int chunks, int cols, int quad_stride,            \
           int slot_chunks, int quads_at, int raw_at, unsigned bands_magic,                 \
           int bands_shift, unsigned wn_magic, int wn_shift, unsigned slot_magic,           \
           int slot_shift, unsigned cols_magic, int cols_shift, int step_rows,              \
           int step_cols, int out_at, int bar_at) {                                         \
    const Conv p{x, w, y, x_halves, B, C, M, H, W, K, Ho, Wo, QC, PB, Wn, NFG, NTP,         \
                 band_rows, RIN, bands, items, chunk_channels, chunks, cols, quad_stride,   \
                 slot_chunks, quads_at, raw_at, bands_magic, bands_shift, wn_magic,         \
                 wn_shift, slot_magic, slot_shift, cols_magic, cols_shift, step_rows,       \
                 step_cols, out_at, bar_at};                                                \
    conv_tc<T, NT, CHUNKED, PACK, MMA>(p);                                                  \
  }

#ifndef CONV_TC_LIBRARY  // r09_wgmma.cu includes this file for conv_tc and its own kernels
// (T, NT): T m16 tiles (2T output rows) and NT n8 tiles (8 NT filters) per warp job
CONV_TC_KERNEL(conv_tc_t2_n1, 2, 1, false, false, MmaSync)
CONV_TC_KERNEL(conv_tc_t6_n1, 6, 1, false, false, MmaSync)
CONV_TC_KERNEL(conv_tc_t10_n1, 10, 1, false, false, MmaSync)
CONV_TC_KERNEL(conv_tc_t2_n2, 2, 2, false, false, MmaSync)
CONV_TC_KERNEL(conv_tc_t6_n2, 6, 2, false, false, MmaSync)
CONV_TC_KERNEL(conv_tc_chunked_t2_n1, 2, 1, true, false, MmaSync)
CONV_TC_KERNEL(conv_tc_chunked_t2_n2, 2, 2, true, false, MmaSync)
// packed: 2T rows x 16 columns x 4 filters per job
CONV_TC_KERNEL(conv_tc_pack_t2_n1, 2, 1, false, true, MmaSync)
CONV_TC_KERNEL(conv_tc_pack_t6_n1, 6, 1, false, true, MmaSync)
CONV_TC_KERNEL(conv_tc_pack_t10_n1, 10, 1, false, true, MmaSync)
#endif  // CONV_TC_LIBRARY
