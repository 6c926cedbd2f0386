"""The libraries the elementwise ladder is measured against, registered as references: one fused
CuPy ``ElementwiseKernel``, what a CuPy user writes for this chain, and ``torch.compile`` of the
same chain as a PyTorch user writes it, both measured in the same run (× library is against the
faster).

It is not a straw man: one kernel, no intermediate in memory and no cast through memory (the
conversions to float are in registers), so it moves the problem's minimum, read x and write y:
537 MB in float32 and 268 MB in float16 at 8192 x 8192, the same bytes as rung 3 (a and b are
broadcast along the rows and stay in cache). Yet on an NVIDIA H200 (results/nvidia-h200.json)
it takes 0.321 ms in float32 and 0.320 ms in float16, 2.46x and 4.66x rung 3's 0.130 and
0.069 ms. What the same file shows: in float32 it runs at 1.673 TB/s, the pace of the plainest
CuPy kernel, ``y = x``, which the ceilings measure at 1.69 TB/s ("cupy kernel" under
``copy_methods_tbps``) against 4.27 TB/s for PyTorch's ``copy_``; and it takes the same time
for 2-byte elements as for 4-byte ones, so it is bound per element, not per byte, where rung 3
moves 4 elements per access and 16 per thread. Which per-element work sets that pace (CuPy's
generated loop takes one element per iteration and computes each operand's index from the flat
index) is not yet measured: no profile of the CuPy kernel is in results/.

``torch-compile``: ``relu(a * x + b)`` compiled by ``torch.compile`` (Inductor, one graph per
shape, ``ladder.core.compiled``) into one generated kernel that stores into our output: the
minimum bytes too, float16 computed in float32 inside the kernel (Inductor upcasts 16-bit
operands) and rounded once at the store, like rung 3.
"""

from __future__ import annotations

import functools
from typing import Any

from ladder.core import compiled
from ladder.core.rung import rung
from ladder.fused.problem import ELEMENTWISE, check_arrays


@functools.cache
def _affine_relu() -> Any:
    import cupy

    return cupy.ElementwiseKernel(
        "T x, T a, T b",
        "T y",
        "float v = (float)a * (float)x + (float)b; y = (T)(v > 0.0f ? v : 0.0f)",
        "ladder_affine_relu",
    )


@rung(
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
        _affine_relu()(cupy.asarray(x), cupy.asarray(a), cupy.asarray(b), y)
    return out


def _affine_relu_torch(x: Any, a: Any, b: Any, out: Any) -> None:
    import torch

    out.copy_(torch.relu(a * x + b))


@rung(
    name="torch-compile",
    title="torch.compile (Inductor) of relu(a * x + b)",
    dtypes=("float32", "float16"),
    needs=("torch", "triton"),
    reference=True,
)
def torch_compile(x: Any, a: Any, b: Any, out: Any = None) -> Any:
    (x, a, b), out, _ = check_arrays(ELEMENTWISE, (x, a, b), out, ("float32", "float16"))
    if out.size:
        compiled.run(_affine_relu_torch, x, a, b, out)
    return out
