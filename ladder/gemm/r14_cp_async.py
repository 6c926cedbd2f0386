"""Rung 14, cp.async: a 4-stage shared-memory ring filled by asynchronous copies.

Rung 13 stalls twice per K tile: its loads wait for global memory with the tensor cores idle,
and its math waits for the barrier after the loads. Ampere added ``cp.async``, a 16-byte copy
from global to shared memory that a thread issues and forgets: the data does not pass through
registers (rung 13 held 4 x 16 bytes = 16 registers per thread in flight), and the ``.cg``
variant caches it in L2 only. In the SASS it is LDGSTS.E.BYPASS.128. Copies issued since the
last ``cp.async.commit_group`` form a group, and ``cp.async.wait_group N`` waits until at most
N of the thread's newest groups are still in flight. The kernel (``r14_cp_async.cu``) writes
the three instructions as inline PTX.

The block tile, the warps and the copy map are rung 13's: 128 x 128 x 32 tiles, 8 warps of
64 x 32, 2 + 2 copies of 16 bytes per thread per tile. What changes is where they go: a ring of
4 stages of 18,944 bytes (75,776 in all) in dynamic shared memory, over the 48 KB a block may
declare statically, so the launcher raises the kernel's ``max_dynamic_shared_size_bytes``.

The pipeline, with one commit group per K tile (group g holds tile g):

- prologue: issue tiles 0, 1 and 2 into stages 0, 1, 2, committing a group after each;
- iteration t: ``wait_group 2`` (of the t + 3 groups committed, only the newest two, tiles
  t + 1 and t + 2, may still be in flight, so tile t has landed), ``__syncthreads`` (every
  thread's copies of tile t are visible, and every warp has finished tile t - 1), issue tile
  t + 3 into stage (t + 3) % 4, the stage tile t - 1 just released, commit, then the 16
  ``mma_sync`` per warp on stage t % 4 while tiles t + 1 .. t + 3 (48 KB) are in flight;
- tail: past the last tile the groups are committed empty, so the count in ``wait_group``
  stays 2 and no copy reads beyond K; a final ``wait_group 0`` and barrier precede the
  epilogue, which reuses the ring's first 20,480 bytes as rung 13's staging strips.

One barrier per K tile instead of two: the barrier that publishes tile t also tells the
copies of tile t + 3 that the warps have left its stage.

Bank conflicts: padded rows, as in rung 13 (A rows of 40 halves, B rows of 136), not an XOR
swizzle. ``load_matrix_sync`` addresses a fragment by one pointer and a leading dimension, so
it can only read a plain strided layout; a swizzle, which permutes the 16-byte chunks of each
row differently, needs ``ldmatrix`` with per-lane addresses (raw ``mma.sync``), not WMMA. The
padding costs 2,560 bytes per stage (16 %) and keeps the ``ldmatrix`` reads conflict-free: any
8 rows of 16 bytes land on 8 distinct groups of 4 banks. The copies keep rung 13's plain order;
cp.async writes shared memory as the data arrives, not as a quarter warp's register stores,
and the 2-way conflict of rung 13's A stores did not reappear (Nsight Compute counted no bank
conflicts for the copies in a trial on an H200).

Tile choice: 128 x 128 x 32 with 4 stages.

- The warp tile stays rung 13's, so the step between the two rungs measures the copy path.
  128 x 256 with 8 warps would need 64 x 64 warp tiles: 128 accumulator registers alone,
  about 200 in all, one block per SM, and half as many blocks to spread over the SMs.
- BK = 32 with 4 stages holds 3 tiles in flight, 96 values of K, in 74 KB; BK = 64 with 3
  stages holds 2 tiles, 128 values of K, in 105 KB and halves the barriers per multiply. Both
  fit twice in an H100's or H200's 228 KB per SM, where the registers allow 2 blocks anyway,
  but only the 74 KB ring fits twice in an A100's 164 KB. In a trial on an H200, 3 or 5
  stages of BK = 32 and 3 or 4 stages of BK = 64 were all slower than this choice.

No register double-buffering of fragments: the compiler already issues the second 16-deep
step's LDSM between the first step's HMMAs.

ptxas reports (NVRTC, CUDA 13): 128 registers for sm_90 (126 for sm_80), no spills, 0 bytes
of static shared memory (the 75,776 are dynamic). Occupancy stays 2 blocks (16 warps) per SM,
bound by the registers as in rung 13 (``__launch_bounds__(256, 2)``).

Prediction: a clear step over rung 13 at the large sizes, where many K tiles keep the ring
full, and less at small K, where the 3-tile prologue is a larger share. Still well below
cuBLAS, for two reasons. Shared-memory bandwidth: per K tile a block reads 48 KB through
``ldmatrix`` (8 warps x 12 x 512 bytes) and writes 16 KB, 64 KB for 524,288 multiply-adds,
because a 64 x 32 warp tile reloads each fragment for every 16-deep step; larger warp tiles
cut that ratio. And on Hopper ``mma_sync`` compiles to the older HMMA instructions, while
cuBLAS HGEMM uses the asynchronous warpgroup MMA (wgmma), fed from shared memory directly, and
the bulk tensor copy (TMA) (predicted, not measured).

Measured on an H200 by ``ladder bench`` (results/nvidia-h200.json): 334.64 TFLOP/s at 4096³
(0.439x cuBLAS HGEMM) and 313.50 at 8192³ (0.420x).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ladder.core import cuda_cpp
from ladder.core.rung import rung
from ladder.gemm.tensor_core import launch_tiled

SOURCE = cuda_cpp.source(__file__, "r14_cp_async.cu", archs=("sm_80", "sm_90"))
BM, BN, BK = 128, 128, 32  # a block's tile of C, and the K step (as in the .cu file)
STAGES = 4  # K tiles resident in the shared-memory ring
PAD = 8  # halves added to every shared row
THREADS = 256  # 8 warps, 2 (M) x 4 (N), each a 64 x 32 tile of C
# the ring: STAGES x (A tile 128 x 40 + B tile 32 x 136) halves = 75,776 bytes, as in the .cu
SMEM_BYTES = STAGES * (BM * (BK + PAD) + BK * (BN + PAD)) * 2


@rung(
    name="cp-async",
    title="WMMA fed by cp.async into a 4-stage shared-memory ring",
    dtypes=("float16",),
    needs=("cupy",),
    units="tensor",
    min_cc=(8, 0),
)
def launch(A: Any, B: Any, C: Any = None) -> Any:
    kernel = SOURCE.kernel("wmma_cp_async")
    if kernel.max_dynamic_shared_size_bytes < SMEM_BYTES:
        kernel.max_dynamic_shared_size_bytes = SMEM_BYTES  # over the 48 KB default

    def body(a: np.uint64, b: np.uint64, c: np.uint64, m: int, n: int, k: int) -> None:
        grid = (n // BN, m // BM)
        args = (a, b, c, np.int32(m), np.int32(n), np.int32(k))
        kernel(grid, (THREADS,), args, shared_mem=SMEM_BYTES)

    return launch_tiled(A, B, C, (BM, BN, BK), body)
