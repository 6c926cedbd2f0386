"""Dtype names used across the harness, including bfloat16, which NumPy lacks.

Problems, rungs and results name dtypes by string ("float32", "float16", "bfloat16", and the
8-bit floats "float8_e4m3fn" and "float8_e5m2", PyTorch's names). NumPy resolves the first two;
the others come from ``ml_dtypes`` (the package JAX and others use), whose arrays Numba can copy
to and from the device as raw 2-byte or 1-byte elements.
"""

from __future__ import annotations

from typing import Any

import numpy as np

ML_DTYPES = ("bfloat16", "float8_e4m3fn", "float8_e5m2")  # NumPy lacks them; ml_dtypes has them


def resolve(name: str) -> np.dtype:
    """The NumPy dtype for a dtype name."""
    if name in ML_DTYPES:
        import ml_dtypes

        return np.dtype(getattr(ml_dtypes, name))
    return np.dtype(name)


def _bits(dtype: np.dtype) -> np.dtype:
    """The unsigned integer of an ml_dtypes type's width, which Numba can copy."""
    return np.dtype(f"u{dtype.itemsize}")


def name_of(dtype: Any) -> str:
    """The name of an array's dtype: NumPy, ml_dtypes or PyTorch (``torch.float16``)."""
    text = str(dtype)
    return text.removeprefix("torch.")


def to_device(x: np.ndarray) -> Any:
    """``cuda.to_device``, also for bfloat16 and the 8-bit floats (copied as their bit
    patterns: Numba's copies go through Python buffers, which cannot describe an ml_dtypes
    type). A C- or Fortran-ordered array keeps its order (an FP8 GEMM's B is column-major)."""
    from numba import cuda

    if x.dtype.name in ML_DTYPES:
        if not (x.flags.c_contiguous or x.flags.f_contiguous):
            x = np.ascontiguousarray(x)
        return cuda.to_device(x.view(_bits(x.dtype))).view(x.dtype)
    return cuda.to_device(x)


def to_host(d: Any) -> np.ndarray:
    """``copy_to_host``, also for bfloat16 and 8-bit float device arrays (see ``to_device``)."""
    name = name_of(d.dtype)
    if name in ML_DTYPES:
        dtype = resolve(name)
        return d.view(_bits(dtype)).copy_to_host().view(dtype)
    return d.copy_to_host()
