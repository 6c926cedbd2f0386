"""Flash: no N x N buffer; P and dS recomputed tile by tile in shared memory.

What changes: `materialized` wrote P and dS for every (query, key) pair to global memory and read
them back four times. FlashAttention-2's backward (Dao, 2023) keeps them on chip, tile by tile;
here in two kernels without atomics, as Triton's fused-attention tutorial does (FlashAttention-2
itself adds dQ with atomics from one kernel), after ``delta_kernel``:

1. ``dkdv_kernel``: a block of 256 threads (16 x 16) owns a tile of keys of one key/value head
   (32 keys when d <= 64, 16 when d <= 128), stages their k and v rows in shared memory once
   and keeps their dK and dV in registers. It loops over the query heads of its group and over
   tiles of queries (32 or 16; causal: from the tile holding its first key), staging q, dO, L
   and D; thread (ty, tx) computes the transposed tiles ``Pᵀ = exp(k·qᵀ/√d − L)`` and
   ``dSᵀ = Pᵀ ∘ (v·dOᵀ − D)`` for keys ``ty + 16a`` and queries ``tx + 16b`` into shared
   memory, then adds ``Pᵀ·dO`` to dV and ``dSᵀ·q`` to dK; dK is written times 1/√d.
2. ``dq_kernel``: a block owns a tile of queries of one query head, stages their q, dO, L and D
   once and loops over tiles of keys (causal: up to its last query, longest blocks first),
   staging k and v, computing P and ``dS = P ∘ (dO·vᵀ − D)`` into shared memory and adding
   ``dS·k`` to dQ in registers.

So S and dP are computed twice, once per kernel: 14·B·H·N²·d operations where the problem
credits 10. Scores are prescaled by ``log2(e) / √d`` and L by ``log2(e)``, so P is one
``exp2``. Rows of a P or dS tile are written and read by the same half-warp (a warp barrier);
shared rows are padded by one word against bank conflicts; edges are zeros and P = 0. Memory
beyond the inputs: D only. Shared memory per block (``ladder check``): 42.0 KB (dkdv) and
37.8 KB (dq) at d <= 64, 35.3 and 34.2 KB at d <= 128 (hence d <= 128).
Why: P and dS never leave the chip (`materialized` moved six B·H·N² float32 passes for them), and
each k, v, q or dO value staged in shared memory serves a tile's worth of multiply-adds
instead of one.
Prediction: like the forward's flash rung, capped by FP32 arithmetic on the CUDA cores, at a
lower rate for the 1.4 times the credited work it does: several times `materialized`, well over ten
times at N = 4096, and far below the library's tensor-core backward.
Measured: on an NVIDIA H100 80GB HBM3 (``ladder run``), float16, [4, 16, 16, 4096, 64] (B, H,
HKV, N, d): 98.806 ms and 6.95 TFLOP/s credited, 7.25x `materialized`; causal 50.244 ms, 12.80x; d =
128: 367.525 ms and 3.74 TFLOP/s, 3.89x; causal 186.856 ms, 6.86x (the files of `tensor-core`:
lab/attention/2026-11-27-backward/nvidia-h100-80gb-hbm3-attention-backward-4096-64.json,
lab/attention/2026-11-27-backward/nvidia-h100-80gb-hbm3-attention-backward-causal-4096-64.json,
lab/attention/2026-11-27-backward/nvidia-h100-80gb-hbm3-attention-backward-4096-128.json,
lab/attention/2026-11-27-backward/nvidia-h100-80gb-hbm3-attention-backward-causal-4096-128.json).
Verdict: missed "well over ten times" except causal d = 64. At d = 64 the credited rate, 1.4x lower
for the recomputation, matches the forward flash rung's (9.6 TFLOP/s on an H200) divided by 1.4; at
d = 128 the tiles shrink to 16 x 16, so each staged value serves half as many multiply-adds, and
the rate halves. The ratio to `materialized` is their rates' ratio (`materialized` runs at 0.96
TFLOP/s): ten times would need about 10 TFLOP/s, above the forward flash rung's rate.

Lab notes: docs/notes/attention.md
"""

import math
from typing import Any

import numpy as np
from numba import cuda, float32

