"""2D register blocking: each thread computes an 8 x 8 block of C in registers.

What changes: a block of 256 threads computes a 128 x 128 tile of C, each thread an 8 x 8
sub-block. Per step d of the K loop a thread copies 8 values of A's column and 8 of B's row
into registers (16 shared loads) and does their outer product, 64 multiply-adds. The tiles
are 128 x 8 of A and 8 x 128 of B: 1024 elements each, four per thread, loaded in strided
passes so that neighbouring threads read neighbouring addresses.
Why: `thread-tiling-1d` reuses each B value 8 times but each A value only once per thread. An outer
product reuses both, and its 64 independent accumulators give the FMA pipes work in flight.
Prediction: shared loads per multiply-add fall from 9/8 to 1/4; two to three times
`thread-tiling-1d`.
Measured: on an NVIDIA H200 by ``ladder bench`` (results/nvidia-h200.json): 8.149 ms at 4096³
(16.86 TFLOP/s, 2.19x `thread-tiling-1d`) but 0.342 ms at 1024³ (0.86x `thread-tiling-1d`). Nsight
Compute at 4096³ (lab/gemm/2026-11-22-profiles/nvidia-h200-profile-float32.json): 1.07 billion
shared-load bank conflicts (`thread-tiling-1d`: 61 thousand), occupancy 23.8%.
Verdict: held at 4096³, missed at 1024³. A 1024 x 1024 C is only 64 tiles of 128 x 128, so 64
blocks for the H200's 132 SMs leave more than half of them idle (`thread-tiling-1d`'s 64 x 64 tiles
make 256 blocks); that count is the likely cause, but no profile at 1024³ is in the file. The
conflicts come from the layout: shared memory has 32 banks of 4-byte words, and a warp's reads of
different words in one bank are served one after another. Here the warp's two groups of 16 threads
read A 8 rows (64 words) apart, the same bank, and its 16 B addresses, 8 words apart, fall in 4
banks (4-way). This is the kernel written the way Numba code is usually written; `unsigned-indices`
removes Numba's index overhead, `transposed-tiles` and `interleaved-columns` the conflicts.

Lab notes: docs/notes/gemm.md#rung-5-2d-register-blocking
"""

from numba import cuda, float32

from ladder.gemm.problem import gemm_rung, grid_2d

BM = 128
BN = 128
BK = 8
TM = 8
TN = 8
THREADS = (BM // TM) * (BN // TN)  # 256
ACC = TM * TN  # accumulators per thread (a local array needs a constant size)
A_ROWS_PER_PASS = THREADS // BK  # 32 rows of A's tile per loading pass
B_ROWS_PER_PASS = THREADS // BN  # 2 rows of B's tile per loading pass


@cuda.jit
def kernel(A, B, C):
    As = cuda.shared.array((BM, BK), float32)
    Bs = cuda.shared.array((BK, BN), float32)
    M, K = A.shape
    N = B.shape[1]
    tid = cuda.threadIdx.x
    row0 = cuda.blockIdx.y * BM
    col0 = cuda.blockIdx.x * BN
    out_row = tid // (BN // TN) * TM
    out_col = tid % (BN // TN) * TN
    a_row, a_col = tid // BK, tid % BK
    b_row, b_col = tid // BN, tid % BN
    acc = cuda.local.array(ACC, float32)
    reg_m = cuda.local.array(TM, float32)
    reg_n = cuda.local.array(TN, float32)
    for i in range(ACC):
        acc[i] = float32(0.0)
    for k0 in range(0, K, BK):
        for off in range(0, BM, A_ROWS_PER_PASS):
            r, c = row0 + a_row + off, k0 + a_col
            As[a_row + off, a_col] = A[r, c] if r < M and c < K else float32(0.0)
        for off in range(0, BK, B_ROWS_PER_PASS):
            r, c = k0 + b_row + off, col0 + b_col
            Bs[b_row + off, b_col] = B[r, c] if r < K and c < N else float32(0.0)
        cuda.syncthreads()
        for d in range(BK):
            for i in range(TM):
                reg_m[i] = As[out_row + i, d]
            for j in range(TN):
                reg_n[j] = Bs[d, out_col + j]
            for i in range(TM):
                for j in range(TN):
                    acc[i * TN + j] += reg_m[i] * reg_n[j]
        cuda.syncthreads()
    for i in range(TM):
        row = row0 + out_row + i
        for j in range(TN):
            col = col0 + out_col + j
            if row < M and col < N:
                C[row, col] = acc[i * TN + j]


@gemm_rung(
    name="register-blocked-2d",
    parent="thread-tiling-1d",
    title="2D register blocking, 8x8 outputs/thread",
)
def geometry(m: int, n: int, k: int) -> tuple:
    """A block of THREADS per BM x BN tile of C."""
    return kernel, grid_2d(n, BN, m, BM), THREADS
