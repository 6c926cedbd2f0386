// Rung 10 (conv): rung 9 with row shifts packed too, so that a pixel is a 2 x 2 block of
// outputs and conv2's 16 filters fill wgmma's N = 64 (sm_90a only).
//
// Everything is rung 9's (r09_wgmma.cu, which includes rung 8's conv_tc) with PACK == 2, which
// conv_tc reads as BLOCKS:
// - An n8 tile holds 4 filters x 2 column shifts at one row shift: B'[(p, q)][(f, s)] =
//   w[f][p - s_r][q - s], s_r = the tile's row shift (n8 tiles 2 f4 and 2 f4 + 1 are filters
//   4 f4 .. + 3 at row shifts 0 and 1). 16 filters are 8 n8 tiles, N = 64.
// - A row g of tile i is block row 2i (output rows 4i and 4i + 1, one per row shift), A row
//   g + 8 block row 2i + 1 (4i + 2, 4i + 3). A k16 step j reads input rows 2j and 2j + 1 below
//   each block row: (4i + 2j, 4i + 2j + 2) in its first k8 half and (4i + 2j + 1, 4i + 2j + 3)
//   in its second, so the A registers of (i, j) are the quad (F(2k), F(2k + 2), F(2k + 1),
//   F(2k + 3)) with k = 2i + j: the diagonal now advances two quads per tile, and a window of
//   T tiles loads 2T + 2 quads for its 4T multiplies.
// - A window covers 8 input rows below each block row, filter rows 0 .. 7 at row shift 0 and
//   -1 .. 6 at shift 1: one window per channel and column chunk when K <= 7 (conv2), and
//   ceil((K + 1) / 8) windows per filter in general (as QC for the column shift).
// Per multiply, twice rung 9's outputs for the same A registers: half the wgmma instructions
// per output, and at the same T half the quad loads (r10_row_shifts.py has what it measured).
#define CONV_WG_LIBRARY
#include "r09_wgmma.cu"

template <>
__device__ __forceinline__ void wgmma_rs<8>(float (&d)[8][4], uint4 a, unsigned long long b) {
  asm volatile(
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
      "{%32, %33, %34, %35}, %36, 1, 1, 1, 0;\n"
      : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]),
        "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]),
        "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]),
        "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]),
        "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]),
        "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]),
        "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]),
        "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3])
      : "r"(a.x), "r"(a.y), "r"(a.z), "r"(a.w), "l"(b));
}

// Rung 9's policy with the BLOCKS diagonal: the (tile i, step j) multiply reads quad 2i + j, so
// a window of T tiles loads 2T + 2 quads (the first 2T - 1 without a test) for 4T multiplies.
struct WgmmaBlocks : Wgmma {
  template <int T, int NT>
  static __device__ __forceinline__ void window(float (&acc)[T][NT][4], const uint4* src,
                                                const unsigned char* smem, int entry,
                                                int frag_stride, int taps) {
    Wgmma::window<T, NT, 2>(acc, src, smem, entry, frag_stride, taps);
  }
};

#ifndef CONV_WGB_LIBRARY  // r11_one_group.cu includes this file for WgmmaBlocks
// 2 x 2 blocks (4 filters x 2 column shifts x 2 row shifts per pair of n8 tiles): 4T rows x
// 64 output columns x 2 NT filters per warpgroup job.
CONV_TC_KERNEL(conv_wgb_t1_n2, 1, 2, false, 2, WgmmaBlocks)
CONV_TC_KERNEL(conv_wgb_t2_n2, 2, 2, false, 2, WgmmaBlocks)
CONV_TC_KERNEL(conv_wgb_t1_n4, 1, 4, false, 2, WgmmaBlocks)
CONV_TC_KERNEL(conv_wgb_t2_n4, 2, 4, false, 2, WgmmaBlocks)
CONV_TC_KERNEL(conv_wgb_t1_n8, 1, 8, false, 2, WgmmaBlocks)
CONV_TC_KERNEL(conv_wgb_t2_n8, 2, 8, false, 2, WgmmaBlocks)
CONV_TC_KERNEL(conv_wgb_chunked_t1_n8, 1, 8, true, 2, WgmmaBlocks)
#endif  // CONV_WGB_LIBRARY
