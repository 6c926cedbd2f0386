"""Hopper's host side for the TMA rungs: the tensor map that ``cp.async.bulk.tensor`` reads.

A library, not a rung (the device side is ``ladder/core/cuda``): the GEMM rungs from ``tma`` to
``fp8``, the mixture-of-experts grouped GEMM and attention's TMA rungs make their maps and launches
here (``gemm_launch``, ``split_k_launch``, ``tensor_launch``).
``cuTensorMapEncodeTiled`` (the driver API, through ctypes) writes 128 opaque bytes that
describe a matrix in global memory (address, sizes, strides), the box one copy moves and the
swizzle it writes into shared memory; the kernel takes them by value (``__grid_constant__``).
"""

from __future__ import annotations

import ctypes
import functools
from typing import Any

import numpy as np

# cuda.h enums for cuTensorMapEncodeTiled; the copy moves bits, so 8-bit floats are UINT8
_TMA_DTYPE = {"float16": 6, "bfloat16": 9, "float8_e4m3fn": 0, "float8_e5m2": 0}
_ITEMSIZE = {"float16": 2, "bfloat16": 2, "float8_e4m3fn": 1, "float8_e5m2": 1}
_INTERLEAVE_NONE, _SWIZZLE_128B, _L2_256B, _OOB_ZERO = 0, 3, 3, 0


@functools.cache
def _libcuda() -> Any:
    lib = ctypes.CDLL("libcuda.so.1")
    lib.cuTensorMapEncodeTiled.restype = ctypes.c_int
    return lib


def _bind_context(pointer: int) -> None:
    """Make the CUDA context of ``pointer``'s device current in this thread, if none is:
    ``cuTensorMapEncodeTiled`` fails without one (CUresult 201), and a thread that has made
    no CUDA runtime call yet has none (autograd's backward thread, when a rung's launch is
    its first CUDA work)."""
    current = ctypes.c_void_p()
    if _libcuda().cuCtxGetCurrent(ctypes.byref(current)) == 0 and current.value:
        return
    import cupy

    device = cupy.cuda.runtime.pointerGetAttributes(pointer).device
    cupy.cuda.runtime.setDevice(device)  # binds the device's primary context to this thread


def tensor_map(
    pointer: int,
    rows: int,
    cols: int,
    box_rows: int,
    box_cols: int,
    dtype: str = "float16",
    layers: int | None = None,
) -> np.ndarray:
    """A 2-D tensor map of a row-major matrix (float16, bfloat16 or an 8-bit float), 128-byte
    swizzled boxes of box_rows x box_cols (box_cols elements are 128 bytes at most), as one
    128-byte NumPy record that CuPy passes by value; with
    ``layers``, a 3-D map of that many such matrices one after the other (boxes of one layer:
    the mixture-of-experts weights, E x K x N)."""
    _bind_context(pointer)
    storage = np.zeros(128 + 64, np.uint8)  # the driver wants the map 64-byte aligned
    offset = (-storage.ctypes.data) % 64
    out = storage[offset : offset + 128]
    u64, u32 = ctypes.c_uint64, ctypes.c_uint32
    size = _ITEMSIZE[dtype]
    sizes, strides, boxes = [cols, rows], [cols * size], [box_cols, box_rows]
    if layers is not None:
        sizes, strides, boxes = [*sizes, layers], [*strides, rows * cols * size], [*boxes, 1]
    rank = len(sizes)
    status = _libcuda().cuTensorMapEncodeTiled(
        ctypes.c_void_p(out.ctypes.data),
        ctypes.c_int(_TMA_DTYPE[dtype]),
        u32(rank),
        ctypes.c_void_p(pointer),
        (u64 * rank)(*sizes),  # sizes, innermost first
        (u64 * (rank - 1))(*strides),  # the strides of the outer dimensions, in bytes
        (u32 * rank)(*boxes),
        (u32 * rank)(*[1] * rank),
        ctypes.c_int(_INTERLEAVE_NONE),
        ctypes.c_int(_SWIZZLE_128B),
        ctypes.c_int(_L2_256B),
        ctypes.c_int(_OOB_ZERO),
    )
    if status != 0:
        raise RuntimeError(f"cuTensorMapEncodeTiled failed with CUresult {status}")
    return out.copy().view(np.dtype((np.void, 128)))  # shape (1,): passed by value


