// Epilogues of the tensor-core conv rungs: FP32 accumulators -> half outputs in global memory
// (or, rung 12, in a shared-memory buffer). acc[i][nt] is m16 tile i, n8 tile nt of a job, in
// mma's D layout: lane (g, t) holds A rows g and g + 8 at n = 2t, 2t + 1.
#ifndef CONV_TC_EPILOGUE_CUH
#define CONV_TC_EPILOGUE_CUH
#include "ladder/core/cuda/convert.cuh"   // pack2
#include "ladder/core/cuda/ldmatrix.cuh"  // movmatrix_trans
#include "ladder/core/cuda/memory.cuh"    // opaque, st_global_b32

#include "layout.cuh"

// The general epilogue (every shape): an 8 x 8 (pixels x filters) half of a tile goes out as
// one movmatrix transpose, after which lane (g, t) holds one filter at columns (na, na + 1) =
// 2t, 2t + 1 of the group: one half2 store when the two are adjacent in a row and 4-byte
// aligned, else two halves. With at most 4 live filters in the group (conv1: M = 4), lanes
// t >= 2 hold padding, so the tile's second pixel row (d2, d3) is moved into them first (one
// shuffle) and one transpose and store serve both rows: lane (g, t) then holds filter g % 4 of
// row g / 4. PACK needs no transpose: lane (g, t) already holds filter t at output columns
// 2 col and 2 col + 1 of its own rows (the second is past the image when Wo is odd). PACK == 2:
// n8 tile nt is filters 4 ((fg NT + nt) / 2) + t at row shift nt % 2, and A row g + 8 is the
// next block row, two output rows down. Rows and pointers are set per job; per tile only the
// row offset changes, and with it neither the pair's contiguity nor (for even r) its alignment.
template <int T, int NT, int PACK>
__device__ __forceinline__ void store_general(const Conv& p, const float (&acc)[T][NT][4],
                                              int b, int h0, int sb, int col, int group,
                                              int fg, bool n_live, int columns, int g, int t) {
  constexpr bool BLOCKS = PACK == 2;
  constexpr int TILE_ROWS = BLOCKS ? 4 : 2, ROWS = TILE_ROWS * T;
  const int Ho = p.Ho, Wo = p.Wo;
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
  const int step = TILE_ROWS * Wo;                             // elements between tiles
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
        const unsigned first = pack2<half>(acc[i][nt][0], acc[i][nt][1]);
        const unsigned second =
            __shfl_xor_sync(0xffffffffu, pack2<half>(acc[i][nt][2], acc[i][nt][3]), 2);
        store(movmatrix_trans(t < 2 ? first : second), 2 * i + row_shift, 0, even);
      }
    } else {
#pragma unroll
      for (int i = 0; i < T; ++i, ya += step) {
#pragma unroll
        for (int half_row = 0; half_row < 2; ++half_row) {
          const unsigned rounded =
              pack2<half>(acc[i][nt][2 * half_row], acc[i][nt][2 * half_row + 1]);
          const unsigned pair = PACK ? rounded : movmatrix_trans(rounded);
          // BLOCKS: the second A row is the next block row, two output rows down
          const int r = (BLOCKS ? 2 : 1) * half_row + row_at;
          store(pair, TILE_ROWS * i + r, r * Wo, (r * Wo) & 1 ? !even : even);
        }
      }
    }
  }
}

// Where a packed job's outputs go when every pair is aligned (Wo even, y 4-byte aligned:
// conv1 and conv2): lane (g, t) holds filter f at output columns 2 col and 2 col + 1, always
// in one row (2 col < Wo) and at a 4-byte boundary (every plane, row and 2 col is even), so a
// store is one 32-bit word whose only test is its row.
struct PackedOut {
  unsigned* y_image;  // the image's output, in words
  long long plane;    // words per output plane
  int at, h, half_wo;  // the lane's first word in its plane, the job's first row, Wo / 2
};
__device__ __forceinline__ PackedOut packed_out(const Conv& p, int b, int h, int col) {
  const int half_wo = p.Wo >> 1;
  const long long plane = (long long)p.Ho * half_wo;
  return {reinterpret_cast<unsigned*>(p.y) + (long long)b * p.M * plane, plane,
          h * half_wo + col, h, half_wo};
}

