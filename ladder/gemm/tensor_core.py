"""What the CUDA C++ (tensor-core) GEMM rungs share: operand checks and edge handling.

Each C++ kernel assumes M, N and K are multiples of its tiles and that every row starts on a
16-byte boundary, which keeps its inner loop free of bounds checks. ``TiledLauncher`` makes
any input fit: when a size is not a multiple of the tiles (or a pointer is misaligned) it copies
the operands into zero-padded buffers, runs the kernel there and copies C's valid part back.
Zero rows and columns add nothing to the product, so the result is exact; the copies cost
time only at such sizes, never at the benchmark sizes, which are multiples of every tile.
It keeps its decisions and the kernel's packed launch per operand signature
(``ladder.core.fastcall``), so a repeated call only validates, finds its plan and launches
(``problem.gemm_rung`` registers a rung's launcher over it). ``TensorMapLaunch`` is that launch
for a kernel that takes tensor maps of A and B (Hopper's bulk tensor copies), which embed the
matrices' addresses and so are kept per pair of addresses. ``transposed_launcher`` is the entry
of a rung that reads Aᵀ or Bᵀ where it lies.
"""

from __future__ import annotations

import contextlib
import ctypes
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ladder.core.dtypes import name_of
from ladder.core.fastcall import (
    POINTER,
    Operand,
    PackedLaunch,
    PlanCache,
    bits_view,
    cupy_launch,
    current_stream,
    intake,
    raw_launches,
)

ALIGN = 16  # bytes: 16-byte vector loads, cp.async and the bulk tensor copy need it
MAPS_PER_LAUNCH = 16  # pairs of A and B addresses a TensorMapLaunch keeps tensor maps for


def _round_up(x: int, tile: int) -> int:
    return (x + tile - 1) // tile * tile


def operand_dtype(A: Any, supported: tuple[str, ...]) -> str:
    """The dtype of A if the rung supports it; a clear TypeError otherwise."""
    found = A.dtype if type(A) is Operand else name_of(getattr(A, "dtype", "unknown"))
    if found not in supported:
        raise TypeError(f"A must be {' or '.join(supported)}, got {found}")
    return found


Run = Callable[[int, int, int, int, int, int], None]  # (a, b, c pointers, M, N, K)


class _Padded:
    """``run`` on zero-padded copies of A and B of the ``padded`` sizes, C's part copied back.
    The copies are the plan's, allocated (zeroed) at its first call: later calls write A's and
    B's values into them (the padding stays zero), and the graph of a captured call replays on
    them."""

    def __init__(self, run: Run, padded: tuple[int, int, int]) -> None:
        self.run, self.padded = run, padded
        self.pa: Any = None

    def __call__(self, a: Operand, b: Operand, c: Operand) -> None:
        (m, k), n = a.shape, b.shape[1]
        if self.pa is None:
            import cupy

            mp, np_, kp = self.padded
            self.pa = cupy.zeros((mp, kp), dtype=np.uint16)
            self.pb = cupy.zeros((kp, np_), dtype=np.uint16)
            self.pc = cupy.empty((mp, np_), dtype=np.uint16)
        self.pa[:m, :k] = bits_view(a)
        self.pb[:k, :n] = bits_view(b)
        self.run(self.pa.data.ptr, self.pb.data.ptr, self.pc.data.ptr, *self.padded)
        bits_view(c)[...] = self.pc[:m, :n]


def padded_sizes(m: int, n: int, k: int, tiles: tuple[int, int, int]) -> tuple[int, int, int]:
    """M, N and K each rounded up to a multiple of its tile: the sizes a tile-multiple kernel
    runs at (``TiledLauncher``, ``problem_fp8.Fp8Launcher``)."""
    tm, tn, tk = tiles
    return _round_up(m, tm), _round_up(n, tn), _round_up(k, tk)


KernelFor = Callable[[int, int, int, str], Callable[..., None]]


def _nothing(a: Operand, b: Operand, c: Operand) -> None:
    return None


def _zeros(a: Operand, b: Operand, c: Operand) -> None:
    bits_view(c).fill(0)  # K = 0: C = A @ B is all zeros


