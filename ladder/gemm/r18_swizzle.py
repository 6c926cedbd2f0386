"""Swizzle: `mma-sync`'s padded rows replaced by an XOR swizzle, conflict-free at no cost in bytes.

What changes: only where a 16-byte chunk of a tile lies in shared memory (``r18_swizzle.cu``).
Shared memory has 32 banks of 4 bytes, so a chunk covers 4 banks, a bank group (address / 16
mod 8), and an ldmatrix 8 x 8 matrix, 8 rows of one chunk each, is read in one pass only if its
rows fall in 8 different groups. `mma-sync` padded each row by one chunk to get there (rows 5
and 17 chunks long). Here rows are not padded, and each row's chunks are permuted by an XOR with
bits of the row index: A (rows of 64 bytes, two to a 128-byte line) ``chunk ^ ((row >> 1) & 3)``,
B (rows of 256 bytes) ``chunk ^ (row & 7)``; 8 consecutive rows at one chunk then take 8
different groups. The XOR is applied where the copies write and where ldmatrix reads, both
worked out once, before the K loop.
Why: the same one pass per ldmatrix matrix, without the pad's bytes; and it is the layout the
copy engine of `tma` writes by itself (the 128-byte swizzle, B's XOR here) and wgmma reads:
neither writes or reads padded rows.
Prediction: a stage falls from 18,944 to 16,384 bytes (the 4-stage ring from 75,776 to
65,536), and nothing the SM feels changes: reads and copies stay conflict-free, two blocks still
fit on an SM (the register bound, 128 a thread, sets it), and per K tile a warp issues 86
instructions against 84 (ptxas of CUDA 13.0, sm_90; sm_80: 87 against 82: the XORs are outside
the loop, the stage's address arithmetic shifts instead of multiplying). Predicted: within 3% of
`mma-sync`. What the bytes buy shows in the next rung: `warp-tile-64`'s 4 stages of 128 x 256
tiles take 98,304 bytes swizzled and 108,544 padded.
Measured: on an NVIDIA H200 by ``ladder bench`` (results/nvidia-h200.json): 0.406 ms at 4096³
(338.27 TFLOP/s, 1.17x `mma-sync`, 1.01x `cp-async`, 0.489x cuBLAS HGEMM) and 3.223 ms at 8192³
(341.14 TFLOP/s, 1.15x, 1.09x, 0.444x).
Verdict: missed, on the fast side: 1.17x and 1.15x `mma-sync`, not within 3%, though both layouts
are conflict-free for ldmatrix by the bank-group count. The layout is the only change, so what
the padded rows cost `mma-sync` (not measured; see its verdict) the swizzle removes, and the two
steps from `cp-async` together come to 1.01x at 4096³, parity (the two rungs' repeats overlap),
and 1.09x at 8192³. The 10 KB of ring it saves per block buy nothing here, since two blocks fit on
an SM either way; they buy `warp-tile-64`'s larger stages.

Lab notes: docs/notes/gemm.md#rung-18-swizzle
"""

from ladder.core import cuda_cpp
from ladder.gemm.problem import gemm_rung

SOURCE = cuda_cpp.source(__file__, "r18_swizzle.cu", archs=("sm_80", "sm_90"))
BM, BN, BK = 128, 128, 32  # a block's tile of C, and the K step (as in the .cu file)
STAGES = 4  # depth of the cp.async ring
THREADS = 256  # 8 warps, 2 (M) x 4 (N), each a 64 x 32 tile of C
SMEM_BYTES = STAGES * (BM * BK + BK * BN) * 2  # 65,536: above the 48 KB default, so opted in


@gemm_rung(
    name="swizzle",
    parent="mma-sync",
    title="XOR-swizzled shared tiles in place of padded rows",
    dtypes=("float16",),
    needs=("cupy",),
    units="tensor",
    min_cc=(8, 0),
    cc_needs="cp.async and mma.sync m16n8k16",
    tiles=(BM, BN, BK),
)
def geometry(m: int, n: int, k: int, dtype: str) -> tuple:
    """``mma_sync_gemm`` on tile-multiple sizes: a block of THREADS per BM x BN tile of C, the
    ring in SMEM_BYTES of dynamic shared memory."""
    return SOURCE.kernel("mma_sync_gemm"), (n // BN, m // BM), (THREADS,), SMEM_BYTES
