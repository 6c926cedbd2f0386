"""Naive: one thread per element of C, with the threads of a warp walking down a column.

What changes: the first GPU kernel. Thread (x, y) computes ``C[x, y]``, the dot product of row
x of A and column y of B, both read from global memory every time.
Why: it is the formula written as a kernel. ``threadIdx.x``, the index that varies fastest in a
warp, picks the *row*: a warp's 32 loads of A hit 32 rows, K floats apart, 32 sectors of 32
bytes for 32 useful floats; B's load is one broadcast. Per step of k: 33 sectors per warp.
Prediction: memory transactions, not arithmetic, set the pace; a few percent of the FP32 peak
(66.9 TFLOP/s on the H200, from its SMs, lanes and clock).
Measured: on an NVIDIA H200 by ``ladder bench`` (results/nvidia-h200.json): 4.425 ms at 1024³
(0.49 TFLOP/s) and 276.089 ms at 4096³ (0.50 TFLOP/s, 0.7% of the FP32 peak), slower than NumPy
on the CPU at both sizes.
Verdict: the kind held, the number missed low. The profile (lab notes): warp slots full, the SM's
busiest unit at a quarter, DRAM idle: it waits on scattered loads, a latency the count left out.

Lab notes: docs/notes/gemm.md#rung-1-naive (the profile; Numba notes for every rung)
"""

from numba import cuda, float32

from ladder.gemm.problem import gemm_rung, grid_2d

BLOCK = 32  # 32 x 32 = 1024 threads, the most a block may have


@cuda.jit
def kernel(A, B, C):
    row = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x  # fastest index -> row: strided
    col = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
    if row < C.shape[0] and col < C.shape[1]:
        acc = float32(0.0)
        for k in range(A.shape[1]):
            acc += A[row, k] * B[k, col]
        C[row, col] = acc


@gemm_rung(name="naive", parent=None, title="Naive: one thread per output, uncoalesced")
def geometry(m: int, n: int, k: int) -> tuple:
    """One thread per element of C, x down a column."""
    return kernel, grid_2d(m, BLOCK, n, BLOCK), (BLOCK, BLOCK)