def tile_launch(found: Any, m: int, n: int, k: int) -> Callable[..., None]:
    """The launch a C++ rung's geometry describes for tile-multiple M, N, K: ``(kernel, grid,
    block, shared_mem)`` is ``fastcall.cupy_launch`` of the kernel on (A, B, C, M, N, K), the
    kernel opted in to its shared memory where it is above the default 48 KB; anything else
    is a launch already (``launch(a, b, c, stream=...)``, a ``TensorMapLaunch``)."""
    if not isinstance(found, tuple):
        return found
    kernel, grid, block, smem = found
    if smem and kernel.max_dynamic_shared_size_bytes < smem:
        kernel.max_dynamic_shared_size_bytes = smem
    args = (POINTER, POINTER, POINTER, np.int32(m), np.int32(n), np.int32(k))
    return cupy_launch(kernel, grid, block, smem, args)


class TiledLauncher:
    """The plans of a tile-multiple kernel on any A, B and C: padded where they are not; what
    it decides is kept per operand signature (``fastcall``).

    ``geometry(M, N, K, dtype)`` describes the kernel's launch for tile-multiple sizes
    (``tile_launch``: a ``cupy_launch`` or a ``TensorMapLaunch``, ``launch(a, b, c,
    stream=...)`` with device pointers), built once per padded size and dtype. A plan, one per
    signature of A, B and C (shapes, strides, dtypes, alignment), is that launch on the
    operands themselves or on padded copies: ``plans(a, b, c)(a, b, c)``
    (``problem.gemm_rung``'s launcher calls it).
    """

    def __init__(self, tiles: tuple[int, int, int], geometry: KernelFor) -> None:
        self.tiles = tiles

        def kernel_for(m: int, n: int, k: int, dtype: str) -> Callable[..., None]:
            return tile_launch(geometry(m, n, k, dtype), m, n, k)

        self.kernels = PlanCache(kernel_for)  # by padded (M, N, K) and dtype
        self.plans = PlanCache(self._plan)

    def _plan(self, a: Operand, b: Operand, c: Operand) -> Callable[..., None]:
        (m, k), n = a.shape, b.shape[1]
        if m == 0 or n == 0:
            return _nothing
        if k == 0:
            return _zeros
        padded = padded_sizes(m, n, k, self.tiles)
        kernel = self.kernels(*padded, a.dtype)
        if padded == (m, n, k) and all(x.align >= ALIGN for x in (a, b, c)):

            def direct(a: Operand, b: Operand, c: Operand) -> None:
                kernel(a.ptr, b.ptr, c.ptr)

            return direct

        def run(pa: int, pb: int, pc: int, mm: int, nn: int, kk: int) -> None:
            kernel(pa, pb, pc)

        return _Padded(run, padded)


Maps = Callable[[int, int], tuple[np.ndarray, np.ndarray]]  # A's, B's address -> their maps


def _by_value(record: np.ndarray) -> ctypes.Array:
    """A parameter passed by value (a 128-byte tensor map) as ctypes bytes for a
    ``PackedLaunch``, 64-byte aligned as CUDA's ``CUtensorMap`` is."""
    data = record.tobytes()
    storage = (ctypes.c_uint8 * (len(data) + 64))()
    value = (ctypes.c_uint8 * len(data)).from_buffer(storage, -ctypes.addressof(storage) % 64)
    ctypes.memmove(value, data, len(data))
    return value  # keeps ``storage`` alive


