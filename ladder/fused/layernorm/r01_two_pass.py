"""Two-pass: row statistics in one kernel, normalization in another, the textbook way.

What changes: nothing yet; this is where the ladder starts. y = (x - mean) / sqrt(var + eps) *
gamma + beta along each row, written the way the formula reads:

1. a statistics kernel, one block of 256 threads per row (for a shorter row the next power of
   two, at least a warp). Pass one: each thread sums its columns (strided by 256, so a warp
   reads 32 consecutive floats), the block adds the 256 partial sums in a shared-memory tree
   (128, 64, ..., 1 threads, a barrier after each step): mean = sum / cols. Pass two reads the
   row again for sum((x - mean)^2), reduced the same way: var = that / cols (biased), rstd =
   1 / sqrt(var + eps). Mean and rstd go to scratch arrays in device memory.
2. a normalization kernel, block (32, 8), one element per thread, rows along the grid's x
   dimension: reads x a third time, the row's mean and rstd, the column's gamma and beta, and
   writes y.

The second pass keeps the variance accurate: the one-pass shortcut E[x^2] - E[x]^2 subtracts
two nearly equal numbers when the mean is large against the spread, and its error grows with
(mean / std)^2 (a NumPy experiment in the lab notes shows it). ptxas (sm_90, the same on sm_80):
34 registers and 1 KB of shared memory for the statistics kernel, 18 for the normalization one.
Why: the baseline. Bytes: x read three times and y written once, 16 bytes per element where
the problem needs 8 (plus gamma, beta and 16 bytes of scratch traffic per row): 1.07 GB
instead of 537 MB at 8192 x 8192. Pass two may partly hit L2 (the block read the same 32 KB
row moments before); the count is what the code asks of memory.
Prediction: bound by memory on twice the minimum bytes, so at best about half the speed of a
one-read kernel; the statistics kernel, one row per block, ten barriers per reduction and one
4-byte load per thread in flight, is likely to fall short of the copy bandwidth as well.
Measured: on an NVIDIA H200 (results/nvidia-h200.json, ``ladder bench``, 8192 x 8192,
float32): 0.370 ms, 2.904 TB/s on the bytes it asks for (0.68 of the 4.269 TB/s copy); `welford`
takes 0.138 ms. Nsight Compute (lab/fused/2026-11-22-profiles/nvidia-h200-profile-layernorm.json):
``row_stats_kernel`` 130.208 µs at 43.28% of peak DRAM throughput, ``normalize_kernel``
237.568 µs at 45.32% (70.93% occupancy), 367.776 µs in all.
Verdict: held at its bound (`welford` is 2.68x faster, more than the 2x of the bytes), but the
kernel that falls short is the other one. The statistics kernel, asked for two reads of x,
draws less DRAM in total than the normalization kernel (43.28% of peak for 130.208 µs against
45.32% for 237.568 µs): its second read comes mostly from L2. The normalization kernel moves x
and y once each, 537 MB in 237.568 µs, about 2.26 TB/s: one element per thread, as elementwise
`three-kernels`, which also reaches about half the copy.

Lab notes: docs/notes/fused.md
"""

import math
from typing import Any

import numpy as np
from numba import cuda, float32, uint32

from ladder.fused.problem import LAYERNORM, LAYERNORM_EPS, fused_rung, workspace

DTYPES = ("float32",)
STATS_THREADS = 256  # one block per row (fewer threads for rows shorter than 256)
MIN_STATS_THREADS = 32
BLOCK_X, BLOCK_Y = 32, 8  # normalization kernel: threads along a row, rows per block
MAX_GRID_Y = 65535

U_BLOCK_X, U_BLOCK_Y = np.uint32(BLOCK_X), np.uint32(BLOCK_Y)
U_ZERO, U_ONE = np.uint32(0), np.uint32(1)
EPS = np.float32(LAYERNORM_EPS)


