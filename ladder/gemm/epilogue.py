"""The tensor-core rungs of the gemm-epilogue problem (C = gelu(A @ B + bias), float16 and
bfloat16): their registration, plans and padding.

A library, not a rung, as ``problem_fp8`` is for the FP8 rung: a rung's geometry describes its
kernel's launch for tile-multiple sizes (``launch(a, b, c, bias, stream=...)`` with device
pointers); ``EpilogueLauncher`` runs it on any size, on the operands themselves where their
sizes are tile multiples and their addresses 16-byte aligned, else on zero-padded copies of
A, B and the bias (zero rows, columns and bias entries change nothing of C's own part), C's
part copied back.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ladder.core.fastcall import Operand, PlanCache, bits_view
from ladder.core.geometry import rung_launcher
from ladder.core.rung import rung
from ladder.fused.problem import GEMM_EPILOGUE, operands
from ladder.gemm.tensor_core import ALIGN, padded_sizes

DTYPES = ("float16", "bfloat16")
KernelFor = Callable[[int, int, int, str], Callable[..., None]]


class EpilogueLauncher:
    """Plans per operand signature (``ladder.core.fastcall``), as ``tensor_core.TiledLauncher``
    keeps them for A and B: ``plans(a, b, bias, c)(a, b, bias, c)``; the kernels' launches
    by padded (M, N, K) and dtype."""

    def __init__(self, tiles: tuple[int, int, int], kernel_for: KernelFor) -> None:
        self.tiles = tiles
        self.kernels = PlanCache(kernel_for)
        self.plans = PlanCache(self._plan)

    def _plan(self, a: Operand, b: Operand, bias: Operand, c: Operand) -> Any:
        (m, k), n = a.shape, b.shape[1]
        if m == 0 or n == 0:
            return lambda *ops: None
        # K = 0 runs on one K tile of zeros: C = gelu(0 + bias), as the definition says
        padded = padded_sizes(m, n, max(k, 1), self.tiles)
        kernel = self.kernels(*padded, a.dtype)
        if padded == (m, n, k) and all(x.align >= ALIGN for x in (a, b, bias, c)):
            return lambda a, b, bias, c: kernel(a.ptr, b.ptr, c.ptr, bias.ptr)
        return _Padded(kernel, padded)


class _Padded:
    """The kernel on zero-padded copies of A, B and the bias, C's part copied back; the copies
    are the plan's, allocated (zeroed) at its first call."""

    def __init__(self, kernel: Callable[..., None], padded: tuple[int, int, int]) -> None:
        self.kernel, self.padded = kernel, padded
        self.pa: Any = None

    def __call__(self, a: Operand, b: Operand, bias: Operand, c: Operand) -> None:
        (m, k), n = a.shape, b.shape[1]
        if self.pa is None:
            import cupy

            mp, np_, kp = self.padded
            self.pa = cupy.zeros((mp, kp), dtype=np.uint16)
            self.pb = cupy.zeros((kp, np_), dtype=np.uint16)
            self.pbias = cupy.zeros(np_, dtype=np.uint16)
            self.pc = cupy.empty((mp, np_), dtype=np.uint16)
        if k:  # K = 0: A and B have no memory (a null pointer); their copies stay zero
            self.pa[:m, :k] = bits_view(a)
            self.pb[:k, :n] = bits_view(b)
        self.pbias[:n] = bits_view(bias)
        self.kernel(self.pa.data.ptr, self.pb.data.ptr, self.pc.data.ptr, self.pbias.data.ptr)
        bits_view(c)[...] = self.pc[:m, :n]


def epilogue_rung(
    *, tiles: tuple[int, int, int], **options: Any
) -> Callable[[KernelFor], KernelFor]:
    """Register a gemm-epilogue rung from ``geometry(M, N, K, dtype)``, its kernel's launch for
    multiples of ``tiles``, with ``rung``'s options, and return the geometry as it is. The
    launcher registered, ``launch(A, B, bias, C=None)``, validates (``operands``, the
    problem's), finds the plan for the operands' signature and runs it."""

    def decorate(geometry: KernelFor) -> KernelFor:
        plans = EpilogueLauncher(tiles, geometry).plans

        def launch(A: Any, B: Any, bias: Any, C: Any = None) -> Any:
            (a, b, bias_), c, _ = operands(GEMM_EPILOGUE, (A, B, bias), C, DTYPES)
            plans(a, b, bias_, c)(a, b, bias_, c)
            return c.obj

        registered = rung_launcher(launch, geometry, plans)
        rung(problem=GEMM_EPILOGUE.name, dtypes=DTYPES, **options)(registered)
        return geometry

    return decorate
