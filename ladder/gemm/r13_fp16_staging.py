"""FP16 staging: half-precision inputs in global and shared memory, FP32 arithmetic.

What changes: the first half-precision rung, still without tensor cores and still in Numba. It is
`interleaved-columns`'s kernel (128 x 128 block tile, 8 x 8 outputs per thread, unsigned indices,
A's tile stored transposed) with A, B and C in float16 and every tile staged in shared memory as
float16. Each value is converted to float32 (``cvt.f32.f16``) when it is read from shared memory
into a register, and the 64 accumulators stay float32: FP16 inputs, FP32 accumulation, the same
contract as cuBLAS HGEMM and the tensor-core rungs above this one.
Why: halving the bytes halves global traffic per tile, and a K tile twice as deep (BK = 16)
fits in the same shared memory as `interleaved-columns`'s float32 tile: half as many barriers per
multiply-add, and twice the problem fits in device memory.
Prediction: about `interleaved-columns`'s speed, give or take the conversions: the arithmetic is
still one FP32 FMA per multiply-add, capped by the FP32 peak (66.9 TFLOP/s on the H200) however few
bytes move, and the conversions add 16 instructions per 64 FMAs (80 to 96 in the inner loop, at most
1/6 slower). Numba has no vector type for pairs of halves, so loads stay 2 bytes wide.
Measured: on an NVIDIA H200 by ``ladder bench`` (results/nvidia-h200.json): 5.324 ms at 4096³
(25.82 TFLOP/s, 0.037x cuBLAS HGEMM at 0.199 ms) and 42.229 ms at 8192³ (26.04 TFLOP/s);
`interleaved-columns` in float32 takes 4.811 ms at 4096³ in the same run. Nsight Compute at 4096³
(lab/gemm/2026-11-22-profiles/nvidia-h200-profile-float16.json): 18.6 million shared-store bank
conflicts (`interleaved-columns`: 5.0 million,
lab/gemm/2026-11-22-profiles/nvidia-h200-profile-float32.json).
Verdict: held: 0.90x `interleaved-columns`, inside the 1/6 the conversions could cost. How the loss
splits between the conversions and the extra store conflicts of the 2-byte transposed stores of A
is not measured. Going up needs the tensor cores, which cuBLAS HGEMM runs at 11.5 times the FP32
peak in the same run (767.9 TFLOP/s at 8192³): `wmma`.

Lab notes: docs/notes/gemm.md#rung-13-fp16-staging
"""

import numpy as np
from numba import cuda, float32, uint32
from numba.types import float16

from ladder.gemm.problem import gemm_rung, grid_2d

BM, BN, BK = 128, 128, 16  # block tile; BK twice interleaved-columns' in the same shared bytes
TM, TN = 8, 8  # outputs per thread
PAD = 8  # halves of padding per transposed A row: 136 halves = 68 words, 4 banks of shift
AS_ROW = BM + PAD
THREADS = (BM // TM) * (BN // TN)  # 256
ACC = TM * TN

U_BM, U_BN, U_BK = np.uint32(BM), np.uint32(BN), np.uint32(BK)
U_TM, U_TN = np.uint32(TM), np.uint32(TN)
U_COL_THREADS = np.uint32(BN // TN)  # 16 threads across a row of the block tile
U_A_ROWS_PER_PASS = np.uint32(THREADS // BK)  # 16
U_B_ROWS_PER_PASS = np.uint32(THREADS // BN)  # 2
U_ZERO = np.uint32(0)


@cuda.jit
def kernel(A, B, C):
    As = cuda.shared.array((BK, AS_ROW), float16)  # transposed: As[k, m]
    Bs = cuda.shared.array((BK, BN), float16)
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
    zero = float16(float32(0.0))
    for i in range(ACC):
        acc[i] = float32(0.0)
    for k0 in range(U_ZERO, K, U_BK):
        for off in range(U_ZERO, U_BM, U_A_ROWS_PER_PASS):
            r, c = row0 + a_row + off, k0 + a_col
            As[a_col, a_row + off] = A[r, c] if r < M and c < K else zero
        for off in range(U_ZERO, U_BK, U_B_ROWS_PER_PASS):
            r, c = k0 + b_row + off, col0 + b_col
            Bs[b_row + off, b_col] = B[r, c] if r < K and c < N else zero
        cuda.syncthreads()
        for d in range(U_BK):
            for i in range(U_TM):
                reg_m[i] = float32(As[d, out_row + i])  # half -> float: one cvt per value
            for j in range(U_TN):
                reg_n[j] = float32(Bs[d, tcol + j * U_COL_THREADS])
            for i in range(TM):
                for j in range(TN):
                    acc[i * TN + j] += reg_m[i] * reg_n[j]
        cuda.syncthreads()
    for i in range(U_TM):
        row = row0 + out_row + i
        for j in range(U_TN):
            col = col0 + tcol + j * U_COL_THREADS
            if row < M and col < N:
                C[row, col] = float16(acc[i * U_TN + j])


@gemm_rung(
    name="fp16-staging",
    parent="interleaved-columns",
    title="FP16 in memory, FP32 FMA (no tensor cores)",
    dtypes=("float16",),
)
def geometry(m: int, n: int, k: int) -> tuple:
    """A block of THREADS per BM x BN tile of C."""
    return kernel, grid_2d(n, BN, m, BM), THREADS
