"""Bias + GELU: `persistent` with a linear layer's epilogue, C = gelu(A @ B + bias) in one kernel.

What changes: the epilogue of `persistent`'s kernel (``r27_bias_gelu.cu``), for the problem
gemm-epilogue in float16 and bfloat16. Each consumer thread reads the bias of the 64 columns
its accumulator fragment holds (32 pairs) and stages gelu(d + bias), GELU's erf form in FP32,
instead of d; the main loop, the ring and the stores are `persistent`'s.
Why: a linear layer with GELU is a GEMM and an elementwise pass over C: the libraries' two
kernels write C and read it back (2 x 32 MB at 4096 x 4096 in half), and the ladder's
operators fell back to PyTorch for it in float16 and bfloat16. In the epilogue the values are
already in registers: the bias is 8 KB per row of tiles, GELU some 20 instructions per element
against the 2 x 4096 x 64 multiply-adds each accumulator saw.
Prediction: the GEMM's time plus the epilogue's arithmetic: 16.7 million GELUs over 132 SMs
is about 2 us at an erff per few cycles, under 1% of `persistent`'s 4096^3 time, so within the
spread of `persistent` itself; against cuBLAS then CuPy's bias + GELU (float16), faster by the
second pass over C, about 64 MB at the copy bandwidth (0.015 ms, some 7% at 4096^3).
Measured: on an NVIDIA H200 by ``ladder bench`` (results/nvidia-h200.json), at 4096³: float16
0.201 ms, against torch.compile 0.209 ms and cuBLAS then CuPy 0.265 ms; bfloat16 0.196 ms,
against torch.compile 0.204 ms. `persistent`'s plain GEMM in the same file: 0.215 and 0.180 ms.
Verdict: held. The epilogue costs no time that the spread of `persistent` shows (its float16
median sits above this rung's, its bfloat16 one 0.016 ms below); 1.32x cuBLAS + CuPy, whose
second pass is dearer than predicted (0.265 ms against some 0.2 + 0.015), and 1.04x
torch.compile in each dtype, whose own Triton GEMM carries the epilogue: a margin larger than
either spread (0.002 to 0.004 ms), so a small win, not parity.

Lab notes: docs/notes/fused.md
"""

from typing import Any

from ladder.core import cuda_cpp
from ladder.gemm.epilogue import epilogue_rung
from ladder.gemm.hopper import sm_count, tensor_launch, tensor_map

SOURCE = cuda_cpp.source(__file__, "r27_bias_gelu.cu", archs=("sm_90a",), arch_specific=True)
BM, BN, BK = 128, 256, 64
STAGES = 4
THREADS = 384
SMEM_BYTES = STAGES * (BM * BK + BK * BN) * 2 + 2 * 64 * 128 * 2 + 1024  # as `persistent`
_KERNEL = {"float16": "bias_gelu", "bfloat16": "bias_gelu_bf16"}


@epilogue_rung(
    name="bias-gelu",
    parent="persistent",
    title="Bias + GELU: persistent with a linear layer's epilogue",
    needs=("cupy",),
    units="tensor",
    sm90a="wgmma and setmaxnreg",
    tiles=(BM, BN, BK),
)
def geometry(m: int, n: int, k: int, dtype: str) -> Any:
    """``_KERNEL[dtype]`` on tile-multiple sizes: `persistent`'s grid and maps, C and the bias
    by pointer."""

    def maps(a: int, b: int) -> tuple[Any, Any]:
        return tensor_map(a, m, k, BM, 64, dtype), tensor_map(b, k, n, BK, 64, dtype)

    blocks = min((m // BM) * (n // BN), sm_count())
    kernel = SOURCE.kernel(_KERNEL[dtype])
    return tensor_launch(kernel, blocks, THREADS, SMEM_BYTES, maps, (m, n, k), pointers=2)
