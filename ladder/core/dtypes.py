"""Dtype names used across the harness, including bfloat16, which NumPy lacks.

Problems, rungs and results name dtypes by string ("float32", "float16", "bfloat16"). NumPy
resolves the first two; bfloat16 comes from ``ml_dtypes`` (the package JAX and others use), whose
arrays Numba can copy to and from the device as raw 2-byte elements.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def resolve(name: str) -> np.dtype:
    """The NumPy dtype for a dtype name."""
    if name == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def name_of(dtype: Any) -> str:
    """The name of an array's dtype: NumPy, ml_dtypes or PyTorch (``torch.float16``)."""
    text = str(dtype)
    return text.removeprefix("torch.")


def to_device(x: np.ndarray) -> Any:
    """``cuda.to_device``, also for bfloat16 (copied as its 16-bit pattern: Numba's copies go
    through Python buffers, which cannot describe an ml_dtypes type)."""
    from numba import cuda

    if x.dtype.name == "bfloat16":
        return cuda.to_device(np.ascontiguousarray(x).view(np.uint16)).view(x.dtype)
    return cuda.to_device(x)


def to_host(d: Any) -> np.ndarray:
    """``copy_to_host``, also for bfloat16 device arrays (see ``to_device``)."""
    if name_of(d.dtype) == "bfloat16":
        return d.view(np.uint16).copy_to_host().view(d.dtype)
    return d.copy_to_host()
