"""TMA: `warp-tile-64`'s tiles brought by the bulk tensor copy engine, counted on an mbarrier.

What changes: only how tiles reach shared memory (``r20_tma.cu``); `warp-tile-64`'s math (ldmatrix,
mma.sync, 8 warps of 64 x 64) stays. In `warp-tile-64` each of 256 threads issued 6 ``cp.async`` per
K tile, each with its own address and XOR swizzle. Here one thread issues 5 copies per K tile
(``cp.async.bulk.tensor``: A's 128 x 64 tile, B's four 64 x 64 chunks); the copy engine computes
every address from a *tensor map* made on the host (``ladder/gemm/hopper.py``) and writes the
128-byte swizzle itself: 16-byte unit XOR row % 8, `warp-tile-64`'s B swizzle. With that swizzle
(the one wgmma reads) a box's rows are 128 bytes at most: BK grows to 64, 48 KB stages. Completion
is counted in bytes on an *mbarrier*: thread 0 arms a stage's "full" barrier with its 49,152 bytes
(``expect_tx``), each copy counts its bytes off as it lands, and every thread waits on the barrier's
phase parity, (tile / STAGES) & 1. A stage is refilled, as in `warp-tile-64`, after the
``__syncthreads`` that retires every warp's reads of it. Also bfloat16 (mma.sync's ``.bf16`` form).
Edges as `warp-tile-64`: padded to 128, 256, 64; compute capability 9.0 and up.
Why: the copies are the part of `warp-tile-64`'s instruction stream that is not math: 12 copies per
thread per 64 of K, with their address arithmetic, against a warp's 32 ldmatrix and 128 mma. They
also fix the layout the next rung needs: ``wgmma`` reads its operands from shared memory in exactly
this swizzle, with no thread touching them.
Prediction: 0-5% faster than `warp-tile-64`: per 64 of K a warp issued 12 copies (and their address
arithmetic) beside 32 ldmatrix and 128 mma, while the tensor pipe worked (`warp-tile-64` reached
70-72% of mma.sync's constant-operand rate, 631.6 TFLOP/s on an H200,
lab/gemm/2026-11-23-wgmma-shapes/nvidia-h200-wgmma-shapes.json).
Measured: on an NVIDIA H100 by ``ladder run``, `warp-tile-64` (then named `mma-sync`) and the
libraries in the same run: 0.311 ms at 4096³ (441.37 TFLOP/s; `warp-tile-64` 0.307 ms,
lab/gemm/2026-11-26-split/nvidia-h100-80gb-hbm3-gemm-split-4096-float16.json) and 2.391 ms at 8192³
(459.76 TFLOP/s; `warp-tile-64` 2.437 ms,
lab/gemm/2026-11-26-split/nvidia-h100-80gb-hbm3-gemm-split-8192-float16.json); bfloat16 0.304 ms and
2.248 ms (lab/gemm/2026-11-26-split/nvidia-h100-80gb-hbm3-gemm-split-4096-bfloat16.json,
lab/gemm/2026-11-26-split/nvidia-h100-80gb-hbm3-gemm-split-8192-bfloat16.json). ptxas: 210 registers
(`warp-tile-64` 236), no spills.
Verdict: held: 0.99x `warp-tile-64` at 4096³, 1.02x at 8192³. The copies were not what held
`warp-tile-64` at 70-72% of mma.sync's rate; the ldmatrix, the synchronous mma and their waits
remain. What the rung buys is the next one: operands in shared memory in the layout the tensor cores
read.

Lab notes: docs/notes/gemm.md#rung-20-tma
"""

from typing import Any

from ladder.core import cuda_cpp
from ladder.gemm.hopper import gemm_launch
from ladder.gemm.problem import gemm_rung

SOURCE = cuda_cpp.source(__file__, "r20_tma.cu", archs=("sm_90",))  # no sm_90a instruction
BM, BN, BK = 128, 256, 64  # a block's tile of C, and the K step (as in the .cu file)
STAGES = 4  # depth of the ring
THREADS = 256  # 8 warps, each a 64 x 64 tile of C, as in warp-tile-64
SMEM_BYTES = STAGES * (BM * BK + BK * BN) * 2 + 1024  # + slack to align the tiles to 1 KB
_KERNEL = {"float16": "tma_gemm_f16", "bfloat16": "tma_gemm_bf16"}


@gemm_rung(
    name="tma",
    parent="warp-tile-64",
    title="TMA: warp-tile-64's tiles by the bulk tensor copy engine, mbarrier completion",
    dtypes=("float16", "bfloat16"),
    needs=("cupy",),
    units="tensor",
    min_cc=(9, 0),
    cc_needs="cp.async.bulk.tensor and mbarrier expect_tx, sm_90 instructions",
    tiles=(BM, BN, BK),
)
def geometry(m: int, n: int, k: int, dtype: str) -> Any:
    """``_KERNEL[dtype]`` on tile-multiple sizes: a block of THREADS per BM x BN tile
    of C (a 1-D grid), the tensor maps of A and B made once per pair of their addresses."""
    return gemm_launch(SOURCE, _KERNEL[dtype], m, n, k, dtype, (BM, BN, BK), THREADS, SMEM_BYTES)
