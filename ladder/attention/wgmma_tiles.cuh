// What the wgmma attention kernels share beyond the primitives of ladder/core/cuda (forward rungs
// 7 to 11, the backward's wgmma rung): the shared-memory layout their descriptors read, and the
// store that keeps code above a wgmma wait. Build for sm_90a.
#ifndef LADDER_ATTENTION_WGMMA_TILES_CUH
#define LADDER_ATTENTION_WGMMA_TILES_CUH
#include "ladder/core/cuda/memory.cuh"  // st_shared_f32

// Byte offset of 16-byte chunk `chunk` of row `row` in a tile of ROWS rows: 64-half column
// blocks of ROWS x 128 bytes, chunks swizzled within a row as the 128-byte swizzle lays them.
template <int ROWS>
__device__ __forceinline__ unsigned tile_offset(int row, int chunk) {
  return (chunk / 8) * (ROWS * 128) + row * 128 + (((chunk & 7) ^ (row & 7)) << 4);
}

// Stores v to shared memory at addr, so that the code v depends on runs before the next
// wgmma wait: ptxas moves a wait up past arithmetic where nothing forces an order, and (as
// observed with CUDA 13.0's ptxas, not a documented rule) not past a shared-memory store.
// Rung 8 stores the row sums, which need every exponential.
__device__ __forceinline__ void store_before_wait(unsigned addr, float v) {
  st_shared_f32(addr, v);
}

#endif  // LADDER_ATTENTION_WGMMA_TILES_CUH
