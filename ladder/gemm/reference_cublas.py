"""Reference: cuBLAS through CuPy (``cupy.matmul``), the library a user would call.

CuPy wraps the Numba device arrays without a copy (``__cuda_array_interface__``) and calls
cuBLAS:

- float32: ``cublasSgemm``, plain FP32. CuPy enables TF32 only when ``CUPY_TF32=1`` is set, and
  the launcher refuses to run in that mode so the comparison stays FP32 against FP32.
- float16 (HGEMM): ``cublasGemmEx`` with half inputs and output and FP32 accumulation
  (``CUBLAS_COMPUTE_32F``, CuPy's default compute type for half). The launcher refuses to run
  when CuPy has been switched to FP16 accumulation, which would be faster and less accurate
  than the tensor-core rungs it is compared with.
- bfloat16: CuPy has no bfloat16 arrays, so the launcher calls ``cublasGemmEx`` itself through
  CuPy's cuBLAS binding and handle, with bfloat16 inputs and output and
  ``CUBLAS_COMPUTE_32F``. cuBLAS is column-major: the row-major product C = A B is computed as
  the column-major Cᵀ = Bᵀ Aᵀ, which reads the same memory without any transpose.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from ladder.core.cuda_cpp import pointer
from ladder.core.rung import rung, tensor_cores_below_fp32
from ladder.gemm.problem import check_operands
from ladder.gemm.tensor_core import operand_dtype

_CUDA_R_16BF, _CUBLAS_COMPUTE_32F, _CUBLAS_GEMM_DEFAULT, _OP_N = 14, 68, -1, 0
_ONE_ZERO = np.array([1.0, 0.0], np.float32)  # alpha, beta (host pointers)


def _gemm_bf16(A: Any, B: Any, C: Any, m: int, n: int, k: int) -> None:
    from cupy.cuda import cublas, device

    handle = device.get_cublas_handle()
    alpha, beta = _ONE_ZERO.ctypes.data, _ONE_ZERO.ctypes.data + 4
    cublas.gemmEx(
        handle, _OP_N, _OP_N, n, m, k,
        alpha, int(pointer(B)), _CUDA_R_16BF, n, int(pointer(A)), _CUDA_R_16BF, k,
        beta, int(pointer(C)), _CUDA_R_16BF, n,
        _CUBLAS_COMPUTE_32F, _CUBLAS_GEMM_DEFAULT,
    )  # fmt: skip


def _check_mode(dtype: np.dtype) -> None:
    if dtype == np.float32 and os.environ.get("CUPY_TF32", "0") != "0":
        raise RuntimeError("CUPY_TF32 is set: cuBLAS would use TF32, not FP32; unset it")
    if dtype == np.float16:
        from cupy._core import _routines_linalg as linalg

        if linalg.get_compute_type(dtype) == linalg.COMPUTE_TYPE_FP16:
            raise RuntimeError("CuPy's compute type for float16 is FP16; the rungs accumulate FP32")


@rung(
    name="cublas",
    title="cuBLAS (CuPy matmul): SGEMM / HGEMM",
    dtypes=("float32", "float16", "bfloat16"),
    needs=("cupy",),
    reference=True,
    units=tensor_cores_below_fp32,
)
def launch(A: Any, B: Any, C: Any = None) -> Any:
    import cupy

    # the operands' dtype picks SGEMM, HGEMM or the bfloat16 GemmEx
    name = operand_dtype(A, ("float32", "float16", "bfloat16"))
    A, B, C, m, n, k = check_operands(A, B, C, name)
    if not (m and n):
        return C
    if name == "bfloat16":
        if k == 0:
            cupy.cuda.runtime.memsetAsync(int(pointer(C)), 0, m * n * 2, 0)
        else:
            _gemm_bf16(A, B, C, m, n, k)
        return C
    _check_mode(np.dtype(name))
    cupy.matmul(cupy.asarray(A), cupy.asarray(B), out=cupy.asarray(C))
    return C
