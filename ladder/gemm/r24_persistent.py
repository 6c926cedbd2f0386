"""Persistent: one block per SM walks many tiles; the next tile's copies run under the
last one's epilogue.

What changes: the grid and the loop around `smem-epilogue`'s kernel (``r24_persistent.cu``). The
launcher starts min(SMs, tiles) blocks, not one per tile; block b takes tiles b, b + grid,
b + 2 grid, ... in `smem-epilogue`'s grouped order. One K-tile counter runs across a block's tiles,
so a stage's index and its barriers' phase carry on from tile to tile and the producer
never stops at a tile's edge: while the consumers write a tile out, it is already filling
the ring with the next tile's K tiles. The consumers therefore also release each tile's last
stage, and the epilogue can no longer borrow the ring: each consumer stages C in a 16 KB
buffer of its own, `smem-epilogue`'s swizzled layout, in two rounds of 128 columns.
Why: in `smem-epilogue` every block starts with an empty ring. Its first multiply waits for the
first copies to come from L2 or DRAM, and at its end the SM holds no work while the last
stores drain and the next block is launched; `smem-epilogue`'s epilogue still cost 0.0075 ms at
4096³ against no stores at all (lab/gemm/2026-11-26-cluster-tries/nvidia-h100-80gb-hbm3-gemm-
tries.json, variants r17 and r16-no-epilogue). A persistent block hides the fill under the epilogue.
Prediction: up to that 0.0075 ms at 4096³ (4%), less at 8192³ where a block's main loop
is twice as long; the tensor cores still wait while a block's own consumers store C.
Measured: on an NVIDIA H100 by ``ladder run``, rungs `wgmma`, `smem-epilogue` and the libraries in
the same run: 0.185 ms at 4096³ (743.07 TFLOP/s; `smem-epilogue` 0.191 ms, cuBLAS 0.183 ms,
lab/gemm/2026-11-26-persistent/nvidia-h100-80gb-hbm3-gemm-persistent-4096-float16.json), 1.475 ms
at 8192³ (745.43 TFLOP/s; `smem-epilogue` 1.489 ms, cuBLAS 1.494 ms, PyTorch 1.552 ms,
lab/gemm/2026-11-26-persistent/nvidia-h100-80gb-hbm3-gemm-persistent-8192-float16.json); bfloat16
0.180 ms at 4096³ (cuBLAS 0.178 ms,
lab/gemm/2026-11-26-persistent/nvidia-h100-80gb-hbm3-gemm-persistent-4096-bfloat16.json) and 1.418
ms at 8192³ (cuBLAS 1.446 ms, PyTorch 1.419 ms,
lab/gemm/2026-11-26-persistent/nvidia-h100-80gb-hbm3-gemm-persistent-8192-bfloat16.json). ptxas:
168 registers, no spills; 230,400 bytes of dynamic shared memory. Host time per call 20.9 to 67.7
us (the files' host_us), the libraries' 51.5 to 279.0.
Verdict: held at 4096³, 1.03x `smem-epilogue` (1.04x in bfloat16; predicted up to 1.04x, though the
0.0075 ms was no bound: the no-stores variant still paid each block's fill and launch, which
persistence removes too); 1.01x at 8192³. Against the fastest library in the same run: 0.99x
at 4096³ in both dtypes, 1.01x (float16) and 1.00x (bfloat16) at 8192³: at cuBLAS, past it
only within the spread (at 8192³ `persistent`'s samples span 5.6 to 7.5% of its median, the
libraries' 6.5 to 13.8%). What is left: the consumers' own epilogue, during which no
multiply runs on the SM: skipped, it gives back 4% at 4096³ and under 1.2% at 8192³
(lab/gemm/2026-11-27-pingpong/nvidia-h100-80gb-hbm3-gemm-tries-pingpong-1.json; a ping-pong try that
hides it lost more on its smaller tiles, see the lab notes), and the last wave, 512 tiles on 132 SMs
at 4096³: 116 SMs take 4 tiles and 16 take 3.

Lab notes: docs/notes/gemm.md#rung-24-persistent
"""

from typing import Any

from ladder.core import cuda_cpp
from ladder.gemm.hopper import gemm_launch
from ladder.gemm.problem import gemm_rung

SOURCE = cuda_cpp.source(__file__, "r24_persistent.cu", archs=("sm_90a",), arch_specific=True)
BM, BN, BK = 128, 256, 64
STAGES = 4
THREADS = 384
# the ring, each consumer's 16 KB staging of C, + slack to align the tiles to 1 KB
SMEM_BYTES = STAGES * (BM * BK + BK * BN) * 2 + 2 * 64 * 128 * 2 + 1024
_KERNEL = {"float16": "persistent", "bfloat16": "persistent_bf16"}


@gemm_rung(
    name="persistent",
    parent="smem-epilogue",
    title="Persistent: one block per SM over many tiles, copies under the epilogue",
    dtypes=("float16", "bfloat16"),
    needs=("cupy",),
    units="tensor",
    sm90a="wgmma and setmaxnreg",
    tiles=(BM, BN, BK),
)
def geometry(m: int, n: int, k: int, dtype: str) -> Any:
    """``_KERNEL[dtype]`` on tile-multiple sizes: min(SMs, tiles) blocks, each walking
    tiles of C."""
    return gemm_launch(
        SOURCE, _KERNEL[dtype], m, n, k, dtype, (BM, BN, BK), THREADS, SMEM_BYTES, persistent=True
    )