from ladder.attention.backward.common import delta_grid, delta_kernel
from ladder.attention.backward.problem import backward_rung
from ladder.attention.problem import IS_CAUSAL, LOG2E, workspace
from ladder.attention.r03_flash import check_d, padded
from ladder.core.intrinsics import syncwarp

SIDE = 16  # threads per block: SIDE x SIDE, a row of a P tile per half-warp of SIDE lanes
THREADS = SIDE * SIDE
LOG2E_32 = np.float32(LOG2E)


def tile_shape(padded_d: int) -> tuple[int, int]:
    """Keys and queries per tile, (BK, BQ): as large as 48 KB of shared memory allows."""
    return (32, 32) if padded_d <= 64 else (16, 16)


def make_kernels(padded_d: int, bk: int, bq: int) -> tuple[Any, Any]:
    """``dkdv_kernel`` and ``dq_kernel`` for head dimensions up to ``padded_d`` (a multiple of
    16), with tiles of ``bk`` keys and ``bq`` queries (multiples of 16)."""
    width, oc = padded_d, padded_d // SIDE  # columns of dK, dV or dQ per thread
    ka, qb = bk // SIDE, bq // SIDE  # keys and queries per thread in a P tile
    # array shapes must be compile-time constants: tuples built here, not in the kernels
    k_tile, q_tile = (bk, width + 1), (bq, width + 1)
    pt_tile, p_tile = (bk, bq + 1), (bq, bk + 1)
    s_regs, key_regs, query_regs = (ka, qb), (ka, oc), (qb, oc)

    @cuda.jit
    def dkdv_kernel(q, k, v, do, lse, delta, out, scale_log2, scale, causal):
        ks = cuda.shared.array(k_tile, float32)
        vs = cuda.shared.array(k_tile, float32)
        qs = cuda.shared.array(q_tile, float32)
        dos = cuda.shared.array(q_tile, float32)
        lses = cuda.shared.array(bq, float32)
        deltas = cuda.shared.array(bq, float32)
        pt = cuda.shared.array(pt_tile, float32)
        dst = cuda.shared.array(pt_tile, float32)
        s = cuda.local.array(s_regs, float32)
        dpr = cuda.local.array(s_regs, float32)
        dk = cuda.local.array(key_regs, float32)
        dv = cuda.local.array(key_regs, float32)
        kreg = cuda.local.array(ka, float32)
        vreg = cuda.local.array(ka, float32)
        qreg = cuda.local.array(oc, float32)
        doreg = cuda.local.array(oc, float32)
        heads, n, d = q.shape[1], q.shape[2], q.shape[3]
        kv_heads = k.shape[1]
        group = heads // kv_heads
        kv, b = cuda.blockIdx.y, cuda.blockIdx.z
        tid = cuda.threadIdx.x
        ty, tx = tid // SIDE, tid % SIDE
        k0 = cuda.blockIdx.x * bk  # causal: block 0 has the most queries and starts first

        for e in range(tid, bk * width, THREADS):
            r, c = e // width, e % width
            inside = k0 + r < n and c < d
            ks[r, c] = float32(k[b, kv, k0 + r, c]) if inside else float32(0.0)
            vs[r, c] = float32(v[b, kv, k0 + r, c]) if inside else float32(0.0)
        for a in range(ka):
            for cc in range(oc):
                dk[a, cc] = float32(0.0)
                dv[a, cc] = float32(0.0)

        first = k0 // bq * bq if causal else 0
        for h in range(kv * group, (kv + 1) * group):
            for q0 in range(first, n, bq):
                cuda.syncthreads()  # every warp is done with the previous q, dO, Pᵀ and dSᵀ
                for e in range(tid, bq * width, THREADS):
                    r, c = e // width, e % width
                    inside = q0 + r < n and c < d
                    qs[r, c] = float32(q[b, h, q0 + r, c]) if inside else float32(0.0)
                    dos[r, c] = float32(do[b, h, q0 + r, c]) if inside else float32(0.0)
                if tid < bq:
                    inside = q0 + tid < n
                    lses[tid] = lse[b, h, q0 + tid] * LOG2E_32 if inside else float32(0.0)
                    deltas[tid] = delta[b, h, q0 + tid] if inside else float32(0.0)
                cuda.syncthreads()

                # Sᵀ and dPᵀ of keys ty + 16 a, queries tx + 16 b
                for a in range(ka):
                    for j in range(qb):
                        s[a, j] = float32(0.0)
                        dpr[a, j] = float32(0.0)
                for c in range(width):
                    for a in range(ka):
                        kreg[a] = ks[ty + SIDE * a, c]
                        vreg[a] = vs[ty + SIDE * a, c]
                    for j in range(qb):
                        x = qs[tx + SIDE * j, c]
                        y = dos[tx + SIDE * j, c]
                        for a in range(ka):
                            s[a, j] += kreg[a] * x
                            dpr[a, j] += vreg[a] * y
                for a in range(ka):
                    key = k0 + ty + SIDE * a
                    for j in range(qb):
                        query = q0 + tx + SIDE * j
                        p = math.exp2(s[a, j] * scale_log2 - lses[tx + SIDE * j])
                        if key >= n or query >= n or (causal and key > query):
                            p = float32(0.0)
                        pt[ty + SIDE * a, tx + SIDE * j] = p
                        dst[ty + SIDE * a, tx + SIDE * j] = p * (dpr[a, j] - deltas[tx + SIDE * j])
                syncwarp()  # the Pᵀ and dSᵀ rows of this half-warp are written

                for i in range(bq):
                    for cc in range(oc):
                        qreg[cc] = qs[i, tx + SIDE * cc]
                        doreg[cc] = dos[i, tx + SIDE * cc]
                    for a in range(ka):
                        p = pt[ty + SIDE * a, i]
                        ds = dst[ty + SIDE * a, i]
                        for cc in range(oc):
                            dv[a, cc] += p * doreg[cc]
                            dk[a, cc] += ds * qreg[cc]

        for a in range(ka):
            key = k0 + ty + SIDE * a
            if key < n:
                for cc in range(oc):
                    c = tx + SIDE * cc
                    if c < d:
                        out[b, heads + kv, key, c] = dk[a, cc] * scale
                        out[b, heads + kv_heads + kv, key, c] = dv[a, cc]

    @cuda.jit
    def dq_kernel(q, k, v, do, lse, delta, out, scale_log2, scale, causal):
        qs = cuda.shared.array(q_tile, float32)
        dos = cuda.shared.array(q_tile, float32)
        ks = cuda.shared.array(k_tile, float32)
        vs = cuda.shared.array(k_tile, float32)
        lses = cuda.shared.array(bq, float32)
        deltas = cuda.shared.array(bq, float32)
        dss = cuda.shared.array(p_tile, float32)
        s = cuda.local.array(s_regs, float32)
        dpr = cuda.local.array(s_regs, float32)
        dq = cuda.local.array(query_regs, float32)
        kreg = cuda.local.array(ka, float32)
        vreg = cuda.local.array(ka, float32)
        kcol = cuda.local.array(oc, float32)
        heads, n, d = q.shape[1], q.shape[2], q.shape[3]
        h, b = cuda.blockIdx.y, cuda.blockIdx.z
        kv = h // (heads // k.shape[1])
        tid = cuda.threadIdx.x
        ty, tx = tid // SIDE, tid % SIDE
        # causal: the last query tile has the most keys; launch it first
        tile = cuda.gridDim.x - 1 - cuda.blockIdx.x if causal else cuda.blockIdx.x
        q0 = tile * bq

        for e in range(tid, bq * width, THREADS):
            r, c = e // width, e % width
            inside = q0 + r < n and c < d
            qs[r, c] = float32(q[b, h, q0 + r, c]) if inside else float32(0.0)
            dos[r, c] = float32(do[b, h, q0 + r, c]) if inside else float32(0.0)
        if tid < bq:
            inside = q0 + tid < n
            lses[tid] = lse[b, h, q0 + tid] * LOG2E_32 if inside else float32(0.0)
            deltas[tid] = delta[b, h, q0 + tid] if inside else float32(0.0)
        for i in range(qb):
            for cc in range(oc):
                dq[i, cc] = float32(0.0)

        kv_end = min(n, q0 + bq) if causal else n
        for k0 in range(0, kv_end, bk):
            cuda.syncthreads()  # every warp is done with the previous k, v and dS
            for e in range(tid, bk * width, THREADS):
                r, c = e // width, e % width
                inside = k0 + r < n and c < d
                ks[r, c] = float32(k[b, kv, k0 + r, c]) if inside else float32(0.0)
                vs[r, c] = float32(v[b, kv, k0 + r, c]) if inside else float32(0.0)
            cuda.syncthreads()

            # S and dP of queries ty + 16 i, keys tx + 16 j
            for i in range(qb):
                for j in range(ka):
                    s[j, i] = float32(0.0)
                    dpr[j, i] = float32(0.0)
            for c in range(width):
                for j in range(ka):
                    kreg[j] = ks[tx + SIDE * j, c]
                    vreg[j] = vs[tx + SIDE * j, c]
                for i in range(qb):
                    x = qs[ty + SIDE * i, c]
                    y = dos[ty + SIDE * i, c]
                    for j in range(ka):
                        s[j, i] += x * kreg[j]
                        dpr[j, i] += y * vreg[j]
            for i in range(qb):
                query = q0 + ty + SIDE * i
                for j in range(ka):
                    key = k0 + tx + SIDE * j
                    p = math.exp2(s[j, i] * scale_log2 - lses[ty + SIDE * i])
                    if key >= n or query >= n or (causal and key > query):
                        p = float32(0.0)
                    dss[ty + SIDE * i, tx + SIDE * j] = p * (dpr[j, i] - deltas[ty + SIDE * i])
            syncwarp()  # the dS rows of this half-warp are written

            for j in range(bk):
                for cc in range(oc):
                    kcol[cc] = ks[j, tx + SIDE * cc]
                for i in range(qb):
                    ds = dss[ty + SIDE * i, j]
                    for cc in range(oc):
                        dq[i, cc] += ds * kcol[cc]

        for i in range(qb):
            row = q0 + ty + SIDE * i
            if row < n:
                for cc in range(oc):
                    c = tx + SIDE * cc
                    if c < d:
                        out[b, h, row, c] = dq[i, cc] * scale

    return dkdv_kernel, dq_kernel


