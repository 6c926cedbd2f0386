"""What the backward's Numba rungs share: ``D = rowsum(dO ∘ O)``.

D_i = Σ_c dO_ic·O_ic is the term every dS = P ∘ (dP − D) subtracts; it needs no key, so one
small kernel computes it for every query row before the kernels that walk the keys.
"""

from __future__ import annotations

from numba import cuda, float32

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


def delta_grid(batch: int, heads: int, n: int) -> tuple[int, int]:
    """``delta_kernel``'s grid and block over B·H·N rows: the step ``(delta_kernel,
    *delta_grid(...), (o, do, delta))``."""
    rows = batch * heads * n
    return (rows + ROW_THREADS - 1) // ROW_THREADS, ROW_THREADS
