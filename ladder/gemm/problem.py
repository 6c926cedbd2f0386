"""GEMM: C = A @ B for row-major A (M x K), B (K x N), C (M x N).

Three dtypes: float32 throughout, and float16 or bfloat16 inputs and output with float32
accumulation (the contract of cuBLAS HGEMM and of the tensor cores). The float64 reference
multiplies the rounded inputs, so only the kernel's own rounding is measured.

Work: 2·M·N·K floating-point operations. Fewest bytes: read A and B once and write C once,
(M·K + K·N + M·N) · itemsize. At M = N = K = 4096 in float32 that is 137 GFLOP over 201 MB:
about 680 FLOP per byte, far above any GPU's balance point, so a good kernel is bound by
arithmetic and the figure that matters is TFLOP/s.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from ladder.core import device, float64
from ladder.core.dtypes import resolve
from ladder.core.fastcall import Operand, PlanCache, intake, numba_array, output
from ladder.core.geometry import plan_of, rung_launcher
from ladder.core.rung import Problem, register_problem, rung
from ladder.gemm import tensor_core

MAX_GRID_Y = 65535  # gridDim.y (and .z) limit on every CUDA GPU; gridDim.x allows 2**31 - 1
# sizes off every tile: K = 1 and K = 0, 4-aligned ones (the float4 paths) and others (the
# padded paths of the tensor-core rungs); the simulator runs the first ones only
SIMULATOR_TEST_SIZES = [(1, 1, 1), (17, 33, 65), (129, 7, 70), (20, 36, 68), (3, 5, 0)]
TEST_SIZES = [
    *SIMULATOR_TEST_SIZES,
    (257, 515, 1031),
    (1000, 1004, 996),
    (2048, 2052, 64),
    (1, 4099, 513),
]


class GemmProblem(Problem):
    name = "gemm"
    bound = "compute"
    dtypes = ("float32", "float16", "bfloat16")
    size_names = ("M", "N", "K")
    size_help = "M N K: C (M x N) = A (M x K) @ B (K x N)"

    def sanitize_sizes(self) -> list[tuple[int, ...]]:
        return [(33, 65, 17), (130, 258, 70)]

    def standard_sizes(self, dtype: str = "float32") -> list[tuple[int, ...]]:
        if dtype != "float32":  # tensor cores: 4096 is only ~0.2 ms for cuBLAS, so add 8192
            return [(4096, 4096, 4096), (8192, 8192, 8192)]
        return [(1024, 1024, 1024), (4096, 4096, 4096)]

    def simulator_sizes(self, dtype: str = "float32") -> list[tuple[int, ...]]:
        return [(17, 33, 65)]

    def test_sizes(self, dtype: str = "float32") -> list[tuple[int, ...]]:
        return list(TEST_SIZES)

    def make_inputs(
        self, size: tuple[int, ...], dtype: str = "float32", seed: int = 0
    ) -> tuple[np.ndarray, ...]:
        m, n, k = size
        rng = np.random.default_rng(seed)
        a = rng.uniform(-1.0, 1.0, size=(m, k)).astype(resolve(dtype))
        b = rng.uniform(-1.0, 1.0, size=(k, n)).astype(resolve(dtype))
        return a, b

    def reference(self, inputs: tuple[np.ndarray, ...]) -> np.ndarray:
        a, b = inputs
        return float64.matmul(a, b)

    def output_shape(self, size: tuple[int, ...]) -> tuple[int, ...]:
        m, n, _ = size
        return (m, n)

    def flops(self, size: tuple[int, ...]) -> float:
        m, n, k = size
        return 2.0 * m * n * k

    def min_bytes(self, size: tuple[int, ...], dtype: str) -> float:
        m, n, k = size
        return float((m * k + k * n + m * n) * resolve(dtype).itemsize)

    def tolerance(self, dtype: str) -> float:
        # bfloat16 keeps 8 significant bits against float16's 11: rounding C alone costs
        # about 2e-3 relative, so its bound is looser
        return {"float32": 1e-5, "float16": 2e-3, "bfloat16": 1e-2}[dtype]

    def ceiling_key(self, dtype: str) -> str:
        return {"float32": "cublas_fp32_tflops"}.get(dtype, "cublas_fp16_tflops")


PROBLEM = register_problem(GemmProblem())


def operands(
    a: Any, b: Any, c: Any, dtype: str = "float32"
) -> tuple[Operand, Operand, Operand, int, int, int]:
    """Validate A, B and (optional) C for C = A @ B; allocate C when it is None.

    Returns the three as ``Operand`` records (``ladder.core.fastcall``) and (M, N, K). Every
    launcher validates through this, so every rung refuses bad input with the same messages.
    """
    a = intake(a, "A")
    b = intake(b, "B")
    for name, arr in (("A", a), ("B", b)):
        if arr.ndim != 2:
            raise ValueError(f"{name} must be 2-D, got shape {arr.shape}")
        if arr.dtype != dtype:
            raise TypeError(f"{name} must be {dtype}, got {arr.dtype}")
        if not arr.contiguous:
            raise ValueError(f"{name} must be C-contiguous (row-major); copy it first")
    m, k = a.shape
    k2, n = b.shape
    if k != k2:
        raise ValueError(f"inner dimensions differ: A is {m}x{k}, B is {k2}x{n}")
    return a, b, output(c, (m, n), dtype, "C"), m, n, k


def check_operands(
    a: Any, b: Any, c: Any, dtype: str = "float32"
) -> tuple[Any, Any, Any, int, int, int]:
    """``operands``, returning Numba device arrays (the caller's own when they are): for the
    launchers that hand their arrays to a Numba dispatcher."""
    a, b, c, m, n, k = operands(a, b, c, dtype)
    return numba_array(a), numba_array(b), numba_array(c), m, n, k


def grid_2d(x_count: int, x_tile: int, y_count: int, y_tile: int) -> tuple[int, int]:
    """Blocks to cover x_count by y_count in tiles, refusing sizes beyond gridDim.y."""
    grid = ((x_count + x_tile - 1) // x_tile, (y_count + y_tile - 1) // y_tile)
    if grid[1] > MAX_GRID_Y:
        raise ValueError(
            f"this size needs {grid[1]} blocks along the grid's y dimension, which allows "
            f"{MAX_GRID_Y}: {y_count} rows in tiles of {y_tile}"
        )
    return grid


class ByAlignment(NamedTuple):
    """A rung's kernel built two ways: ``wide`` makes 16-byte accesses, which every row of A,
    B and C must allow (``aligned_for_float4``), ``scalar`` does not. A geometry returns one
    in place of a kernel; the plan for each signature of the operands takes the one it allows."""

    wide: Any
    scalar: Any


Geometry = Callable[..., Any]


def _numba_plan(geometry: Geometry, a: Operand, b: Operand, c: Operand) -> Any:
    """The launch a Numba rung's ``geometry(M, N, K)`` describes for these operands: its
    kernel (of a ``ByAlignment``, the one they allow) on its grid and block."""
    m, n = c.shape
    kernel, *launch = geometry(m, n, a.shape[1])
    if type(kernel) is ByAlignment:
        kernel = kernel.wide if aligned_for_float4(a, b, c) else kernel.scalar
    return plan_of((kernel, *launch), (a, b, c))


def gemm_rung(
    *,
    dtypes: tuple[str, ...] = ("float32",),
    tiles: tuple[int, int, int] | None = None,
    transposed: Geometry | None = None,
    **options: Any,
) -> Callable[[Geometry], Geometry]:
    """Register a GEMM rung (C = A @ B) from its launch geometry, with ``rung``'s options
    (name, parent, title, needs, units, min_cc, ...), and return the geometry as it is.

    A Numba rung's ``geometry(M, N, K)`` returns ``(kernel, grid, block)``, with the dynamic
    shared memory after it where the kernel takes some; ``kernel`` may be a ``ByAlignment``.
    A CUDA C++ rung gives ``tiles`` (BM, BN, BK): its ``geometry(M, N, K, dtype)`` is called
    for tile multiples only and returns ``(kernel, grid, block, shared_mem)``, the kernel
    taking (A, B, C, M, N, K), or a launch of its own (``hopper.gemm_launch``);
    ``tensor_core.TiledLauncher`` pads other sizes. ``transposed``, for a C++ rung, is the
    geometry ``(M, N, K, dtype, layout)`` of its entry that reads Aᵀ or Bᵀ in place
    (``Rung.transposed``, ``tensor_core.transposed_launcher``).

    The launcher registered, ``launch(A, B, C=None)``, validates (``operands``: A's dtype one of
    ``dtypes``), finds the plan for the operands' signature (a ``PlanCache``, ``launch.plans``)
    and launches it: what every rung's own launcher did before, written once."""
    dtype = dtypes[0]

    def decorate(geometry: Geometry) -> Geometry:
        if tiles is None:
            plans = PlanCache(functools.partial(_numba_plan, geometry))

            if len(dtypes) == 1:

                def launch(A: Any, B: Any, C: Any = None) -> Any:
                    a, b, c, m, n, _ = operands(A, B, C, dtype)
                    if m and n:
                        plans(a, b, c)(a, b, c)
                    return c.obj

            else:

                def launch(A: Any, B: Any, C: Any = None) -> Any:
                    a = intake(A, "A")  # read once: operands takes the Operand as it is
                    a, b, c, m, n, _ = operands(a, B, C, tensor_core.operand_dtype(a, dtypes))
                    if m and n:
                        plans(a, b, c)(a, b, c)
                    return c.obj

        else:
            plans = tensor_core.TiledLauncher(tiles, geometry).plans

            if len(dtypes) == 1:

                def launch(A: Any, B: Any, C: Any = None) -> Any:
                    a, b, c, _, _, _ = operands(A, B, C, dtype)
                    plans(a, b, c)(a, b, c)
                    return c.obj

            else:

                def launch(A: Any, B: Any, C: Any = None) -> Any:
                    a = intake(A, "A")  # read once: operands takes the Operand as it is
                    a, b, c, _, _, _ = operands(a, B, C, tensor_core.operand_dtype(a, dtypes))
                    plans(a, b, c)(a, b, c)
                    return c.obj

            if transposed is not None:
                options["transposed"] = tensor_core.transposed_launcher(transposed, tiles)
        rung(dtypes=dtypes, **options)(rung_launcher(launch, geometry, plans))
        return geometry

    return decorate


def aligned_for_float4(*arrays: Any) -> bool:
    """True when every row of every array starts on a 16-byte boundary (float4 loads allowed).

    Takes ``Operand`` records or device arrays (whose pointer counts as 0 in the simulator)."""
    for arr in arrays:
        if arr.shape[1] % 4 != 0:
            return False
        if isinstance(arr, Operand):
            pointer = arr.ptr
        else:
            pointer = arr.__cuda_array_interface__["data"][0] if not device.simulator() else 0
        if pointer % 16 != 0:
            return False
    return True
