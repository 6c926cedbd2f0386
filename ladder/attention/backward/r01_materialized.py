"""Materialized: P and then dS held in an N x N buffer in global memory, six kernels.

What changes: nothing yet; the backward ladder starts here. The chain rule of ``problem``'s
docstring, one kernel per step, each the obvious loop with one thread per output element:

1. ``delta_kernel`` (``common``): one thread per query row, ``D_i = Σ_c dO_ic·O_ic``;
2. ``probs_kernel``: thread (i, j) writes ``P_ij = exp(q_i·k_j / √d − L_i)`` (0 above the
   diagonal when causal) into a float32 N x N buffer per head: the forward's saved L makes
   P without a softmax pass;
3. ``key_grad_kernel``, for dV: thread (j, c) of a key/value head sums ``P_ij·dO_ic`` over the
   N queries of every query head of its group (a sum in the thread, no atomics);
4. ``ds_kernel``: thread (i, j) overwrites P_ij in place with ``dS_ij = P_ij·(dO_i·v_j − D_i)``;
5. ``dq_kernel``: thread (i, c) sums ``dS_ij·k_jc`` over the N keys, times 1/√d;
6. ``key_grad_kernel`` again, for dK: dS in place of P, q in place of dO, times 1/√d.

Memory: one float32 buffer for every head of every batch, B·H·N²·4 bytes as in `attention/naive`
(4.3 GB at B = 4, H = 16, N = 4096), asked for first (``memory.empty``) so that a buffer that
cannot fit raises ``AttentionMemoryError``; the plan owns it and D (B·H·N floats).
Why: the baseline. The buffer is written twice and read four times, six passes over B·H·N²
floats; kernels 2 and 4 read two length-d rows per element (2·d loads for d multiply-adds)
and kernels 3, 5 and 6 walk N rows per output element, none reusing a value from registers or
shared memory: `attention/naive`, with five N x N x d products where it had two.
Prediction: bound by load instructions like `attention/naive`, so about its rate in
TFLOP/s (the problem credits two and a half times the forward's work), hence about two and a
half times its time: several hundred milliseconds at the SDPA shape. Causal: only kernel 2
skips the masked half, so the causal call takes most of the plain call's time and its
TFLOP/s nearly halve.
Measured: on an NVIDIA H100 80GB HBM3 (``ladder run``), float16, [4, 16, 16, 4096, 64] (B, H,
HKV, N, d): 716.254 ms and 0.96 TFLOP/s (SDPA's backward: 1.572 ms), causal 643.089 ms and
0.53 TFLOP/s (lab/attention/2026-11-27-backward/nvidia-h100-80gb-hbm3-attention-backward-4096-
64.json and lab/attention/2026-11-27-backward/nvidia-h100-80gb-hbm3-attention-backward-causal-4096-
64.json); d = 128: 1429.092 ms (lab/attention/2026-11-27-backward/nvidia-h100-80gb-hbm3-attention-
backward-4096-128.json).
Verdict: held: `attention/naive` rate (0.9 TFLOP/s on an H200) and about two and a half
times its time; causal takes 0.90 of the plain call and its TFLOP/s nearly halve. d = 128
doubles every product, and the time (2.00x) with it.

Lab notes: docs/notes/attention.md
"""

import math
from typing import Any

import numpy as np
from numba import cuda, float32

from ladder.attention.backward.common import delta_grid, delta_kernel
from ladder.attention.backward.problem import backward_rung
from ladder.attention.problem import IS_CAUSAL, workspace
from ladder.core.dtypes import resolve

TILE = 16  # 16 x 16 threads per block, one per output element


@cuda.jit
def probs_kernel(q, k, lse, probs, scale, causal):
    n, d = q.shape[2], q.shape[3]
    tiles_j = (n + TILE - 1) // TILE
    i = cuda.blockIdx.x // tiles_j * TILE + cuda.threadIdx.y
    j = cuda.blockIdx.x % tiles_j * TILE + cuda.threadIdx.x
    h, b = cuda.blockIdx.y, cuda.blockIdx.z
    kv = h // (q.shape[1] // k.shape[1])
    if i < n and j < n:
        if causal and j > i:
            probs[b, h, i, j] = float32(0.0)
        else:
            s = float32(0.0)
            for c in range(d):
                s += float32(q[b, h, i, c]) * float32(k[b, kv, j, c])
            probs[b, h, i, j] = math.exp(s * scale - lse[b, h, i])


@cuda.jit
def ds_kernel(do, v, delta, probs):
    n, d = do.shape[2], do.shape[3]
    tiles_j = (n + TILE - 1) // TILE
    i = cuda.blockIdx.x // tiles_j * TILE + cuda.threadIdx.y
    j = cuda.blockIdx.x % tiles_j * TILE + cuda.threadIdx.x
    h, b = cuda.blockIdx.y, cuda.blockIdx.z
    kv = h // (do.shape[1] // v.shape[1])
    if i < n and j < n:
        dp = float32(0.0)
        for c in range(d):
            dp += float32(do[b, h, i, c]) * float32(v[b, kv, j, c])
        probs[b, h, i, j] *= dp - delta[b, h, i]


