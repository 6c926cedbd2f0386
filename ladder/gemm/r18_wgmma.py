"""Rung 18, warp specialization: a producer warpgroup feeds two math warpgroups.

What changes: who does what (``r18_wgmma.cu``); rung 17's stages, copies and ``wgmma`` stay.
Of three warpgroups, one only copies (one of its threads issues every copy; ``setmaxnreg``
shrinks the warpgroup's registers to 40) and two only multiply (raised to 232). The block
barrier per K tile goes: each stage gets an "empty" mbarrier beside its "full" one, on which
all 256 math threads arrive once their multiplies of the stage are done (``wait_group 1``),
and the producer waits on it before refilling the stage. Each warpgroup now runs at its own
pace, and no copy sits in a math warp's instruction stream. The 40 and 232 split the block's
registers: 168 x 384 = 128 x (40 + 2 x 232). Also changed: blocks are ordered in groups of 8
block rows (16 in rung 17), not measured apart. ``launch_transposed`` runs the same template
on Aᵀ or Bᵀ as they lie (``wgmma`` reads 16-bit operands in either major order): the GEMM
backward of ``ladder.ops``.
Why: in rung 17 all 256 threads meet at a ``__syncthreads`` every K tile, so a warpgroup
that is ahead waits for the other, and thread 0's copies wait behind its own warp's wgmma
issue. This is the structure CUTLASS and cuBLAS use on Hopper.
Prediction: a few percent to 10% over rung 17, the part of each K tile spent at the barrier.
Measured: on an NVIDIA H100 by ``ladder run``, rung 17 and the libraries in the same run:
0.209 ms at 4096³ (656.92 TFLOP/s; rung 17 0.209 ms, cuBLAS 0.183 ms,
lab/gemm/2026-11-26-split/nvidia-h100-80gb-hbm3-gemm-split-4096-float16.json), 1.574 ms at 8192³
(698.74 TFLOP/s; rung 17 1.610 ms, lab/gemm/2026-11-26-split/nvidia-h100-80gb-hbm3-gemm-split-8192-
float16.json); bfloat16 0.203 ms and 1.568 ms (rung 17 0.203 and 1.536 ms;
lab/gemm/2026-11-26-split/nvidia-h100-80gb-hbm3-gemm-split-4096-bfloat16.json,
lab/gemm/2026-11-26-split/nvidia-h100-80gb-hbm3-gemm-split-8192-bfloat16.json). ptxas: 168
registers. On an H200 by ``ladder bench`` (results/nvidia-h200.json, as rung 16): 0.206 ms at 4096³
(0.886x cuBLAS), 1.606 ms at 8192³ (0.973x); Nsight Compute at 4096³
(lab/gemm/2026-11-22-profiles/nvidia-h200-profile-float16.json): SM throughput 77.7% against
cuBLAS's 90.4%.
Verdict: missed: 1.00x rung 17 at 4096³, 1.02x at 8192³ (bfloat16 1.00x and 0.98x), the
grouping included. Why:
the ring is 4 stages deep, so copies are issued 3 tiles ahead and land in time either way;
the two math warpgroups do equal work, so the barrier rarely makes one wait; and at 154
registers rung 17 never needed ``setmaxnreg``'s 232. What specialization buys here is room:
the producer is done early, so rung 19 can stage C in the ring while only the math
warpgroups synchronize (a named barrier), and a bigger tile could take the 232 registers.

Lab notes: docs/notes/gemm.md#rung-18-warp-specialization
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ladder.core import cuda_cpp
from ladder.core.fastcall import PlanCache, intake
from ladder.core.rung import rung
from ladder.gemm.hopper import gemm_launch, tensor_map
from ladder.gemm.tensor_core import TensorMapLaunch, TiledLauncher, operand_dtype

SOURCE = cuda_cpp.source(__file__, "r18_wgmma.cu", archs=("sm_90a",), arch_specific=True)
BM, BN, BK = 128, 256, 64
STAGES = 4
THREADS = 384
SMEM_BYTES = STAGES * (BM * BK + BK * BN) * 2 + 1024  # + slack to align the tiles to 1 KB

_KERNEL = {"float16": "wgmma_tma", "bfloat16": "wgmma_tma_bf16"}


def kernel_for(m: int, n: int, k: int, dtype: str) -> Any:
    """The kernel's launch for tile-multiple M, N, K in ``dtype``: ``launch(a, b, c,
    stream=...)``, with the tensor maps of A and B made once per pair of their addresses."""
    return gemm_launch(SOURCE, _KERNEL[dtype], m, n, k, dtype, (BM, BN, BK), THREADS, SMEM_BYTES)


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
    order, so only the tensor map and the shared-memory descriptor change (``r18_wgmma.cu``).
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
    if min(m, n, k) == 0 or m % BM or n % BN or k % BK or min(op.align for op in (a, b, c)) < 16:
        raise ValueError(
            f"M, N, K must be positive multiples of {BM}, {BN}, {BK}, operands 16-byte aligned"
        )
    TRANSPOSED(m, n, k, dtype, layout)(a.ptr, b.ptr, c.ptr)
    return c.obj


@rung(
    name="wgmma",
    parent="wgmma-descriptors",
    title="Warp specialization: a producer warpgroup, empty barriers, setmaxnreg",
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
