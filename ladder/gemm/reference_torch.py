"""Reference: cuBLAS through PyTorch (``torch.matmul(A, B, out=C)``), the call a PyTorch user
makes, beside cuBLAS through CuPy (``reference_cublas.py``); both are measured in the same run,
and × library is against the faster.

PyTorch reads the Numba arrays without a copy (``__cuda_array_interface__``; bfloat16, which the
interface cannot name, as int16 viewed as bfloat16) and cuBLAS writes C in place: ``out=`` a
C-contiguous matrix of the right shape is written directly, with no copy. PyTorch may choose
cuBLAS's routines differently from CuPy (``cublasGemmEx`` or cuBLASLt, with its own heuristics
and workspace), which is why both rows are kept.

The comparison stays FP32 accumulation against FP32 accumulation
(``torch_views.fp32_means_fp32``, called on every call):

- float32: TF32 off (``torch.backends.cuda.matmul.allow_tf32 = False``), plain FP32 SGEMM.
- float16 and bfloat16: FP32 accumulation, and reduced-precision reductions switched off
  (``allow_fp16_reduced_precision_reduction`` and ``allow_bf16_reduced_precision_reduction``,
  both True by default in PyTorch). Left on, cuBLAS may split K and add the partial sums in 16
  bits, which can be faster and is less accurate than the rungs, which accumulate in FP32 end to
  end; switched off, the row computes what the rungs compute.
"""

from __future__ import annotations

from typing import Any

from ladder.core.rung import rung, tensor_cores_below_fp32
from ladder.core.torch_views import fp32_means_fp32, tensors
from ladder.gemm.problem import check_operands
from ladder.gemm.tensor_core import operand_dtype

DTYPES = ("float32", "float16", "bfloat16")


@rung(
    name="torch-matmul",
    title="cuBLAS (PyTorch matmul, out=)",
    dtypes=DTYPES,
    needs=("torch",),
    reference=True,
    units=tensor_cores_below_fp32,
)
def launch(A: Any, B: Any, C: Any = None) -> Any:
    import torch

    name = operand_dtype(A, DTYPES)
    A, B, C, m, n, _ = check_operands(A, B, C, name)
    if m and n:  # K = 0 too: cuBLAS writes C = 0
        fp32_means_fp32()
        ta, tb, tc = tensors(A, B, C)
        torch.matmul(ta, tb, out=tc)
    return C
