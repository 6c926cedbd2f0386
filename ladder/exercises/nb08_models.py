"""Exercises for notebook 08 (from kernels to a model).

- ``check_matmul_backward(fn)``: the gradients of C = A @ B, written by you in NumPy as the
  ``ladder::matmul`` backward computes them: two more GEMMs.
- ``check_softmax_backward(fn)``: the gradient of a row softmax from its output, as
  ``ladder/ops/backward.py``'s kernel computes it per row.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ladder.exercises._common import require

M, K, N = 5, 7, 3  # shapes that differ, so that a missing transpose cannot multiply


def _relative(found: Any, right: np.ndarray, name: str) -> float:
    found = np.asarray(found, dtype=np.float64)
    require(found.shape == right.shape, f"{name} must have shape {right.shape}, got {found.shape}")
    return float(np.linalg.norm(found - right) / np.linalg.norm(right))


def check_matmul_backward(fn: Callable[..., Any]) -> str:
    """Write ``fn(A, B, dC) -> (dA, dB)``: given A (M x K), B (K x N) and the gradient dC
    (M x N) of a loss with respect to C = A @ B, return the gradients of A and of B (NumPy
    float64 arrays). Each is one matrix product of two of the three arrays, one of them
    transposed."""
    rng = np.random.default_rng(8)
    A, B, dC = rng.normal(size=(M, K)), rng.normal(size=(K, N)), rng.normal(size=(M, N))
    try:
        found = fn(A.copy(), B.copy(), dC.copy())
    except ValueError as err:
        raise AssertionError(
            f"your matrix product failed ({err}): dA has A's shape (M x K) = (M x N)(N x K), "
            "so dC is multiplied by B transposed"
        ) from err
    require(isinstance(found, tuple) and len(found) == 2, "return a tuple (dA, dB)")
    dA, dB = found
    require(_relative(dA, dC @ B.T, "dA") < 1e-12, "dA: C[i, j] sums A[i, k] B[k, j] over k")
    require(
        _relative(dB, A.T @ dC, "dB") < 1e-12,
        "dB: each B[k, j] meets every A[i, k] of column k: sum dC[i, j] A[i, k] over i",
    )
    return (
        "right: the backward of one GEMM is two GEMMs of the same FLOPs as the forward's; "
        "ladder::matmul runs both on the GEMM rungs"
    )


def check_softmax_backward(fn: Callable[..., Any]) -> str:
    """Write ``fn(y, dy) -> dx``: y = softmax(x) along each row of a 2-D array, dy the
    gradient of a loss with respect to y; return the gradient with respect to x (NumPy)."""
    rng = np.random.default_rng(9)
    x = rng.normal(size=(4, 9))
    y = np.exp(x - x.max(1, keepdims=True))
    y /= y.sum(1, keepdims=True)
    dy = rng.normal(size=(4, 9))
    right = y * (dy - (dy * y).sum(1, keepdims=True))
    found = fn(y.copy(), dy.copy())
    if _relative(found, y * dy, "dx") < 1e-12:
        raise AssertionError(
            "each y[j] depends on every x[i] of its row (through the sum), so dx[i] gathers "
            "dy[j] * ∂y[j]/∂x[i] over j: y[i] * (dy[i] - the row's sum of dy * y)"
        )
    require(
        _relative(found, right, "dx") < 1e-12,
        "dx: the Jacobian of softmax is diag(y) - y yᵀ per row; multiply it by dy",
    )
    return (
        "right: one reduction per row (the sum of dy * y) and one elementwise pass, like the "
        "forward; it needs y, not x, so the forward's output is what is saved"
    )
