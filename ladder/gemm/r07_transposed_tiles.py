"""Transposed tiles: A's tile stored transposed and padded, a thread's 8 values of A adjacent.

What changes: only where A's tile lies in shared memory. `unsigned-indices` stores it as it lies in
A, ``As[m, k]`` (128 x 8), and a thread reads its 8 values of A down a column, 8 words apart.
Here it is stored transposed, ``As[k, m]``, each row padded by PAD = 4 floats (AS_ROW = 132).
Why: shared memory has 32 banks of 4-byte words, and a warp's reads of different words in one
bank are served one after another. In `unsigned-indices` a warp's two halves read A at rows
``out_row`` 8 apart, words 64 apart: one bank, two words, a 2-way conflict on every read of A.
Transposed, the two halves read words 8 apart, in different banks. The store of A's tile turns
from a row into a column: without the pad a warp's 32 stores (8 k-rows by 4 m) would fall in 4
banks, 8-way; with rows of 132 floats each row is shifted by 4 banks (bank = 4 k + m mod 32) and
the 32 stores hit 32 banks.
Prediction: A's 8 reads of a k become adjacent, and ptxas merges them into two LDS.128: the
inner loop falls from 88 to 80 instructions per 64 FMAs (ptxas of CUDA 13.0, sm_80 and sm_90),
and A's reads from 16 wavefronts per k to 2. About 1.1x to 1.2x `unsigned-indices` at 4096³.
Measured: on an NVIDIA H200 by ``ladder bench`` (results/nvidia-h200.json): 4.610 ms at 4096³
(29.81 TFLOP/s, 44.6% of the FP32 peak, 1.26x `unsigned-indices`) and 0.224 ms at 1024³ (1.18x).
Verdict: beat the prediction: 1.26x at 4096³, more than the 88/80 = 1.10x that the instruction
count allows by itself, so the conflicts cost time of their own, not only issue slots: A's reads
went from 16 wavefronts a warp per k to 2. How the gain splits between the two is not profiled.

Lab notes: docs/notes/gemm.md#rung-7-transposed-tiles
"""

import numpy as np
from numba import cuda, float32, uint32

from ladder.gemm.problem import gemm_rung, grid_2d

BM, BN, BK = 128, 128, 8  # block tile (Python ints: array shapes must be)
TM, TN = 8, 8  # outputs per thread
PAD = 4  # floats of padding per row of the transposed A tile
AS_ROW = BM + PAD  # 132 floats: 132 mod 32 = 4 banks of shift per row
THREADS = (BM // TM) * (BN // TN)  # 256
ACC = TM * TN

# The same numbers as uint32, for index arithmetic without wrap-around code (see docstring).
U_BM, U_BN, U_BK = np.uint32(BM), np.uint32(BN), np.uint32(BK)
U_TM, U_TN = np.uint32(TM), np.uint32(TN)
U_COL_THREADS = np.uint32(BN // TN)  # 16 threads across a row of the block tile
U_A_ROWS_PER_PASS = np.uint32(THREADS // BK)  # 32
U_B_ROWS_PER_PASS = np.uint32(THREADS // BN)  # 2
U_ZERO = np.uint32(0)


@cuda.jit
def kernel(A, B, C):
    As = cuda.shared.array((BK, AS_ROW), float32)  # transposed: As[k, m]
    Bs = cuda.shared.array((BK, BN), float32)
    M, K, N = uint32(A.shape[0]), uint32(A.shape[1]), uint32(B.shape[1])
    tid = uint32(cuda.threadIdx.x)
    row0 = uint32(cuda.blockIdx.y) * U_BM
    col0 = uint32(cuda.blockIdx.x) * U_BN
    out_row = tid // U_COL_THREADS * U_TM
    out_col = tid % U_COL_THREADS * U_TN
    a_row, a_col = tid // U_BK, tid % U_BK
    b_row, b_col = tid // U_BN, tid % U_BN
    acc = cuda.local.array(ACC, float32)
    reg_m = cuda.local.array(TM, float32)
    reg_n = cuda.local.array(TN, float32)
    for i in range(ACC):
        acc[i] = float32(0.0)
    for k0 in range(U_ZERO, K, U_BK):
        for off in range(U_ZERO, U_BM, U_A_ROWS_PER_PASS):
            r, c = row0 + a_row + off, k0 + a_col
            As[a_col, a_row + off] = A[r, c] if r < M and c < K else float32(0.0)
        for off in range(U_ZERO, U_BK, U_B_ROWS_PER_PASS):
            r, c = k0 + b_row + off, col0 + b_col
            Bs[b_row + off, b_col] = B[r, c] if r < K and c < N else float32(0.0)
        cuda.syncthreads()
        for d in range(U_BK):
            for i in range(U_TM):
                reg_m[i] = As[d, out_row + i]
            for j in range(U_TN):
                reg_n[j] = Bs[d, out_col + j]
            for i in range(TM):
                for j in range(TN):
                    acc[i * TN + j] += reg_m[i] * reg_n[j]
        cuda.syncthreads()
    for i in range(U_TM):
        row = row0 + out_row + i
        for j in range(U_TN):
            col = col0 + out_col + j
            if row < M and col < N:
                C[row, col] = acc[i * U_TN + j]


@gemm_rung(
    name="transposed-tiles",
    parent="unsigned-indices",
    title="A's tile stored transposed and padded in shared memory",
)
def geometry(m: int, n: int, k: int) -> tuple:
    """A block of THREADS per BM x BN tile of C."""
    return kernel, grid_2d(n, BN, m, BM), THREADS
