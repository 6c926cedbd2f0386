"""What the backward's Numba rungs share: ``D = rowsum(dO ∘ O)`` and their float32 workspaces.

D_i = Σ_c dO_ic·O_ic is the term every dS = P ∘ (dP − D) subtracts; it needs no key, so one
small kernel computes it for every query row before the kernels that walk the keys.
"""

from __future__ import annotations

import numpy as np
from numba import cuda, float32

from ladder.attention import memory
from ladder.core.fastcall import NumbaLaunch, Operand, intake

ROW_THREADS = 128  # delta_kernel: one thread per query row


@cuda.jit
def delta_kernel(o, do, delta):
    heads, n, d = o.shape[1], o.shape[2], o.shape[3]
    row = cuda.blockIdx.x * ROW_THREADS + cuda.threadIdx.x
    if row < o.shape[0] * heads * n:
        b, h, i = row // (heads * n), row // n % heads, row % n
        acc = float32(0.0)
        for c in range(d):
            acc += float32(do[b, h, i, c]) * float32(o[b, h, i, c])
        delta[b, h, i] = acc


def delta_launch(batch: int, heads: int, n: int) -> NumbaLaunch:
    """``delta_kernel`` over B·H·N rows: ``launch(o, do, delta)``."""
    rows = batch * heads * n
    return NumbaLaunch(delta_kernel, (rows + ROW_THREADS - 1) // ROW_THREADS, ROW_THREADS)


def workspace(shape: tuple[int, ...], name: str, what: str) -> Operand:
    """A float32 device array that a plan owns, as an ``Operand`` called ``name``; ``what``
    names it in the error raised when it cannot fit (``memory.empty``)."""
    return intake(memory.empty(shape, np.float32, what), name)
