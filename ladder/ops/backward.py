"""Backward kernels for the operators: softmax, layer norm and the GELU epilogue.

Each is the gradient written out and reduced the way the forward rungs reduce (a block per
row, warp shuffles, one shared exchange across warps), with FP32 arithmetic for every dtype:

- softmax: ``dx = y * (dy - sum(dy * y))`` per row, from the saved output ``y``: one read
  of y and dy for the sum, one more for dx.
- layer norm: ``x̂ = (x - mean) * rstd``, ``g = dy * gamma``,
  ``dx = rstd * (g - mean(g) - x̂ * mean(g * x̂))`` per row (mean and rstd recomputed from x,
  cheaper than saving them when the row is read anyway, and written for the second kernel);
  ``dgamma = sum over rows of dy * x̂`` and ``dbeta = sum of dy`` by a second kernel, a thread
  per column over a chunk of rows, the chunks added with atomics.
- GELU (the erf form): ``d pre = dy * (Φ(pre) + pre * φ(pre))``, elementwise.

They are not rungs: no ladder climbs here (yet), and ``tests/test_ops.py`` checks each against
PyTorch's float64 autograd.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numba import cuda, float32

from ladder.core.fastcall import NumbaLaunch, Operand, PlanCache, intake
from ladder.core.intrinsics import FULL_MASK, shfl_xor_sync

THREADS = 256  # a block per row
WARPS = THREADS // 32
COLUMN_THREADS = 128  # dgamma/dbeta: a thread per column
ROWS_PER_CHUNK = 256  # rows one thread of the dgamma/dbeta kernel adds before its atomic
ELEMENTWISE_THREADS = 256
INV_SQRT2 = np.float32(1.0 / math.sqrt(2.0))
INV_SQRT_2PI = np.float32(1.0 / math.sqrt(2.0 * math.pi))


@cuda.jit(device=True, inline="always")
def block_sum(value, shared):
    """The sum of ``value`` over the block's THREADS threads, in every thread (``shared``:
    WARPS floats; the block synchronizes twice)."""
    for i in range(5):
        value += shfl_xor_sync(FULL_MASK, value, 16 >> i)
    lane = cuda.threadIdx.x & 31
    if lane == 0:
        shared[cuda.threadIdx.x >> 5] = value
    cuda.syncthreads()
    value = shared[lane] if lane < WARPS else float32(0.0)
    for i in range(5):
        value += shfl_xor_sync(FULL_MASK, value, 16 >> i)
    cuda.syncthreads()  # shared is free again for the next sum
    return value


@cuda.jit
def softmax_backward_kernel(y, dy, dx):
    shared = cuda.shared.array(WARPS, float32)
    row = cuda.blockIdx.x
    cols = y.shape[1]
    partial = float32(0.0)
    for c in range(cuda.threadIdx.x, cols, THREADS):
        partial += float32(y[row, c]) * float32(dy[row, c])
    total = block_sum(partial, shared)
    for c in range(cuda.threadIdx.x, cols, THREADS):
        dx[row, c] = float32(y[row, c]) * (float32(dy[row, c]) - total)


@cuda.jit
def layer_norm_backward_kernel(x, gamma, dy, dx, stats, eps):
    shared = cuda.shared.array(WARPS, float32)
    row = cuda.blockIdx.x
    cols = x.shape[1]
    inv_cols = float32(1.0) / float32(cols)
    partial = float32(0.0)
    for c in range(cuda.threadIdx.x, cols, THREADS):
        partial += float32(x[row, c])
    mean = block_sum(partial, shared) * inv_cols
    partial = float32(0.0)
    for c in range(cuda.threadIdx.x, cols, THREADS):
        centered = float32(x[row, c]) - mean
        partial += centered * centered
    rstd = float32(1.0) / math.sqrt(block_sum(partial, shared) * inv_cols + eps)
    sum_g = float32(0.0)
    sum_gx = float32(0.0)
    for c in range(cuda.threadIdx.x, cols, THREADS):
        g = float32(dy[row, c]) * float32(gamma[c])
        sum_g += g
        sum_gx += g * (float32(x[row, c]) - mean) * rstd
    mean_g = block_sum(sum_g, shared) * inv_cols
    mean_gx = block_sum(sum_gx, shared) * inv_cols
    for c in range(cuda.threadIdx.x, cols, THREADS):
        g = float32(dy[row, c]) * float32(gamma[c])
        xhat = (float32(x[row, c]) - mean) * rstd
        dx[row, c] = rstd * (g - mean_g - xhat * mean_gx)
    if cuda.threadIdx.x == 0:
        stats[row, 0] = mean
        stats[row, 1] = rstd


@cuda.jit
def layer_norm_params_kernel(x, dy, stats, dgamma, dbeta):
    col = cuda.blockIdx.x * COLUMN_THREADS + cuda.threadIdx.x
    rows, cols = x.shape
    if col >= cols:
        return
    first = cuda.blockIdx.y * ROWS_PER_CHUNK
    last = min(first + ROWS_PER_CHUNK, rows)
    sum_gamma = float32(0.0)
    sum_beta = float32(0.0)
    for r in range(first, last):  # adjacent threads read adjacent columns: coalesced
        d = float32(dy[r, col])
        sum_gamma += d * (float32(x[r, col]) - stats[r, 0]) * stats[r, 1]
        sum_beta += d
    cuda.atomic.add(dgamma, col, sum_gamma)
    cuda.atomic.add(dbeta, col, sum_beta)


@cuda.jit
def gelu_backward_kernel(pre, dy, dpre):
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    for j in range(i, pre.shape[0], stride):
        v = float32(pre[j])
        cdf = float32(0.5) * (float32(1.0) + math.erf(v * INV_SQRT2))
        pdf = math.exp(float32(-0.5) * v * v) * INV_SQRT_2PI
        dpre[j] = float32(dy[j]) * (cdf + v * pdf)


def _rows_plan(kernel: Any) -> PlanCache:
    return PlanCache(lambda *ops: NumbaLaunch(kernel, ops[0].shape[0], THREADS))


SOFTMAX_PLANS = _rows_plan(softmax_backward_kernel)
LAYER_NORM_PLANS = PlanCache(
    lambda x, gamma, dy, dx, stats, eps: NumbaLaunch(
        layer_norm_backward_kernel, x.shape[0], THREADS, scalars=(np.float32(eps),)
    )
)
PARAMS_PLANS = PlanCache(
    lambda x, *rest: NumbaLaunch(
        layer_norm_params_kernel,
        (-(-x.shape[1] // COLUMN_THREADS), -(-x.shape[0] // ROWS_PER_CHUNK)),
        COLUMN_THREADS,
    )
)
GELU_PLANS = PlanCache(
    lambda pre, *rest: NumbaLaunch(
        gelu_backward_kernel,
        max(1, min(-(-pre.shape[0] // ELEMENTWISE_THREADS), 65535)),
        ELEMENTWISE_THREADS,
    )
)


def _same(first: Operand, *others: Operand) -> None:
    for other in others:
        if other.shape != first.shape:
            raise ValueError(f"{other.name} must have {first.name}'s shape {first.shape}")
    for op in (first, *others):
        if not op.contiguous:
            raise ValueError(f"{op.name} must be C-contiguous")


def softmax_backward(y: Any, dy: Any, dx: Any) -> None:
    """dx = the gradient of softmax's input, from its output ``y`` and the output's gradient
    ``dy``: 2-D, rows of the softmax, C-contiguous, one dtype (float32 or float16)."""
    y, dy, dx = intake(y, "y"), intake(dy, "dy"), intake(dx, "dx")
    _same(y, dy, dx)
    if y.shape[0] and y.shape[1]:
        SOFTMAX_PLANS(y, dy, dx)(y, dy, dx)


def layer_norm_backward(
    x: Any, gamma: Any, dy: Any, dx: Any, dgamma: Any, dbeta: Any, stats: Any, eps: float
) -> None:
    """dx, dgamma and dbeta of ``layer_norm(x) * gamma + beta`` over the rows of 2-D ``x``
    (``eps`` added to the variance), given the output's gradient ``dy``. ``dgamma`` and
    ``dbeta`` (float32) must be zero (the chunks add into them); ``stats`` is float32 (rows, 2)
    scratch for mean and rstd."""
    x, gamma, dy, dx = intake(x, "x"), intake(gamma, "gamma"), intake(dy, "dy"), intake(dx, "dx")
    dgamma, dbeta, stats = intake(dgamma, "dgamma"), intake(dbeta, "dbeta"), intake(stats, "stats")
    _same(x, dy, dx)
    rows, cols = x.shape
    if gamma.shape != (cols,) or dgamma.shape != (cols,) or dbeta.shape != (cols,):
        raise ValueError(f"gamma, dgamma and dbeta must have shape ({cols},)")
    if stats.shape != (rows, 2):
        raise ValueError(f"stats must have shape ({rows}, 2)")
    if rows and cols:
        LAYER_NORM_PLANS(x, gamma, dy, dx, stats, eps)(x, gamma, dy, dx, stats)
        PARAMS_PLANS(x, dy, stats, dgamma, dbeta)(x, dy, stats, dgamma, dbeta)


def gelu_backward(pre: Any, dy: Any, dpre: Any) -> None:
    """dpre = dy * GELU'(pre) (the erf form), elementwise over 1-D arrays of one length."""
    pre, dy, dpre = intake(pre, "pre"), intake(dy, "dy"), intake(dpre, "dpre")
    _same(pre, dy, dpre)
    if pre.shape[0]:
        GELU_PLANS(pre, dy, dpre)(pre, dy, dpre)
