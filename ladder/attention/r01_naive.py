"""Naive: the scores and the probabilities materialized in global memory, three kernels.

What changes: nothing yet; this is where the ladder starts. Attention the way its formula reads,
one kernel per step, each the obvious loop:

1. ``scores_kernel``: one thread per (query i, key j) writes ``S[i, j] = q_i · k_j / √d`` (or
   -inf above the diagonal when causal) into an N x N float32 buffer per head;
2. ``softmax_kernel``: one thread per row of S walks it three times, for the max, the sum of
   ``exp(S - max)`` and ``P = exp(S - max) / sum``, which overwrites the scores in place (`naive`
   of the softmax ladder, in one kernel);
3. ``pv_kernel``: one thread per output element computes ``O[i, c] = Σ_j P[i, j] · V[j, c]``
   over all N keys (masked keys hold P = 0 and are multiplied all the same).

Memory: one float32 score buffer for every head of every batch, B·H·N²·4 bytes: 4.3 GB at the
SDPA shape (B = 4, H = 16, N = 4096), 69 GB at N = 16384, 275 GB at N = 32768. The rung asks
for it first (``memory.empty``), so a buffer that cannot fit raises ``AttentionMemoryError``
naming the bytes needed and free, rather than failing inside the driver; its plan keeps it.
Why: the baseline. Kernel 1 writes S, the softmax reads it three times and writes it, kernel 3
reads it: six passes over B·H·N² floats, 26 GB at the SDPA shape against the problem's 134 MB
(float16). Worse is how kernels 1 and 3 fetch operands: a warp of kernel 1 holds 16
consecutive keys whose rows of k lie d·itemsize bytes apart, and every (i, j) pair reads its
two length-d rows on its own, 2·d loads for d multiply-adds, never reused from registers or
shared memory: `gemm/naive` twice over, plus the softmax.
Prediction: bound by the load instructions of kernels 1 and 3, like the naive GEMM (0.50
TFLOP/s at 4096³ on an H200), with the softmax's 26 GB a few milliseconds on top: a few hundred
milliseconds at the SDPA shape. The causal problem counts half the FLOPs but this rung does all
the work, so its TFLOP/s halve.
Measured: on an NVIDIA H200 (results/nvidia-h200.json, ``ladder bench``), at the SDPA shape
[4, 16, 16, 4096, 64] (B, H, HKV, N, d): 301.727 ms and 0.9 TFLOP/s in float32 (SDPA: 7.849 ms)
and 297.608 ms in float16 (SDPA: 0.600 ms, 496.3x faster); causal (the file's earlier run,
2026-11-25), 227.992 ms in float32, 0.6 TFLOP/s.
Verdict: the time held; the rate is about 1.8x the naive GEMM's, likely because a warp of
``scores_kernel`` loads from 16 rows of k and 2 of q where the naive GEMM's warp loads from 32
rows of A, and a warp of ``pv_kernel`` reads one row of v (not profiled). The causal TFLOP/s
did not halve: ``scores_kernel`` skips the dot products above the diagonal, so the causal call
takes 0.76 of the non-causal time.

Lab notes: docs/notes/attention.md
"""

import math
from typing import Any

import numpy as np
from numba import cuda, float32

from ladder.attention.problem import IS_CAUSAL, attention_rung, workspace
from ladder.core.dtypes import resolve

TILE = 16  # kernels 1 and 3: 16 x 16 threads per block
ROW_THREADS = 128  # kernel 2: one thread per row of S
NEG_INF = np.float32(-np.inf)


@cuda.jit
def scores_kernel(q, k, scores, scale, causal):
    n, d = q.shape[2], q.shape[3]
    tiles_j = (n + TILE - 1) // TILE
    i = cuda.blockIdx.x // tiles_j * TILE + cuda.threadIdx.y
    j = cuda.blockIdx.x % tiles_j * TILE + cuda.threadIdx.x
    h, b = cuda.blockIdx.y, cuda.blockIdx.z
    kv = h // (q.shape[1] // k.shape[1])
    if i < n and j < n:
        if causal and j > i:
            scores[b, h, i, j] = NEG_INF
        else:
            s = float32(0.0)
            for c in range(d):
                s += float32(q[b, h, i, c]) * float32(k[b, kv, j, c])
            scores[b, h, i, j] = s * scale


