"""What the CUDA C++ (tensor-core) GEMM rungs share: operand checks and edge handling.

Each C++ kernel assumes M, N and K are multiples of its tiles and that every row starts on a
16-byte boundary, which keeps its inner loop free of bounds checks. ``launch_tiled`` makes any
input fit: when a size is not a multiple of the tiles (or a pointer is misaligned) it copies
the operands into zero-padded buffers, runs the kernel there and copies C's valid part back.
Zero rows and columns add nothing to the product, so the result is exact; the copies cost
time only at such sizes, never at the benchmark sizes, which are multiples of every tile.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ladder.core.cuda_cpp import pointer
from ladder.gemm.problem import check_operands

Body = Callable[[np.uint64, np.uint64, np.uint64, int, int, int], None]
ALIGN = 16  # bytes: 16-byte vector loads, cp.async and the bulk tensor copy need it


def _round_up(x: int, tile: int) -> int:
    return (x + tile - 1) // tile * tile


def launch_tiled(
    A: Any, B: Any, C: Any, tiles: tuple[int, int, int], body: Body, dtype: str = "float16"
) -> Any:
    """Validate A, B, C and run ``body(a, b, c, M, N, K)`` on tile-multiple operands."""
    import cupy

    A, B, C, m, n, k = check_operands(A, B, C, dtype)
    if m == 0 or n == 0:
        return C
    if k == 0:
        cupy.asarray(C).fill(0)
        return C
    tm, tn, tk = tiles
    mp, np_, kp = _round_up(m, tm), _round_up(n, tn), _round_up(k, tk)
    aligned = all(int(pointer(x)) % ALIGN == 0 for x in (A, B, C))
    if (mp, np_, kp) == (m, n, k) and aligned:
        body(pointer(A), pointer(B), pointer(C), m, n, k)
        return C
    a = cupy.zeros((mp, kp), dtype=dtype)
    b = cupy.zeros((kp, np_), dtype=dtype)
    c = cupy.empty((mp, np_), dtype=dtype)
    a[:m, :k] = cupy.asarray(A)
    b[:k, :n] = cupy.asarray(B)
    body(pointer(a), pointer(b), pointer(c), mp, np_, kp)
    cupy.asarray(C)[...] = c[:m, :n]
    return C
