"""Interleaved columns: a thread's 8 columns 16 apart, so B's reads and C's stores are contiguous.

What changes: only which 8 columns of the block tile a thread owns. In `transposed-tiles` the
thread at ``tcol`` (0 to 15 across a row of threads) owns columns ``8 tcol`` to ``8 tcol + 7``;
here ``tcol + 16 j``, j = 0 to 7: it reads ``Bs[d, tcol + 16 j]`` and writes those columns of C.
Why: shared memory has 32 banks of 4-byte words. A half-warp's 16 threads now read 16
consecutive words of B's tile (16 banks, one word each) and write 16 consecutive floats of C (two
32-byte sectors). In `transposed-tiles` a thread's 8 adjacent columns are two 16-byte reads
(LDS.128), 32 bytes apart across the half-warp: 256 bytes in 16 of the 32 banks, 4 words a bank;
and a store of C touches 16 sectors per half-warp.
Prediction: B's reads cost 8 wavefronts per k here (8 LDS, no conflict) against 8 in
`transposed-tiles` if the hardware serves a 16-byte read by the whole warp (2 LDS.128 of 4), 16
if by quarter-warps; but the inner loop grows from 80 to 86 instructions per 64 FMAs (ptxas of
CUDA 13.0, sm_90), the 2 LDS.128 of B becoming 8 LDS. C's stores are 64 per thread once, not per
k. Between 5% slower and 10% faster than `transposed-tiles` at 4096³.
Measured: on an NVIDIA H200 by ``ladder bench`` (results/nvidia-h200.json): 0.220 ms at 1024³
(1.02x `transposed-tiles`) and 4.811 ms at 4096³ (28.57 TFLOP/s, 43% of the FP32 peak, 0.96x).
Nsight Compute at 4096³, of this kernel under the name `transposed-tiles` before the split
(lab/gemm/2026-11-22-profiles/nvidia-h200-profile-float32.json): shared-load bank conflicts 7.7
thousand (`register-blocked-2d`: 1.07 billion), SM throughput 68.0% (61.6%).
Verdict: held, at the slow end at 4096³: 0.96x `transposed-tiles`, 1.02x at 1024³. The extra
instructions (86 per 64 FMAs against 80) would give 0.93x if issue were the whole limit; at 4096³
they cost more than B's conflict-free reads saved. The three steps from `register-blocked-2d`
together are 1.69x at 4096³ and 1.56x at 1024³; this one gives a little back at 4096³. The profile
still counts 5.0 million shared-store conflicts (`register-blocked-2d`: 1.2 million), where the
layout count says A's stores have none; where they come from is not examined yet (Nsight's
per-instruction source view would show it). `wide-loads` widens the loads.

Lab notes: docs/notes/gemm.md#rung-8-interleaved-columns
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
    tcol = tid % U_COL_THREADS
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
                reg_n[j] = Bs[d, tcol + j * U_COL_THREADS]
            for i in range(TM):
                for j in range(TN):
                    acc[i * TN + j] += reg_m[i] * reg_n[j]
        cuda.syncthreads()
    for i in range(U_TM):
        row = row0 + out_row + i
        for j in range(U_TN):
            col = col0 + tcol + j * U_COL_THREADS
            if row < M and col < N:
                C[row, col] = acc[i * U_TN + j]


@gemm_rung(
    name="interleaved-columns",
    parent="transposed-tiles",
    title="Each thread's columns 16 apart: conflict-free B reads",
)
def geometry(m: int, n: int, k: int) -> tuple:
    """A block of THREADS per BM x BN tile of C."""
    return kernel, grid_2d(n, BN, m, BM), THREADS
