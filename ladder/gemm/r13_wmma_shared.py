"""Rung 13, WMMA from shared memory: 128 x 128 block tiles, each warp a 64 x 32 tile of C.

Rung 12 fed the tensor cores straight from global memory, one 16 x 16 tile of C per warp, so
every fragment was loaded once per multiply and every warp re-read its own strips of A and B.
This rung (``r13_wmma_shared.cu``) applies the two classic fixes of the FP32 rungs 3 and 8 to
the tensor cores. A block of 256 threads stages a 128 x 32 tile of A and a 32 x 128 tile of B
in shared memory per K step; its 8 warps, 2 along M by 4 along N, each own a 64 x 32 warp tile
of C: 4 x 2 accumulator fragments, 64 FP32 registers per thread.

What that buys, counted:

- Global traffic. Per K step a block reads 8 KB of A and 8 KB of B for 128 x 128 x 32 =
  524,288 multiply-adds, 32 per byte; rung 12's 32 x 32 block read 4 KB for 16,384, 4 per
  byte. At M = N = K = 4096 each operand is read 4096/128 = 32 times instead of 256.
- Fragment reuse. Per 16-deep step a warp loads 4 A and 2 B fragments (3 KB, from shared
  memory) for 8 ``mma_sync`` (32,768 multiply-adds): each A fragment is used twice, each B
  fragment four times. Rung 12 loaded 1 KB from global memory for every ``mma_sync``.
- Coalesced wide copies. Each thread copies 2 x 16 bytes of A and 2 x 16 bytes of B per K step
  (``uint4``); a warp reads eight whole 64-byte row segments of A, or two 256-byte ones of B.

Bank conflicts. ``load_matrix_sync`` compiles to ``ldmatrix`` (LDSM in the SASS, transposing
for B), which reads 8 rows of 16 bytes per phase. Unpadded, A's 64-byte rows put those 8 rows
on 8 of the 32 banks (4-way conflict) and B's 256-byte rows on the same 4 banks (8-way). Each
shared row is padded by 8 halves (16 bytes): A rows of 40 halves (80 bytes, 20 banks apart)
and B rows of 136 halves (272 bytes, 4 banks apart) spread any 8 consecutive rows over all 32
banks. The copies keep the plain order, consecutive threads on consecutive 16-byte chunks of a
row: B's stores are conflict-free (8 lanes, 128 contiguous bytes), A's are 2-way conflicted (8
lanes cover two 64-byte rows, and with an 80-byte pitch those share 4 banks). The order that
would avoid it, each quarter warp on 8 different rows, scatters every quarter warp's global
loads over 8 rows, which costs L1 more than the conflict: a trial of it on an H200 was slower.

Synchronous: every K step is load, barrier, compute, barrier. Per K step each warp issues
4 LDG.128 (all four before the first store), 4 STS.128, 12 LDSM and 32 HMMA.16816 (an
``mma_sync`` of 16 x 16 x 16 is two of them) in the SASS for sm_90, but no warp can start the
math until the slowest load of the tile has arrived, and no load of the next tile starts
before the math is done.

Epilogue. The accumulators' layout is opaque, so they reach C through shared memory, reusing
the tiles' memory after the last barrier: each warp stores one 16 x 32 strip of FP32 at a time
(rows of 40 floats, so ``store_matrix_sync``'s 8-byte stores are conflict-free), converts it
to half and writes it to C with 8-byte stores, 8 lanes per 64-byte row segment. The staging
needs 8 x 16 x 40 x 4 = 20,480 bytes, the tiles 18,944; the block declares the larger, static.

ptxas reports (NVRTC, CUDA 13): 128 registers for sm_90 (126 for sm_80), 20,480 bytes of
shared memory, no spills. 256 threads x 128 registers fill half of an SM's 65,536, so 2 blocks
(16 warps) fit per SM; registers, not shared memory, bound the occupancy, and
``__launch_bounds__(256, 2)`` holds the compiler to the 128 that keep it there.

Prediction: a large step over rung 12, since 8x less global traffic and shared-memory
fragments keep the tensor cores busier, but still well short of cuBLAS: every K step stalls all
warps of a block on global latency, and two blocks per SM hide only part of it (predicted, not
measured). Rung 14 removes the stall.

Measured on an H200 by ``ladder bench`` (results/nvidia-h200.json): 216.55 TFLOP/s at 4096³
(0.284x cuBLAS HGEMM) and 219.80 at 8192³ (0.294x): shared-memory reuse is worth 7.7x over
rung 12.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ladder.core import cuda_cpp
from ladder.core.rung import rung
from ladder.gemm.tensor_core import launch_tiled

SOURCE = cuda_cpp.source(__file__, "r13_wmma_shared.cu", archs=("sm_80", "sm_90"))
BM, BN, BK = 128, 128, 32  # a block's tile of C, and the K step (as in the .cu file)
THREADS = 256  # 8 warps, 2 (M) x 4 (N), each a 64 x 32 tile of C


@rung(
    name="wmma-shared",
    title="WMMA, 128 x 128 block tiles staged in shared memory",
    dtypes=("float16",),
    needs=("cupy",),
    units="tensor",
    min_cc=(7, 0),
)
def launch(A: Any, B: Any, C: Any = None) -> Any:
    kernel = SOURCE.kernel("wmma_shared")

    def body(a: np.uint64, b: np.uint64, c: np.uint64, m: int, n: int, k: int) -> None:
        grid = (n // BN, m // BM)
        kernel(grid, (THREADS,), (a, b, c, np.int32(m), np.int32(n), np.int32(k)))

    return launch_tiled(A, B, C, (BM, BN, BK), body)
