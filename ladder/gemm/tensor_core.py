"""What the CUDA C++ (tensor-core) GEMM rungs share: operand checks and edge handling.

Each C++ kernel assumes M, N and K are multiples of its tiles and that every row starts on a
16-byte boundary, which keeps its inner loop free of bounds checks. ``launch_tiled`` makes any
input fit: when a size is not a multiple of the tiles (or a pointer is misaligned) it copies
the operands into zero-padded buffers, runs the kernel there and copies C's valid part back.
Zero rows and columns add nothing to the product, so the result is exact; the copies cost
time only at such sizes, never at the benchmark sizes, which are multiples of every tile.
``TiledLauncher`` does the same with its decisions and the kernel's packed launch kept per
operand signature (``ladder.core.fastcall``), for a host time per call of a few µs.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from ladder.core.dtypes import name_of
from ladder.core.fastcall import Operand, PlanCache, numba_array
from ladder.gemm.problem import operands

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


def _view(op: Operand) -> Any:
    """A CuPy view of a 2-byte-element device array, as uint16 (CuPy has no bfloat16): the
    padding below only copies bits, and all-zero bits are +0.0 in float16 and bfloat16."""
    import cupy

    memory = cupy.cuda.UnownedMemory(op.ptr, int(np.prod(op.shape)) * 2, owner=op.base)
    return cupy.ndarray(op.shape, np.uint16, cupy.cuda.MemoryPointer(memory, 0))


Run = Callable[[int, int, int, int, int, int], None]  # (a, b, c pointers, M, N, K)


def _padded(run: Run, a: Operand, b: Operand, c: Operand, padded: tuple[int, int, int]) -> None:
    """``run`` on zero-padded copies of A and B of the ``padded`` sizes; C's part copied back."""
    import cupy

    (m, k), n = a.shape, b.shape[1]
    mp, np_, kp = padded
    pa = cupy.zeros((mp, kp), dtype=np.uint16)
    pb = cupy.zeros((kp, np_), dtype=np.uint16)
    pc = cupy.empty((mp, np_), dtype=np.uint16)
    pa[:m, :k] = _view(a)
    pb[:k, :n] = _view(b)
    run(pa.data.ptr, pb.data.ptr, pc.data.ptr, mp, np_, kp)
    _view(c)[...] = pc[:m, :n]


def _padded_sizes(m: int, n: int, k: int, tiles: tuple[int, int, int]) -> tuple[int, int, int]:
    tm, tn, tk = tiles
    return _round_up(m, tm), _round_up(n, tn), _round_up(k, tk)


def launch_tiled(
    A: Any, B: Any, C: Any, tiles: tuple[int, int, int], body: Body, dtype: str = "float16"
) -> Any:
    """Validate A, B, C and run ``body(a, b, c, M, N, K)`` on tile-multiple operands."""
    a, b, c, m, n, k = operands(A, B, C, dtype)
    out = numba_array(c)
    if m == 0 or n == 0:
        return out
    if k == 0:
        _view(c).fill(0)
        return out

    def run(pa: int, pb: int, pc: int, mm: int, nn: int, kk: int) -> None:
        body(np.uint64(pa), np.uint64(pb), np.uint64(pc), mm, nn, kk)

    padded = _padded_sizes(m, n, k, tiles)
    if padded == (m, n, k) and all(x.ptr % ALIGN == 0 for x in (a, b, c)):
        run(a.ptr, b.ptr, c.ptr, m, n, k)
    else:
        _padded(run, a, b, c, padded)
    return out


KernelFor = Callable[[int, int, int], Callable[..., None]]


def _nothing(a: Operand, b: Operand, c: Operand) -> None:
    return None


def _zeros(a: Operand, b: Operand, c: Operand) -> None:
    _view(c).fill(0)  # K = 0: C = A @ B is all zeros


class TiledLauncher:
    """``launch_tiled`` with what it decides kept per operand signature (``fastcall``).

    ``kernel_for(M, N, K)`` returns the kernel's launch for tile-multiple sizes,
    ``launch(a, b, c, stream=...)`` with device pointers (``fastcall.cupy_launch``). A plan,
    one per signature of A, B and C (shapes, strides, dtypes, alignment), is that launch on
    the operands themselves or on padded copies; a repeated call validates, finds its plan and
    launches. Returns the C it was given (or the one it allocated), not a view of it.
    """

    def __init__(self, tiles: tuple[int, int, int], kernel_for: KernelFor) -> None:
        self.tiles = tiles
        self.kernels = PlanCache(kernel_for)  # by padded (M, N, K)
        self.plans = PlanCache(self._plan)

    def __call__(self, A: Any, B: Any, C: Any = None, dtype: str = "float16") -> Any:
        a, b, c, _, _, _ = operands(A, B, C, dtype)
        self.plans(a, b, c)(a, b, c)
        return c.obj

    def _plan(self, a: Operand, b: Operand, c: Operand) -> Callable[..., None]:
        import cupy

        (m, k), n = a.shape, b.shape[1]
        if m == 0 or n == 0:
            return _nothing
        if k == 0:
            return _zeros
        padded = _padded_sizes(m, n, k, self.tiles)
        kernel = self.kernels(*padded)
        current = cupy.cuda.get_current_stream  # where CuPy's own launch would go

        if padded == (m, n, k) and all(x.align >= ALIGN for x in (a, b, c)):

            def direct(a: Operand, b: Operand, c: Operand) -> None:
                kernel(a.ptr, b.ptr, c.ptr, stream=current().ptr)

            return direct

        def run(pa: int, pb: int, pc: int, mm: int, nn: int, kk: int) -> None:
            kernel(pa, pb, pc, stream=current().ptr)

        return functools.partial(_padded, run, padded=padded)