@cuda.jit
def dq_kernel(ds, k, out, scale):
    heads, n, d = ds.shape[1], ds.shape[2], k.shape[3]
    tiles_c = (d + TILE - 1) // TILE
    i = cuda.blockIdx.x // tiles_c * TILE + cuda.threadIdx.y
    c = cuda.blockIdx.x % tiles_c * TILE + cuda.threadIdx.x
    h, b = cuda.blockIdx.y, cuda.blockIdx.z
    kv = h // (heads // k.shape[1])
    if i < n and c < d:
        acc = float32(0.0)
        for j in range(n):
            acc += ds[b, h, i, j] * float32(k[b, kv, j, c])
        out[b, h, i, c] = acc * scale


@cuda.jit
def key_grad_kernel(m, x, out, first_head, factor):
    # out[b, first_head + kv, j, c] = factor · Σ over the group's heads h and queries i of
    # m[b, h, i, j] · x[b, h, i, c]: dV from (P, dO), dK from (dS, q)
    heads, n, d = m.shape[1], m.shape[2], x.shape[3]
    group = heads // cuda.gridDim.y
    tiles_c = (d + TILE - 1) // TILE
    j = cuda.blockIdx.x // tiles_c * TILE + cuda.threadIdx.y
    c = cuda.blockIdx.x % tiles_c * TILE + cuda.threadIdx.x
    kv, b = cuda.blockIdx.y, cuda.blockIdx.z
    if j < n and c < d:
        acc = float32(0.0)
        for h in range(kv * group, (kv + 1) * group):
            for i in range(n):
                acc += m[b, h, i, j] * float32(x[b, h, i, c])
        out[b, first_head + kv, j, c] = acc * factor


def _nxn(q: np.ndarray) -> np.ndarray:
    batch, heads, n, _ = q.shape
    return np.empty((batch, heads, n, n), np.float32)


# `ladder check` compiles each kernel for example arguments made from the problem's arrays
# (lse stands in for D: both are float32 (B, H, N))
ONE = np.float32(1)
KERNEL_ARGS = {
    "probs_kernel": lambda q, k, v, o, do, lse, out: (q, k, lse, _nxn(q), ONE, False),
    "ds_kernel": lambda q, k, v, o, do, lse, out: (do, v, lse, _nxn(q)),
    "dq_kernel": lambda q, k, v, o, do, lse, out: (_nxn(q), k, out, ONE),
    "key_grad_kernel": lambda q, k, v, o, do, lse, out: (_nxn(q), do, out, 0, ONE),
    "delta_kernel": lambda q, k, v, o, do, lse, out: (o, do, lse),
}


def _bytes_moved(size: tuple[int, ...], dtype: str) -> float:
    batch, heads, kv_heads, n, d = size
    io = (4 * batch * heads + 4 * batch * kv_heads) * n * d * resolve(dtype).itemsize
    rows = 3 * batch * heads * n * 4  # lse read, D written and read
    return float(io + rows + 6 * batch * heads * n * n * 4)  # P, dS: written 2x, read 4x


@backward_rung(
    name="materialized",
    parent=None,
    title="Six kernels: D, P, dV, dS, dQ, dK (P and dS N x N in global memory)",
    bytes_moved=_bytes_moved,
    plans_kept=1,  # each plan holds a B x H x N x N buffer: keep one
)
def geometry(q: Any, k: Any, v: Any, o: Any, do: Any, lse: Any, out: Any) -> list:
    """D, P, dV, dS (over P, in place), dQ and dK in order, a thread per output element; the N x
    N buffer and D are the plan's (one plan kept: no more than one N x N buffer is held)."""
    batch, heads, n, d = q.shape
    kv_heads = k.shape[1]
    tiles, tiles_c = (n + TILE - 1) // TILE, (d + TILE - 1) // TILE
    scale = np.float32(1.0 / math.sqrt(d))
    what = f"rung 1's P and dS matrix ({batch} x {heads} x {n} x {n} float32)"
    probs = workspace((batch, heads, n, n), "probs", what)
    delta = workspace((batch, heads, n), "delta", "rung 1's D (one float32 per query row)")
    block, by_query = (TILE, TILE), (tiles * tiles, heads, batch)
    by_key = (tiles * tiles_c, kv_heads, batch)
    return [
        (delta_kernel, *delta_grid(batch, heads, n), (o, do, delta)),
        (probs_kernel, by_query, block, (q, k, lse, probs, scale, IS_CAUSAL)),
        (key_grad_kernel, by_key, block, (probs, do, out, heads + kv_heads, np.float32(1))),
        (ds_kernel, by_query, block, (do, v, delta, probs)),
        (dq_kernel, (tiles * tiles_c, heads, batch), block, (probs, k, out, scale)),
        (key_grad_kernel, by_key, block, (probs, q, out, heads, scale)),
    ]
