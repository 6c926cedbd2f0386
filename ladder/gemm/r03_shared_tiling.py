"""Rung 3, shared-memory tiling: a block stages 32 x 32 tiles of A and B in shared memory.

Rung 2 loads every element of A and B from global memory (or cache) once per output that uses
it: N times for A, M times for B. Here a 32 x 32 block loads a 32-wide slice of A's rows and
B's columns into shared memory, one element per thread, synchronises, and each thread runs 32
multiply-adds out of shared memory. Each global element is now loaded M/32 or N/32 times
instead of M or N times.

Edges: a tile that hangs over the matrix is filled with zeros, which add nothing to the dot
product, and only threads inside C write. That is how every tiled rung handles any M, N, K.

Prediction: global traffic falls 32 times, but the inner loop now does two shared-memory loads
per multiply-add; shared memory serves 32 words per clock per SM against 128 FMA lanes, so
this rung is bound by shared-memory bandwidth near an eighth of the FP32 peak.
"""

from __future__ import annotations

from typing import Any

from numba import cuda, float32

from ladder.core.rung import rung
from ladder.gemm.problem import check_operands, grid_2d

TILE = 32


@cuda.jit
def shared_kernel(A, B, C):
    As = cuda.shared.array((TILE, TILE), float32)
    Bs = cuda.shared.array((TILE, TILE), float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    row = cuda.blockIdx.y * TILE + ty
    col = cuda.blockIdx.x * TILE + tx
    M, K = A.shape
    N = B.shape[1]
    acc = float32(0.0)
    for k0 in range(0, K, TILE):
        As[ty, tx] = A[row, k0 + tx] if row < M and k0 + tx < K else float32(0.0)
        Bs[ty, tx] = B[k0 + ty, col] if k0 + ty < K and col < N else float32(0.0)
        cuda.syncthreads()
        for i in range(TILE):
            acc += As[ty, i] * Bs[i, tx]
        cuda.syncthreads()  # nobody may overwrite the tiles while others still read them
    if row < M and col < N:
        C[row, col] = acc


@rung(name="shared-tiling", title="Shared-memory tiling, 32x32")
def launch(A: Any, B: Any, C: Any = None) -> Any:
    A, B, C, m, n, _ = check_operands(A, B, C)
    if m and n:
        shared_kernel[grid_2d(n, TILE, m, TILE), (TILE, TILE)](A, B, C)
    return C