class TensorMapLaunch:
    """A launch of a kernel whose parameters are (tensor map of A, tensor map of B, C,
    scalars...): ``launch(a, b, c, stream=None)`` with device pointers, like ``cupy_launch``'s
    (with ``pointers`` > 1, that many pointers after the maps: ``launch(a, b, c, p, ...)``).

    A tensor map holds its matrix's global address, so it cannot be part of a plan, whose key
    (shapes, strides, dtypes, alignment) leaves addresses out: a plan that kept the maps of the
    first call would send later calls to the first call's memory. ``maps(a, b)`` encodes the
    two maps for one pair of addresses (the sizes are this launch's own); each pair gets a
    launch of its own, a ``PackedLaunch`` with the maps in its parameters when raw launches
    are on (CuPy's ``RawKernel`` call otherwise), kept for later calls with the same pair (up
    to ``MAPS_PER_LAUNCH`` pairs, the oldest dropped first). Only C's address changes per call.
    """

    def __init__(
        self,
        kernel: Any,
        grid: Sequence[int],
        block: Sequence[int],
        shared_mem: int,
        maps: Maps,
        scalars: Sequence[np.generic],
        pointers: int = 1,
    ) -> None:
        self.kernel = kernel
        self.pointers = pointers  # device pointers given per call, after the two maps
        self.grid, self.block, self.shared_mem = tuple(grid), tuple(block), shared_mem
        self.maps = maps
        self.scalars = tuple(scalars)
        self.raw = raw_launches()  # decided once, as a plan is built for one launch path
        self.mode = "raw" if self.raw else "cupy RawKernel"
        self._launches: dict[tuple[int, int], Callable[..., None]] = {}

    def __call__(self, a: int, b: int, *pointers: int, stream: int | None = None) -> None:
        launch = self._launches.get((a, b))
        if launch is None:
            launch = self._add(a, b)
        launch(*pointers, stream=stream)

    def __len__(self) -> int:
        return len(self._launches)

    def _add(self, a: int, b: int) -> Callable[..., None]:
        map_a, map_b = self.maps(a, b)
        launch = self._packed(map_a, map_b) if self.raw else self._cupy(map_a, map_b)
        if len(self._launches) >= MAPS_PER_LAUNCH:
            del self._launches[next(iter(self._launches))]
        self._launches[(a, b)] = launch
        return launch

    def _packed(self, map_a: np.ndarray, map_b: np.ndarray) -> PackedLaunch:
        scalars = [np.ctypeslib.as_ctypes_type(s.dtype)(s.item()) for s in self.scalars]
        pointers = [ctypes.c_uint64(0) for _ in range(self.pointers)]
        values = [_by_value(map_a), _by_value(map_b), *pointers, *scalars]
        function = self.kernel.kernel.ptr
        grid, block, smem = self.grid, self.block, self.shared_mem
        where = list(range(2, 2 + self.pointers))
        return PackedLaunch(function, grid, block, smem, values, where, owner=self.kernel)

    def _cupy(self, map_a: np.ndarray, map_b: np.ndarray) -> Callable[..., None]:
        import cupy

        def launch(*pointers: int, stream: int | None = None) -> None:
            if stream is None:
                stream = current_stream()
            args = (map_a, map_b, *[np.uint64(p) for p in pointers], *self.scalars)
            current = cupy.cuda.get_current_stream().ptr == stream
            with contextlib.nullcontext() if current else cupy.cuda.ExternalStream(stream):
                self.kernel(self.grid, self.block, args, shared_mem=self.shared_mem)

        return launch


Transposed = Callable[[int, int, int, str, str], Callable[..., None]]


def transposed_launcher(geometry: Transposed, tiles: tuple[int, int, int]) -> Any:
    """``Rung.transposed`` of a C++ rung: ``launch(A, B, C, layout)``, C = Aᵀ·B (``layout="tn"``:
    A given K x M) or A·Bᵀ (``"nt"``: B given N x K), the transposed operand read where it
    lies, by ``geometry(M, N, K, dtype, layout)``'s launch (kept per sizes, dtype and layout).
    For ``ladder.ops``' GEMM backward (dB = Aᵀ·dC, dA = dC·Bᵀ). Takes tile-multiple sizes,
    16-byte-aligned C-contiguous 16-bit operands and a given C; raises ValueError otherwise
    (the caller copies the operand and calls the rung's launcher)."""
    bm, bn, bk = tiles
    launches = PlanCache(geometry)

    def launch(A: Any, B: Any, C: Any, layout: str) -> Any:
        if layout not in ("tn", "nt"):
            raise ValueError(f"layout must be 'tn' or 'nt', got {layout!r}")
        a, b, c = intake(A, "A"), intake(B, "B"), intake(C, "C")
        dtype = operand_dtype(a, ("float16", "bfloat16"))
        for op in (a, b, c):
            if op.ndim != 2 or not op.contiguous or op.dtype != dtype:
                raise ValueError(f"{op.name} must be a C-contiguous 2-D {dtype} array")
        if layout == "tn":  # A is K x M, B is K x N
            (k, m), (k2, n) = a.shape, b.shape
        else:  # A is M x K, B is N x K
            (m, k), (n, k2) = a.shape, b.shape
        if k != k2:
            raise ValueError(f"inner dimensions differ: {layout} with A {a.shape} and B {b.shape}")
        if c.shape != (m, n):
            raise ValueError(f"C must have shape {(m, n)}, got {c.shape}")
        if min(m, n, k) == 0 or m % bm or n % bn or k % bk or min(x.align for x in (a, b, c)) < 16:
            raise ValueError(
                f"M, N, K must be positive multiples of {bm}, {bn}, {bk}, operands 16-byte aligned"
            )
        launches(m, n, k, dtype, layout)(a.ptr, b.ptr, c.ptr)
        return c.obj

    return launch
