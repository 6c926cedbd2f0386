"""cp.async: a 4-stage shared-memory ring filled by asynchronous copies.

What changes: `wmma-shared`'s tiles, warps and copy map (128 x 128 x 32 tiles, 8 warps of 64 x 32,
2 + 2 copies of 16 bytes per thread per tile), but the copies are ``cp.async``: a 16-byte copy
from global to shared memory that a thread issues and forgets. The data do not pass through
registers, and the ``.cg`` variant caches them in L2 only. A thread closes the copies it has
issued into a group with one more instruction, and ``cp.async.wait_group N`` waits until at
most N of its newest groups are still in flight (inline PTX in ``r16_cp_async.cu``). They fill
a ring of 4 stages of 18,944 bytes (75,776 in all, dynamic shared memory, over the 48 KB a
block may declare statically). With one group per K tile:
- prologue: issue tiles 0, 1 and 2 into stages 0, 1, 2, closing a group after each;
- iteration t: ``wait_group 2`` (tile t has landed), ``__syncthreads`` (every thread's copies
  of tile t are visible, and every warp has left tile t - 1), issue tile t + 3 into stage
  (t + 3) % 4, the stage tile t - 1 released, close the group, then the math on stage t % 4;
- tail: past the last tile the groups are closed empty, so the count in ``wait_group``
  stays 2 and no copy reads beyond K.
One barrier per K tile instead of two. The rows stay padded as in `wmma-shared`: WMMA's
``load_matrix_sync`` takes one pointer and a leading dimension, so it cannot read a swizzled
layout (`swizzle` can).
Why: `wmma-shared` stalls twice per K tile: its loads wait for global memory with the tensor cores
idle, and its math waits for the barrier after the loads. Here three tiles (48 KB) are in
flight while the tensor cores work on the fourth.
Prediction: a clear step over `wmma-shared` at the large sizes, where many K tiles keep the ring
full. Still well below cuBLAS: per K tile a block reads 48 KB of fragments from shared memory
and writes 16 KB, 64 KB for 524,288 multiply-adds, because a 64 x 32 warp tile reloads each
fragment every 16-deep step; and on Hopper ``mma_sync`` compiles to the older HMMA
instructions, while cuBLAS HGEMM uses the asynchronous warpgroup MMA (wgmma) and the bulk
tensor copy (TMA).
Measured: on an NVIDIA H200 by ``ladder bench`` (results/nvidia-h200.json): 0.410 ms at 4096³
(335.14 TFLOP/s, 1.56x `wmma-shared`, 0.484x cuBLAS HGEMM) and 3.500 ms at 8192³ (314.10 TFLOP/s,
1.42x, 0.409x). Nsight Compute at 4096³
(lab/gemm/2026-11-22-profiles/nvidia-h200-profile-float16.json): SM throughput 54.0%
(`wmma-shared`: 33.5%), shared-store bank conflicts 56 thousand (9.4 million).
Verdict: held at both sizes: a busier SM and under half of cuBLAS. The rate falls from 4096³
to 8192³ while `wmma-shared`'s holds; the profile is at 4096³ only, so why is not yet measured (a
profile at 8192³, its L2 hit rate and DRAM throughput, would say).

Lab notes: docs/notes/gemm.md#rung-16-cp-async
"""

from ladder.core import cuda_cpp
from ladder.gemm.problem import gemm_rung

SOURCE = cuda_cpp.source(__file__, "r16_cp_async.cu", archs=("sm_80", "sm_90"))
BM, BN, BK = 128, 128, 32  # a block's tile of C, and the K step (as in the .cu file)
STAGES = 4  # K tiles resident in the shared-memory ring
PAD = 8  # halves added to every shared row
THREADS = 256  # 8 warps, 2 (M) x 4 (N), each a 64 x 32 tile of C
# the ring: STAGES x (A tile 128 x 40 + B tile 32 x 136) halves = 75,776 bytes, as in the .cu
SMEM_BYTES = STAGES * (BM * (BK + PAD) + BK * (BN + PAD)) * 2


@gemm_rung(
    name="cp-async",
    parent="wmma-shared",
    title="WMMA fed by cp.async into a 4-stage shared-memory ring",
    dtypes=("float16",),
    needs=("cupy",),
    units="tensor",
    min_cc=(8, 0),
    cc_needs="cp.async",
    tiles=(BM, BN, BK),
)
def geometry(m: int, n: int, k: int, dtype: str) -> tuple:
    """``wmma_cp_async`` on tile-multiple sizes: a block of THREADS per BM x BN tile of C, the
    ring in SMEM_BYTES of dynamic shared memory."""
    return SOURCE.kernel("wmma_cp_async"), (n // BN, m // BM), (THREADS,), SMEM_BYTES
