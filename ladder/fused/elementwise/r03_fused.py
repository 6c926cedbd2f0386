"""Fused: one kernel reads x once and writes y once, in 16-byte accesses.

What changes: t and u of `three-kernels` only ever live in registers (the multiply and the add fuse
into one FMA), so each element of x is read once and y written once, the problem's minimum: 8 bytes
per element in float32 (537 MB at 8192 x 8192, a third of `three-kernels`'s 1.61 GB), 4 in float16
(268 MB, a fifth of `fp16-casts`'s 1.34 GB). And each thread does more than one element:
- block (64, 4), 256 threads, a tile of 16 rows x 256 columns; each thread owns 4 adjacent
  columns in 4 rows, 4 apart, and issues its 4 row loads before it uses any of them: 64 bytes
  in flight per float32 thread; at 40 registers 6 blocks (1536 threads) fit on an SM, 96 KB;
- with ``cols % 4 == 0`` and aligned arrays the 4 columns are one 16-byte ``ld.global.v4.f32``
  (``st.global.v4.f32`` for y), a warp moving 512 contiguous bytes per instruction; in float16
  one 8-byte ``ld.global.v4.u16``. Otherwise the launcher picks the same kernel with scalar
  accesses, a thread's 4 columns 64 apart (a warp still reads 32 consecutive elements);
- a and b are read once per thread for its 4 rows (as vectors too) and stay in L1 and L2; the
  math is in float32 whatever the storage (``cvt.f32.f16`` in, ``cvt.rn.f16.f32`` out);
- a 1-D grid of tiles (up to 2^31 - 1 blocks), split into a row tile and a column tile with one
  division, so the 65535 limit of gridDim.y applies to neither dimension.
Numba has no vector type: ``load4``, ``load4_1d`` and ``store4`` (``ladder.core.intrinsics``)
emit an LLVM vector access for float32 or float16 arrays, so one source serves both dtypes (the
launcher checks the alignment with ``vector_aligned``). ptxas (sm_90, the same on sm_80): 40
registers for the wide kernel in float32, 37 in float16, 43 for the scalar one; no spills.
Why: a memory-bound kernel wants the fewest bytes and enough of them in flight to cover the
latency of device memory: by Little's law, 4.8 TB/s x about 1 µs is some 5 MB across an H200,
35 KB per SM, where `three-kernels` kept 8 KB per SM in flight.
Prediction: close to the copy bandwidth in float32, about three times `three-kernels` (a third of
the bytes, one launch instead of three); float16 half the bytes, so about half float32's time and
about a fifth of `fp16-casts`'s, perhaps a little further from the copy (8-byte vectors: twice the
instructions per byte and half the bytes in flight per thread).
Measured: on an NVIDIA H200 (results/nvidia-h200.json, ``ladder bench``, 8192 x 8192): 0.130 ms in
float32, 4.122 TB/s, 0.97 of the 4.268 TB/s copy (`three-kernels`: 0.694 ms); 0.069 ms in float16,
3.910 TB/s, 0.92 of the copy (`fp16-casts`: 0.356 ms, `three-kernels`: 0.621 ms). The library,
CuPy's fused ``ElementwiseKernel``: 0.321 ms in float32 and 0.320 ms in float16.
Verdict: held, and beat the 3x over `three-kernels` (5.32x), because `three-kernels` also fell
short of the copy on its own bytes (0.54). float16 takes 0.53 of float32's time, 5.18x faster than
`fp16-casts`, and sits a little further from the copy (0.92), as predicted. CuPy is 2.46x slower in
float32 and 4.66x in float16 with the same minimum bytes in one kernel: it runs at the pace of
CuPy's own copy kernel whatever the element size (``references.py`` counts it).

Lab notes: docs/notes/fused.md
"""

from typing import Any

import numpy as np
from numba import cuda, float32, uint32

from ladder.core.intrinsics import load4, load4_1d, store4, vector_aligned
from ladder.fused.problem import ELEMENTWISE, fused_rung

DTYPES = ("float32", "float16")
BLOCK_X, BLOCK_Y = 64, 4  # threads along a row (one 4-wide vector each), threads down
ROWS_PER_THREAD = 4  # rows per thread, BLOCK_Y apart
VEC = 4  # adjacent columns per thread
TILE_ROWS = BLOCK_Y * ROWS_PER_THREAD  # 16
TILE_COLS = BLOCK_X * VEC  # 256
VALUES = ROWS_PER_THREAD * VEC  # 16 values of x per thread, held in registers
MAX_GRID_X = 2**31 - 1

