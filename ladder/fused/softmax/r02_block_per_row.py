"""One block per row: shared-memory tree reductions for the max and the sum, one kernel.

What changes: `three-kernels` gave each row to one thread and launched three kernels, the row
statistics going through global memory. Here a block of 256 threads owns a row: thread ``t`` reads
columns ``t, t + 256, ...``, so each warp's load reads 128 consecutive bytes (float32), and the max
and the sum stay on chip:

1. each thread takes the max of its columns; the 256 partial maxima go into a shared array and
   a tree halves them (128, 64, ..., 1 active threads, a barrier after every level: 9 barriers);
2. each thread sums ``exp(x - max)`` over its columns, and the same tree adds the partials;
3. each thread writes ``exp(x - max) * (1 / sum)`` (one division per row, a multiply each).

Bytes: still three reads and one write, ``4 * rows * cols * itemsize``, 1074 MB at 8192 x 8192
float32, twice the minimum; `three-kernels`'s scratch is gone. The count is what the kernel asks of
memory, not what reaches DRAM: a row is 32 KB, at 32 registers 8 blocks fit on an SM, so about
34 MB of rows are in progress across 132 SMs, and a re-read soon after the first read can be
served by L2. ptxas (sm_90): 32 registers (float32), 26 (float16); 1 KB of shared memory.
Why: coalesced loads, and 8192 blocks that fill every SM many times over, where `three-kernels`'s
profile showed 6% occupancy and half the SMs idle.
Prediction: several times faster than `three-kernels`, from coalescing and a full GPU alone.
Against the copy, well short: four passes where two would do, each a strided loop of 4-byte loads
with at most 4 in flight per thread (LLVM unrolls it by 4), and 19 barriers per row: half the copy
bandwidth if every pass went to DRAM, somewhat more where L2 catches re-reads.
Measured: on an NVIDIA H200 (results/nvidia-h200.json, ``ladder bench``, 8192 x 8192): 0.237 ms
in float32, 2.270 TB/s on the minimum bytes (0.53 of the 4.269 TB/s copy), against 1.568 ms for
`three-kernels`; 0.213 ms in float16 (`three-kernels`: 1.450 ms). Nsight Compute
(lab/fused/2026-11-22-profiles/nvidia-h200-profile-softmax.json, float32): 237.472 µs, 53.75% of
peak DRAM throughput, 58.17% L2 hit rate, 90.6% occupancy.
Verdict: held on both counts: 6.63x `three-kernels` in float32 (6.81x in float16), and 0.53 of the
copy, "somewhat more" than half, because L2 serves re-reads: the bytes the kernel asks for flow at
4.540 TB/s, more than the copy's 4.269, which only L2 hits allow.

Lab notes: docs/notes/fused.md
"""

import math
from typing import Any

import numpy as np
from numba import cuda, float32, uint32

from ladder.core.dtypes import resolve
from ladder.fused.problem import SOFTMAX, fused_rung

THREADS = 256  # one block per row (a power of two: the tree halves it)

U_THREADS = np.uint32(THREADS)
U_HALF = np.uint32(THREADS // 2)
U_ZERO, U_ONE = np.uint32(0), np.uint32(1)
NEG_INF = np.float32(-np.inf)


@cuda.jit
def kernel(x, out):
    partial = cuda.shared.array(THREADS, float32)
    cols = uint32(x.shape[1])
    row = uint32(cuda.blockIdx.x)
    tid = uint32(cuda.threadIdx.x)

    # pass 1: the row max
    m = NEG_INF
    for c in range(tid, cols, U_THREADS):
        m = max(m, float32(x[row, c]))
    partial[tid] = m
    cuda.syncthreads()
    stride = U_HALF
    while stride > U_ZERO:
        if tid < stride:
            partial[tid] = max(partial[tid], partial[tid + stride])
        cuda.syncthreads()
        stride >>= U_ONE
    m = partial[0]
    cuda.syncthreads()  # every thread has read the max before the sums overwrite it

    # pass 2: the sum of exp(x - max)
    s = float32(0.0)
    for c in range(tid, cols, U_THREADS):
        s += math.exp(float32(x[row, c]) - m)
    partial[tid] = s
    cuda.syncthreads()
    stride = U_HALF
    while stride > U_ZERO:
        if tid < stride:
            partial[tid] += partial[tid + stride]
        cuda.syncthreads()
        stride >>= U_ONE
    inv = float32(1.0) / partial[0]

    # pass 3: normalize
    for c in range(tid, cols, U_THREADS):
        out[row, c] = math.exp(float32(x[row, c]) - m) * inv


@fused_rung(
    SOFTMAX,
    name="block-per-row",
    parent="three-kernels",
    title="One kernel, a block per row, shared-memory tree reductions",
    dtypes=("float32", "float16"),
    bytes_moved=lambda size, dtype: float(4 * size[0] * size[1] * resolve(dtype).itemsize),
)
def geometry(x: Any, out: Any) -> tuple:
    """One block of THREADS per row."""
    return kernel, x.shape[0], THREADS
