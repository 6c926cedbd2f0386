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
from ladder.core.dtypes import name_of
from ladder.gemm.problem import check_operands

Body = Callable[[np.uint64, np.uint64, np.uint64, int, int, int], None]
ALIGN = 16  # bytes: 16-byte vector loads, cp.async and the bulk tensor copy need it


def _round_up(x: int, tile: int) -> int:
    return (x + tile - 1) // tile * tile


def operand_dtype(A: Any, supported: tuple[str, ...]) -> str:
    """The dtype of A if the rung supports it; a clear TypeError otherwise."""
    found = name_of(getattr(A, "dtype", "unknown"))
    if found not in supported:
        raise TypeError(f"A must be {' or '.join(supported)}, got {found}")
    return found


def _cupy_view(arr: Any) -> Any:
    """A CuPy view of a 2-byte-element device array, as uint16 (CuPy has no bfloat16): the
    padding below only copies bits, and all-zero bits are +0.0 in float16 and bfloat16."""
    import cupy

    memory = cupy.cuda.UnownedMemory(int(pointer(arr)), arr.size * 2, owner=arr)
    return cupy.ndarray(tuple(arr.shape), np.uint16, cupy.cuda.MemoryPointer(memory, 0))


def launch_tiled(
    A: Any, B: Any, C: Any, tiles: tuple[int, int, int], body: Body, dtype: str = "float16"
) -> Any:
    """Validate A, B, C and run ``body(a, b, c, M, N, K)`` on tile-multiple operands."""
    import cupy

    A, B, C, m, n, k = check_operands(A, B, C, dtype)
    if m == 0 or n == 0:
        return C
    if k == 0:
        _cupy_view(C).fill(0)
        return C
    tm, tn, tk = tiles
    mp, np_, kp = _round_up(m, tm), _round_up(n, tn), _round_up(k, tk)
    aligned = all(int(pointer(x)) % ALIGN == 0 for x in (A, B, C))
    if (mp, np_, kp) == (m, n, k) and aligned:
        body(pointer(A), pointer(B), pointer(C), m, n, k)
        return C
    a = cupy.zeros((mp, kp), dtype=np.uint16)
    b = cupy.zeros((kp, np_), dtype=np.uint16)
    c = cupy.empty((mp, np_), dtype=np.uint16)
    a[:m, :k] = _cupy_view(A)
    b[:k, :n] = _cupy_view(B)
    body(pointer(a), pointer(b), pointer(c), mp, np_, kp)
    _cupy_view(C)[...] = c[:m, :n]
    return C