// The packed epilogue (rungs 8 to 10): per job one base pointer, per n8 tile a 64-bit pointer
// for its filter and per store a 32-bit offset in its plane (one add and one wide
// multiply-add); opaque, or the compiler redoes it all in 64 bits per store. PACK == 2: n8 tile
// nt is filters 4 ((fg NT + nt) / 2) + t at row shift nt % 2, and tile i's rows are
// 4i + 2r + nt % 2.
template <int T, int NT, int PACK>
__device__ __forceinline__ void store_packed(const Conv& p, const float (&acc)[T][NT][4],
                                             const PackedOut& o, int fg, int t, bool n_live) {
  constexpr bool BLOCKS = PACK == 2;
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    const int f = ((fg * NT + nt) >> BLOCKS) * PACK_FILTERS + t;
    const bool live = n_live && f < p.M;
    unsigned* yf = opaque(o.y_image + (live ? f : 0) * o.plane);
#pragma unroll
    for (int i = 0; i < T; ++i)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int row = BLOCKS ? 4 * i + 2 * r + nt % 2 : 2 * i + r;
        if (live && o.h + row < p.Ho)
          st_global_b32(yf + (o.at + row * o.half_wo),
                    pack2<half>(acc[i][nt][2 * r], acc[i][nt][2 * r + 1]));
      }
  }
}

// Rung 11's leaner packed epilogue (rungs 11 and 12, 2 x 2 blocks): lane (g, t) holds filter
// 4 (q0 + q) + t in n8 tiles 2q and 2q + 1 (row shifts 0 and 1). One pointer per filter, at
// the lane's first word, and per output row of the job one offset and one test,
// loop-invariant: a store is then one wide multiply-add for its address, its rounding and
// itself (store_packed recomputes a pointer per n8 tile and an offset and a test per store).
// put(offset, pair) stores a pair: GlobalPut to y, SharedPut to rung 12's buffer.
struct GlobalPut {
  unsigned* at;
  __device__ __forceinline__ void operator()(unsigned offset, unsigned pair) const {
    st_global_b32(at + offset, pair);
  }
};
struct SharedPut {
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
          put(row_at[rr], pack2<half>(acc[i][2 * q + s][2 * r], acc[i][2 * q + s][2 * r + 1]));
      }
}
// buffer: rung 12's image buffer in shared memory (same layout as the image's output, h0 = 0),
// used when to_buffer; else the stores go to y.
template <int T, int NT>
__device__ __forceinline__ void store_lean(const Conv& p, const float (&acc)[T][NT][4],
                                           const PackedOut& o, int fg, int t, bool n_live,
                                           unsigned* buffer = nullptr, bool to_buffer = false) {
  constexpr int JOB_ROWS = 4 * T;
  const int q0 = fg * (NT / 2);
  unsigned row_at[JOB_ROWS];  // unsigned: one IMAD.WIDE.U32 per address, no sign extension
  bool row_live[JOB_ROWS];
#pragma unroll
  for (int rr = 0; rr < JOB_ROWS; ++rr) {
    row_at[rr] = rr * o.half_wo;
    row_live[rr] = o.h + rr < p.Ho;
  }
#pragma unroll
  for (int q = 0; q < NT / 2; ++q) {
    const int f = (q0 + q) * PACK_FILTERS + t;
    if (!n_live || f >= p.M) continue;
    if (to_buffer)
      store_filter<T, NT>(acc, q, row_at, row_live,
                          SharedPut{buffer + ((int)(f * o.plane) + o.at)});
    else
      store_filter<T, NT>(acc, q, row_at, row_live,
                          GlobalPut{opaque(o.y_image + f * o.plane + o.at)});
  }
}

#endif  // CONV_TC_EPILOGUE_CUH
