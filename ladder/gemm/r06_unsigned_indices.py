"""Unsigned indices: `register-blocked-2d`'s kernel with Numba's index tax removed.

What changes: only the type of the index arithmetic. The tiling, the shared-memory layout and
every access are `register-blocked-2d`'s. Every index starts from ``uint32`` values (thread and
block indices, shapes, and the tile constants as ``np.uint32``), and every constant and loop
bound is unsigned. Two things the PTX shows:
1. Numba's arrays take negative indices, Python's way: before each access with a signed index it
   tests the sign and adds the extent (wrap-around code: ``shr.s64``, ``and``, ``add``, 23 times
   in `register-blocked-2d`), in 64-bit arithmetic. An unsigned index cannot be negative.
2. The cure's trap: Numba types ``uint64 op int64`` as float64, so one signed constant, or
   ``range(n)`` over a signed ``n``, turns a compare into ``cvt.rn.f64`` and ``setp.f64``.
Why: the inner loop is what the SM issues; every instruction that is not a multiply-add, a
shared load or a loop step takes an issue slot from them, and `thread-tiling-1d` measured
already that these kernels are bound by issuing instructions.
Prediction: the inner loop, one k of the tile (64 FMAs a thread), compiles to 88 instructions
against `register-blocked-2d`'s 127 (ptxas of CUDA 13.0 for sm_90; sm_80: 88 against 111): its 24
LEA and 8 IADD3 of 64-bit address arithmetic go, and with indices known to be non-negative ptxas
merges a thread's 8 adjacent reads of B into two 16-byte reads (LDS.128): 10 shared reads where
there were 16. The layout, and its conflicts, stay; B's now come in fewer reads: a warp's wavefronts
per k fall from 48 (A 8 reads 2-way, B 8 reads 4-way) to 24 (B's two 16-byte reads, 4 each; 32 if
the hardware serves them by quarter-warps). If issue is the limit, as `thread-tiling-1d` measured,
at most 127/88 = 1.44x: predicted 1.3x to 1.4x `register-blocked-2d` at 4096³.
Measured: on an NVIDIA H200 by ``ladder bench`` (results/nvidia-h200.json): 5.797 ms at 4096³
(23.71 TFLOP/s, 35.4% of the FP32 peak, 1.41x `register-blocked-2d`) and 0.265 ms at 1024³
(1.29x).
Verdict: held at 4096³, at the top of the range: 1.41x, just under the 127/88 = 1.44x that the
instruction count allows if issue is the whole limit, which fits the issue-bound reading. No
profile of this rung is in the lab, so the share of the fewer wavefronts is not separated from
that of the fewer instructions. At 1024³ the gain is smaller (1.29x), where the 64 blocks leave
more than half of the 132 SMs idle, as in `register-blocked-2d`.

Lab notes: docs/notes/gemm.md#rung-6-unsigned-indices
"""

import numpy as np
from numba import cuda, float32, uint32

from ladder.gemm.problem import gemm_rung, grid_2d

BM, BN, BK = 128, 128, 8  # block tile (Python ints: array shapes must be)
TM, TN = 8, 8  # outputs per thread
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
    As = cuda.shared.array((BM, BK), float32)
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
            As[a_row + off, a_col] = A[r, c] if r < M and c < K else float32(0.0)
        for off in range(U_ZERO, U_BK, U_B_ROWS_PER_PASS):
            r, c = k0 + b_row + off, col0 + b_col
            Bs[b_row + off, b_col] = B[r, c] if r < K and c < N else float32(0.0)
        cuda.syncthreads()
        for d in range(U_BK):
            for i in range(U_TM):
                reg_m[i] = As[out_row + i, d]
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
    name="unsigned-indices",
    parent="register-blocked-2d",
    title="Unsigned indices: Numba's wrap-around code removed",
)
def geometry(m: int, n: int, k: int) -> tuple:
    """A block of THREADS per BM x BN tile of C."""
    return kernel, grid_2d(n, BN, m, BM), THREADS
