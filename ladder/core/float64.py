"""Float64 products for the references: the rounded inputs multiplied in float64, by NumPy,
or by cuBLAS's DGEMM through PyTorch where a GPU is there and the product is large.

A reference must be exact enough that a rung's error is its own; float64 is, on either side.
What differs is the time: the float64 product of a 4096 × 14336 × 4096 GEMM is 481 GFLOP,
seconds to tens of seconds on a CPU and milliseconds on an H200's FP64 units, and a bench
computes one per case (``timing.prepare``), on the GPU machine's clock.
"""

from __future__ import annotations

import numpy as np

from ladder.core import device

GPU_FROM = 1 << 30  # multiply-adds (m · n · k) from which the GPU computes the product


def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` of two 2-D arrays in float64 (each converted first), as a NumPy array."""
    m, k = a.shape
    n = b.shape[1]
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    if m * n * k >= GPU_FROM and device.torch_cuda_available():
        import torch

        with torch.no_grad():
            out = torch.from_numpy(a64).cuda() @ torch.from_numpy(b64).cuda()
            return out.cpu().numpy()
    return a64 @ b64