def gemm_launch(
    source: Any,
    name: str,
    m: int,
    n: int,
    k: int,
    dtype: str,
    tiles: tuple[int, int, int],
    threads: int,
    smem_bytes: int,
    persistent: bool = False,
) -> Any:
    """The launch of a TMA GEMM kernel, ``name(tmA, tmB, C, M, N, K)`` in ``source``, for
    tile-multiple M, N, K: a 1-D grid of one block per (BM, BN) tile of C (``persistent``:
    at most one per SM, each walking several tiles), A's map in boxes of BM rows x 64 (128
    bytes), B's in boxes of BK k-rows x 64 columns, both 128-byte swizzled; the maps made
    once per pair of addresses (``TensorMapLaunch``)."""
    bm, bn, bk = tiles

    def maps(a: int, b: int) -> tuple[np.ndarray, np.ndarray]:
        return tensor_map(a, m, k, bm, 64, dtype), tensor_map(b, k, n, bk, 64, dtype)

    blocks = (m // bm) * (n // bn)
    if persistent:
        blocks = min(blocks, sm_count())
    return tensor_launch(source.kernel(name), blocks, threads, smem_bytes, maps, (m, n, k))


def split_k_launch(
    source: Any,
    name: str,
    m: int,
    n: int,
    k: int,
    dtype: str,
    tiles: tuple[int, int, int],
    threads: int,
    smem_bytes: int,
    splits: int,
) -> Any:
    """``gemm_launch``'s persistent launch of a kernel ``name(tmA, tmB, C, W, counters, M, N,
    K, splits)`` whose blocks walk ``splits`` units per tile of C (each a range of K): at
    most one block per SM, with its scratch (``Scratch``) made once: W, the FP32 partial
    sums (splits x M x N, none for one split), and one counter per tile, zeroed on the
    launch's stream before each launch. One launch at a time per plan: two streams running
    the same plan at once would share the scratch."""
    bm, bn, bk = tiles
    if not 1 <= splits <= k // bk:
        raise ValueError(f"splits must be 1 to {k // bk} (a K tile each) for K={k}, got {splits}")

    def maps(a: int, b: int) -> tuple[np.ndarray, np.ndarray]:
        return tensor_map(a, m, k, bm, 64, dtype), tensor_map(b, k, n, bk, 64, dtype)

    tiles_c = (m // bm) * (n // bn)
    blocks = min(tiles_c * splits, sm_count())
    sizes = (m, n, k, splits)
    launch = tensor_launch(source.kernel(name), blocks, threads, smem_bytes, maps, sizes, 3)
    return Scratch(launch, splits * m * n if splits > 1 else 1, tiles_c)


class Scratch:
    """A launch ``launch(a, b, c, w, counters, stream=...)`` given its scratch: ``floats``
    FP32 words of W and ``counters`` 32-bit counters, allocated once on the current device
    (CuPy); called as ``launch(a, b, c, stream=...)``, as a tile launch is. The counters are
    zeroed on the launch's stream before each launch (a memset node in a captured graph): a
    launch that never finished cannot leave a later one counting from a wrong start."""

    def __init__(self, launch: Any, floats: int, counters: int) -> None:
        import cupy

        self.launch = launch
        self.w = cupy.empty(floats, np.float32)
        self.counters = cupy.zeros(counters, np.uint32)
        self._pointers = (self.w.data.ptr, self.counters.data.ptr)
        self._memset = cupy.cuda.runtime.memsetAsync
        self._bytes = counters * 4

    def __call__(self, a: int, b: int, c: int, stream: int | None = None) -> None:
        from ladder.core.fastcall import current_stream

        handle = current_stream() if stream is None else stream
        self._memset(self._pointers[1], 0, self._bytes, handle)
        self.launch(a, b, c, *self._pointers, stream=handle)


def tensor_launch(
    kernel: Any,
    blocks: int,
    threads: int,
    smem_bytes: int,
    maps: Any,
    sizes: tuple[int, ...],
    pointers: int = 1,
) -> Any:
    """A ``TensorMapLaunch`` of ``kernel(map A, map B, pointers..., sizes...)`` on a 1-D grid of
    ``blocks``, the sizes as int32 (NumPy scalars as they are) and the kernel opted in to
    ``smem_bytes`` of dynamic shared memory (above the default 48 KB)."""
    from ladder.gemm.tensor_core import TensorMapLaunch

    if kernel.max_dynamic_shared_size_bytes < smem_bytes:
        kernel.max_dynamic_shared_size_bytes = smem_bytes
    scalars = tuple(v if isinstance(v, np.generic) else np.int32(v) for v in sizes)
    return TensorMapLaunch(kernel, (blocks,), (threads,), smem_bytes, maps, scalars, pointers)


def sm_count() -> int:
    """The current device's number of SMs (CuPy's runtime)."""
    import cupy

    device = cupy.cuda.runtime.getDevice()
    return int(cupy.cuda.runtime.getDeviceProperties(device)["multiProcessorCount"])
