"""Warp tile 64: 128 x 256 block tiles of 64 x 64 warp tiles, fragments double-buffered.

What changes: the tiles, and what they bring with them (``r19_warp_tile_64.cu``). `swizzle`'s 8
warps (2 x 4) each own 64 x 32 of a 128 x 128 tile of C; here 64 x 64 of a 128 x 256 tile: 4 x 8
mma tiles, 128 FP32 sums a thread (64 before), and per k16 step 8 ldmatrix (6) for 32 mma (16).
Stages grow to 24 KB, 96 KB for the 4. Two changes come with the tiles:
- one block per SM, not two (``__launch_bounds__(256, 1)``: 236 registers a thread), so its 8
  warps alone must hide the ldmatrix latency: the fragments are double-buffered in registers
  (the next k16 step's load issued before this step's mma), and the wait and barrier for the
  next K tile come before a tile's last k16 step, not after it;
- a 1-D grid in grouped order: consecutive blocks walk down 16 block rows before moving right,
  so the ~132 resident blocks cover about a 2048 x 2048 square of C and share its rows of A and
  columns of B in L2. Not forced by the tiles: an idea of its own, kept here so that this rung
  is the kernel that was measured; its share has not been measured apart.
Why: each byte read is used more. Per k16 step a warp reads 4 KB from shared memory for 32 mma
(32 FLOP per byte; `swizzle`: 3 KB for 16, 21), and per K tile a block copies 24 KB from L2 for
1,048,576 multiply-adds (85 FLOP per byte; `swizzle`: 16 KB for 524,288, 64). With the copies'
stores, shared memory at 128 bytes a clock feeds an SM 2,980 FLOP a clock here against 2,048 in
`swizzle`, where mma.sync's own rate on an H200 is about 2,400 (631.6 TFLOP/s on 132 SMs at 1.98
GHz, lab/gemm/2026-11-23-wgmma-shapes/nvidia-h200-wgmma-shapes.json).
Prediction: most of the split's step over `cp-async` is here, the two rungs before it predicted
near 1.0x: 1.2x to 1.5x `swizzle`. On an H100/H200 still well short of cuBLAS HGEMM, at about
60-70% of it (the range commonly reported for hand-written mma.sync kernels there; a figure from
outside this project).
Measured: on an NVIDIA H200 by ``ladder bench`` (results/nvidia-h200.json): 0.306 ms at 4096³
(449.01 TFLOP/s, 1.33x `swizzle`, 1.34x `cp-async`, 0.649x cuBLAS HGEMM, whose repeats there spread
from 0.182 to 0.223 ms) and 2.225 ms at 8192³ (494.17 TFLOP/s, 1.45x, 1.57x, 0.644x). Nsight
Compute at 4096³, of this kernel under the name `mma-sync` before the split
(lab/gemm/2026-11-22-profiles/nvidia-h200-profile-float16.json): shared-load bank conflicts 2
thousand (`cp-async`: 114 thousand), none on stores, SM throughput 72.5%, occupancy 12.3% (one
block per SM). The bare instruction with constant operands
(lab/gemm/2026-11-23-wgmma-shapes/nvidia-h200-wgmma-shapes.json) tops out at 631.6 TFLOP/s.
Verdict: held: 1.33x and 1.45x `swizzle`, and against cuBLAS inside the range at both sizes, 71%
and 78% of what mma.sync itself reaches on this GPU. Most of the split's step over `cp-async` is
here, as predicted, though the two rungs before it were not each near 1.0x: `mma-sync` lost (0.86x,
0.94x) and `swizzle` gained that back (and more at 8192³). Why the rate is lower at 4096³ is not
measured; one count points at the tail: 512 blocks of one per SM are 3.9 waves of 132 SMs (2048
blocks, 15.5 waves, at 8192³). The rest of the gap to cuBLAS is the instruction:
`wgmma-descriptors`.

Lab notes: docs/notes/gemm.md#rung-19-warp-tile-64
"""

from ladder.core import cuda_cpp
from ladder.gemm.problem import gemm_rung

SOURCE = cuda_cpp.source(__file__, "r19_warp_tile_64.cu", archs=("sm_80", "sm_90"))
BM, BN, BK = 128, 256, 32  # a block's tile of C, and the K step (as in the .cu file)
STAGES = 4  # depth of the cp.async ring
THREADS = 256  # 8 warps, each a 64 x 64 tile of C
SMEM_BYTES = STAGES * (BM * BK + BK * BN) * 2  # 98,304: above the 48 KB default, so opted in


@gemm_rung(
    name="warp-tile-64",
    parent="swizzle",
    title="128 x 256 tiles, 64 x 64 warp tiles, fragments double-buffered",
    dtypes=("float16",),
    needs=("cupy",),
    units="tensor",
    min_cc=(8, 0),
    cc_needs="cp.async and mma.sync m16n8k16",
    tiles=(BM, BN, BK),
)
def geometry(m: int, n: int, k: int, dtype: str) -> tuple:
    """``mma_sync_gemm`` on tile-multiple sizes: a 1-D grid, which the kernel maps to tiles of C
    16 block rows a group; the ring in SMEM_BYTES of dynamic shared memory."""
    return SOURCE.kernel("mma_sync_gemm"), ((m // BM) * (n // BN),), (THREADS,), SMEM_BYTES
