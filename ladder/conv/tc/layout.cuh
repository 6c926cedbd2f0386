// What every tensor-core conv rung shares about the data: the constants the launcher and the
// kernels agree on, the launch parameters, and where an item's input and weights come from.
//
// The GEMM: y[b][f][h][w] = sum over k = (c, p, q) of X[(b, h, w)][k] W[k][f]. A k16 step is
// two filter rows (p, p + 1) of one channel, 8 filter columns each (q = 8 qc + 0..7, zero
// weights past K). Lane (g, t) of an A fragment holds two neighbouring k of one pixel, which
// are two neighbouring input pixels of one row: the 32-bit "pair word" F(r) of a column holds
// input columns col, col + 1 of input row r. The words of one A fragment are a "quad" of pair
// words, staged in shared memory so that a lane loads a fragment with one 16-byte load (see
// docs/notes/conv.md and each rung's docstring for the layouts).
#ifndef CONV_TC_LAYOUT_CUH
#define CONV_TC_LAYOUT_CUH
#include "ladder/core/cuda/fastdiv.cuh"  // fast_div

// One source for Python and C++: ladder/conv/tc/plan.py passes these to NVRTC (-D).
constexpr int NWARPS = CONV_NWARPS;            // warps per block
constexpr int THREADS = 32 * NWARPS;
constexpr int P_BLOCK = CONV_P_BLOCK;          // filter rows per window: PAIRS k16 steps
constexpr int PAIRS = P_BLOCK / 2;
constexpr int Q_CHUNK = CONV_Q_CHUNK;          // filter columns per k8 half of a k16 step
constexpr int FRAG_BYTES = CONV_FRAG_BYTES;    // one k16 x n8 block of B: 32 lanes x (b0, b1)
constexpr int PACK_FILTERS = CONV_PACK_FILTERS;  // filters of a packed n8 tile (x 2 shifts)
constexpr int MIN_BLOCKS = CONV_MIN_BLOCKS;    // blocks per SM the register budget is fitted for
static_assert(FRAG_BYTES == 32 * sizeof(uint2), "a B fragment is one uint2 per lane");

// The launch parameters: the pointers, then the plan's fields (tc/plan.py, PARAMS), which the
// launcher computes so that they stay in the constant bank instead of taking registers.
struct Conv {
  const unsigned short* x;  // half bits; 16-byte aligned (the launcher copies it otherwise)
  const unsigned short* w;
  unsigned short* y;
  CONV_FIELDS
};

// The kernel's parameter list and the Conv it builds, from the same generated lists.
#define CONV_KERNEL(NAME)                                                              \
  extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)                    \
      NAME(const unsigned short* x, const unsigned short* w, unsigned short* y,        \
           CONV_PARAMETERS)

#define CONV_PARAMS_STRUCT(p) const Conv p{x, w, y, CONV_ARGUMENTS}

// The first element of channel c's band (rows from h0) of image b in x, in halves.
__device__ __forceinline__ long long band_start(const Conv& p, int b, int c, int h0) {
  return (((long long)b * p.C + c) * p.H + h0) * p.W;
}

// Item -> (image b, first output row h0).
__device__ __forceinline__ void origin(const Conv& p, int item, int& b, int& h0) {
  b = fast_div(item, p.bands_magic, p.bands_shift);
  h0 = (item - b * p.bands) * p.band_rows;
}

// One entry of the weights in shared memory: the k16 x n8 block of B for channel cl of the
// chunk, filter-column chunk qc, filter-row block pb, row pair `pair` and n8 tile `tile`
// (entry ((((cl * QC + qc) * PB + pb) * PAIRS + pair) * NTP + tile), 256 bytes).
// tap(n, k) is its element B[k][n]: k = 8 kh + kq is filter row 8 pb + 2 pair + kh, filter
// column 8 qc + kq; n is filter 8 tile + n, or (PACK) filter 4 tile + n / 2 at shift n % 2,
// whose weight sits one column to the right: w[f][p][q - shift]. PACK == 2 (rung 10 on) also
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

#endif  // CONV_TC_LAYOUT_CUH
