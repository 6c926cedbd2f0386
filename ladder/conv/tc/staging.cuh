// Staging an item's input for the tensor-core conv rungs: copy its rows into raw slots in
// shared memory (cp.async), then rewrite them as the A quads the main loop loads.
//
// Shared memory of a block: B entries (the weights) | the input's A quads | raw input slots.
// Each channel's band (min(RIN, H - h0) rows x W, contiguous in NCHW) is copied in 16-byte
// chunks from the aligned chunk at or below its first element into its raw slot; the warps
// then rewrite it as quads, zeros past the image.
#ifndef CONV_TC_STAGING_CUH
#define CONV_TC_STAGING_CUH
#include "ladder/core/cuda/cp_async.cuh"  // cp_async16, cp_async_commit

#include "layout.cuh"

// Global -> raw slots, 16-byte cp.async chunks; one commit group per call. The one chunk that
// would reach past the end of x (when B C H W is not a multiple of 8) is copied half by half:
// cp.async's src-size would zero-fill its tail, but the 16-byte access still crosses the end of
// the allocation, and compute-sanitizer's memcheck reports it.
__device__ __forceinline__ void copy_band_async(const Conv& p, unsigned short* raw,
                                                unsigned raw_shared, int item, int chunk,
                                                int tid) {
  int b, h0;
  origin(p, item, b, h0);
  const int c0 = chunk * p.chunk_channels, cc = min(p.chunk_channels, p.C - c0);
  const int length = min(p.RIN, p.H - h0) * p.W;
  const long long first_band = band_start(p, b, c0, h0), plane = (long long)p.H * p.W;
  for (int i = tid; i < cc * p.slot_chunks; i += THREADS) {
    const int cl = fast_div(i, p.slot_magic, p.slot_shift), k = i - cl * p.slot_chunks;
    const long long start = first_band + cl * plane, first = start & ~7LL;
    if (k * 8 < (int)(start - first) + length) {
      const long long at = first + (long long)k * 8;
      const int slot = cl * p.slot_chunks + k;
      if (at + 8 <= p.x_halves) {
        cp_async16(raw_shared + slot * 16, p.x + at);
      } else {  // the last chunk of x: never read past its end
        for (int e = 0; e < 8; ++e) raw[slot * 8 + e] = at + e < p.x_halves ? p.x[at + e] : 0;
      }
    }
  }
  cp_async_commit();
}

// Raw slots -> A quads: quad (cl, col, k) holds the pair words F(2k), F(2k + 1), F(2k + 1),
// F(2k + 2) of its column (PACK == 2, 2 x 2 output blocks: F(2k), F(2k + 2), F(2k + 1),
// F(2k + 3), every one of the quad_stride quads), where F(r) holds x[c0 + cl][h0 + r][xc] and
// [xc + 1] with xc = CSTEP col (PACK: only even input columns are staged), zero past the
// image. All threads walk the quads_per_column x cols quads of a channel, THREADS apart in
// row-major order (the step is added, not divided: no division in the loop); lanes read
// consecutive halves and write quads quad_stride (odd) apart, so neither side has bank
// conflicts.
template <int PACK>
__device__ __forceinline__ void rewrite_quads(const Conv& p, uint4* quads,
                                              const unsigned short* raw, int item, int chunk,
                                              int tid) {
  constexpr bool BLOCKS = PACK == 2;
  constexpr int CSTEP = PACK ? 2 : 1;  // input columns per quad column
  int b, h0;
  origin(p, item, b, h0);
  const int c0 = chunk * p.chunk_channels, cc = min(p.chunk_channels, p.C - c0);
  const int rows = min(p.RIN, p.H - h0);
  const long long first_band = band_start(p, b, c0, h0), plane = (long long)p.H * p.W;
  const int walk_row = fast_div(tid, p.cols_magic, p.cols_shift);
  const int walk_col = tid - walk_row * p.cols;
  // the last holds row RIN (zero) when RIN is odd; BLOCKS windows read every quad of a column
  const int quads_per_column = BLOCKS ? p.quad_stride : (p.RIN + 1) / 2;
  // Packed with an even W (conv1 and conv2): every row of the band starts at an even half (so
  // does the band, so its skew is even) and a packed column reads input columns 2 col and
  // 2 col + 1, so a pair word is one aligned 32-bit word of the raw slot, word r W / 2 + col,
  // live when its row is and col < W / 2: one load and one row test instead of two loads and
  // four tests (the general path below, for odd W or unpacked columns of any parity).
  const bool words = PACK && (p.W & 1) == 0;  // uniform over the block
  const int half_w = p.W >> 1;
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
}

// Rung 11's rewrite (rungs 11 and 12), for 2 x 2 output blocks (PACK == 2) and an even W: a
// thread walks a segment of one quad column down, and since quad k + 1 is rows 2k + 2 .. 2k + 5,
// it keeps two of quad k's words and loads two: two loads and one store per quad, no walk
// arithmetic. A warp's lanes take consecutive columns (one division per segment), so neither
// the loads nor the stores conflict.
constexpr int SEGMENTS = CONV_SEGMENTS;  // segments per column
__device__ __forceinline__ void rewrite_quads_sliding(const Conv& p, uint4* quads,
                                                      const unsigned short* raw, int item,
                                                      int chunk, int tid) {
  int b, h0;
  origin(p, item, b, h0);
  const int c0 = chunk * p.chunk_channels, cc = min(p.chunk_channels, p.C - c0);
  const int rows = min(p.RIN, p.H - h0);
  const long long first_band = band_start(p, b, c0, h0), plane = (long long)p.H * p.W;
  const int quads_per_column = p.quad_stride, half_w = p.W >> 1;
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
}

#endif  // CONV_TC_STAGING_CUH
