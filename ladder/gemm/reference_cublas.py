"""Reference: cuBLAS SGEMM through CuPy (``cupy.matmul``), the library a user would call.

CuPy wraps the Numba device arrays without a copy (``__cuda_array_interface__``) and calls
``cublasSgemm`` (plain FP32; CuPy enables TF32 only when ``CUPY_TF32=1`` is set, and the
launcher refuses to run in that mode so the comparison stays FP32 against FP32).
"""

from __future__ import annotations

import os
from typing import Any

from ladder.core.rung import rung
from ladder.gemm.problem import check_operands


@rung(
    problem="gemm",
    number=99,
    name="cublas",
    title="cuBLAS SGEMM (CuPy)",
    needs=("cupy",),
    reference=True,
)
def launch(A: Any, B: Any, C: Any = None) -> Any:
    import cupy

    if os.environ.get("CUPY_TF32", "0") != "0":
        raise RuntimeError("CUPY_TF32 is set: cuBLAS would use TF32, not FP32; unset it")
    A, B, C, m, n, _ = check_operands(A, B, C)
    if m and n:
        cupy.matmul(cupy.asarray(A), cupy.asarray(B), out=cupy.asarray(C))
    return C
