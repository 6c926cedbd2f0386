"""Rung 16, Hopper: ``wgmma`` fed by the bulk tensor copy engine (TMA), warp-specialized.

Everything below this rung drives the tensor cores with ``mma.sync``: each warp loads its own
fragments from shared memory into registers (``ldmatrix``) and issues small 16 x 8 x 16
multiplies that complete before the warp goes on. On Hopper that path cannot keep the tensor
cores busy: the ``ldmatrix`` traffic, the address arithmetic and the copies all compete with
the math for the warps' issue slots. Hopper's own path changes three things at once:

1. ``wgmma.mma_async`` (sm_90a): a *warpgroup* of 4 warps issues one 64 x 256 x 16 multiply
   whose operands come straight from shared memory through 64-bit *descriptors* (address,
   strides, swizzle mode); no ``ldmatrix``, no operand registers. It runs asynchronously:
   the warpgroup issues four of them per K tile, commits them as a group and only waits
   (``wgmma.wait_group 1``) for the group before, so the tensor cores always have queued work.
2. The bulk tensor copy engine: ``cp.async.bulk.tensor`` moves a whole 128 x 64 tile of A (or
   a 64 x 64 chunk of B) from global to shared memory in one instruction issued by one
   thread, computing addresses in hardware from a *tensor map* made on the host
   (``cuTensorMapEncodeTiled``) and writing the 128-byte swizzle that ``wgmma`` reads without
   bank conflicts. Completion is counted in bytes on an ``mbarrier``.
3. Warp specialization: of the three warpgroups, one only copies (a single thread issues the
   copies; ``setmaxnreg`` shrinks its registers to 40) and two only multiply (raised to 232
   registers: each holds a 64 x 256 FP32 accumulator, 128 registers per thread). A ring of
   4 stages x 48 KB, with a "full" and an "empty" mbarrier per stage, lets the copies run up
   to 4 K tiles ahead of the math.

B is row-major (N contiguous), which for ``wgmma`` is "N-major": the last immediate of the
instruction (imm-trans-b = 1) reads it as it lies, so B is never transposed in memory. Its
descriptor's leading byte offset (8 KB) steps between 64-column chunks and its stride byte
offset (1 KB) between groups of 8 k-rows. The block order is grouped (8 block rows at a
time) so that the blocks resident together share panels of A and B in L2.

The epilogue converts the FP32 accumulators to half and writes them straight from registers
(pairs of columns per thread).

BFloat16 is the second dtype: the same kernel template with ``wgmma ... .bf16.bf16``, a
bfloat16 tensor map and a bfloat16 epilogue (``wgmma_tma_bf16``). It has float32's exponent
range with 8 significant bits, the usual choice for training; on the tensor cores it runs at
the same rate as half.

Edges: the kernel needs M, N and K to be multiples of 128, 256 and 64 (the launcher pads),
and compute capability 9.0 exactly: ``wgmma`` is an sm_90a instruction, not forward
compatible, so on any other GPU the rung reports itself unavailable.

Compile report (``nvcc -gencode=arch=compute_90a,code=sm_90a -Xptxas -v``): 168 registers at
entry (the cap for 384 threads; ``setmaxnreg`` redistributes them), no spills, 64 bytes of
static shared memory (the mbarriers) plus 4 x 48 KB + 1 KB dynamic.

Prediction: this is how cuBLAS runs HGEMM on Hopper, so the gap should close to a modest
fraction; what remains is what cuBLAS adds on top (thread-block clusters with multicast
copies, a persistent scheduler, an epilogue through shared memory and TMA stores).

Measured on an H200 by ``ladder bench`` (results/nvidia-h200.json): 675.84 TFLOP/s at 4096³
(0.887x cuBLAS HGEMM, 762.33 in the same run) and 686.37 at 8192³ (0.919x of 746.66): 1.49x
rung 15 at 4096³ and 1.50x at 8192³. The SASS holds HGMMA.64x256x16 and UTMALDG (the bulk
tensor copy), as intended. What the remaining gap is made of is not profiled yet; the likely
parts are the tail of the last wave (512 blocks of one per SM at 4096³ are 3.9 waves of 132
SMs) and the epilogue's 4-byte stores straight from registers. In bfloat16 (a later run of the
same session, same file): 690.12 TFLOP/s at 4096³ (0.875x cuBLAS) and 753.08 at 8192³ (0.947x),
relative error 1.7e-3.
"""

from __future__ import annotations

import ctypes
import functools
from typing import Any

import numpy as np

from ladder.core import cuda_cpp
from ladder.core.rung import rung
from ladder.gemm.tensor_core import launch_tiled, operand_dtype

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


@functools.lru_cache(maxsize=64)
def tensor_map(
    pointer: int, rows: int, cols: int, box_rows: int, box_cols: int, dtype: str = "float16"
) -> np.ndarray:
    """A 2-D tensor map of a row-major 2-byte matrix (float16 or bfloat16), 128-byte swizzled
    boxes of box_rows x box_cols, as one 128-byte NumPy record that CuPy passes by value.

    It depends only on its arguments, so it is cached: the timed launches reuse it.
    """
    storage = np.zeros(128 + 64, np.uint8)  # the driver wants the map 64-byte aligned
    offset = (-storage.ctypes.data) % 64
    out = storage[offset : offset + 128]
    u64, u32 = ctypes.c_uint64, ctypes.c_uint32
    status = _libcuda().cuTensorMapEncodeTiled(
        ctypes.c_void_p(out.ctypes.data),
        ctypes.c_int(_TMA_DTYPE[dtype]),
        u32(2),
        ctypes.c_void_p(pointer),
        (u64 * 2)(cols, rows),  # sizes, innermost first
        (u64 * 1)(cols * 2),  # the row stride in bytes
        (u32 * 2)(box_cols, box_rows),
        (u32 * 2)(1, 1),
        ctypes.c_int(_INTERLEAVE_NONE),
        ctypes.c_int(_SWIZZLE_128B),
        ctypes.c_int(_L2_256B),
        ctypes.c_int(_OOB_ZERO),
    )
    if status != 0:
        raise RuntimeError(f"cuTensorMapEncodeTiled failed with CUresult {status}")
    return out.copy().view(np.dtype((np.void, 128)))  # shape (1,): passed by value


@rung(
    name="wgmma",
    title="Hopper: wgmma + TMA, warp-specialized",
    dtypes=("float16", "bfloat16"),
    needs=("cupy",),
    units="tensor",
    min_cc=(9, 0),
    max_cc=(9, 0),
)
def launch(A: Any, B: Any, C: Any = None) -> Any:
    dtype = operand_dtype(A, ("float16", "bfloat16"))
    kernel = SOURCE.kernel(_KERNEL[dtype])
    if kernel.max_dynamic_shared_size_bytes < SMEM_BYTES:
        kernel.max_dynamic_shared_size_bytes = SMEM_BYTES  # above the default 48 KB

    def body(a: np.uint64, b: np.uint64, c: np.uint64, m: int, n: int, k: int) -> None:
        tm_a = tensor_map(int(a), m, k, BM, 64, dtype)  # A tiles: 128 rows x 64 (128 bytes)
        tm_b = tensor_map(int(b), k, n, BK, 64, dtype)  # B chunks: 64 k-rows x 64 columns
        blocks = (m // BM) * (n // BN)
        kernel(
            (blocks,),
            (THREADS,),
            (tm_a, tm_b, c, np.int32(m), np.int32(n), np.int32(k)),
            shared_mem=SMEM_BYTES,
        )

    return launch_tiled(A, B, C, (BM, BN, BK), body, dtype)
