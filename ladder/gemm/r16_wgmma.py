"""Rung 16, Hopper: ``wgmma`` fed by the bulk tensor copy engine (TMA), warp-specialized.

What changes: three things at once, Hopper's own path (``r16_wgmma.cu``).
1. ``wgmma.mma_async`` (sm_90a): a *warpgroup* of 4 warps issues one 64 x 256 x 16 multiply
   whose operands come straight from shared memory through 64-bit *descriptors* (address,
   strides, swizzle mode): no ``ldmatrix``, no operand registers. It runs asynchronously: the
   warpgroup issues four per K tile as one group and waits only for the group
   before (``wgmma.wait_group 1``), so the tensor cores always have queued work.
2. The bulk tensor copy engine: ``cp.async.bulk.tensor`` moves a whole 128 x 64 tile of A (or a
   64 x 64 chunk of B) from global to shared memory in one instruction issued by one thread,
   computing addresses in hardware from a *tensor map* made on the host
   (``cuTensorMapEncodeTiled``) and writing the 128-byte swizzle that ``wgmma`` reads without
   bank conflicts. Completion is counted in bytes on an ``mbarrier``.
3. Warp specialization: of three warpgroups, one only copies (``setmaxnreg`` shrinks its
   registers to 40) and two only multiply (raised to 232: each holds a 64 x 256 FP32
   accumulator, 128 registers per thread). A ring of 4 stages x 48 KB, with a "full" and an
   "empty" mbarrier per stage, lets the copies run up to 4 K tiles ahead of the math.
B is row-major, which for ``wgmma`` is "N-major", so it is never transposed in memory. Blocks
are ordered in groups of 8 block rows for L2 reuse. The epilogue writes half (or bfloat16)
straight from registers. BFloat16, float32's exponent range with 8 significant bits, is the
same template with ``.bf16`` operands. Edges: M, N, K padded to 128, 256, 64; compute
capability 9.0 exactly (sm_90a code is not forward compatible), else the rung is unavailable.
``launch_transposed`` runs the same template on Aᵀ or Bᵀ as they lie (``ladder.ops``' backward).
Why: below this rung each warp loads its own fragments (``ldmatrix``) and issues small
synchronous multiplies; on Hopper those loads, the address arithmetic and the copies compete
with the math for the warps' issue slots. A microbenchmark with constant operands (upper
bounds, results/nvidia-h200-wgmma-shapes.json) reaches 969.7 TFLOP/s with wgmma, 631.6 with
mma.sync.
Prediction: this is how cuBLAS runs HGEMM on Hopper, so the gap should close to a modest
fraction; what remains is what cuBLAS adds on top (thread-block clusters with multicast
copies, a persistent scheduler, an epilogue through shared memory and TMA stores).
Measured: on an NVIDIA H200 by ``ladder bench`` (results/nvidia-h200.json): 0.203 ms at 4096³
(675.84 TFLOP/s, 1.50x rung 15, 0.887x cuBLAS at 0.180 ms) and 1.602 ms at 8192³ (686.37
TFLOP/s, 0.919x cuBLAS at 1.473 ms); bfloat16: 0.199 ms and 1.460 ms (0.875x and 0.947x
cuBLAS). Nsight Compute at 4096³ (results/nvidia-h200-profile-float16.json): no bank
conflicts, SM throughput 77.7% against cuBLAS's 90.4%.
Verdict: held: within 12% of cuBLAS at 4096³ and 9% at 8192³. The profile shows cuBLAS keeping
the SM busier with the same kind of instructions; what the rest is made of (the tail of the
last wave, the epilogue's stores) is not profiled yet: not yet measured.

Lab notes: docs/notes/gemm.md#rung-16-wgmma
"""

from __future__ import annotations

import ctypes
import functools
from typing import Any

import numpy as np

from ladder.core import cuda_cpp
from ladder.core.fastcall import PlanCache, intake
from ladder.core.rung import rung
from ladder.gemm.tensor_core import TensorMapLaunch, TiledLauncher, operand_dtype

SOURCE = cuda_cpp.source(__file__, "r16_wgmma.cu", archs=("sm_90a",), arch_specific=True)
BM, BN, BK = 128, 256, 64
STAGES = 4
THREADS = 384
SMEM_BYTES = STAGES * (BM * BK + BK * BN) * 2 + 1024  # + slack to align the tiles to 1 KB

