"""1D thread tiling: each thread computes a column of TM = 8 outputs.

What changes: a block of 512 threads computes a 64 x 64 tile of C, and each thread keeps TM = 8
accumulators for 8 rows of one column. For each step d of the K loop it loads one value of B
into a register and reuses it for 8 multiply-adds against 8 values of A (the same 8 values for
every thread of a warp, so those loads are broadcasts). The K slice staged per step is BK = 8:
A's tile is 64 x 8 and B's is 8 x 64, so each of the 512 threads loads one element of each.
Why: `shared-tiling` is bound by its two shared-memory loads per multiply-add. Reusing a value held
in a register costs no shared-memory access.
Prediction: shared loads per multiply-add fall from 2 to 9/8, so `shared-tiling`'s shared-memory
bound rises 1.8x: close to twice `shared-tiling`, about 15 TFLOP/s, still limited by shared-memory
loads and by the small amount of independent work per thread.
Measured: on an NVIDIA H200 by ``ladder bench`` (results/nvidia-h200.json): 0.295 ms at 1024³
(0.97x `shared-tiling`) and 17.847 ms at 4096³ (7.70 TFLOP/s, 0.98x `shared-tiling`). Nsight
Compute at 4096³ (lab/gemm/2026-11-22-profiles/nvidia-h200-profile-float32.json), against
`shared-tiling`: SM throughput 80.7% (64.4%), occupancy 49.3% (99.6%), shared-load bank conflicts
61 thousand (813 thousand), DRAM 2.6% (10%).
Verdict: missed: no gain at all. What the count predicted did happen around it (fewer shared loads,
fewer bank conflicts, less DRAM traffic), but the count left out the instructions that are not
loads. Nsight Compute counts them
(lab/gemm/2026-11-24-counts/nvidia-h200-profile-gemm-counts.json): 15.1 billion warp instructions
against `shared-tiling`'s 9.05 billion, 1.67x as many for the same multiply-adds, with the
schedulers issuing on 82.9% of cycles (`shared-tiling`: 49.5%). The kernel is bound by issuing
instructions, and the extra ones (the index arithmetic of each A read and of the 8 accumulators,
with half the occupancy to hide them) cost what the saved loads gained. `register-blocked-2d` makes
each A value reused too, so one load serves several multiply-adds.

Lab notes: docs/notes/gemm.md#rung-4-1d-thread-tiling
"""

from numba import cuda, float32

from ladder.gemm.problem import gemm_rung, grid_2d

BM = 64  # rows of C per block
BN = 64  # columns of C per block
BK = 8  # K slice staged in shared memory per step
TM = 8  # outputs per thread, down a column
THREADS = BM * BN // TM  # 512


@cuda.jit
def kernel(A, B, C):
    As = cuda.shared.array((BM, BK), float32)
    Bs = cuda.shared.array((BK, BN), float32)
    M, K = A.shape
    N = B.shape[1]
    tid = cuda.threadIdx.x
    row0 = cuda.blockIdx.y * BM
    col0 = cuda.blockIdx.x * BN
    out_row = tid // BN * TM  # first of this thread's TM rows inside the tile
    out_col = tid % BN
    a_row, a_col = tid // BK, tid % BK  # one element of A's 64 x 8 tile per thread
    b_row, b_col = tid // BN, tid % BN  # one element of B's 8 x 64 tile per thread
    acc = cuda.local.array(TM, float32)
    for i in range(TM):
        acc[i] = float32(0.0)
    for k0 in range(0, K, BK):
        r, c = row0 + a_row, k0 + a_col
        As[a_row, a_col] = A[r, c] if r < M and c < K else float32(0.0)
        r, c = k0 + b_row, col0 + b_col
        Bs[b_row, b_col] = B[r, c] if r < K and c < N else float32(0.0)
        cuda.syncthreads()
        for d in range(BK):
            b = Bs[d, out_col]
            for i in range(TM):
                acc[i] += As[out_row + i, d] * b
        cuda.syncthreads()
    col = col0 + out_col
    for i in range(TM):
        row = row0 + out_row + i
        if row < M and col < N:
            C[row, col] = acc[i]


@gemm_rung(
    name="thread-tiling-1d", parent="shared-tiling", title="1D thread tiling, 8 outputs/thread"
)
def geometry(m: int, n: int, k: int) -> tuple:
    """A block of THREADS per BM x BN tile of C."""
    return kernel, grid_2d(n, BN, m, BM), THREADS
