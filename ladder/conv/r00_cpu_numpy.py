"""Rung 0, CPU baseline: NumPy's sliding-window view contracted with the weights (``einsum``).

Not a GPU kernel: the floor every GPU rung should beat, and the course's "CPU reference".
``sliding_window_view`` gives a B x C x Ho x Wo x K x K view of the input without copying;
``einsum`` contracts it with the M x C x K x K weights over (c, p, q), a slice of images at a
time, which NumPy turns into BLAS calls on copied windows. At B = 10,000 this takes seconds:
conv2 is 72 GFLOP, and the windows of each slice are copied before the product.

Takes and fills host (NumPy) arrays and is timed with a host clock.
"""

from __future__ import annotations

import numpy as np

from ladder.conv.problem import conv_numpy
from ladder.core.rung import rung


@rung(
    name="cpu-numpy",
    title="CPU: NumPy sliding windows + einsum",
    dtypes=("float32",),
    needs=("cpu",),
)
def launch(x: np.ndarray, w: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    for name, arr in (("x", x), ("w", w)):
        if not isinstance(arr, np.ndarray):
            raise TypeError(f"{name} must be a NumPy array for the CPU rung")
        if arr.ndim != 4:
            raise ValueError(f"{name} must be 4-D, got shape {arr.shape}")
    if x.dtype != np.float32 or w.dtype != np.float32:
        raise TypeError(f"x and w must both be float32, got {x.dtype} and {w.dtype}")
    if w.shape[1] != x.shape[1] or w.shape[2] != w.shape[3] or w.shape[2] > min(x.shape[2:]):
        raise ValueError(f"weights {w.shape} do not fit input {x.shape}")
    y = conv_numpy(x, w)
    if out is None:
        return y
    if out.shape != y.shape or out.dtype != x.dtype:
        raise ValueError(f"out must be {x.dtype} of shape {y.shape}")
    out[...] = y
    return out
