"""Wide loads: 16-byte global loads and 16-byte shared-memory reads and stores.

What changes: `interleaved-columns` moves every float with its own 4-byte instruction. Numba has no
``float4``; ``ladder.core.intrinsics.load4``/``store4`` emit vector accesses, which become
``ld.global.v4.f32``, ``ld.shared.v4.f32`` and ``st.global.v4.f32`` in the PTX. Same 128 x 128
x 8 block tile and 8 x 8 outputs per thread. A's 128 x 8 tile is 256 float4, one per thread
(stored transposed as four scalars); B's 8 x 128 tile is 256 float4, one 16-byte store each.
The inner loop reads a thread's 8 values of A as two float4 and its 8 values of B as two float4
(columns ``4 tcol .. 4 tcol + 3`` and ``64 + 4 tcol ..``); C is written as float4.
A 16-byte access must be 16-byte aligned, so the wide global path needs K and N to be multiples
of 4 and 16-byte-aligned arrays; otherwise the launcher uses the same kernel with scalar global
accesses. Shared arrays are declared 16-byte aligned, so the shared reads are always wide.
Why: fewer instructions move the same bytes, and a quarter-warp's 16-byte reads cover 128
consecutive bytes, so they stay free of bank conflicts.
Prediction: global load instructions fall 4x and shared reads 4x (16 to 4 per 64
multiply-adds); a large step over `interleaved-columns`.
Measured: on an NVIDIA H200 by ``ladder bench`` (results/nvidia-h200.json): 0.203 ms at 1024³
(1.08x `interleaved-columns`) and 4.330 ms at 4096³ (31.74 TFLOP/s, 1.11x). Nsight Compute at 4096³
(lab/gemm/2026-11-22-profiles/nvidia-h200-profile-float32.json): SM throughput 65.9%
(`interleaved-columns`: 68.0%), occupancy 24.3% (24.4%), shared-load bank conflicts 46 thousand (7.7
thousand), DRAM 1.9%.
Verdict: missed: 1.11x, not a large step. The count looked at the loads alone. Per step of k a
thread issues 64 FMAs and 16 shared reads in `interleaved-columns`, 64 and 4 here: the FMAs, which
do not change, are 64 of the 80, so even if instruction issue were the whole limit the inner loop
could get at most 80/68 = 1.18x faster. Nsight Compute
(lab/gemm/2026-11-24-counts/nvidia-h200-profile-gemm-counts.json) counts 2.99 billion warp
instructions against `interleaved-columns`'s 3.40 billion (12% fewer), with issue-slot use near 68%
in both: the time fell about as the instructions did (10%), so issue is the limit, and the FMAs are
most of what is left. `warp-tiling` cuts the shared-memory traffic per multiply-add instead.

Lab notes: docs/notes/gemm.md#rung-9-wide-loads
"""

import numpy as np
from numba import cuda, float32, uint32

from ladder.core.intrinsics import VECTOR_ALIGN, load4, store4
from ladder.gemm.problem import ByAlignment, gemm_rung, grid_2d

