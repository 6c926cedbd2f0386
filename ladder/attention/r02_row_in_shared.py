"""Row in shared: one block per query row, its scores in shared memory, one kernel.

What changes: `naive` wrote every score to global memory and read it back five times, in three
kernels. Here one block of 128 threads owns one query row ``i`` of one head, all on chip:

1. each thread computes the scores of keys ``j = tid, tid + 128, ...`` into a shared array of N
   floats, keeping its own running max; causal rows stop at key ``i``;
2. the 128 partial maxima go through a shared array and every thread reads all of them (one
   barrier, then broadcast reads); each thread turns its scores into ``exp(s - max)`` in place,
   and the partial sums are combined the same way;
3. ``P·V``: warp ``w`` sums the keys ``j ≡ w (mod 4)``, lane ``l`` holding output column
   ``c0 + l`` (a warp reads 32 consecutive values of a row of v), the four warps' partials
   meet in shared memory, and the result is scaled by ``1 / sum`` once.

Memory: no N x N buffer, so device memory is linear in N. The row of scores is N x 4 bytes of
shared memory per block, within the 48 KB a block gets without opting in: N <= 12,160
(``MAX_N``); past it the launcher raises ``AttentionMemoryError`` rather than tiling the row,
since tiling the keys with a running max and sum is exactly what the flash rungs do.
Why: the five passes over S and two of `naive`'s three launches go. What it costs: every block
reads all of k and v of its head, 2·N·d·itemsize bytes, and there are B·H·N blocks: 550 GB
per call at the SDPA shape in float32, served by L2 (a head's k and v are 2 MB, and the blocks
of one head run together), but still two loads (q and k) per multiply-add in step 1. The
262,144 blocks fill the SMs, 7 per SM, a limit set by the registers (70 x 128 threads).
Prediction: faster than `naive` by the passes over S, 1.5 to 3x; still far from the tensor
cores, since each score costs about as many load instructions as in `naive`.
Measured: on an NVIDIA H200 (results/nvidia-h200.json, ``ladder bench``), at the SDPA shape
[4, 16, 16, 4096, 64] (B, H, HKV, N, d): 313.550 ms in float32 (`naive`: 301.727 ms) and
311.366 ms in float16 (`naive`: 297.608 ms), 0.9 TFLOP/s; causal (the file's earlier run,
2026-11-25), 158.535 ms in float32 against `naive`'s 227.992 ms.
Verdict: missed without the mask: 0.96x `naive`. The S traffic it removes is likely worth only a
few of `naive`'s 302 ms, and step 1 likely costs more than `naive`'s ``scores_kernel``: a warp
holds 32 consecutive keys, so each load of k touches 32 rows (16 in `naive`), and the 128
partials are read one by one after each barrier (neither rung is profiled). With the causal
mask it wins, 1.44x `naive`, likely because its rows stop at key i in both the scores and
``P·V``, while `naive`'s softmax and ``pv_kernel`` walk all N keys.

Lab notes: docs/notes/attention.md
"""

import math
from typing import Any

import numpy as np
from numba import cuda, float32

from ladder.attention.memory import AttentionMemoryError
from ladder.attention.problem import IS_CAUSAL, attention_rung

THREADS = 128  # one block per query row
WARPS = THREADS // 32
BLOCK_SHARED = 48 * 1024  # shared memory a block gets without opting in to more
STATIC_SHARED = THREADS * 4  # the partials
MAX_N = (BLOCK_SHARED - STATIC_SHARED) // 4  # scores of one row in the rest
NEG_INF = np.float32(-np.inf)


@cuda.jit
def row_kernel(q, k, v, out, scale, causal):
    scores = cuda.shared.array(0, float32)  # N floats, sized at launch
    partial = cuda.shared.array(THREADS, float32)
    heads, n, d = q.shape[1], q.shape[2], q.shape[3]
    i, h, b = cuda.blockIdx.x, cuda.blockIdx.y, cuda.blockIdx.z
    kv = h // (heads // k.shape[1])
    tid = cuda.threadIdx.x
    lane, warp = tid % 32, tid // 32
    keys = i + 1 if causal else n  # causal: keys after i have probability 0, skip them

    # 1. scores into shared memory, and this thread's max
    m = NEG_INF
    for j in range(tid, keys, THREADS):
        s = float32(0.0)
        for c in range(d):
            s += float32(q[b, h, i, c]) * float32(k[b, kv, j, c])
        s *= scale
        scores[j] = s
        m = max(m, s)
    partial[tid] = m
    cuda.syncthreads()

    # 2. the row max and sum: every thread reads the 128 partials (broadcast reads)
    for t in range(THREADS):
        m = max(m, partial[t])
    cuda.syncthreads()  # all have read the maxima before the sums overwrite them
    total = float32(0.0)
    for j in range(tid, keys, THREADS):
        p = math.exp(scores[j] - m)
        scores[j] = p
        total += p
    partial[tid] = total
    cuda.syncthreads()
    total = float32(0.0)
    for t in range(THREADS):
        total += partial[t]
    inv = float32(1.0) / total

    # 3. P·V: warp w takes keys w, w + 4, ...; lane l one column of a 32-column chunk
    for c0 in range(0, d, 32):
        c = c0 + lane
        acc = float32(0.0)
        if c < d:
            for j in range(warp, keys, WARPS):
                acc += scores[j] * float32(v[b, kv, j, c])
        cuda.syncthreads()  # the partials of the previous step (or the sums) are read
        partial[tid] = acc
        cuda.syncthreads()
        if warp == 0 and c < d:
            acc = partial[lane]
            for w in range(1, WARPS):
                acc += partial[w * 32 + lane]
            out[b, h, i, c] = acc * inv


# `ladder check` compiles the kernel for example arguments made from the problem's arrays
KERNEL_ARGS = {"row_kernel": lambda q, k, v, out: (q, k, v, out, np.float32(1), False)}


@attention_rung(
    name="row-in-shared",
    parent="naive",
    title="One block per query row, the scores in shared memory",
)
def geometry(q: Any, k: Any, v: Any, out: Any) -> tuple:
    """One block of THREADS per query row and head, the row's N scores in dynamic shared memory;
    rows longer than MAX_N do not fit."""
    batch, heads, n, d = q.shape
    if n > MAX_N:
        raise AttentionMemoryError(
            f"rung 2's row of {n} float32 scores", n * 4 + STATIC_SHARED,
            BLOCK_SHARED, "shared memory per block",
        )  # fmt: skip
    scale = np.float32(1.0 / math.sqrt(d))
    return row_kernel, (n, heads, batch), THREADS, n * 4, (scale, IS_CAUSAL)
