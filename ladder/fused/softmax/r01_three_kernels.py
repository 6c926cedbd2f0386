"""Rung 1, three kernels: row max, row sum of exponentials, normalize; one thread per row.

Softmax composed from three separate kernels, each the obvious loop, already with the shift
by the row max that keeps ``exp`` from overflowing (inputs of +-1e4 would give ``inf / inf``
without it):

1. ``row_max_kernel``: one thread per row walks its row and writes the max to a scratch array
   ``stats[row, 0]`` (float32, in global memory);
2. ``row_sum_kernel``: one thread per row walks its row again and writes
   ``sum(exp(x - max))`` to ``stats[row, 1]``;
3. ``normalize_kernel``: one block per row, its threads striding across the columns, writes
   ``exp(x - max) / sum``.

Bytes: the row is read three times and written once, plus the scratch: 4 bytes of max written
by kernel 1 and read by kernels 2 and 3, 4 bytes of sum written by kernel 2 and read by
kernel 3: ``4 * rows * cols * itemsize + 20 * rows``. At 8192 x 8192 float32 that is 1074 MB
against the problem's 537 MB minimum (read once, write once). All arithmetic is float32;
float16 inputs are converted on load and the result is rounded to float16 on the store.

What is wrong with it, besides twice the bytes: in kernels 1 and 2 the 32 threads of a warp
read 32 different rows, 32 KB apart at 8192 columns, so every load instruction touches 32
sectors and the L1 cache has to hold them until the next 7 loads use the rest of each
sector; and 8192 rows are only 8192 threads, 64 blocks of 128, on a GPU that holds 270,000
at once (132 SMs x 2048): 68 of the 132 SMs have nothing to do, and the other 64 run 4 warps
each, far too few to hide the memory latency.
The scratch arrays are kept between calls (``_stats``), as a caching allocator would keep
them, so no allocation is timed.

Prediction: the two reduction kernels, latency-bound and half the GPU idle, take most of the
time; the whole rung runs at a small fraction of the copy bandwidth, several times slower than
the one-kernel rungs above it, and counts twice the minimum bytes.

ptxas reports (sm_90, float32; float16 the same or fewer): 32 registers for ``row_max_kernel``
(LLVM unrolls its loop), 29 for ``row_sum_kernel``, 31 for ``normalize_kernel``; no spills.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numba import cuda, float32, uint32

from ladder.core.dtypes import resolve
from ladder.core.rung import rung
from ladder.fused.problem import SOFTMAX, check_arrays

ROW_THREADS = 128  # kernels 1 and 2: threads per block, one row each
NORM_THREADS = 256  # kernel 3: threads per block, one block per row

U_ROW_THREADS = np.uint32(ROW_THREADS)
U_NORM_THREADS = np.uint32(NORM_THREADS)
U_ZERO = np.uint32(0)
NEG_INF = np.float32(-np.inf)


@cuda.jit
def row_max_kernel(x, stats):
    rows, cols = uint32(x.shape[0]), uint32(x.shape[1])
    row = uint32(cuda.blockIdx.x) * U_ROW_THREADS + uint32(cuda.threadIdx.x)
    if row < rows:
        m = NEG_INF
        for c in range(U_ZERO, cols):
            m = max(m, float32(x[row, c]))
        stats[row, 0] = m


@cuda.jit
def row_sum_kernel(x, stats):
    rows, cols = uint32(x.shape[0]), uint32(x.shape[1])
    row = uint32(cuda.blockIdx.x) * U_ROW_THREADS + uint32(cuda.threadIdx.x)
    if row < rows:
        m = float32(stats[row, 0])
        s = float32(0.0)
        for c in range(U_ZERO, cols):
            s += math.exp(float32(x[row, c]) - m)
        stats[row, 1] = s


@cuda.jit
def normalize_kernel(x, stats, out):
    cols = uint32(x.shape[1])
    row = uint32(cuda.blockIdx.x)
    m = float32(stats[row, 0])
    s = float32(stats[row, 1])
    for c in range(uint32(cuda.threadIdx.x), cols, U_NORM_THREADS):
        out[row, c] = math.exp(float32(x[row, c]) - m) / s


def _example_stats(x: Any) -> Any:
    """An example scratch array (rows x 2, float32) for ``ladder check``."""
    return np.empty((x.shape[0], 2), np.float32)


# `ladder check` compiles each kernel for example arguments made from the problem's arrays
KERNEL_ARGS = {
    "row_max_kernel": lambda x, out: (x, _example_stats(x)),
    "row_sum_kernel": lambda x, out: (x, _example_stats(x)),
    "normalize_kernel": lambda x, out: (x, _example_stats(x), out),
}

_stats_cache: dict[int, Any] = {}


def _stats(rows: int) -> Any:
    """The float32 scratch (rows x 2: max, sum), kept for the next call with as many rows."""
    stats = _stats_cache.get(rows)
    if stats is None:
        _stats_cache.clear()
        stats = _stats_cache[rows] = cuda.device_array((rows, 2), dtype=np.float32)
    return stats


def _bytes_moved(size: tuple[int, ...], dtype: str) -> float:
    rows, cols = size
    # three reads of the row and one write, plus 4-byte max and sum: 2 writes and 3 reads
    return float(4 * rows * cols * resolve(dtype).itemsize + 5 * 4 * rows)


@rung(
    name="three-kernels",
    title="Three kernels: max, sum, normalize (one thread per row)",
    dtypes=("float32", "float16"),
    bytes_moved=_bytes_moved,
)
def launch(x: Any, out: Any = None) -> Any:
    (x,), out, _ = check_arrays(SOFTMAX, (x,), out, ("float32", "float16"))
    rows, cols = x.shape
    if rows == 0 or cols == 0:
        return out
    stats = _stats(rows)
    blocks = (rows + ROW_THREADS - 1) // ROW_THREADS
    row_max_kernel[blocks, ROW_THREADS](x, stats)
    row_sum_kernel[blocks, ROW_THREADS](x, stats)
    normalize_kernel[rows, NORM_THREADS](x, stats, out)
    return out
