"""Memory-bound problems where fusion pays: an elementwise chain, row softmax, layer norm, and
a GEMM with a bias + GELU epilogue.

The first three move each byte of their input and output once at best and do a few operations
per element, far below any GPU's balance point: they are bound by memory, and the figure that
matters is bytes per second against the measured device-to-device copy bandwidth. A rung that
runs several kernels moves more than the minimum: its launcher declares the bytes it actually
moves (``bytes_moved``), and reports show both.

Every launcher takes device arrays (inputs first, then an optional output) and returns the
output; ``operands`` validates them the same way for every rung. A rung declares its launch
geometry and registers it with ``fused_rung``, which keeps what it decides per signature of the
operands (``ladder.core.fastcall``: a plan); a rung of several kernels keeps the buffers between
them in its plans (``workspace``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ladder.core import float64
from ladder.core.dtypes import resolve
from ladder.core.fastcall import PLANS_PER_CACHE, Operand, PlanCache, intake, numba_array, output
from ladder.core.geometry import plan_of, reshaped, rung_launcher
from ladder.core.rung import Problem, register_problem, rung

LAYERNORM_EPS = 1e-5
# plans kept by a rung whose plans hold buffers the size of x (each plan its own): a few
# shapes' worth of device memory, not fastcall's PLANS_PER_CACHE
WORKSPACE_PLANS = 4
TEST_SHAPES = [(1, 1), (1, 257), (257, 1), (1000, 33), (3, 50000), (65, 1030)]


class _RowwiseProblem(Problem):
    """Shared parts of the problems over a rows x cols matrix."""

    name = ""
    bound = "memory"
    dtypes: tuple[str, ...] = ("float32", "float16")
    size_names = ("ROWS", "COLS")
    size_help = "ROWS COLS: the rows x cols matrix x, each row on its own"

    def sanitize_sizes(self) -> list[tuple[int, ...]]:
        return [(33, 65), (5, 1030)]

    def standard_sizes(self, dtype: str = "float32") -> list[tuple[int, ...]]:
        return [(8192, 8192)]

    def simulator_sizes(self, dtype: str = "float32") -> list[tuple[int, ...]]:
        return [(3, 65)]  # few rows: the simulator runs each block's threads in Python

    def test_sizes(self, dtype: str = "float32") -> list[tuple[int, ...]]:
        return list(TEST_SHAPES)

    def output_shape(self, size: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(size[:2])

    def flops(self, size: tuple[int, ...]) -> float:
        return 0.0  # memory-bound: reported in TB/s

    def tolerance(self, dtype: str) -> float:
        return {"float32": 1e-5, "float16": 2e-3}[dtype]

    def ceiling_key(self, dtype: str) -> str:
        return "copy_tbps"

    def _x(self, size: tuple[int, ...], dtype: str, rng: np.random.Generator) -> np.ndarray:
        rows, cols = size
        return rng.uniform(-4.0, 4.0, size=(rows, cols)).astype(resolve(dtype))


class ElementwiseProblem(_RowwiseProblem):
    """y = relu(a * x + b): x is rows x cols, a and b are per-column vectors (length cols)."""

    name = "elementwise"

    def make_inputs(self, size: tuple[int, ...], dtype: str = "float32", seed: int = 0):
        rng = np.random.default_rng(seed)
        x = self._x(size, dtype, rng)
        a = rng.uniform(0.5, 1.5, size=size[1]).astype(resolve(dtype))
        b = rng.uniform(-0.5, 0.5, size=size[1]).astype(resolve(dtype))
        return x, a, b

    def reference(self, inputs: tuple[np.ndarray, ...]) -> np.ndarray:
        x, a, b = (v.astype(np.float64) for v in inputs)
        return np.maximum(a * x + b, 0.0)

    def min_bytes(self, size: tuple[int, ...], dtype: str) -> float:
        rows, cols = size
        return float((2 * rows * cols + 2 * cols) * resolve(dtype).itemsize)


class SoftmaxProblem(_RowwiseProblem):
    """y = softmax(x) along each row of a rows x cols matrix."""

    name = "softmax"

    def make_inputs(self, size: tuple[int, ...], dtype: str = "float32", seed: int = 0):
        return (self._x(size, dtype, np.random.default_rng(seed)),)

    def reference(self, inputs: tuple[np.ndarray, ...]) -> np.ndarray:
        x = inputs[0].astype(np.float64)
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    def min_bytes(self, size: tuple[int, ...], dtype: str) -> float:
        rows, cols = size
        return float(2 * rows * cols * resolve(dtype).itemsize)


class LayerNormProblem(_RowwiseProblem):
    """y = (x - mean) / sqrt(var + eps) * gamma + beta along each row (biased variance)."""

    name = "layernorm"
    dtypes = ("float32",)

    def make_inputs(self, size: tuple[int, ...], dtype: str = "float32", seed: int = 0):
        rng = np.random.default_rng(seed)
        x = (self._x(size, dtype, rng) + 3.0).astype(resolve(dtype))  # a mean far from 0
        gamma = rng.uniform(0.5, 1.5, size=size[1]).astype(resolve(dtype))
        beta = rng.uniform(-0.5, 0.5, size=size[1]).astype(resolve(dtype))
        return x, gamma, beta

    def reference(self, inputs: tuple[np.ndarray, ...]) -> np.ndarray:
        x, gamma, beta = (v.astype(np.float64) for v in inputs)
        mean = x.mean(axis=1, keepdims=True)
        var = ((x - mean) ** 2).mean(axis=1, keepdims=True)
        return (x - mean) / np.sqrt(var + LAYERNORM_EPS) * gamma + beta

    def min_bytes(self, size: tuple[int, ...], dtype: str) -> float:
        rows, cols = size
        return float((2 * rows * cols + 2 * cols) * resolve(dtype).itemsize)


def gelu64(x: np.ndarray) -> np.ndarray:
    """GELU, the erf form, in float64."""
    erf = np.vectorize(math.erf, otypes=[np.float64])
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


class GemmEpilogueProblem(Problem):
    """C = gelu(A @ B + bias) for row-major A (M x K), B (K x N), bias (N): float32 for the
    Numba rungs, float16 and bfloat16 for the tensor cores' (C in the inputs' type, FP32
    accumulation)."""

    name = "gemm-epilogue"
    bound = "compute"
    dtypes = ("float32", "float16", "bfloat16")
    size_names = ("M", "N", "K")
    size_help = "M N K: C (M x N) = gelu(A (M x K) @ B (K x N) + bias (N))"

    def sanitize_sizes(self) -> list[tuple[int, ...]]:
        return [(33, 65, 17), (130, 258, 70)]

    def standard_sizes(self, dtype: str = "float32") -> list[tuple[int, ...]]:
        return [(4096, 4096, 4096)]

    def simulator_sizes(self, dtype: str = "float32") -> list[tuple[int, ...]]:
        return [(17, 33, 65)]

    def test_sizes(self, dtype: str = "float32") -> list[tuple[int, ...]]:
        return [(1, 1, 1), (17, 33, 65), (20, 36, 68), (1, 130, 7)]

    def make_inputs(self, size: tuple[int, ...], dtype: str = "float32", seed: int = 0):
        m, n, k = size
        rng = np.random.default_rng(seed)
        a = rng.uniform(-1.0, 1.0, size=(m, k)).astype(resolve(dtype))
        b = rng.uniform(-1.0, 1.0, size=(k, n)).astype(resolve(dtype))
        bias = rng.uniform(-1.0, 1.0, size=n).astype(resolve(dtype))
        return a, b, bias

    def reference(self, inputs: tuple[np.ndarray, ...]) -> np.ndarray:
        a, b, bias = inputs
        return gelu64(float64.matmul(a, b) + bias.astype(np.float64))

    def output_shape(self, size: tuple[int, ...]) -> tuple[int, ...]:
        return (size[0], size[1])

    def flops(self, size: tuple[int, ...]) -> float:
        m, n, k = size
        return 2.0 * m * n * k

    def min_bytes(self, size: tuple[int, ...], dtype: str) -> float:
        m, n, k = size
        return float((m * k + k * n + m * n + n) * resolve(dtype).itemsize)

    def tolerance(self, dtype: str) -> float:
        # the GEMM's bounds (gemm/problem.py); GELU's slope is at most about 1.13, and C is
        # rounded once, after it, as the GEMM's C is
        return {"float32": 1e-5, "float16": 2e-3, "bfloat16": 1e-2}[dtype]

    def ceiling_key(self, dtype: str) -> str:
        return {"float32": "cublas_fp32_tflops"}.get(dtype, "cublas_fp16_tflops")


ELEMENTWISE = register_problem(ElementwiseProblem())
SOFTMAX = register_problem(SoftmaxProblem())
LAYERNORM = register_problem(LayerNormProblem())
GEMM_EPILOGUE = register_problem(GemmEpilogueProblem())


_NAMES = {
    "elementwise": ("x", "a", "b"),
    "softmax": ("x",),
    "layernorm": ("x", "gamma", "beta"),
    "gemm-epilogue": ("A", "B", "bias"),
}


def operands(
    problem: Any, arrays: tuple[Any, ...], out: Any, dtypes: tuple[str, ...]
) -> tuple[tuple[Operand, ...], Operand, str]:
    """Validate a launcher's device arrays against ``problem``; allocate the output if None.

    ``arrays`` are the inputs in the order of ``problem.make_inputs``. Returns the inputs and
    the output as ``Operand`` records (``ladder.core.fastcall``), and the dtype. Every rung
    validates through this, so every rung refuses bad input with the same messages.
    """
    names = _NAMES[problem.name]
    if len(arrays) != len(names):
        raise TypeError(f"{problem.name} takes {', '.join(names)} (and an optional output)")
    found = tuple(map(intake, arrays, names))  # (the fewest steps: this runs on every call)
    first = found[0]
    dtype = first.dtype
    if dtype not in dtypes:
        raise TypeError(f"{names[0]} must be {' or '.join(dtypes)}, got {dtype}")
    for arr, name in zip(found, names, strict=True):
        if arr.dtype != dtype:
            raise TypeError(f"{name} must be {dtype} like {names[0]}, got {arr.dtype}")
        if not arr.contiguous:
            raise ValueError(f"{name} must be C-contiguous (row-major); copy it first")
    if first.ndim != 2:
        raise ValueError(f"{names[0]} must be 2-D, got shape {first.shape}")
    if problem.name == "gemm-epilogue":
        a, b, bias = found
        if b.ndim != 2 or a.shape[1] != b.shape[0]:
            raise ValueError(f"inner dimensions differ: A is {a.shape}, B is {b.shape}")
        shape = (a.shape[0], b.shape[1])
        vectors = ((bias, "bias"),)
    else:
        shape = first.shape
        vectors = zip(found[1:], names[1:], strict=True)
    cols = (shape[1],)
    for vec, name in vectors:
        if vec.shape != cols:
            raise ValueError(f"{name} must have shape ({shape[1]},), got {vec.shape}")
    return found, output(out, shape, dtype), dtype


def check_arrays(
    problem: Any, arrays: tuple[Any, ...], out: Any, dtypes: tuple[str, ...]
) -> tuple[tuple[Any, ...], Any, str]:
    """``operands``, returning Numba device arrays (the caller's own when they are): for the
    library rows, which hand their arrays to CuPy or PyTorch."""
    found, result, dtype = operands(problem, arrays, out, dtypes)
    return tuple(numba_array(op) for op in found), numba_array(result), dtype


def workspace(shape: tuple[int, ...], dtype: str, name: str) -> Operand:
    """A device buffer of a plan's own, between two of its kernels, as an ``Operand``.

    A plan allocates its buffers once and every call with its signature reuses them. A call
    made while the GPU still runs the one before is safe: a plan launches all its kernels on
    the same stream, so the second call's kernels run after the first call's are done with the
    buffers. (Two host threads calling at once could interleave their launches, as with any
    buffer two calls share.)
    """
    from numba import cuda

    return intake(cuda.device_array(shape, dtype=resolve(dtype)), name)


def flat(op: Operand) -> Operand:
    """A C-contiguous ``op`` as the 1-D array of its elements (the same memory), for kernels
    over flattened elements (``geometry.reshaped``: a plan's steps make it again per call)."""
    return reshaped(op, (math.prod(op.shape),))


Geometry = Callable[..., Any]
Launcher = Callable[..., Any]


def _launcher(problem: Any, plans: PlanCache, dtypes: tuple[str, ...]) -> Launcher:
    """The launcher of one of the four problems over ``plans``: validate (``operands``), find
    the plan for the operands' signature, run it on them (in the kernels' order: gemm-epilogue's
    take C before the bias). Written out per problem, so a call makes no more Python calls than
    a rung's own launcher did."""
    if problem.name == "softmax":

        def launch(x: Any, out: Any = None) -> Any:
            (x,), out, _ = operands(problem, (x,), out, dtypes)
            rows, cols = x.shape
            if rows and cols:
                plans(x, out)(x, out)
            return out.obj

    elif problem.name == "elementwise":

        def launch(x: Any, a: Any, b: Any, out: Any = None) -> Any:  # type: ignore[misc]
            (x, a, b), out, _ = operands(problem, (x, a, b), out, dtypes)
            rows, cols = x.shape
            if rows and cols:
                plans(x, a, b, out)(x, a, b, out)
            return out.obj

    elif problem.name == "layernorm":

        def launch(x: Any, gamma: Any, beta: Any, out: Any = None) -> Any:  # type: ignore[misc]
            (x, gamma, beta), out, _ = operands(problem, (x, gamma, beta), out, dtypes)
            rows, cols = x.shape
            if rows and cols:
                plans(x, gamma, beta, out)(x, gamma, beta, out)
            return out.obj

    else:

        def launch(A: Any, B: Any, bias: Any, out: Any = None) -> Any:  # type: ignore[misc]
            (a, b, bias), out, _ = operands(problem, (A, B, bias), out, dtypes)
            m, n = out.shape
            if m and n:
                plans(a, b, out, bias)(a, b, out, bias)
            return out.obj

    return launch


def fused_launcher(
    problem: Any, geometry: Geometry, dtypes: Sequence[str], plans_kept: int = PLANS_PER_CACHE
) -> Launcher:
    """A launcher of ``problem`` from a ``geometry`` (see ``fused_rung``), not registered: for a
    rung's variants (the GEMM epilogue with another activation)."""

    def plan(*ops: Operand) -> Any:
        return plan_of(geometry(*ops), ops)

    plans = PlanCache(plan, size=plans_kept)
    return rung_launcher(_launcher(problem, plans, tuple(dtypes)), geometry, plans)


def fused_rung(
    problem: Any,
    *,
    dtypes: Sequence[str] = ("float32",),
    plans_kept: int = PLANS_PER_CACHE,
    **options: Any,
) -> Callable[[Geometry], Geometry]:
    """Register a rung of ``problem`` (ELEMENTWISE, SOFTMAX, LAYERNORM or GEMM_EPILOGUE) from
    its launch geometry, with ``rung``'s options (name, parent, title, bytes_moved, ...), and
    return the geometry as it is.

    ``geometry(*operands)`` takes the validated operands in the kernels' order, (x, out),
    (x, a, b, out), (x, gamma, beta, out) or (A, B, C, bias), once per signature of them, and
    returns ``(kernel, grid, block)`` (a launch of the kernel on them, in that order), or a
    list of steps ``(kernel, grid, block, args)`` for a rung of several kernels
    (``geometry.steps``: the arguments name the operands, the plan's own ``workspace``s and
    ``flat`` views). ``plans_kept``: how many signatures' plans to keep (fewer where each plan
    holds buffers the size of x). The launcher registered validates (``operands``), finds the
    plan (``launch.plans``) and runs it."""

    def decorate(geometry: Geometry) -> Geometry:
        rung(dtypes=tuple(dtypes), **options)(fused_launcher(problem, geometry, dtypes, plans_kept))
        return geometry

    return decorate
