"""Online softmax: the max and the sum of exponentials in one pass over the row.

What changes: `warp-shuffle`'s first two passes become one. Keep a running max ``m`` and a running
sum ``s`` of ``exp(x - m)``; when an element ``v`` raises the max to ``m' = max(m, v)``, every term
already in ``s`` was shifted by the old max, so rescale it (Milakov and Gimelshein, "Online
normalizer calculation for softmax", 2018):

    s' = s * exp(m - m') + exp(v - m')

Two pairs combine the same way, ``m = max(m1, m2)``, ``s = s1 * exp(m1 - m) + s2 * exp(m2 - m)``,
so the block reduces pairs with `warp-shuffle`'s scheme: five xor shuffles in each warp (two values
per step), one shared exchange of the 8 warps' pairs, five more shuffles. A thread with no elements
holds ``(-inf, 0)``; combining two such pairs would compute ``exp(-inf + inf)``, NaN, so every
update is skipped while the new max is still -inf. The second and last pass writes ``exp(x - m) *
(1 / s)``. Same 256 threads per row and scalar loads as `warp-shuffle`. ptxas (sm_90): 27 registers
(float32 and float16); 64 bytes of shared memory; no spills.
Why: the sum needs the max only as a shift, and a shift can be corrected later, so one read of
the row goes: ``3 * rows * cols * itemsize``, 805 MB at 8192 x 8192 float32, 1.5 times the
minimum instead of 2. The price, a second ``exp`` per element in the first pass (exactly 1
unless the max moved), is arithmetic that a memory-bound kernel has to spare.
Prediction: about 4/3 of `warp-shuffle`'s speed if both run at the same achieved bandwidth; less
where `warp-shuffle`'s second read came from L2 rather than DRAM.
Measured: on an NVIDIA H200 (results/nvidia-h200.json, ``ladder bench``, 8192 x 8192): 0.250 ms in
float32 against `warp-shuffle`'s 0.227 ms, 0.232 ms in float16 against 0.210 ms. Nsight Compute
(lab/fused/2026-11-22-profiles/nvidia-h200-profile-softmax.json, float32): 250.496 µs against
`warp-shuffle`'s 225.632, both at 55% of peak DRAM throughput (55.27% and 55.66%), L2 hit rate
44.19% against 59.31%.
Verdict: missed: 0.91x `warp-shuffle`'s speed in float32 (0.90x in float16), slower instead of 4/3
faster. The count was of the bytes asked; the time follows the bytes that reach DRAM. Both kernels
draw DRAM at the same rate, and DRAM % x duration puts `online`'s traffic at 1.10x
`warp-shuffle`'s: taking `rows-in-registers` (one read, one write) as the minimum, `warp-shuffle`
reaches DRAM with 1.18x it and `online` with 1.30x. `warp-shuffle`'s two re-reads mostly hit L2, so
dropping one saved little DRAM, and `online`'s one re-read misses L2 more often. Why it misses more
is not yet measured (a longer first pass, two dependent ``exp`` per element, keeping a row longer
between its two reads is a candidate, untested); the float16 rows were not profiled.

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
    warp_m = cuda.shared.array(WARPS, float32)
    warp_s = cuda.shared.array(WARPS, float32)
    cols = uint32(x.shape[1])
    row = uint32(cuda.blockIdx.x)
    tid = uint32(cuda.threadIdx.x)
    lane, warp = tid & U_LANE_MASK, tid >> U_FIVE

    # pass 1: running max and rescaled running sum, one read of the row
    m = NEG_INF
    s = float32(0.0)
    for c in range(tid, cols, U_THREADS):
        v = float32(x[row, c])
        m_new = max(m, v)
        if m_new > NEG_INF:
            s = s * math.exp(m - m_new) + math.exp(v - m_new)
            m = m_new
    for i in range(5):  # xor butterfly over (m, s) pairs: every lane ends with the warp's pair
        m_other = shfl_xor_sync(FULL_MASK, m, 16 >> i)
        s_other = shfl_xor_sync(FULL_MASK, s, 16 >> i)
        m_new = max(m, m_other)
        if m_new > NEG_INF:  # both empty: stay (-inf, 0)
            s = s * math.exp(m - m_new) + s_other * math.exp(m_other - m_new)
            m = m_new
    if lane == U_ZERO:
        warp_m[warp] = m
        warp_s[warp] = s
    cuda.syncthreads()
    if lane < U_WARPS:
        m, s = warp_m[lane], warp_s[lane]
    else:
        m, s = NEG_INF, float32(0.0)
    for i in range(5):
        m_other = shfl_xor_sync(FULL_MASK, m, 16 >> i)
        s_other = shfl_xor_sync(FULL_MASK, s, 16 >> i)
        m_new = max(m, m_other)
        if m_new > NEG_INF:
            s = s * math.exp(m - m_new) + s_other * math.exp(m_other - m_new)
            m = m_new
    inv = float32(1.0) / s

    # pass 2: normalize
    for c in range(tid, cols, U_THREADS):
        out[row, c] = math.exp(float32(x[row, c]) - m) * inv


@fused_rung(
    SOFTMAX,
    name="online",
    parent="warp-shuffle",
    title="Online softmax: max and sum in one pass (2 reads, 1 write)",
    dtypes=("float32", "float16"),
    bytes_moved=lambda size, dtype: float(3 * size[0] * size[1] * resolve(dtype).itemsize),
)
def geometry(x: Any, out: Any) -> tuple:
    """One block of THREADS per row."""
    return kernel, x.shape[0], THREADS
