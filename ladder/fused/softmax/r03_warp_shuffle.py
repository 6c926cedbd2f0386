"""Warp shuffles: the reductions move through registers, with one shared exchange.

What changes: the same block of 256 threads per row and the same three passes over the row as
`block-per-row`; only the two reductions:

1. inside each warp, five ``shfl_xor_sync`` steps (distance 16, 8, 4, 2, 1) combine the 32
   lanes' values register to register; with the xor pattern every lane ends with the warp's
   result, with no shared memory and no barrier;
2. lane 0 of each of the 8 warps writes that result to a shared array; one barrier;
3. every warp reads the 8 values (lane ``i`` reads entry ``i``, the other lanes the identity:
   -inf for the max, 0 for the sum) and does the five shuffle steps again, so every thread has
   the block's result without a second barrier.

Two barriers per row in all instead of `block-per-row`'s 19; the max and the sum use separate
shared arrays, so no barrier is needed to protect one from the other. Bytes are `block-per-row`'s:
three reads and one write, ``4 * rows * cols * itemsize``. (Numba's CUDA simulator has no shuffles;
there ``ladder.core.intrinsics.shfl_xor_sync`` stands in for them, slowly.) ptxas (sm_90): 30
registers (float32 and float16); 64 bytes of shared memory; no spills.
Why: `block-per-row`'s tree is 8 levels, each a round trip through shared memory and a barrier for
the whole block, with half of the remaining threads idle at every level; a shuffle step is one
instruction between registers.
Prediction: a modest step over `block-per-row`. The reductions were the smaller part of the time;
the three passes over the row, twice the problem's minimum in bytes, are unchanged and now
dominate.
Measured: on an NVIDIA H200 (results/nvidia-h200.json, ``ladder bench``, 8192 x 8192): 0.227 ms in
float32 (`block-per-row`: 0.237 ms), 0.554 of the 4.269 TB/s copy; 0.210 ms in float16
(`block-per-row`: 0.213 ms). Nsight Compute
(lab/fused/2026-11-22-profiles/nvidia-h200-profile-softmax.json, float32): 225.632 µs against
`block-per-row`'s 237.472, 55.66% of peak DRAM throughput, 59.31% L2 hit rate; shared-memory store
bank conflicts 6530 against `block-per-row`'s 42840.
Verdict: held: 1.04x `block-per-row` in float32, 1.01x in float16. The time is the passes over the
row.

Lab notes: docs/notes/fused.md
"""

import math
from typing import Any

import numpy as np
from numba import cuda, float32, uint32

from ladder.core.dtypes import resolve
from ladder.core.intrinsics import FULL_MASK, shfl_xor_sync
from ladder.fused.problem import SOFTMAX, fused_rung

THREADS = 256  # one block per row
WARPS = THREADS // 32

U_THREADS = np.uint32(THREADS)
U_WARPS = np.uint32(WARPS)
U_LANE_MASK = np.uint32(31)
U_FIVE = np.uint32(5)
U_ZERO = np.uint32(0)
NEG_INF = np.float32(-np.inf)


@cuda.jit
def kernel(x, out):
    warp_maxes = cuda.shared.array(WARPS, float32)
    warp_sums = cuda.shared.array(WARPS, float32)
    cols = uint32(x.shape[1])
    row = uint32(cuda.blockIdx.x)
    tid = uint32(cuda.threadIdx.x)
    lane, warp = tid & U_LANE_MASK, tid >> U_FIVE

    # pass 1: the row max
    m = NEG_INF
    for c in range(tid, cols, U_THREADS):
        m = max(m, float32(x[row, c]))
    for i in range(5):  # xor butterfly: every lane ends with the warp's max
        m = max(m, shfl_xor_sync(FULL_MASK, m, 16 >> i))
    if lane == U_ZERO:
        warp_maxes[warp] = m
    cuda.syncthreads()
    m = warp_maxes[lane] if lane < U_WARPS else NEG_INF
    for i in range(5):
        m = max(m, shfl_xor_sync(FULL_MASK, m, 16 >> i))

    # pass 2: the sum of exp(x - max)
    s = float32(0.0)
    for c in range(tid, cols, U_THREADS):
        s += math.exp(float32(x[row, c]) - m)
    for i in range(5):
        s += shfl_xor_sync(FULL_MASK, s, 16 >> i)
    if lane == U_ZERO:
        warp_sums[warp] = s
    cuda.syncthreads()
    s = warp_sums[lane] if lane < U_WARPS else float32(0.0)
    for i in range(5):
        s += shfl_xor_sync(FULL_MASK, s, 16 >> i)
    inv = float32(1.0) / s

    # pass 3: normalize
    for c in range(tid, cols, U_THREADS):
        out[row, c] = math.exp(float32(x[row, c]) - m) * inv


@fused_rung(
    SOFTMAX,
    name="warp-shuffle",
    parent="block-per-row",
    title="Warp-shuffle reductions, one shared exchange across warps",
    dtypes=("float32", "float16"),
    bytes_moved=lambda size, dtype: float(4 * size[0] * size[1] * resolve(dtype).itemsize),
)
def geometry(x: Any, out: Any) -> tuple:
    """One block of THREADS per row."""
    return kernel, x.shape[0], THREADS
