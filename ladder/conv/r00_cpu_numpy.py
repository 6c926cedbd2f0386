"""CPU baseline: NumPy's sliding-window view contracted with the weights (``einsum``).

What changes: nothing runs on the GPU. ``sliding_window_view`` gives a B x C x Ho x Wo x K x K
view of the input without copying; ``einsum`` contracts it with the M x C x K x K weights over
(c, p, q), a slice of images at a time, which NumPy turns into BLAS calls on copied windows.
It takes and fills host (NumPy) arrays and is timed with a host clock. This is the course's
"CPU reference", the floor every GPU rung should beat.
Why: a simple, correct baseline to measure the GPU rungs against; the same function
(``conv_numpy``), in float64, is the tests' reference at small sizes.
Prediction: seconds per layer. conv2 is 72.5 GFLOP and conv1 25.1 GFLOP, and the windows of
each slice are copied (K² = 49 copies of every input value) before BLAS multiplies them; at a
few tens of GFLOP/s that is seconds.
Measured: on an NVIDIA H200's host by ``ladder bench`` (results/nvidia-h200.json), float32:
conv1 8039.214 ms and conv2 1820.456 ms, about 3.1 and 40 GFLOP/s; cuDNN FP32 on the GPU is
710x and 273x faster.
Verdict: held for conv2; conv1 is 4.4 times slower than conv2 for a third of its FLOPs. With
C = 1 and M = 4 each contraction is 4 x 49 by 49 x pixels, so copying the windows likely costs
more than the multiply; no CPU profile was taken, so this is not yet measured.

Lab notes: docs/notes/conv.md#rung-0-cpu-numpy
"""

from __future__ import annotations

import numpy as np

from ladder.conv.problem import conv_numpy
from ladder.core.rung import rung


@rung(
    name="cpu-numpy",
    parent=None,
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
