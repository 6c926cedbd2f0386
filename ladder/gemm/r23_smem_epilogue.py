"""Epilogue through shared memory: C leaves the SM in whole 16-byte lines.

What changes: only the epilogue of `wgmma`'s kernel (``r23_smem_epilogue.cu``). `wgmma`'s
consumers store their accumulators straight from registers: ``wgmma``'s accumulator layout
gives a thread two adjacent columns of a row, so each warp store instruction writes 4 bytes
per thread, 16 bytes into each of 8 rows of C. Here each consumer warpgroup first writes its
64 x 256 part of C, converted to half, into shared memory (the ring's stages, free once both
consumers are past their last ``wgmma``: a named barrier for the 256 consumer threads), with
the 128-byte swizzle of the TMA tiles so that those writes hit 32 different banks. Then it
reads the part back a row at a time and writes C with 16-byte stores: a warp writes one whole
512-byte row per instruction, every 32-byte sector complete.
Why: with no epilogue at all (the stores skipped), `wgmma`'s kernel ran at about cuBLAS's rate
on an H100 at 4096³ (lab/gemm/2026-11-26-cluster-tries/nvidia-h100-80gb-hbm3-gemm-tries.json): the
epilogue is the gap. It weighs because 1 block fills an SM (the ring and the accumulators take its
shared memory and registers), so no other block's math hides it, and, likely (not profiled), because
each store instruction asks the memory system for 8 partial sectors.
Prediction: with stores skipped, `wgmma` took 0.026 ms less at 4096³ (12%) and 0.10 ms less
at 8192³ (6%). Whole lines at the H100's 3 TB/s would write a block's 64 KB in a fraction of
that: the epilogue down to about 0.011 ms at 4096³, the kernel about 7% faster there, 3% at
8192³, where each block's main loop is twice as long. The staging adds two barriers, 64 KB of
shared-memory writes and reads per block, and uses no more registers (168, as `wgmma`).
Measured: on an NVIDIA H100 by ``ladder run``, `wgmma` and the libraries in the same run
(lab/gemm/2026-11-26-smem-epilogue/nvidia-h100-80gb-hbm3-gemm-smem-epilogue-4096-float16.json):
0.191 ms at 4096³ (718.88 TFLOP/s), `wgmma` 0.209 ms, cuBLAS 0.184 ms (0.961x); at 8192³
(lab/gemm/2026-11-26-smem-epilogue/nvidia-h100-80gb-hbm3-gemm-smem-epilogue-8192-float16.json)
1.508 ms, `wgmma` 1.617 ms, the fastest library (PyTorch's matmul) 1.480 ms (0.982x). bfloat16:
0.187 ms
(lab/gemm/2026-11-26-smem-epilogue/nvidia-h100-80gb-hbm3-gemm-smem-epilogue-4096-bfloat16.json,
0.957x cuBLAS) and 1.428 ms
(lab/gemm/2026-11-26-smem-epilogue/nvidia-h100-80gb-hbm3-gemm-smem-epilogue-8192-bfloat16.json,
0.993x PyTorch). Side by side
(lab/gemm/2026-11-26-cluster-tries/nvidia-h100-80gb-hbm3-gemm-tries.json, where rungs
`smem-epilogue` and `wgmma` are the variants r17 and r16): 0.1911 ms at 4096³, `wgmma` 0.2100, with
no stores 0.1836.
Verdict: held: 1.09x `wgmma` at 4096³ (predicted 1.07x), 1.07x at 8192³ in the ``ladder run``
(`wgmma`'s time there moves by 4% between runs; 1.02x in the tries file). The epilogue still
costs 0.0075 ms at 4096³, and `wgmma` with no stores at all ran at 748.5 TFLOP/s, about the
rate cuBLAS reached in the ``ladder run`` (747.73): passing cuBLAS needs the main loop faster
or the epilogue overlapped with the next tile's loads (a persistent kernel), not better stores.

Lab notes: docs/notes/gemm.md#rung-23-epilogue-through-shared-memory
"""

from typing import Any

from ladder.core import cuda_cpp
from ladder.gemm.hopper import gemm_launch
from ladder.gemm.problem import gemm_rung

SOURCE = cuda_cpp.source(__file__, "r23_smem_epilogue.cu", archs=("sm_90a",), arch_specific=True)
BM, BN, BK = 128, 256, 64
STAGES = 4
THREADS = 384
SMEM_BYTES = STAGES * (BM * BK + BK * BN) * 2 + 1024  # + slack to align the tiles to 1 KB
_KERNEL = {"float16": "smem_epilogue", "bfloat16": "smem_epilogue_bf16"}
# the staging of C, as in the .cu: per consumer 64 rows x BN halves, 64-column chunks
CONSUMER_ROWS = 64
ROW_BYTES = 128  # a chunk's row: 64 halves
C_CHUNK_BYTES = CONSUMER_ROWS * ROW_BYTES
UNIT_BYTES = 16  # a uint4: what one thread moves per load or store
UNITS_PER_ROW = BN * 2 // UNIT_BYTES


def staged(r: int, u: int) -> int:
    """The byte offset of row r's 16-byte unit u in a consumer's staged C: the .cu's
    ``staged`` (the TMA tiles' 128-byte swizzle, unit u % 8 XOR r % 8, in 64-column chunks)."""
    return (u // 8) * C_CHUNK_BYTES + r * ROW_BYTES + (((u % 8) ^ (r % 8)) * UNIT_BYTES)


@gemm_rung(
    name="smem-epilogue",
    parent="wgmma",
    title="Hopper: C staged in shared memory, whole-line stores",
    dtypes=("float16", "bfloat16"),
    needs=("cupy",),
    units="tensor",
    sm90a="wgmma and setmaxnreg",
    tiles=(BM, BN, BK),
)
def geometry(m: int, n: int, k: int, dtype: str) -> Any:
    """``_KERNEL[dtype]`` on tile-multiple sizes: as `wgmma`'s."""
    return gemm_launch(SOURCE, _KERNEL[dtype], m, n, k, dtype, (BM, BN, BK), THREADS, SMEM_BYTES)
