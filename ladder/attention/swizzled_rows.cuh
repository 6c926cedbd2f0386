// What the mma.sync attention kernels share beyond the primitives of ladder/core/cuda (rung 5
// and 6's forward, the backward ladder's tensor-core rung; the wgmma rungs take neg_inf): the
// XOR swizzle of their shared rows, and minus infinity.
#ifndef LADDER_ATTENTION_SWIZZLED_ROWS_CUH
#define LADDER_ATTENTION_SWIZZLED_ROWS_CUH

__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000); }

// Byte offset of 16-byte chunk `chunk` of row `row` in a swizzled tile of ROW_BYTES-byte rows.
template <int ROW_BYTES>
__device__ __forceinline__ unsigned swizzle(int row, int chunk) {
  return row * ROW_BYTES + ((chunk ^ (row & 7)) << 4);
}

#endif  // LADDER_ATTENTION_SWIZZLED_ROWS_CUH
