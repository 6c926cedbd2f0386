"""Coalesced: the same kernel with the thread-to-output mapping swapped.

What changes: ``threadIdx.x`` now picks the *column* of C instead of the row; one line of the
kernel. The 32 threads of a warp read 32 consecutive floats of one row of B (one 128-byte
line: four sectors instead of 32), all read the same element of A (one broadcast), and write
32 consecutive floats of C.
Why: the memory system moves whole 32-byte sectors; a warp whose addresses are consecutive
("coalesced") uses every byte of them. Per step of k a warp now touches 5 sectors, not 33.
Prediction: several times faster than `naive` (the sector count allows up to 6.6x); still two
global loads (mostly L1/L2 hits) per fused multiply-add (FMA), so bound by cache bandwidth at
a small fraction of the FP32 peak.
Measured: on an NVIDIA H200 by ``ladder bench`` (results/nvidia-h200.json): 1.602 ms at 1024³
(1.34 TFLOP/s, 2.76x `naive`) and 99.551 ms at 4096³ (1.38 TFLOP/s, 2.77x, 2.1% of the FP32
peak). Nsight Compute at 4096³ (lab/gemm/2026-11-22-profiles/nvidia-h200-profile-float32.json): SM
throughput 74.3% (`naive`: 26.8%), L2 hit rate 60%, DRAM 1.8%.
Verdict: held in kind (nearly 3x, 2.1% of the peak) but well under the 6.6x that the sectors
alone allow. Only the sectors per load fell: the load instructions, two per FMA, are the same
as in `naive`, and the profile shows one of the SM's units now busy three quarters of the time.
Which unit (the load/store path or instruction issue) is not in the profile file: not yet
measured. `shared-tiling` cuts the global loads themselves.

Lab notes: docs/notes/gemm.md#rung-2-coalesced
"""

from numba import cuda, float32

from ladder.gemm.problem import gemm_rung, grid_2d

BLOCK = 32


@cuda.jit
def kernel(A, B, C):
    col = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x  # fastest index -> column
    row = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
    if row < C.shape[0] and col < C.shape[1]:
        acc = float32(0.0)
        for k in range(A.shape[1]):
            acc += A[row, k] * B[k, col]
        C[row, col] = acc


@gemm_rung(name="coalesced", parent="naive", title="Coalesced: warps read rows of B")
def geometry(m: int, n: int, k: int) -> tuple:
    """One thread per element of C, x along a row."""
    return kernel, grid_2d(n, BLOCK, m, BLOCK), (BLOCK, BLOCK)
