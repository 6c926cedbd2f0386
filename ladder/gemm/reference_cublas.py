"""Reference: cuBLAS through CuPy (``cupy.matmul``), the library a user would call.

CuPy wraps the Numba device arrays without a copy (``__cuda_array_interface__``) and calls
cuBLAS:

- float32: ``cublasSgemm``, plain FP32. CuPy enables TF32 only when ``CUPY_TF32=1`` is set, and
  the launcher refuses to run in that mode so the comparison stays FP32 against FP32.
- float16 (HGEMM): ``cublasGemmEx`` with half inputs and output and FP32 accumulation
  (``CUBLAS_COMPUTE_32F``, CuPy's default compute type for half). The launcher refuses to run
  when CuPy has been switched to FP16 accumulation, which would be faster and less accurate
  than the tensor-core rungs it is compared with.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from ladder.core.rung import rung
from ladder.gemm.problem import check_operands


def _check_mode(dtype: np.dtype) -> None:
    if dtype == np.float32 and os.environ.get("CUPY_TF32", "0") != "0":
        raise RuntimeError("CUPY_TF32 is set: cuBLAS would use TF32, not FP32; unset it")
    if dtype == np.float16:
        from cupy._core import _routines_linalg as linalg

        if linalg.get_compute_type(dtype) == linalg.COMPUTE_TYPE_FP16:
            raise RuntimeError("CuPy's compute type for float16 is FP16; the rungs accumulate FP32")


@rung(
    problem="gemm",
    number=99,
    name="cublas",
    title="cuBLAS (CuPy matmul): SGEMM / HGEMM",
    dtypes=("float32", "float16"),
    needs=("cupy",),
    reference=True,
)
def launch(A: Any, B: Any, C: Any = None) -> Any:
    import cupy

    # the operands' dtype picks SGEMM or HGEMM (str() also reads torch.float16)
    given = str(getattr(A, "dtype", "unknown"))
    name = next((d for d in ("float32", "float16") if given.endswith(d)), None)
    if name is None:
        raise TypeError(f"A must be float32 or float16, got {given.removeprefix('torch.')}")
    A, B, C, m, n, _ = check_operands(A, B, C, name)
    _check_mode(np.dtype(name))
    if m and n:
        cupy.matmul(cupy.asarray(A), cupy.asarray(B), out=cupy.asarray(C))
    return C
