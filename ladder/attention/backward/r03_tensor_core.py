"""Rung 3, tensor cores: rung 2's two kernels on mma.sync + ldmatrix in CUDA C++.

What changes: the five products per tile (S, dP, dV, dK in the key kernel; S, dP, dQ in the query
kernel) move from FP32 FMAs to ``mma.m16n8k16``, with the fragments, ldmatrix addressing and
swizzle of forward rung 5 (``ladder/attention/mma_sync.cuh``, shared by both). One new trick:
the key kernel computes the transposes Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ, keys as the M dimension, so
that Pᵀ and dSᵀ come out in the accumulator layout that is exactly the A fragment of the next
products dV += Pᵀ·dO and dK += dSᵀ·Q, as P feeds P·V in the forward: nothing is stored to shared
memory but the four operand tiles. A block is 4 warps over 64 keys (key kernel) or 64 queries
(query kernel), one m16 tile per warp; query tiles of 64 (32 at d = 128) and key tiles of 64,
copied by cp.async and waited for, no pipelining. Other head dimensions are zero-padded to 64 or
128 and unaligned operands copied, as in forward rung 5 (the memory table shows the
workspaces). float16 only.
Why: rung 2 runs every product on the FP32 lanes of the CUDA cores; the forward's rung 5 showed
what the tensor cores give the same products (26.70x its FP32 rung on an H200).
Prediction: 7 products per tile where 5 are counted, at the mma.sync forward's rate (about 300
TFLOP/s of counted work) less the two recomputed products and the unpipelined copies: 120 to
200 TFLOP/s counted, tens of times rung 2, and below the libraries' backward, which pipeline
(FlashAttention-2) or run on wgmma (cuDNN on Hopper).
Measured: on an NVIDIA H100 80GB HBM3 (``ladder run``; the libraries in the same run), float16,
[4, 16, 16, 4096, 64] (B, H, HKV, N, d): 3.167 ms and 216.95 TFLOP/s credited, 31.19x rung 2;
SDPA's backward (cuDNN) 1.572 ms, FlashAttention-2's 2.567 ms; causal 1.720 ms against
0.940; d = 128: 6.659 ms and 206.40 TFLOP/s against 2.627 ms; causal 3.537 against 1.502
(results/nvidia-h100-80gb-hbm3-attention-backward-4096-64.json,
results/nvidia-h100-80gb-hbm3-attention-backward-causal-4096-64.json,
results/nvidia-h100-80gb-hbm3-attention-backward-4096-128.json,
results/nvidia-h100-80gb-hbm3-attention-backward-causal-4096-128.json).
Verdict: the rate held, at the top of its range (194 to 217 TFLOP/s), and 29x to 55x rung 2;
against the fastest library 0.50x at d = 64 (causal 0.55x) and 0.40x at d = 128 (causal
0.42x), short of the 0.6x target; against FlashAttention-2's backward 0.81x and 0.71x. What
limits it, likely (not profiled): each tile waits for its copies (no pipeline), the two
recomputed products are 40% more tensor work, and cuDNN runs wgmma, which rung 7 of the
forward showed worth 1.3x over mma.sync.

Lab notes: docs/notes/attention.md
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ladder.attention.backward.common import workspace
from ladder.attention.backward.problem import backward_rung, operands
from ladder.attention.problem import Masks
from ladder.attention.tensor_core import ALIGN, kernel_d, padded_workspace
from ladder.core import cuda_cpp
from ladder.core.fastcall import POINTER, Operand, PlanCache, Steps, cupy_launch

SOURCE = cuda_cpp.source(__file__, "r03_tensor_core.cu", archs=("sm_80", "sm_90"))
THREADS = 128  # 4 warps
BLOCK_ROWS = 64  # keys of a key-kernel block, queries of a query-kernel block
QUERY_TILE = {64: 64, 128: 32}  # queries per tile of the key kernel, per head dimension
KEY_TILE = 64  # keys per tile of the query kernel


def shared_bytes(kd: int) -> tuple[int, int]:
    """Dynamic shared memory of the key kernel (K, V, and a Q, dO, lse and D tile) and of the
    query kernel (Q, dO, and a K and V tile)."""
    bq = QUERY_TILE[kd]
    return 2 * (BLOCK_ROWS + bq) * kd * 2 + 2 * bq * 4, 2 * (BLOCK_ROWS + KEY_TILE) * kd * 2


def plan(
    q: Operand, k: Operand, v: Operand, o: Operand, do: Operand, lse: Operand, out: Operand
) -> Masks:
    """The three kernels for this head dimension, their grids, the D workspace (and padded
    workspaces where d is not 64 or 128 or an operand is not 16-byte aligned), and the launch
    without and with the causal mask: built once per signature (``PLANS``)."""
    import cupy

    batch, heads, n, d = q.shape
    kv_heads = k.shape[1]
    kd = kernel_d(d, "rung 3")
    kernels = [SOURCE.kernel(f"backward_{step}_d{kd}") for step in ("delta", "dkdv", "dq")]
    smem_dkdv, smem_dq = shared_bytes(kd)
    for kernel, smem in zip(kernels[1:], (smem_dkdv, smem_dq), strict=True):
        if kernel.max_dynamic_shared_size_bytes < smem:
            kernel.max_dynamic_shared_size_bytes = smem  # above the 48 KB default
    rows = batch * heads * n
    tiles = (n + BLOCK_ROWS - 1) // BLOCK_ROWS
    # D's workspace, held by the plan's launches (freed with the plan, not before)
    delta = workspace((batch, heads, n), "delta", "rung 3's D (one float32 per query row)")
    copy = kd != d or any(x.align < ALIGN for x in (q, k, v, o, do, out))
    if copy:  # the plan's zero-padded, aligned workspaces, as forward rung 5's
        halves = (q, k, v, o, do, out)
        buffers = [padded_workspace(x, kd, f"rung 3's padded {x.name}") for x in halves]
        views = [cupy.asarray(x) for x in buffers]
        pointers = [int(cuda_cpp.pointer(x)) for x in buffers]

    sizes = (np.int32(n), np.int32(heads), np.int32(kv_heads), np.float32(1 / math.sqrt(d)))
    delta_launch = cupy_launch(
        kernels[0], (rows * 32 + THREADS - 1) // THREADS, (THREADS,), 0,
        (POINTER, POINTER, POINTER, np.int32(rows)),
    )  # fmt: skip

    def masked(causal: bool) -> Steps:
        args = (*[POINTER] * 7, *sizes, np.int32(causal))
        dkdv = cupy_launch(kernels[1], (tiles, kv_heads, batch), (THREADS,), smem_dkdv, args)
        dq = cupy_launch(kernels[2], (tiles, heads, batch), (THREADS,), smem_dq, args)

        def launch(q: int, k: int, v: int, o: int, do: int, lse: int, out: int) -> None:
            delta_launch(o, do, delta.ptr)
            dkdv(q, k, v, do, lse, delta.ptr, out)
            dq(q, k, v, do, lse, delta.ptr, out)

        def direct(*ops: Operand) -> None:
            launch(*[x.ptr for x in ops])

        def padded(*ops: Operand) -> None:
            for x, view in zip(ops[:5], views[:5], strict=True):
                view[..., :d] = cupy.asarray(x.base)
            p = pointers
            launch(p[0], p[1], p[2], p[3], p[4], ops[5].ptr, p[5])
            cupy.asarray(ops[6].base)[...] = views[5][..., :d]

        return Steps(padded if copy else direct, delta_launch, dkdv, dq)

    return Masks(masked(False), masked(True))


PLANS = PlanCache(plan)


@backward_rung(
    name="tensor-core",
    title="Flash backward on the tensor cores: mma.sync, ldmatrix, cp.async (CUDA C++)",
    dtypes=("float16",),
    needs=("cupy",),
    units="tensor",
    min_cc=(8, 0),
    cc_needs="cp.async and mma.sync m16n8k16",
)
def launch(
    q: Any, k: Any, v: Any, o: Any, do: Any, lse: Any, out: Any = None, causal: bool = False
) -> Any:
    q, k, v, o, do, lse, out, _ = operands(q, k, v, o, do, lse, out, ("float16",))
    if 0 not in out.shape:
        PLANS(q, k, v, o, do, lse, out)[bool(causal)](q, k, v, o, do, lse, out)
    return out.obj
