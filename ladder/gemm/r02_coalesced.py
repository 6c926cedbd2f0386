"""Rung 2, coalesced: the same kernel with the thread-to-output mapping swapped.

Now ``threadIdx.x`` picks the *column* of C. The 32 threads of a warp read 32 consecutive
floats of one row of B (one 128-byte line: four sectors for 32 useful floats instead of 32
sectors), all read the same element of A (one broadcast), and write 32 consecutive floats of
C. Nothing else changed: one line of the kernel.

Prediction: several times faster than rung 1; still two global loads (mostly L1/L2 hits)
per fused multiply-add, so bound by cache bandwidth at a small fraction of the FP32 peak.
"""

from __future__ import annotations

from typing import Any

from numba import cuda, float32

from ladder.core.rung import rung
from ladder.gemm.problem import check_operands, grid_2d

BLOCK = 32


@cuda.jit
def coalesced_kernel(A, B, C):
    col = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x  # fastest index -> column
    row = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
    if row < C.shape[0] and col < C.shape[1]:
        acc = float32(0.0)
        for k in range(A.shape[1]):
            acc += A[row, k] * B[k, col]
        C[row, col] = acc


@rung(name="coalesced", title="Coalesced: warps read rows of B")
def launch(A: Any, B: Any, C: Any = None) -> Any:
    A, B, C, m, n, _ = check_operands(A, B, C)
    if m and n:
        coalesced_kernel[grid_2d(n, BLOCK, m, BLOCK), (BLOCK, BLOCK)](A, B, C)
    return C
