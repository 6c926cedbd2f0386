"""FP8: `persistent` on 8-bit floats, with per-tensor scales and FP32 accumulation.

What changes: the operands' type and what follows from it (``r26_fp8.cu``). A and B are e4m3
(or both e5m2), and each wgmma is m64n256k32: twice `persistent`'s multiplies per instruction, from
the same 32 bytes of each row. A stage's K tile is 128 elements, still 128 bytes a row, so the
ring's sizes, its barriers, the swizzle and the persistent tile loop stay `persistent`'s. An
8-bit operand cannot be transposed by wgmma, so B must lie K-major: the problem takes it
column-major (Bᵀ row-major, as cuBLASLt does), and its stage is one 256 x 128-byte copy laid
out and described as A's. The epilogue multiplies each FP32 sum by scale_a · scale_b and
rounds to bfloat16.
Why: Hopper's tensor cores do an 8-bit multiply-add at twice the rate of a 16-bit one (1979
against 989 dense TFLOP/s on an H100 SXM), and an operand half the size halves the bytes per
multiply-add: the same 48 KB stage carries K = 128 instead of 64. Everything that limited rung
20 per byte of shared memory is unchanged, and the math per stage doubles in the same time.
Prediction: twice `persistent`'s rate if nothing else limits it, about 1490 TFLOP/s at 8192³
(`persistent`: 745 on the H100,
lab/gemm/2026-11-26-persistent/nvidia-h100-80gb-hbm3-gemm-persistent-8192-float16.json), near
cuBLASLt's FP8 rate. The epilogue and the last wave take the time they took in `persistent`, a
larger share of a shorter run. The target: at least 0.9x the library at 8192³.
Measured: on an NVIDIA H100 by ``ladder run``, cuBLASLt's two rows in the same run. e4m3 at
4096³: 0.099 ms (1381.46 TFLOP/s), cuBLASLt 0.249 ms, with use_fast_accum 0.101 ms
(lab/gemm/2026-11-27-fp8/nvidia-h100-80gb-hbm3-gemm-fp8-4096-float8_e4m3fn.json). At 8192³, three
runs: 0.738, 0.742 and 0.739 ms (1490.43, 1482.56, 1487.31 TFLOP/s) against cuBLASLt's 0.753, 0.754,
0.791 ms and 0.892, 0.729, 0.833 ms with use_fast_accum (the files lab/gemm/2026-11-27-fp8/nvidia-
h100-80gb-hbm3-gemm-fp8-8192-float8_e4m3fn-1.json, lab/gemm/2026-11-27-fp8/nvidia-h100-80gb-hbm3-
gemm-fp8-8192-float8_e4m3fn-2.json and lab/gemm/2026-11-27-fp8/nvidia-h100-80gb-hbm3-gemm-fp8-8192-
float8_e4m3fn-3.json). e5m2 at 8192³: 0.726 ms (1515.08 TFLOP/s), which cuBLASLt does not multiply
(lab/gemm/2026-11-27-fp8/nvidia-h100-80gb-hbm3-gemm-fp8-8192-float8_e5m2.json). Relative error
2.5e-3 at 8192³, the same as use_fast_accum's (1.7e-3 with FP32 partial sums). ptxas: 168 registers
(the launch bound's cap; the consumers raise theirs to 232 with setmaxnreg), no spills; 230,400
bytes of shared memory. Host time per call 29.8 to 83.1 us, the library's 169.0 to 380.7. Nsight
Compute at 4096³: 82.3% SM busy (lab/gemm/2026-11-27-fp8/nvidia-h100-80gb-hbm3-profile-gemm-
fp8.json). In one bench run with `persistent` (lab/gemm/2026-11-27-bench-h100/nvidia-h100-80gb-hbm3-
bench-gemm.json): 1527.47 TFLOP/s at 8192³ against `persistent`'s 735.70, 1391.76 against 759.23 at
4096³.
Verdict: held at 8192³, 2.08x `persistent`'s TFLOP/s in one run (1.83x at 4096³, where the
epilogue and the last wave weigh more), and at cuBLASLt: 1.02x the faster library row at
4096³; 1.02x, 0.98x and 1.07x at 8192³, where the library's own medians move by up to 22%
from run to run (its fast-accumulation row) and `fp8`'s by 0.5% across those three. Parity,
not a win: the target of 0.9x is met in every run. What likely limits it is `persistent`'s: the
consumers' epilogue stops the tensor cores, now for a larger share of a tile's time.

Lab notes: docs/notes/gemm.md#rung-26-fp8
"""

from typing import Any

import numpy as np

from ladder.core import cuda_cpp
from ladder.gemm.hopper import sm_count, tensor_launch, tensor_map
from ladder.gemm.problem_fp8 import fp8_rung

SOURCE = cuda_cpp.source(__file__, "r26_fp8.cu", archs=("sm_90a",), arch_specific=True)
BM, BN, BK = 128, 256, 128
STAGES = 4
THREADS = 384
# the ring (A 16 KB + B 32 KB a stage), each consumer's 16 KB staging of C, + 1 KB alignment
SMEM_BYTES = STAGES * (BM * BK + BN * BK) + 2 * 64 * 128 * 2 + 1024
_KERNEL = {"float8_e4m3fn": "fp8_e4m3", "float8_e5m2": "fp8_e5m2"}


@fp8_rung(
    name="fp8",
    parent="persistent",
    title="FP8: persistent on e4m3/e5m2 wgmma, per-tensor scales, bfloat16 out",
    needs=("cupy",),
    units="tensor",
    sm90a="wgmma and setmaxnreg",
    tiles=(BM, BN, BK),
)
def geometry(m: int, n: int, k: int, dtype: str) -> Any:
    """``_KERNEL[dtype]`` on tile-multiple sizes: min(SMs, tiles) blocks; A's map in boxes of 128
    rows x 128 bytes, Bᵀ's in boxes of 256 rows x 128 bytes, both 128-byte swizzled, made once
    per pair of their addresses; C and the two scales by pointer."""

    def maps(a: int, bt: int) -> tuple[np.ndarray, np.ndarray]:
        return tensor_map(a, m, k, BM, BK, dtype), tensor_map(bt, n, k, BN, BK, dtype)

    blocks = min((m // BM) * (n // BN), sm_count())
    kernel = SOURCE.kernel(_KERNEL[dtype])
    return tensor_launch(kernel, blocks, THREADS, SMEM_BYTES, maps, (m, n, k), pointers=3)
