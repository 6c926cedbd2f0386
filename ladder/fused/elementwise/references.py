"""The libraries the fusion ladders are measured against, registered as references.

- elementwise: one fused CuPy ``ElementwiseKernel`` (what a CuPy user writes for this chain);
- softmax and layer norm: the kernels behind PyTorch's ``torch.softmax`` and
  ``torch.nn.functional.layer_norm`` (``aten._softmax`` and ``aten.native_layer_norm``, in their
  ``out=`` forms so that the result lands in our output without a copy), when PyTorch with CUDA
  is installed (optional, never required). PyTorch reads the Numba arrays without a copy
  (``torch.as_tensor`` on ``__cuda_array_interface__``);
- gemm-epilogue: cuBLAS SGEMM (``cupy.matmul``) followed by one fused CuPy elementwise kernel
  for bias + GELU: two kernels, the intermediate C written and read once.
"""

from __future__ import annotations

import functools
import math
from typing import Any

from ladder.core.rung import rung
from ladder.fused.problem import (
    ELEMENTWISE,
    GEMM_EPILOGUE,
    LAYERNORM,
    LAYERNORM_EPS,
    SOFTMAX,
    check_arrays,
)


@functools.cache
def _cupy_kernels() -> dict[str, Any]:
    import cupy

    affine_relu = cupy.ElementwiseKernel(
        "T x, T a, T b",
        "T y",
        "float v = (float)a * (float)x + (float)b; y = (T)(v > 0.0f ? v : 0.0f)",
        "ladder_affine_relu",
    )
    bias_gelu = cupy.ElementwiseKernel(
        "float32 c, float32 bias",
        "float32 y",
        f"float v = c + bias; y = 0.5f * v * (1.0f + erff(v * {1.0 / math.sqrt(2.0)!r}f))",
        "ladder_bias_gelu",
    )
    return {"affine_relu": affine_relu, "bias_gelu": bias_gelu}


@rung(
    problem="elementwise",
    name="cupy-elementwise",
    title="CuPy ElementwiseKernel (fused)",
    dtypes=("float32", "float16"),
    needs=("cupy",),
    reference=True,
)
def elementwise(x: Any, a: Any, b: Any, out: Any = None) -> Any:
    import cupy

    (x, a, b), out, _ = check_arrays(ELEMENTWISE, (x, a, b), out, ("float32", "float16"))
    if out.size:
        y = cupy.asarray(out)
        _cupy_kernels()["affine_relu"](cupy.asarray(x), cupy.asarray(a), cupy.asarray(b), y)
    return out


def _torch(arr: Any) -> Any:
    import torch

    return torch.as_tensor(arr, device="cuda")


@rung(
    problem="softmax",
    name="torch-softmax",
    title="PyTorch torch.softmax",
    dtypes=("float32", "float16"),
    needs=("torch",),
    reference=True,
)
def softmax(x: Any, out: Any = None) -> Any:
    import torch

    (x,), out, _ = check_arrays(SOFTMAX, (x,), out, ("float32", "float16"))
    if out.size:  # aten's out= form writes straight into our output, no extra copy
        torch.ops.aten._softmax.out(_torch(x), 1, False, out=_torch(out))
    return out


@rung(
    problem="layernorm",
    name="torch-layer-norm",
    title="PyTorch layer_norm",
    dtypes=("float32",),
    needs=("torch",),
    reference=True,
)
def layer_norm(x: Any, gamma: Any, beta: Any, out: Any = None) -> Any:
    import torch

    (x, gamma, beta), out, _ = check_arrays(LAYERNORM, (x, gamma, beta), out, ("float32",))
    if out.size:  # the kernel behind layer_norm, in its out= form: no extra copy
        rows, cols = x.shape
        stats = torch.empty((2, rows, 1), dtype=torch.float32, device="cuda")
        torch.ops.aten.native_layer_norm.out(
            _torch(x), [cols], _torch(gamma), _torch(beta), LAYERNORM_EPS,
            out0=_torch(out), out1=stats[0], out2=stats[1],
        )  # fmt: skip
    return out


@rung(
    problem="gemm-epilogue",
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
        _cupy_kernels()["bias_gelu"](c, cupy.asarray(bias), c)
    return out