BM, BN, BK = 128, 128, 8
TM, TN = 8, 8
PAD = 4
AS_ROW = BM + PAD  # rows stay 16-byte multiples (528 bytes) so float4 reads stay aligned
THREADS = (BM // TM) * (BN // TN)  # 256
ACC = TM * TN

U_BM, U_BN, U_BK = np.uint32(BM), np.uint32(BN), np.uint32(BK)
U_TM = np.uint32(TM)
U_FOUR = np.uint32(4)
U_HALF_BN = np.uint32(BN // 2)  # a thread's second group of 4 columns starts 64 further
U_COL_THREADS = np.uint32(BN // TN)  # 16
U_ZERO = np.uint32(0)


def make_kernel(wide_global: bool) -> object:
    """The kernel with 16-byte global accesses (``wide_global``) or scalar ones."""

    @cuda.jit
    def kernel(A, B, C):
        As = cuda.shared.array((BK, AS_ROW), float32, alignment=VECTOR_ALIGN)
        Bs = cuda.shared.array((BK, BN), float32, alignment=VECTOR_ALIGN)
        M, K, N = uint32(A.shape[0]), uint32(A.shape[1]), uint32(B.shape[1])
        tid = uint32(cuda.threadIdx.x)
        row0 = uint32(cuda.blockIdx.y) * U_BM
        col0 = uint32(cuda.blockIdx.x) * U_BN
        out_row = tid // U_COL_THREADS * U_TM
        out_col = tid % U_COL_THREADS * U_FOUR
        a_row, a_col = tid // np.uint32(BK // 4), tid % np.uint32(BK // 4) * U_FOUR
        b_row, b_col = tid // np.uint32(BN // 4), tid % np.uint32(BN // 4) * U_FOUR
        acc = cuda.local.array(ACC, float32)
        reg_m = cuda.local.array(TM, float32)
        reg_n = cuda.local.array(TN, float32)
        for i in range(ACC):
            acc[i] = float32(0.0)
        zero = float32(0.0)
        for k0 in range(U_ZERO, K, U_BK):
            r, c = row0 + a_row, k0 + a_col
            if wide_global:
                a0, a1, a2, a3 = load4(A, r, c) if r < M and c < K else (zero, zero, zero, zero)
            else:
                ok = r < M
                a0 = A[r, c] if ok and c < K else zero
                a1 = A[r, c + 1] if ok and c + 1 < K else zero
                a2 = A[r, c + 2] if ok and c + 2 < K else zero
                a3 = A[r, c + 3] if ok and c + 3 < K else zero
            As[a_col, a_row] = a0
            As[a_col + 1, a_row] = a1
            As[a_col + 2, a_row] = a2
            As[a_col + 3, a_row] = a3
            r, c = k0 + b_row, col0 + b_col
            if wide_global:
                b0, b1, b2, b3 = load4(B, r, c) if r < K and c < N else (zero, zero, zero, zero)
            else:
                ok = r < K
                b0 = B[r, c] if ok and c < N else zero
                b1 = B[r, c + 1] if ok and c + 1 < N else zero
                b2 = B[r, c + 2] if ok and c + 2 < N else zero
                b3 = B[r, c + 3] if ok and c + 3 < N else zero
            store4(Bs, b_row, b_col, b0, b1, b2, b3)
            cuda.syncthreads()
            for d in range(U_BK):
                # registers, not a tuple: indexing a tuple with a loop variable puts it on
                # the stack (ptxas reports a 256-byte stack frame)
                reg_m[0], reg_m[1], reg_m[2], reg_m[3] = load4(As, d, out_row)
                reg_m[4], reg_m[5], reg_m[6], reg_m[7] = load4(As, d, out_row + U_FOUR)
                reg_n[0], reg_n[1], reg_n[2], reg_n[3] = load4(Bs, d, out_col)
                reg_n[4], reg_n[5], reg_n[6], reg_n[7] = load4(Bs, d, out_col + U_HALF_BN)
                for i in range(TM):
                    for j in range(TN):
                        acc[i * TN + j] += reg_m[i] * reg_n[j]
            cuda.syncthreads()
        for i in range(TM):
            row = row0 + out_row + uint32(i)
            if row < M:
                for half in range(2):
                    col = col0 + out_col + uint32(half) * U_HALF_BN
                    base = i * TN + half * 4
                    if wide_global:
                        if col < N:
                            store4(
                                C, row, col, acc[base], acc[base + 1], acc[base + 2], acc[base + 3]
                            )
                    else:
                        for j in range(4):
                            if col + uint32(j) < N:
                                C[row, col + uint32(j)] = acc[base + j]

    return kernel


wide_kernel = make_kernel(wide_global=True)
scalar_kernel = make_kernel(wide_global=False)


@gemm_rung(
    name="wide-loads", parent="interleaved-columns", title="16-byte loads and stores (float4)"
)
def geometry(m: int, n: int, k: int) -> tuple:
    """The 16-byte kernel where every row of A, B and C allows it, else the scalar one; a block
    of THREADS per BM x BN tile of C."""
    return ByAlignment(wide_kernel, scalar_kernel), grid_2d(n, BN, m, BM), THREADS