@cuda.jit
def softmax_kernel(scores):
    heads, n = scores.shape[1], scores.shape[2]
    row = cuda.blockIdx.x * ROW_THREADS + cuda.threadIdx.x
    if row < scores.shape[0] * heads * n:
        b, h, i = row // (heads * n), row // n % heads, row % n
        m = NEG_INF
        for j in range(n):
            m = max(m, scores[b, h, i, j])
        s = float32(0.0)
        for j in range(n):
            s += math.exp(scores[b, h, i, j] - m)
        inv = float32(1.0) / s
        for j in range(n):
            scores[b, h, i, j] = math.exp(scores[b, h, i, j] - m) * inv


@cuda.jit
def pv_kernel(probs, v, out):
    n, d = out.shape[2], out.shape[3]
    tiles_c = (d + TILE - 1) // TILE
    i = cuda.blockIdx.x // tiles_c * TILE + cuda.threadIdx.y
    c = cuda.blockIdx.x % tiles_c * TILE + cuda.threadIdx.x
    h, b = cuda.blockIdx.y, cuda.blockIdx.z
    kv = h // (out.shape[1] // v.shape[1])
    if i < n and c < d:
        acc = float32(0.0)
        for j in range(n):
            acc += probs[b, h, i, j] * float32(v[b, kv, j, c])
        out[b, h, i, c] = acc


def _example_scores(q: np.ndarray) -> np.ndarray:
    batch, heads, n, _ = q.shape
    return np.empty((batch, heads, n, n), np.float32)


# `ladder check` compiles each kernel for example arguments made from the problem's arrays
KERNEL_ARGS = {
    "scores_kernel": lambda q, k, v, out: (q, k, _example_scores(q), np.float32(1), False),
    "softmax_kernel": lambda q, k, v, out: (_example_scores(q),),
    "pv_kernel": lambda q, k, v, out: (_example_scores(q), v, out),
}


def _bytes_moved(size: tuple[int, ...], dtype: str) -> float:
    batch, heads, kv_heads, n, d = size
    io = (2 * batch * heads + 2 * batch * kv_heads) * n * d * resolve(dtype).itemsize
    return float(io + 6 * batch * heads * n * n * 4)  # S: written, read 3x, written, read


def scores_buffer(batch: int, heads: int, n: int, rung: str) -> Any:
    """The float32 B x H x N x N buffer, or a clear error saying what it would have needed."""
    what = f"{rung}'s score matrix ({batch} x {heads} x {n} x {n} float32)"
    return workspace((batch, heads, n, n), "scores", what)


@attention_rung(
    name="naive",
    parent=None,
    title="Three kernels: scores, softmax, P·V (N x N in global memory)",
    bytes_moved=_bytes_moved,
    plans_kept=1,  # each plan holds a B x H x N x N buffer: keep one
)
def geometry(q: Any, k: Any, v: Any, out: Any) -> list:
    """Scores, softmax and P·V in order, each on its own grid; the N x N buffer is the plan's, so
    that a captured call replays on memory that lives on (one plan kept: no more than one such
    buffer is held, and ``memory.memory_vs_n`` drops it before each N)."""
    batch, heads, n, d = q.shape
    tiles = (n + TILE - 1) // TILE
    rows = batch * heads * n
    scale = np.float32(1.0 / math.sqrt(d))
    s = scores_buffer(batch, heads, n, "rung 1")
    return [
        (scores_kernel, (tiles * tiles, heads, batch), (TILE, TILE), (q, k, s, scale, IS_CAUSAL)),
        (softmax_kernel, (rows + ROW_THREADS - 1) // ROW_THREADS, ROW_THREADS, (s,)),
        (pv_kernel, (tiles * ((d + TILE - 1) // TILE), heads, batch), (TILE, TILE), (s, v, out)),
    ]