_kernels: dict[int, tuple[Any, Any]] = {}


def kernels_for(d: int) -> tuple[Any, Any]:
    """(``dkdv_kernel``, ``dq_kernel``) for head dimension ``d``, built once per padded d."""
    dp = padded(d)
    if dp not in _kernels:
        _kernels[dp] = make_kernels(dp, *tile_shape(dp))
    return _kernels[dp]


# what ``ladder check`` compiles: D's kernel, and both kernels for three head dimensions
KERNELS = {
    "delta_kernel": delta_kernel,
    **{
        f"{name}_d{d}": kernel
        for d in (16, 64, 128)
        for name, kernel in zip(("dkdv", "dq"), kernels_for(d), strict=True)
    },
}


def _tiled_args(q: Any, k: Any, v: Any, o: Any, do: Any, lse: Any, out: Any) -> tuple:
    return (q, k, v, do, lse, lse, out, np.float32(1), np.float32(1), False)  # lse stands for D


KERNEL_ARGS = {name: _tiled_args for name in KERNELS}
KERNEL_ARGS["delta_kernel"] = lambda q, k, v, o, do, lse, out: (o, do, lse)


@backward_rung(
    name="flash",
    parent="materialized",
    title="Flash backward: dK/dV per key tile, dQ per query tile, P and dS in shared memory",
)
def geometry(q: Any, k: Any, v: Any, o: Any, do: Any, lse: Any, out: Any) -> list:
    """D, then the key kernel (a block per key tile and K/V head) and the query kernel (a block
    per query tile and head), for head dimensions up to `attention/flash`'s MAX_D; D the plan's."""
    batch, heads, n, d = q.shape
    check_d(d, "rung 2")
    kv_heads = k.shape[1]
    dkdv_kernel, dq_kernel = kernels_for(d)
    bk, bq = tile_shape(padded(d))
    scale = 1.0 / math.sqrt(d)
    scalars = (np.float32(scale * LOG2E), np.float32(scale), IS_CAUSAL)
    delta = workspace((batch, heads, n), "delta", "rung 2's D (one float32 per query row)")
    key_grid = ((n + bk - 1) // bk, kv_heads, batch)
    query_grid = ((n + bq - 1) // bq, heads, batch)
    return [
        (delta_kernel, *delta_grid(batch, heads, n), (o, do, delta)),
        (dkdv_kernel, key_grid, THREADS, (q, k, v, do, lse, delta, out, *scalars)),
        (dq_kernel, query_grid, THREADS, (q, k, v, do, lse, delta, out, *scalars)),
    ]
