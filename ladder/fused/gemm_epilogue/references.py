"""The libraries the GEMM epilogue ladder is measured against, registered as references: cuBLAS
SGEMM (``cupy.matmul``) followed by one fused CuPy elementwise kernel for bias + GELU: two
kernels, the intermediate C written and read once (in float16, cuBLAS's half GEMM on the tensor
cores and the same kernel in half, its arithmetic in FP32; CuPy has no bfloat16).

This is rung 1's structure with library kernels, and it is faster than either rung on an NVIDIA H200
(results/nvidia-h200.json, 4096³): 2.759 ms against rung 2's 3.578 ms, because cuBLAS's SGEMM alone
(the gemm ladder's cublas row, 2.688 ms) is faster than `gemm/double-buffered` (3.804 ms); both rows
are from a separate run on the same day as this problem's (2026-11-29), another piece of the file.
The epilogue costs what rung 1's does, one more pass over C (2 x 67 MB on top of the GEMM's 201 MB
minimum): the difference of the two library medians, 0.071 ms across the two runs, is about
1.9 TB/s, near the pace of CuPy's elementwise kernels (the elementwise ladder's
``references.py``). cuBLASLt can fuse a bias + GELU epilogue into the GEMM; this reference does
not use it.

``torch-compile``: ``F.gelu(A @ B + bias)`` (GELU's erf form, the problem's) compiled by
``torch.compile`` (Inductor's default mode, one graph per shape, ``ladder.core.compiled``), TF32
off. Inductor calls cuBLAS for the product (``mm``, or ``addmm`` with the bias) into a buffer of
its own and generates one kernel for the rest that stores into our output: the same two passes
as the CuPy row. Fusing the epilogue into the GEMM itself would take Inductor's Triton GEMM
templates (``mode="max-autotune"``), which time many configurations per shape at the first
call (minutes); not used here.
"""

from __future__ import annotations

import functools
import math
from typing import Any

from ladder.core import compiled
from ladder.core.rung import rung, tensor_cores_below_fp32
from ladder.fused.problem import GEMM_EPILOGUE, check_arrays


@functools.cache
def _bias_gelu(dtype: str) -> Any:
    """CuPy's bias + GELU for C of ``dtype`` (float32 or float16), computed in FP32."""
    import cupy

    c_type = {"float32": "float", "float16": "float16"}[dtype]  # CuPy's C name of each
    return cupy.ElementwiseKernel(
        f"{dtype} c, {dtype} bias",
        f"{dtype} y",
        "float v = (float)c + (float)bias; "
        f"y = ({c_type})(0.5f * v * (1.0f + erff(v * {1.0 / math.sqrt(2.0)!r}f)))",
        f"ladder_bias_gelu_{dtype}",
    )


@rung(
    name="cublas+cupy",
    title="cuBLAS GEMM, then a CuPy bias + GELU kernel",
    dtypes=("float32", "float16"),  # CuPy has no bfloat16
    needs=("cupy",),
    units=tensor_cores_below_fp32,
    reference=True,
)
def gemm_epilogue(A: Any, B: Any, bias: Any, out: Any = None) -> Any:
    import cupy

    dtypes = ("float32", "float16")
    (A, B, bias), out, dtype = check_arrays(GEMM_EPILOGUE, (A, B, bias), out, dtypes)
    if out.size:
        c = cupy.asarray(out)
        cupy.matmul(cupy.asarray(A), cupy.asarray(B), out=c)
        _bias_gelu(dtype)(c, cupy.asarray(bias), c)
    return out


def _gemm_bias_gelu_torch(A: Any, B: Any, bias: Any, out: Any) -> None:
    import torch.nn.functional as F

    out.copy_(F.gelu(A @ B + bias))  # approximate="none": the erf form


@rung(
    name="torch-compile",
    title="torch.compile (Inductor) of gelu(A @ B + bias)",
    dtypes=GEMM_EPILOGUE.dtypes,
    needs=("torch", "triton"),
    units=tensor_cores_below_fp32,
    reference=True,
)
def torch_compile(A: Any, B: Any, bias: Any, out: Any = None) -> Any:
    (A, B, bias), out, _ = check_arrays(GEMM_EPILOGUE, (A, B, bias), out, GEMM_EPILOGUE.dtypes)
    if out.size:
        compiled.run(_gemm_bias_gelu_torch, A, B, bias, out)
    return out
