"""Shared-memory tiling: a block stages 32 x 32 tiles of A and B in shared memory.

What changes: a 32 x 32 block loads a 32-wide slice of A's rows and of B's columns into shared
memory, one element per thread, synchronises, and each thread runs 32 multiply-adds out of
shared memory before the next slice. Edges: a tile that hangs over the matrix is filled with
zeros, which add nothing to the dot product, and only threads inside C write. That is how
every tiled rung handles any M, N, K.
Why: `coalesced` loads every element of A and B once per output that uses it (N times for A, M
times for B). Staged in a tile, each global element is loaded M/32 or N/32 times instead.
Prediction: global traffic falls 32 times, but the inner loop now does two shared-memory loads
per multiply-add; shared memory serves 32 words per clock per SM against 128 FMA lanes, so
this rung is bound by shared-memory bandwidth near an eighth of the FP32 peak: 8.4 TFLOP/s of
the H200's 66.9.
Measured: on an NVIDIA H200 by ``ladder bench`` (results/nvidia-h200.json): 0.286 ms at 1024³
(7.51 TFLOP/s) and 17.459 ms at 4096³ (7.87 TFLOP/s, 11.8% of the FP32 peak, 5.70x `coalesced`).
Nsight Compute at 4096³ (lab/gemm/2026-11-22-profiles/nvidia-h200-profile-float32.json): DRAM
throughput 10%, occupancy 99.6%, SM throughput 64.4%.
Verdict: held: 7.87 TFLOP/s is 94% of the shared-memory bound of the count. Global memory is no
longer the limit; the two shared loads per multiply-add are, which is `thread-tiling-1d`'s subject.

Lab notes: docs/notes/gemm.md#rung-3-shared-memory-tiling
"""

from numba import cuda, float32

from ladder.gemm.problem import gemm_rung, grid_2d

TILE = 32


@cuda.jit
def kernel(A, B, C):
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


@gemm_rung(name="shared-tiling", parent="coalesced", title="Shared-memory tiling, 32x32")
def geometry(m: int, n: int, k: int) -> tuple:
    """A block of TILE x TILE threads per tile of C."""
    return kernel, grid_2d(n, TILE, m, TILE), (TILE, TILE)
