"""What the CUDA C++ attention rungs (5 to 7) share: the head dimensions their kernels are built
for, zero-padded workspaces, and the plan that launches one of their kernels with or without
the causal mask. A library, not a rung: each rung picks its kernel and passes it here.

Every kernel takes (Q, K, V, O, N, H, HKV, scale_log2, causal), float16 (the wgmma rungs also
bfloat16: the kernel's name ends in ``_bf16``), d in HEAD_DIMS and 16-byte aligned pointers;
``plan`` copies operands into zero-padded, aligned workspaces when they are not (the memory
table shows them).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ladder.attention import memory
from ladder.attention.problem import LOG2E, Masks
from ladder.core import cuda_cpp
from ladder.core.fastcall import POINTER, Operand, Steps, bits_view, cupy_launch

HEAD_DIMS = (64, 128)  # the kernels' head dimensions; smaller ones are padded up
ALIGN = 16  # bytes: cp.async copies 16-byte chunks


def kernel_d(d: int, rung: str) -> int:
    """The head dimension the kernel runs: d itself, or the next one up (zero-padded)."""
    if d > HEAD_DIMS[-1]:
        raise ValueError(f"{rung} supports head dimensions up to {HEAD_DIMS[-1]}, got d={d}")
    return next(size for size in HEAD_DIMS if size >= d)


def kernel_name(stem: str, kd: int, dtype: str) -> str:
    """The name of the kernel ``stem`` built for head dimension kd and ``dtype``."""
    return f"{stem}_d{kd}" + ("_bf16" if dtype == "bfloat16" else "")


def padded_workspace(x: Operand, kd: int, what: str) -> Any:
    """A zeroed (..., kd) workspace of x's 16-bit elements (held as their bits: CuPy has no
    bfloat16) for x (..., d): calls copy x into its first d columns, and the columns past d
    stay zero, +0.0 in float16 and bfloat16 alike."""
    import cupy

    buffer = memory.empty((*x.shape[:-1], kd), np.uint16, what)
    cupy.asarray(buffer).fill(0)
    return buffer


def plan(
    q: Operand, k: Operand, v: Operand, out: Operand, kernel: Any, smem: int,
    block_rows: int, threads: int, packed: bool, rung: str,
) -> Masks:  # fmt: skip
    """``kernel`` (built for ``kernel_d`` of q's head dimension and q's dtype; ``packed``: rung
    6's layout, a block over the rows of the query heads that share a K/V head) on these operands:
    its grid of ``block_rows`` query rows a block, and its launch without and with the causal
    mask."""
    import cupy

    batch, heads, n, d = q.shape
    kv_heads = k.shape[1]
    kd = kernel_d(d, rung)
    if kernel.max_dynamic_shared_size_bytes < smem:
        kernel.max_dynamic_shared_size_bytes = smem  # above the 48 KB default
    rows = n * (heads // kv_heads) if packed else n
    grid = ((rows + block_rows - 1) // block_rows, kv_heads if packed else heads, batch)
    sizes = (np.int32(n), np.int32(heads), np.int32(kv_heads), np.float32(LOG2E / math.sqrt(d)))
    copy = kd != d or any(x.align < ALIGN for x in (q, k, v, out))

    if copy:  # workspaces the kernel can take (d padded with zeros, 16-byte aligned), the plan's
        buffers = [padded_workspace(x, kd, f"{rung}'s padded {x.name}") for x in (q, k, v, out)]
        views = [cupy.asarray(x) for x in buffers]
        pointers = [int(cuda_cpp.pointer(x)) for x in buffers]

    def masked(causal: bool) -> Steps:
        args = (POINTER, POINTER, POINTER, POINTER, *sizes, np.int32(causal))
        launch = cupy_launch(kernel, grid, (threads,), smem, args)

        def direct(q: Operand, k: Operand, v: Operand, out: Operand) -> None:
            launch(q.ptr, k.ptr, v.ptr, out.ptr)

        def padded(q: Operand, k: Operand, v: Operand, out: Operand) -> None:
            for x, view in zip((q, k, v), views[:3], strict=True):
                view[..., :d] = bits_view(x)
            launch(*pointers)
            bits_view(out)[...] = views[3][..., :d]

        return Steps(padded if copy else direct, launch)

    return Masks(masked(False), masked(True))
