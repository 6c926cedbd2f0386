"""WMMA from shared memory: 128 x 128 block tiles, each warp a 64 x 32 tile of C.

What changes: the two classic fixes of the FP32 rungs `shared-tiling` and `warp-tiling`, applied to
the tensor cores (``r15_wmma_shared.cu``). A block of 256 threads stages a 128 x 32 tile of A and a
32 x 128 tile of B in shared memory per K step; its 8 warps, 2 along M by 4 along N, each own a 64
x 32 warp tile of C: 4 x 2 accumulator fragments, 64 FP32 registers per thread. Each thread copies
2 x 16 bytes of A and 2 x 16 of B per K step (``uint4``), consecutive threads on consecutive
16-byte chunks of a row. Every K step is load, barrier, compute, barrier. The accumulators reach C
through shared memory (their layout is opaque), reusing the tiles' memory. Bank conflicts:
``load_matrix_sync`` compiles to ``ldmatrix``, which reads 8 rows of 16 bytes per pass. Unpadded,
those 8 rows would fall in the same few of the 32 banks (4-way for A's 64-byte rows, 8-way for B's
256-byte rows); each shared row is padded by 8 halves (16 bytes), A rows to 40 halves and B rows to
136, which spreads any 8 consecutive rows over all 32 banks. A's copies stay 2-way conflicted (8
lanes write two 64-byte rows 80 bytes apart, whose banks overlap by 4).
Why: `wmma` loaded 1 KB from global memory for every ``mma_sync``. Here a block reads 16 KB
per K step for 524,288 multiply-adds, 32 per byte against `wmma`'s 4; each operand is read
4096/128 = 32 times at 4096³ instead of 256; and per 16-deep step a warp loads 4 A and 2 B
fragments from shared memory for 8 ``mma_sync``, reusing each A fragment twice and each B
fragment four times.
Prediction: a large step over `wmma` (8x less global traffic), but still well short of
cuBLAS: every K step stalls all warps of a block on global latency, and two blocks per SM
(256 threads x 128 registers, the compiler's count) hide only part of it.
Measured: on an NVIDIA H200 by ``ladder bench`` (results/nvidia-h200.json): 0.638 ms at 4096³
(215.42 TFLOP/s, 7.73x `wmma`, 0.311x cuBLAS HGEMM) and 4.966 ms at 8192³ (221.39 TFLOP/s,
0.288x). Nsight Compute at 4096³ (lab/gemm/2026-11-22-profiles/nvidia-h200-profile-float16.json): SM
throughput 33.5%, occupancy 24.3%, 9.4 million shared-store bank conflicts.
Verdict: held: 7.73x, close to the 8x cut in global traffic, and under a third of cuBLAS.
The SM's busiest unit works a third of the time, which fits warps waiting at each K step;
the stall reasons that would confirm it are not in the profile file. `cp-async` overlaps the
copies with the math.

Lab notes: docs/notes/gemm.md#rung-15-wmma-shared
"""

from ladder.core import cuda_cpp
from ladder.gemm.problem import gemm_rung

SOURCE = cuda_cpp.source(__file__, "r15_wmma_shared.cu", archs=("sm_80", "sm_90"))
BM, BN, BK = 128, 128, 32  # a block's tile of C, and the K step (as in the .cu file)
THREADS = 256  # 8 warps, 2 (M) x 4 (N), each a 64 x 32 tile of C


@gemm_rung(
    name="wmma-shared",
    parent="wmma",
    title="WMMA, 128 x 128 block tiles staged in shared memory",
    dtypes=("float16",),
    needs=("cupy",),
    units="tensor",
    min_cc=(7, 0),
    cc_needs="WMMA on FP16 (wmma.mma_sync)",
    tiles=(BM, BN, BK),
)
def geometry(m: int, n: int, k: int, dtype: str) -> tuple:
    """``wmma_shared`` on tile-multiple sizes: a block of THREADS per BM x BN tile of C."""
    return SOURCE.kernel("wmma_shared"), (n // BN, m // BM), (THREADS,), 0
