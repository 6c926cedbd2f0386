"""Rung 1, naive: one thread per element of C, with threads of a warp walking down a column.

Thread (x, y) of the grid computes ``C[x, y]`` as a dot product of row x of A and column y
of B. ``threadIdx.x`` is the fastest-varying index inside a warp, and here it picks the
*row*: the 32 threads of a warp read 32 different rows of A (addresses K floats apart, 32
separate 32-byte sectors for 32 useful floats) and write 32 rows of C (N floats apart). Only
the B load is shared: the whole warp reads one element of one column.

Prediction: memory transactions, not arithmetic, set the pace; a few percent of the FP32 peak.

Numba notes that apply from here on:
- write ``float32(0.0)``, not ``0.0``: a bare ``0.0`` is a float64, and ``acc += a * b``
  then runs in double precision (``fma.rn.f64`` in the PTX, 1/2 the FP32 rate on an H100
  and 1/64 on consumer GPUs), with conversions on every iteration;
- every integer is widened to 64 bits and every index on a signed integer carries
  wrap-around code for negative values (``shr.s64``/``and``/``add`` before each load in the
  PTX); rung 6 removes both.
"""

from __future__ import annotations

from typing import Any

from numba import cuda, float32

from ladder.core.rung import rung
from ladder.gemm.problem import check_operands, grid_2d

BLOCK = 32  # 32 x 32 = 1024 threads, the most a block may have


@cuda.jit
def naive_kernel(A, B, C):
    row = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x  # fastest index -> row: strided
    col = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
    if row < C.shape[0] and col < C.shape[1]:
        acc = float32(0.0)
        for k in range(A.shape[1]):
            acc += A[row, k] * B[k, col]
        C[row, col] = acc


@rung(name="naive", title="Naive: one thread per output, uncoalesced")
def launch(A: Any, B: Any, C: Any = None) -> Any:
    A, B, C, m, n, _ = check_operands(A, B, C)
    if m and n:
        naive_kernel[grid_2d(m, BLOCK, n, BLOCK), (BLOCK, BLOCK)](A, B, C)
    return C