U_BLOCK_X, U_BLOCK_Y = np.uint32(BLOCK_X), np.uint32(BLOCK_Y)
U_VEC = np.uint32(VEC)
U_TILE_ROWS, U_TILE_COLS = np.uint32(TILE_ROWS), np.uint32(TILE_COLS)
U_ONE = np.uint32(1)


def make_kernel(wide: bool):
    """The fused kernel with 4-wide vector accesses (``wide``) or scalar ones."""

    @cuda.jit
    def kernel(x, a, b, out):
        xs = cuda.local.array(VALUES, float32)
        rows, cols = uint32(x.shape[0]), uint32(x.shape[1])
        tx, ty = uint32(cuda.threadIdx.x), uint32(cuda.threadIdx.y)
        # a 1-D grid of tiles, row tile by row tile: no limit from gridDim.y (65535)
        col_tiles = (cols + U_TILE_COLS - U_ONE) // U_TILE_COLS
        tile = uint32(cuda.blockIdx.x)
        row0 = tile // col_tiles * U_TILE_ROWS + ty
        col0 = tile % col_tiles * U_TILE_COLS
        if wide:
            col = col0 + tx * U_VEC
            if col < cols:  # cols % 4 == 0: the whole vector is inside the row
                a0, a1, a2, a3 = load4_1d(a, col)
                b0, b1, b2, b3 = load4_1d(b, col)
                # every load first, then the math: 4 vectors in flight per thread
                for r in range(ROWS_PER_THREAD):
                    row = row0 + uint32(r) * U_BLOCK_Y
                    if row < rows:
                        v0, v1, v2, v3 = load4(x, row, col)
                        xs[4 * r] = v0
                        xs[4 * r + 1] = v1
                        xs[4 * r + 2] = v2
                        xs[4 * r + 3] = v3
                for r in range(ROWS_PER_THREAD):
                    row = row0 + uint32(r) * U_BLOCK_Y
                    if row < rows:
                        store4(
                            out, row, col,
                            max(float32(a0) * xs[4 * r] + float32(b0), float32(0.0)),
                            max(float32(a1) * xs[4 * r + 1] + float32(b1), float32(0.0)),
                            max(float32(a2) * xs[4 * r + 2] + float32(b2), float32(0.0)),
                            max(float32(a3) * xs[4 * r + 3] + float32(b3), float32(0.0)),
                        )  # fmt: skip
        else:
            for j in range(VEC):
                col = col0 + tx + uint32(j) * U_BLOCK_X  # a warp: 32 consecutive columns
                if col < cols:
                    for r in range(ROWS_PER_THREAD):
                        row = row0 + uint32(r) * U_BLOCK_Y
                        if row < rows:
                            xs[r * VEC + j] = x[row, col]
            for j in range(VEC):
                col = col0 + tx + uint32(j) * U_BLOCK_X
                if col < cols:
                    aj, bj = float32(a[col]), float32(b[col])
                    for r in range(ROWS_PER_THREAD):
                        row = row0 + uint32(r) * U_BLOCK_Y
                        if row < rows:
                            out[row, col] = max(aj * xs[r * VEC + j] + bj, float32(0.0))

    return kernel


wide_kernel = make_kernel(wide=True)
scalar_kernel = make_kernel(wide=False)


def tiles(rows: int, cols: int) -> int:
    """Blocks in the 1-D grid: one per tile of TILE_ROWS x TILE_COLS."""
    count = -(-rows // TILE_ROWS) * -(-cols // TILE_COLS)
    if count > MAX_GRID_X:
        raise ValueError(f"{rows} x {cols} needs {count} blocks; a grid allows {MAX_GRID_X}")
    return count


def _bytes(size: tuple[int, ...], dtype: str) -> float:
    rows, cols = size
    return float((2 * rows * cols + 2 * cols) * np.dtype(dtype).itemsize)  # the minimum


@fused_rung(
    ELEMENTWISE,
    name="fused",
    parent="three-kernels",
    title="One fused kernel, 4-wide vector accesses",
    dtypes=DTYPES,
    bytes_moved=_bytes,
)
def geometry(x: Any, a: Any, b: Any, out: Any) -> tuple:
    """The wide kernel where every array allows 4-wide accesses, else the scalar one; a 1-D grid
    of tiles."""
    rows, cols = x.shape
    kernel = wide_kernel if vector_aligned(x, a, b, out) else scalar_kernel
    return kernel, tiles(rows, cols), (BLOCK_X, BLOCK_Y)
