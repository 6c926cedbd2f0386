"""What the CUDA C++ attention rungs (5 to 11) share: the head dimensions their kernels are built
for, zero-padded workspaces, and the plan that launches one of their kernels with or without
the causal mask. A library, not a rung: each rung picks its kernel and passes it here.

Every kernel takes (Q, K, V, O, N, H, HKV, scale_log2, causal), float16 (the wgmma rungs also
bfloat16: the kernel's name ends in ``_bf16``), d in HEAD_DIMS and 16-byte aligned pointers;
the TMA rungs (9 to 11) take tensor maps of K and V in place of their pointers, then Q and
O (``tma_launch``). ``plan`` copies operands into zero-padded, aligned workspaces when they
are not (the memory table shows them).
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
ALIGN = 16  # bytes: cp.async copies 16-byte chunks; TMA needs 16-byte addresses and strides


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
    block_rows: int, threads: int, packed: bool, rung: str, tma_rows: int = 0,
) -> Masks:  # fmt: skip
    """``kernel`` (built for ``kernel_d`` of q's head dimension and q's dtype; ``packed``: rung
    6's layout, a block over the rows of the query heads that share a K/V head) on these operands:
    its grid of ``block_rows`` query rows a block, and its launch without and with the causal
    mask. ``tma_rows``: the kernel takes K and V as tensor maps of boxes of that many keys
    (``tma_launch``), then Q and O."""
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
        if tma_rows:  # (tensor map of K, of V, Q, O, sizes...)
            launch = tma_launch(kernel, grid, threads, smem, k, kd, tma_rows, (*sizes, causal))

            def run(q: int, k: int, v: int, out: int) -> None:
                launch(k, v, q, out)

        else:  # (Q, K, V, O, sizes...)
            args = (POINTER, POINTER, POINTER, POINTER, *sizes, np.int32(causal))
            run = launch = cupy_launch(kernel, grid, (threads,), smem, args)

        def direct(q: Operand, k: Operand, v: Operand, out: Operand) -> None:
            run(q.ptr, k.ptr, v.ptr, out.ptr)

        def padded(q: Operand, k: Operand, v: Operand, out: Operand) -> None:
            for x, view in zip((q, k, v), views[:3], strict=True):
                view[..., :d] = bits_view(x)
            run(*pointers)
            bits_view(out)[...] = views[3][..., :d]

        return Steps(padded if copy else direct, launch)

    return Masks(masked(False), masked(True))


def tma_launch(
    kernel: Any, grid: tuple[int, ...], threads: int, smem: int, k: Operand, kd: int,
    rows: int, scalars: tuple[Any, ...],
) -> Any:  # fmt: skip
    """The launch of a kernel that takes (tensor map of K, of V, Q, O, scalars...):
    ``launch(k, v, q, o)`` with device pointers. K and V, (B, HKV, N, kd) and contiguous, are
    mapped as B HKV layers of N x kd, in boxes of ``rows`` keys x 64 columns (128 bytes,
    swizzled), so that a box never reads the next head's keys and keys past N arrive as zeros;
    the maps are made once per pair of addresses (``TensorMapLaunch``)."""
    from ladder.gemm.hopper import tensor_map
    from ladder.gemm.tensor_core import TensorMapLaunch

    batch, kv_heads, n, _ = k.shape
    dtype = k.dtype

    def maps(k_ptr: int, v_ptr: int) -> tuple[np.ndarray, np.ndarray]:
        layers = batch * kv_heads
        return tuple(tensor_map(p, n, kd, rows, 64, dtype, layers) for p in (k_ptr, v_ptr))

    values = (*scalars[:-1], np.int32(scalars[-1]))
    return TensorMapLaunch(kernel, grid, (threads,), smem, maps, values, pointers=2)
