"""CPU baseline: NumPy's ``A @ B``, which calls the host BLAS (OpenBLAS or MKL).

What changes: nothing yet; this is the floor every GPU rung is placed against. It is not a
GPU kernel: it takes and fills host (NumPy) arrays and is timed with a host clock.
Why: a tuned BLAS already runs blocked, vectorised code on every CPU core, so a GPU kernel
has to earn its place against it, not against a Python loop.
Prediction: a tuned BLAS on a many-core CPU reaches a few TFLOP/s in float32 at best, so the
GPU rungs should pass it once they reuse data (`shared-tiling` and up).
Measured: on the host CPU of the H200 machine (its model is not recorded), by ``ladder bench``
(results/nvidia-h200.json): 1.792 ms at 1024³ (1.20 TFLOP/s) and 111.127 ms at 4096³
(1.24 TFLOP/s), where the repeats spread from 110.651 to 115.933 ms. In the same run the naive
GPU rung takes 4.425 ms and 276.089 ms, the coalesced rung 1.602 ms and 99.551 ms, and
shared-memory tiling 0.286 ms and 17.459 ms.
Verdict: held as a ceiling, and low: about 1.2 TFLOP/s at both sizes. At 4096³ the host was
steady (every repeat within 4.3% of the median). The simplest GPU rungs do not pass NumPy by much:
the naive rung is slower than NumPy at both sizes (0.40x at 1024³ and at 4096³), and the coalesced
rung is only a little faster (1.12x at both). From `shared-tiling` on, every GPU rung is more than
5x faster than NumPy at both sizes (the least: `register-blocked-2d` at 1024³, 5.25x). At 1024³ the
GPU rungs from `coalesced` up already win; the size below which launch costs (microseconds) let the
CPU win is smaller than any size in the file: not measured.

Lab notes: docs/notes/gemm.md#rung-0-cpu-baseline
"""

from __future__ import annotations

import numpy as np

from ladder.core.rung import rung


@rung(
    name="cpu-numpy",
    parent=None,
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