@cuda.jit(device=True, inline="always")
def block_sum(partials, tid, threads, value):
    """The sum of ``value`` over the block's threads (a power of two), by a tree in shared
    memory; every thread gets it."""
    partials[tid] = value
    cuda.syncthreads()
    stride = threads >> U_ONE
    while stride > U_ZERO:
        if tid < stride:
            partials[tid] += partials[tid + stride]
        cuda.syncthreads()
        stride >>= U_ONE
    total = partials[0]
    cuda.syncthreads()  # everyone has read partials[0] before the array is reused
    return total


@cuda.jit
def row_stats_kernel(x, mean_out, rstd_out):
    partials = cuda.shared.array(STATS_THREADS, float32)
    row, tid = uint32(cuda.blockIdx.x), uint32(cuda.threadIdx.x)
    threads = uint32(cuda.blockDim.x)
    cols = uint32(x.shape[1])
    inv_cols = float32(1.0) / float32(cols)
    total = float32(0.0)
    for col in range(tid, cols, threads):  # pass 1: the mean
        total += x[row, col]
    mean = block_sum(partials, tid, threads, total) * inv_cols
    total = float32(0.0)
    for col in range(tid, cols, threads):  # pass 2: squared deviations from it
        d = x[row, col] - mean
        total += d * d
    var = block_sum(partials, tid, threads, total) * inv_cols
    if tid == U_ZERO:
        mean_out[row] = mean
        rstd_out[row] = float32(1.0) / float32(math.sqrt(var + EPS))


@cuda.jit
def normalize_kernel(x, gamma, beta, mean, rstd, out):
    row = uint32(cuda.blockIdx.x) * U_BLOCK_Y + uint32(cuda.threadIdx.y)
    col = uint32(cuda.blockIdx.y) * U_BLOCK_X + uint32(cuda.threadIdx.x)
    if row < uint32(x.shape[0]) and col < uint32(x.shape[1]):
        out[row, col] = (x[row, col] - mean[row]) * rstd[row] * gamma[col] + beta[col]


def _per_row(x: Any) -> Any:
    """An example scratch array (mean or rstd) for ``ladder check``."""
    return np.empty(x.shape[0], np.float32)


# `ladder check` compiles each kernel for example arguments made from the problem's arrays
KERNEL_ARGS = {
    "row_stats_kernel": lambda x, gamma, beta, out: (x, _per_row(x), _per_row(x)),
    "normalize_kernel": lambda x, gamma, beta, out: (
        x, gamma, beta, _per_row(x), _per_row(x), out,
    ),
}  # fmt: skip


def _bytes(size: tuple[int, ...], dtype: str) -> float:
    rows, cols = size
    # x read three times, y written; gamma, beta; mean and rstd written and read (4 per row)
    return float((4 * rows * cols + 2 * cols + 4 * rows) * 4)


@fused_rung(
    LAYERNORM,
    name="two-pass",
    parent=None,
    title="Two-pass statistics kernel, then a normalization kernel",
    dtypes=DTYPES,
    bytes_moved=_bytes,
)
def geometry(x: Any, gamma: Any, beta: Any, out: Any) -> list:
    """The statistics, a block per row (the power of two up to STATS_THREADS that covers it),
    then the normalization, a thread per element; mean and rstd the plan's own buffers."""
    rows, cols = x.shape
    grid = ((rows + BLOCK_Y - 1) // BLOCK_Y, (cols + BLOCK_X - 1) // BLOCK_X)
    if grid[1] > MAX_GRID_Y:
        raise ValueError(f"{cols} columns need {grid[1]} blocks along y; at most {MAX_GRID_Y}")
    mean, rstd = workspace((rows,), "float32", "mean"), workspace((rows,), "float32", "rstd")
    threads = min(STATS_THREADS, max(MIN_STATS_THREADS, 1 << (cols - 1).bit_length()))
    return [
        (row_stats_kernel, rows, threads, (x, mean, rstd)),
        (normalize_kernel, grid, (BLOCK_X, BLOCK_Y), (x, gamma, beta, mean, rstd, out)),
    ]
