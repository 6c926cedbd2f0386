"""The libraries the GEMM epilogue ladder is measured against, registered as a reference: cuBLAS
SGEMM (``cupy.matmul``) followed by one fused CuPy elementwise kernel for bias + GELU: two
kernels, the intermediate C written and read once.
"""

from __future__ import annotations

import functools
import math
from typing import Any

from ladder.core.rung import rung
from ladder.fused.problem import GEMM_EPILOGUE, check_arrays


@functools.cache
def _bias_gelu() -> Any:
    import cupy

    return cupy.ElementwiseKernel(
        "float32 c, float32 bias",
        "float32 y",
        f"float v = c + bias; y = 0.5f * v * (1.0f + erff(v * {1.0 / math.sqrt(2.0)!r}f))",
        "ladder_bias_gelu",
    )


@rung(
    name="cublas+cupy",
    title="cuBLAS SGEMM, then a CuPy bias + GELU kernel",
    needs=("cupy",),
    reference=True,
)
def gemm_epilogue(A: Any, B: Any, bias: Any, out: Any = None) -> Any:
    import cupy

    (A, B, bias), out, _ = check_arrays(GEMM_EPILOGUE, (A, B, bias), out, ("float32",))
    if out.size:
        c = cupy.asarray(out)
        cupy.matmul(cupy.asarray(A), cupy.asarray(B), out=c)
        _bias_gelu()(c, cupy.asarray(bias), c)
    return out
