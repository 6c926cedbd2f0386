"""The library the elementwise ladder is measured against, registered as a reference: one fused
CuPy ``ElementwiseKernel``, what a CuPy user writes for this chain.
"""

from __future__ import annotations

import functools
from typing import Any

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