# cuda.h enums for cuTensorMapEncodeTiled
_TMA_DTYPE = {"float16": 6, "bfloat16": 9}
_INTERLEAVE_NONE, _SWIZZLE_128B, _L2_256B, _OOB_ZERO = 0, 3, 3, 0
_KERNEL = {"float16": "wgmma_tma", "bfloat16": "wgmma_tma_bf16"}


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
    """A 2-D tensor map of a row-major 2-byte matrix (float16 or bfloat16), 128-byte swizzled
    boxes of box_rows x box_cols, as one 128-byte NumPy record that CuPy passes by value; with
    ``layers``, a 3-D map of that many such matrices one after the other (boxes of one layer:
    the mixture-of-experts weights, E x K x N)."""
    _bind_context(pointer)
    storage = np.zeros(128 + 64, np.uint8)  # the driver wants the map 64-byte aligned
    offset = (-storage.ctypes.data) % 64
    out = storage[offset : offset + 128]
    u64, u32 = ctypes.c_uint64, ctypes.c_uint32
    sizes, strides, boxes = [cols, rows], [cols * 2], [box_cols, box_rows]
    if layers is not None:
        sizes, strides, boxes = [*sizes, layers], [*strides, rows * cols * 2], [*boxes, 1]
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


def kernel_for(m: int, n: int, k: int, dtype: str) -> Any:
    """The kernel's launch for tile-multiple M, N, K in ``dtype``: ``launch(a, b, c,
    stream=...)``, with the tensor maps of A and B made once per pair of their addresses."""
    kernel = SOURCE.kernel(_KERNEL[dtype])
    if kernel.max_dynamic_shared_size_bytes < SMEM_BYTES:
        kernel.max_dynamic_shared_size_bytes = SMEM_BYTES  # above the default 48 KB

    def maps(a: int, b: int) -> tuple[np.ndarray, np.ndarray]:
        tm_a = tensor_map(a, m, k, BM, 64, dtype)  # A tiles: 128 rows x 64 (128 bytes)
        tm_b = tensor_map(b, k, n, BK, 64, dtype)  # B chunks: 64 k-rows x 64 columns
        return tm_a, tm_b

    blocks = (m // BM) * (n // BN)
    scalars = (np.int32(m), np.int32(n), np.int32(k))
    return TensorMapLaunch(kernel, (blocks,), (THREADS,), SMEM_BYTES, maps, scalars)


LAUNCHER = TiledLauncher((BM, BN, BK), kernel_for)


def _transposed_for(m: int, n: int, k: int, dtype: str, layout: str) -> TensorMapLaunch:
    """``wgmma_tma_<layout>``'s launch for tile-multiple M, N, K (``launch_transposed``)."""
    kernel = SOURCE.kernel(f"wgmma_tma_{layout}" + ("_bf16" if dtype == "bfloat16" else ""))
    if kernel.max_dynamic_shared_size_bytes < SMEM_BYTES:
        kernel.max_dynamic_shared_size_bytes = SMEM_BYTES

    def maps(a: int, b: int) -> tuple[np.ndarray, np.ndarray]:
        if layout == "tn":  # A given K x M: boxes of 64 k-rows x 64 of its columns
            return tensor_map(a, k, m, BK, 64, dtype), tensor_map(b, k, n, BK, 64, dtype)
        # "nt": B given N x K: boxes of 256 n-rows x 64 k, as A's tiles
        return tensor_map(a, m, k, BM, 64, dtype), tensor_map(b, n, k, BN, 64, dtype)

    scalars = (np.int32(m), np.int32(n), np.int32(k))
    blocks = (m // BM) * (n // BN)
    return TensorMapLaunch(kernel, (blocks,), (THREADS,), SMEM_BYTES, maps, scalars)


TRANSPOSED = PlanCache(_transposed_for)


def launch_transposed(A: Any, B: Any, C: Any, layout: str) -> Any:
    """C = Aᵀ·B (``layout="tn"``: A given K x M) or A·Bᵀ (``"nt"``: B given N x K), the
    transposed operand read where it lies: ``wgmma`` takes 16-bit operands in either major
    order, so only the tensor map and the shared-memory descriptor change (``r16_wgmma.cu``).
    For ``ladder.ops``' GEMM backward (dB = Aᵀ·dC, dA = dC·Bᵀ). Takes tile-multiple sizes (M
    of 128, N of 256, K of 64), 16-byte-aligned C-contiguous operands and a given C; raises
    ValueError otherwise (the caller copies the operand and calls ``launch``)."""
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
    if m % BM or n % BN or k % BK or min(op.align for op in (a, b, c)) < 16:
        raise ValueError(f"M, N, K must be multiples of {BM}, {BN}, {BK}, operands 16-byte aligned")
    TRANSPOSED(m, n, k, dtype, layout)(a.ptr, b.ptr, c.ptr)
    return c.obj


@rung(
    name="wgmma",
    title="Hopper: wgmma + TMA, warp-specialized",
    dtypes=("float16", "bfloat16"),
    needs=("cupy",),
    units="tensor",
    min_cc=(9, 0),
    max_cc=(9, 0),
    cc_needs="wgmma and setmaxnreg, sm_90a-only instructions",
    transposed=launch_transposed,
)
def launch(A: Any, B: Any, C: Any = None) -> Any:
    a = intake(A, "A")  # read once: the launcher takes the Operand as it is
    return LAUNCHER(a, B, C, operand_dtype(a, ("float16", "bfloat16")))
