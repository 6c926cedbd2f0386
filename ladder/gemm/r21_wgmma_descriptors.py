"""wgmma: `tma`'s TMA ring feeding warpgroup multiplies through descriptors.

What changes: only the math (``r21_wgmma_descriptors.cu``); `tma`'s stages, copies, full
barriers and one ``__syncthreads`` per K tile stay. ``wgmma.mma_async`` (sm_90a) is issued by
a *warpgroup*, 4 warps together: one m64n256k16 multiplies a 64 x 16 slice of A by a 16 x 256
slice of B into a 64 x 256 FP32 accumulator (128 registers per thread). Its operands never
enter registers: a 64-bit *descriptor* (start address, the byte strides between 8-row swizzle
atoms and between 64-column chunks, the swizzle mode) tells the tensor cores where they lie in
shared memory. So ldmatrix goes, and with it the fragments and the 8 warps' tiles: 2
warpgroups, 64 rows x 256 columns of C each, 4 wgmma per K tile. wgmma is asynchronous: a
warpgroup closes a K tile's 4 multiplies into one group and waits only for the group before
(``wait_group 1``), so they run while it waits for the next stage; the stage of the tile
before is then free. Read the compiler's report here: with the tile's corner written inline,
ptxas said "C7515 ... wgmma.mma_async instructions are serialized"; computed once, no more.
Why: per k16 step a warp of `tma` issued 8 ldmatrix and 32 mma; a warpgroup now issues 1
instruction. With constant operands wgmma reaches 969.7 TFLOP/s on an H200 (the H100's
tensor cores) against mma.sync's 631.6 (lab/gemm/2026-11-23-wgmma-shapes/nvidia-h200-wgmma-
shapes.json).
Prediction: 1.3x to 1.5x `tma`. `tma` ran at 70-73% of mma.sync's ceiling; the same
fraction of wgmma's would be 1.54x, less whatever the barrier per tile costs.
Measured: on an NVIDIA H100 by ``ladder run``, `tma` and the libraries in the same run:
0.209 ms at 4096³ (657.02 TFLOP/s; `tma` 0.311 ms, cuBLAS 0.183 ms,
lab/gemm/2026-11-26-split/nvidia-h100-80gb-hbm3-gemm-split-4096-float16.json) and 1.610 ms at 8192³
(682.97 TFLOP/s; `tma` 2.391 ms, lab/gemm/2026-11-26-split/nvidia-h100-80gb-hbm3-gemm-split-8192-
float16.json); bfloat16 0.203 ms and 1.536 ms (`tma` 0.304 and 2.248 ms;
lab/gemm/2026-11-26-split/nvidia-h100-80gb-hbm3-gemm-split-4096-bfloat16.json,
lab/gemm/2026-11-26-split/nvidia-h100-80gb-hbm3-gemm-split-8192-bfloat16.json). ptxas: 154
registers.
Verdict: held: 1.49x `tma` at both sizes in float16 (1.50x and 1.46x in bfloat16), 0.87x
cuBLAS at 4096³. The step is the instruction's: the rest of the ladder starts from here.

Lab notes: docs/notes/gemm.md#rung-21-wgmma-descriptors
"""

from typing import Any

from ladder.core import cuda_cpp
from ladder.gemm.hopper import gemm_launch
from ladder.gemm.problem import gemm_rung

SOURCE = cuda_cpp.source(
    __file__, "r21_wgmma_descriptors.cu", archs=("sm_90a",), arch_specific=True
)
BM, BN, BK = 128, 256, 64  # a block's tile of C, and the K step (as in the .cu file)
STAGES = 4  # depth of the ring
THREADS = 256  # 2 warpgroups, each 64 rows x 256 columns of C
SMEM_BYTES = STAGES * (BM * BK + BK * BN) * 2 + 1024  # + slack to align the tiles to 1 KB
_KERNEL = {"float16": "wgmma_descriptors", "bfloat16": "wgmma_descriptors_bf16"}


@gemm_rung(
    name="wgmma-descriptors",
    parent="tma",
    title="wgmma from shared-memory descriptors, fed by the TMA ring",
    dtypes=("float16", "bfloat16"),
    needs=("cupy",),
    units="tensor",
    sm90a="wgmma",
    tiles=(BM, BN, BK),
)
def geometry(m: int, n: int, k: int, dtype: str) -> Any:
    """``_KERNEL[dtype]`` on tile-multiple sizes: a block of THREADS per BM x BN tile
    of C (a 1-D grid), the tensor maps of A and B made once per pair of their addresses."""
    return gemm_launch(SOURCE, _KERNEL[dtype], m, n, k, dtype, (BM, BN, BK), THREADS, SMEM_BYTES)
