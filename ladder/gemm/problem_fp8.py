"""FP8 GEMM: C = (scale_a · scale_b) · (A @ B) in 8-bit floats, the contract of cuBLASLt's FP8
matmul (``torch._scaled_mm``).

A (M x K) row-major and B (K x N) column-major, that is Bᵀ (N x K) row-major: an 8-bit wgmma
operand must lie K-major, and cuBLASLt asks the same. Both are float8_e4m3fn (4 exponent bits,
3 mantissa bits, largest 448) or both float8_e5m2 (5 and 2, largest 57344). The scales are
per-tensor: one float32 each, on the device. Products are accumulated in FP32 and C (M x N) is
bfloat16, row-major. It is a problem of its own, not a dtype of ``gemm``, because every operand
differs: B's layout, the two scales, C's type.

Inputs are drawn the way a user quantizes: a float32 matrix X uniform in [-1, 1], its scale
s = max|X| / the format's largest value, the stored matrix X / s rounded to the format. The
float64 reference multiplies the stored (rounded) matrices and the scales, so only the kernel's
own rounding is measured: its accumulation and C's rounding to bfloat16.

Tolerance: 1e-2 relative (in the norm), the bound of the bfloat16 GEMM: rounding C alone costs
about 2e-3. Hopper's FP8 tensor cores also add a K-slice's products with fewer mantissa bits
than FP32 (DeepSeek-V3's report measured about 14); cuBLASLt's ``use_fast_accum=False``
promotes partial sums to FP32 registers to avoid it, ``use_fast_accum=True`` and the rung do
not. tests/test_gemm_fp8.py checks both against the reference at 8192 long K.

Work: 2·M·N·K FLOPs. Fewest bytes: (M·K + K·N) one byte each, and 2·M·N for C. The floor
assumes FP8's tensor-core rate is twice FP16's, as Hopper's datasheet gives it (1979 against 989
dense TFLOP/s on an H100 SXM), at twice cuBLAS's measured FP16 rate.

``operands`` validates for every launcher of the problem; ``Fp8Launcher`` runs a tile-multiple
kernel on any size, padded where the sizes are off the tiles; ``fp8_rung`` registers a rung from
its kernel's launch for tile-multiple sizes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ladder.core import float64
from ladder.core.dtypes import resolve
from ladder.core.fastcall import Operand, PlanCache, c_contiguous, intake, output
from ladder.core.geometry import rung_launcher
from ladder.core.rung import Problem, register_problem, rung
from ladder.gemm.tensor_core import padded_sizes

DTYPES = ("float8_e4m3fn", "float8_e5m2")
LARGEST = {"float8_e4m3fn": 448.0, "float8_e5m2": 57344.0}
OUT_DTYPE = "bfloat16"
ALIGN = 16  # bytes: the bulk tensor copy needs 16-byte aligned rows and addresses

# off every tile (128 x 256 x 128), K = 0 and K not a multiple of 16, and multiples of 16,
# which cuBLASLt needs, so that the library is tested too
TEST_SIZES = [
    (1, 1, 1),
    (17, 33, 65),
    (129, 7, 70),
    (3, 5, 0),
    (257, 515, 1031),
    (64, 48, 32),
    (272, 528, 400),
    (1, 4099, 513),
]


class Fp8GemmProblem(Problem):
    name = "gemm-fp8"
    bound = "compute"
    dtypes = DTYPES
    size_names = ("M", "N", "K")
    size_help = "M N K: C (M x N, bfloat16) = sa·sb · A (M x K) @ B (K x N, stored as B.T)"

    def standard_sizes(self, dtype: str = "float8_e4m3fn") -> list[tuple[int, ...]]:
        return [(4096, 4096, 4096), (8192, 8192, 8192)]

    def simulator_sizes(self, dtype: str = "float8_e4m3fn") -> list[tuple[int, ...]]:
        return [(17, 33, 65)]

    def test_sizes(self, dtype: str = "float8_e4m3fn") -> list[tuple[int, ...]]:
        return list(TEST_SIZES)

    def sanitize_sizes(self) -> list[tuple[int, ...]]:
        return [(33, 65, 17), (130, 258, 144)]

    def make_inputs(
        self, size: tuple[int, ...], dtype: str = "float8_e4m3fn", seed: int = 0
    ) -> tuple[np.ndarray, ...]:
        m, n, k = size
        rng = np.random.default_rng(seed)
        a, scale_a = quantize(rng.uniform(-1.0, 1.0, size=(m, k)), dtype)
        b, scale_b = quantize(rng.uniform(-1.0, 1.0, size=(k, n)), dtype)
        return a, np.asfortranarray(b), scale_a, scale_b

    def reference(self, inputs: tuple[np.ndarray, ...]) -> np.ndarray:
        a, b, scale_a, scale_b = inputs
        scale = float(scale_a[0]) * float(scale_b[0])
        return scale * float64.matmul(a, b)

    def output_shape(self, size: tuple[int, ...]) -> tuple[int, ...]:
        m, n, _ = size
        return (m, n)

    def output_dtype(self, dtype: str) -> str:
        return OUT_DTYPE

    def flops(self, size: tuple[int, ...]) -> float:
        m, n, k = size
        return 2.0 * m * n * k

    def min_bytes(self, size: tuple[int, ...], dtype: str) -> float:
        m, n, k = size
        return float(m * k + k * n + m * n * resolve(OUT_DTYPE).itemsize)

    def tolerance(self, dtype: str) -> float:
        return 1e-2

    def ceiling_key(self, dtype: str) -> str:
        return "cublas_fp16_tflops"

    def floor_ms(
        self,
        size: tuple[int, ...],
        dtype: str,
        ceilings: dict[str, Any],
        tensor_cores: bool | None = None,
    ) -> float | None:
        """The fewest ms: its bytes at the copy bandwidth, or its FLOPs at twice cuBLAS's
        measured FP16 rate (FP8's tensor-core rate on Hopper), whichever is more."""
        copy, fp16 = ceilings.get("copy_tbps"), ceilings.get("cublas_fp16_tflops")
        if not copy or not fp16:
            return None
        memory_s = self.min_bytes(size, dtype) / (copy * 1e12)
        return max(memory_s, self.flops(size) / (2 * fp16 * 1e12)) * 1e3


PROBLEM = register_problem(Fp8GemmProblem())


def quantize(x: np.ndarray, dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """x scaled into ``dtype``'s range and rounded to it, with its per-tensor scale (a float32
    array of one element): x ≈ scale · stored. An all-zero x gets scale 1."""
    amax = float(np.max(np.abs(x))) if x.size else 0.0
    scale = np.float32(amax / LARGEST[dtype] if amax > 0 else 1.0)
    stored = (x / np.float64(scale)).astype(resolve(dtype))
    return stored, np.array([scale], np.float32)


def _scale(arr: Any, name: str) -> Operand:
    op = intake(arr, name)
    if op.dtype != "float32" or op.size != 1:
        raise TypeError(
            f"{name} must be one float32 (a per-tensor scale on the device), got {op.dtype} "
            f"of shape {op.shape}"
        )
    return op


def operands(
    A: Any, B: Any, scale_a: Any, scale_b: Any, C: Any = None, dtype: str | None = None
) -> tuple[Operand, Operand, Operand, Operand, Operand, int, int, int]:
    """Validate A, B, the two scales and (optional) C; allocate C (bfloat16) when it is None.

    ``dtype`` None takes A's (either 8-bit float); B must match it. Returns the five as
    ``Operand`` records and (M, N, K); every launcher of the problem validates through this."""
    a, b = intake(A, "A"), intake(B, "B")
    for name, arr in (("A", a), ("B", b)):
        if arr.ndim != 2:
            raise ValueError(f"{name} must be 2-D, got shape {arr.shape}")
    want = dtype or a.dtype
    for name, arr in (("A", a), ("B", b)):
        if want not in DTYPES or arr.dtype != want:
            expected = want if want in DTYPES else " or ".join(DTYPES)
            raise TypeError(f"{name} must be {expected}, got {arr.dtype}")
    if not a.contiguous:
        raise ValueError("A must be C-contiguous (row-major); copy it first")
    m, k = a.shape
    k2, n = b.shape
    if k != k2:
        raise ValueError(f"inner dimensions differ: A is {m}x{k}, B is {k2}x{n}")
    if not c_contiguous((n, k), b.strides[::-1]):
        raise ValueError(
            "B must be column-major (B.T C-contiguous), as cuBLASLt's FP8 GEMM takes it: "
            "pass B.T.contiguous().T"
        )
    sa, sb = _scale(scale_a, "scale_a"), _scale(scale_b, "scale_b")
    return a, b, sa, sb, output(C, (m, n), OUT_DTYPE, "C"), m, n, k


# a kernel's launch for tile-multiple sizes: kernel_for(M, N, K, dtype) -> launch(a, bt, c,
# scale_a, scale_b) with device pointers (a ``TensorMapLaunch`` of three pointers)
KernelFor = Callable[[int, int, int, str], Callable[..., None]]


class Fp8Launcher:
    """Validate (``operands``) and run a tile-multiple FP8 kernel on any size: on the operands
    themselves when their sizes are multiples of ``tiles`` and their addresses 16-byte aligned,
    on zero-padded copies otherwise (zero rows and columns add nothing, so the result is
    exact; the copies cost time at such sizes only, never at the benchmark's). Plans are kept
    per operand signature (``ladder.core.fastcall``), as ``tensor_core.TiledLauncher`` does:
    ``plans(a, b, sa, sb, c)(a, b, sa, sb, c)``."""

    def __init__(self, tiles: tuple[int, int, int], kernel_for: KernelFor) -> None:
        self.tiles = tiles
        self.kernels = PlanCache(kernel_for)  # by padded (M, N, K) and dtype
        self.plans = PlanCache(self._plan)

    def _plan(self, a: Operand, b: Operand, sa: Operand, sb: Operand, c: Operand) -> Any:
        from ladder.core.fastcall import bits_view

        (m, k), n = a.shape, b.shape[1]
        if m == 0 or n == 0:
            return lambda *ops: None
        if k == 0:
            return lambda a, b, sa, sb, c: bits_view(c).fill(0)  # C = A @ B = 0
        padded = padded_sizes(m, n, k, self.tiles)
        kernel = self.kernels(*padded, a.dtype)
        if padded == (m, n, k) and all(x.align >= ALIGN for x in (a, b, c)):
            return lambda a, b, sa, sb, c: kernel(a.ptr, b.ptr, c.ptr, sa.ptr, sb.ptr)
        return _Padded(kernel, padded)


class _Padded:
    """The kernel on zero-padded copies of A and Bᵀ, C's part copied back; the copies are the
    plan's, allocated (zeroed) at its first call, as ``tensor_core``'s are."""

    def __init__(self, kernel: Callable[..., None], padded: tuple[int, int, int]) -> None:
        self.kernel, self.padded = kernel, padded
        self.pa: Any = None

    def __call__(self, a: Operand, b: Operand, sa: Operand, sb: Operand, c: Operand) -> None:
        from ladder.core.fastcall import bits_view

        (m, k), n = a.shape, b.shape[1]
        if self.pa is None:
            import cupy

            mp, np_, kp = self.padded
            self.pa = cupy.zeros((mp, kp), dtype=np.uint8)
            self.pbt = cupy.zeros((np_, kp), dtype=np.uint8)
            self.pc = cupy.empty((mp, np_), dtype=np.uint16)
        self.pa[:m, :k] = bits_view(a)
        self.pbt[:n, :k] = bits_view(b, (n, k))  # column-major B is Bᵀ row-major
        self.kernel(self.pa.data.ptr, self.pbt.data.ptr, self.pc.data.ptr, sa.ptr, sb.ptr)
        bits_view(c)[...] = self.pc[:m, :n]


def fp8_rung(*, tiles: tuple[int, int, int], **options: Any) -> Callable[[KernelFor], KernelFor]:
    """Register an FP8 GEMM rung from ``geometry(M, N, K, dtype)``, its kernel's launch for
    multiples of ``tiles`` (``launch(a, bt, c, scale_a, scale_b, stream=...)`` with device
    pointers), with ``rung``'s options, and return the geometry as it is. The launcher
    registered, ``launch(A, B, scale_a, scale_b, C=None)``, validates (``operands``), finds the
    plan for the operands' signature in an ``Fp8Launcher``'s plans and runs it."""

    def decorate(geometry: KernelFor) -> KernelFor:
        plans = Fp8Launcher(tiles, geometry).plans

        def launch(A: Any, B: Any, scale_a: Any, scale_b: Any, C: Any = None) -> Any:
            a, b, sa, sb, c, _, _, _ = operands(A, B, scale_a, scale_b, C)
            plans(a, b, sa, sb, c)(a, b, sa, sb, c)
            return c.obj

        rung(problem="gemm-fp8", dtypes=DTYPES, **options)(rung_launcher(launch, geometry, plans))
        return geometry

    return decorate
