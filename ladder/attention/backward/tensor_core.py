"""What the backward's CUDA C++ rungs (3 and 4) share: the D = rowsum(dO ∘ O) kernel
(``delta.cu``), and the plan that runs it and a rung's two kernels, with or without the causal
mask. A library, not a rung: each rung picks its kernels and passes them here.

Every key kernel (dK, dV) and query kernel (dQ) takes (Q, K, V, dO, lse, D, G, N, H, HKV,
scale, causal): float16 operands (rung 4's and D's ``_bf16`` kernels: bfloat16) with d in
``HEAD_DIMS`` and 16-byte aligned pointers, float32
lse and D, G the problem's output. ``plan`` copies the operands into zero-padded, aligned
workspaces when they are not (``ladder.attention.tensor_core``, as the forward's rungs do).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ladder.attention.problem import Masks, workspace
from ladder.attention.tensor_core import ALIGN, kernel_d, kernel_name, padded_workspace
from ladder.core import cuda_cpp
from ladder.core.fastcall import POINTER, Operand, Steps, bits_view, cupy_launch

DELTA = cuda_cpp.source(__file__, "delta.cu", archs=("sm_80", "sm_90"))
DELTA_THREADS = 128  # four rows (warps) a block
BLOCK_ROWS = 64  # keys of a key-kernel block, queries of a query-kernel block


def plan(
    ops: tuple[Operand, ...], kernels: tuple[Any, Any], smem: tuple[int, int], threads: int,
    rung: str,
) -> Masks:  # fmt: skip
    """The D kernel, then ``kernels`` (the key kernel over key tiles of BLOCK_ROWS and K/V
    heads, the query kernel over query tiles and query heads; ``threads`` each, ``smem`` bytes
    of dynamic shared memory each) on ``ops`` = (q, k, v, o, do, lse, out): the plan's D
    workspace, padded workspaces where needed, and the launch without and with the mask."""
    import cupy

    q, k = ops[:2]
    batch, heads, n, d = q.shape
    kv_heads = k.shape[1]
    kd = kernel_d(d, rung)
    for kernel, size in zip(kernels, smem, strict=True):
        if kernel.max_dynamic_shared_size_bytes < size:
            kernel.max_dynamic_shared_size_bytes = size  # above the 48 KB default
    rows = batch * heads * n
    tiles = (n + BLOCK_ROWS - 1) // BLOCK_ROWS
    # D's workspace, held by the plan's launches (freed with the plan, not before)
    delta = workspace((batch, heads, n), "delta", f"{rung}'s D (one float32 per query row)")
    halves = ops[:5] + ops[6:]
    copy = kd != d or any(x.align < ALIGN for x in halves)
    if copy:  # the plan's zero-padded, aligned workspaces, as the forward's rungs have
        buffers = [padded_workspace(x, kd, f"{rung}'s padded {x.name}") for x in halves]
        views = [cupy.asarray(x) for x in buffers]
        pointers = [int(cuda_cpp.pointer(x)) for x in buffers]

    sizes = (np.int32(n), np.int32(heads), np.int32(kv_heads), np.float32(1 / math.sqrt(d)))
    delta_launch = cupy_launch(
        DELTA.kernel(kernel_name("backward_delta", kd, q.dtype)),
        (rows * 32 + DELTA_THREADS - 1) // DELTA_THREADS,
        (DELTA_THREADS,), 0, (POINTER, POINTER, POINTER, np.int32(rows)),
    )  # fmt: skip

    def masked(causal: bool) -> Steps:
        args = (*[POINTER] * 7, *sizes, np.int32(causal))
        keys = cupy_launch(kernels[0], (tiles, kv_heads, batch), (threads,), smem[0], args)
        queries = cupy_launch(kernels[1], (tiles, heads, batch), (threads,), smem[1], args)

        def launch(q: int, k: int, v: int, o: int, do: int, lse: int, out: int) -> None:
            delta_launch(o, do, delta.ptr)
            keys(q, k, v, do, lse, delta.ptr, out)
            queries(q, k, v, do, lse, delta.ptr, out)

        def direct(*ops: Operand) -> None:
            launch(*[x.ptr for x in ops])

        def padded(*ops: Operand) -> None:
            for x, view in zip(ops[:5], views[:5], strict=True):
                view[..., :d] = bits_view(x)
            p = pointers
            launch(p[0], p[1], p[2], p[3], p[4], ops[5].ptr, p[5])
            bits_view(ops[6])[...] = views[5][..., :d]

        return Steps(padded if copy else direct, delta_launch, keys, queries)

    return Masks(masked(False), masked(True))
