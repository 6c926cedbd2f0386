"""Three kernels: row max, row sum of exponentials, normalize; one thread per row.

What changes: nothing yet; this is where the ladder starts. Softmax from three kernels, each
the obvious loop, already with the shift by the row max that keeps ``exp`` from overflowing
(inputs of +-1e4 would give ``inf / inf`` without it):

1. ``row_max_kernel``: one thread per row walks its row and writes the max to a float32 scratch
   array in global memory, ``stats[row, 0]``;
2. ``row_sum_kernel``: one thread per row walks it again, writes ``sum(exp(x - max))`` to
   ``stats[row, 1]``;
3. ``normalize_kernel``: one block per row, its threads striding across the columns, writes
   ``exp(x - max) / sum``.

Bytes: three reads of the row and one write, plus the scratch (4 bytes of max written once and
read twice, 4 of sum written once and read once): ``4 * rows * cols * itemsize + 20 * rows``,
1074 MB at 8192 x 8192 float32 against the problem's 537 MB minimum. All arithmetic is float32;
float16 is converted on load and rounded on the store. The scratch belongs to the launcher's
plan (one per shape), kept as a caching allocator would, so no allocation is timed. ptxas (sm_90,
float32): 32, 29 and 31 registers for the three kernels (LLVM unrolls the max loop); no spills.
Why: the baseline, and what is wrong with it besides twice the bytes: in kernels 1 and 2 a
warp's 32 threads read 32 rows 32 KB apart, so each load touches 32 sectors and L1 must hold
them until the next 7 loads use the rest; and 8192 rows are 8192 threads, 64 blocks of 128, on
a GPU that holds 270,000 (132 SMs x 2048): 68 SMs idle, the other 64 with 4 warps each.
Prediction: the two reduction kernels, latency-bound with half the GPU idle, take most of the
time; the rung runs at a small fraction of the copy bandwidth, several times slower than the
one-kernel rungs above it.
Measured: on an NVIDIA H200 (results/nvidia-h200.json, ``ladder bench``, 8192 x 8192): 1.568 ms
in float32 (0.685 TB/s on its bytes, 0.16 of the 4.269 TB/s copy), 1.450 ms in float16. Nsight
Compute (lab/fused/2026-11-22-profiles/nvidia-h200-profile-softmax.json, float32):
``row_max_kernel`` 585.056 µs and ``row_sum_kernel`` 805.44 µs of 1574.72 µs, both at 6.23%
occupancy and under 10% of peak DRAM throughput; ``normalize_kernel`` 184.224 µs at 91.92% occupancy
and 58.34% of DRAM.
Verdict: held: the two reductions are 88% of the time, bound by latency (4 warps on a busy SM),
not by bytes; `block-per-row`, one kernel with a block per row, is 6.63x faster.

Lab notes: docs/notes/fused.md
"""

import math
from typing import Any

import numpy as np
from numba import cuda, float32, uint32

from ladder.core.dtypes import resolve
from ladder.fused.problem import SOFTMAX, fused_rung, workspace

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


def _bytes_moved(size: tuple[int, ...], dtype: str) -> float:
    rows, cols = size
    # three reads of the row and one write, plus 4-byte max and sum: 2 writes and 3 reads
    return float(4 * rows * cols * resolve(dtype).itemsize + 5 * 4 * rows)


@fused_rung(
    SOFTMAX,
    name="three-kernels",
    parent=None,
    title="Three kernels: max, sum, normalize (one thread per row)",
    dtypes=("float32", "float16"),
    bytes_moved=_bytes_moved,
)
def geometry(x: Any, out: Any) -> list:
    """Max, sum, normalize in order, the first two a thread per row, the third a block per row;
    the max and sum of each row in the plan's own scratch (rows x 2)."""
    rows = x.shape[0]
    stats = workspace((rows, 2), "float32", "stats")
    blocks = (rows + ROW_THREADS - 1) // ROW_THREADS
    return [
        (row_max_kernel, blocks, ROW_THREADS, (x, stats)),
        (row_sum_kernel, blocks, ROW_THREADS, (x, stats)),
        (normalize_kernel, rows, NORM_THREADS, (x, stats, out)),
    ]
