"""Rung 0, CPU baseline: NumPy's ``A @ B``, which calls the host BLAS (OpenBLAS or MKL).

Not a GPU kernel: the floor every GPU rung should beat. A tuned BLAS on a many-core CPU
reaches a few TFLOP/s in float32 at best, so even the simpler GPU rungs pass it at large
sizes; at small sizes the CPU wins, because a GPU launch alone costs microseconds.

Takes and fills host (NumPy) arrays and is timed with a host clock.
"""

from __future__ import annotations

import numpy as np

from ladder.core.rung import rung


@rung(
    name="cpu-numpy",
    title="CPU: NumPy / host BLAS",
    needs=("cpu",),
)
def launch(A: np.ndarray, B: np.ndarray, C: np.ndarray | None = None) -> np.ndarray:
    for name, arr in (("A", A), ("B", B)):
        if not isinstance(arr, np.ndarray):
            raise TypeError(f"{name} must be a NumPy array for the CPU rung")
        if arr.ndim != 2 or arr.dtype != np.float32:
            raise TypeError(f"{name} must be a 2-D float32 array")
    if A.shape[1] != B.shape[0]:
        raise ValueError(f"inner dimensions differ: A is {A.shape}, B is {B.shape}")
    if C is None:
        return A @ B
    if C.shape != (A.shape[0], B.shape[1]) or C.dtype != np.float32:
        raise ValueError(f"C must be float32 of shape ({A.shape[0]}, {B.shape[1]})")
    np.matmul(A, B, out=C)
    return C
