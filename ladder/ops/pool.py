"""ReLU + 2 x 2 max pool, forward and backward: the course's network's other layer.

LeNet follows each convolution with a ReLU and a 2 x 2 max pool (stride 2, the last odd row
or column dropped). PyTorch runs them as two kernels, ``relu`` (read and write the whole
activation) then ``max_pool2d`` (read it again, write a quarter). Fused, the activation is
read once: ``y = max(0, x00, x01, x10, x11)`` per output. On the conv1 output of the course's
batch (10,000 x 4 x 80 x 80) that moves 1.25 of the activation's size where the pair moves
3.25: the layer is memory-bound, so the time should fall by about that ratio.

Adjacent threads take adjacent outputs, so a warp reads two rows of 64 adjacent inputs. A
first version with a thread per output fell well short: finding a window from an output's
index takes four integer divisions, and at one output per thread that arithmetic, not the
memory, set the pace. Each thread now takes ``PER_THREAD`` outputs a grid apart and issues
all their loads before any store, on 32-bit offsets (docs/notes/models.md has the measured
times).

Backward: the gradient goes to the first of the four inputs holding the maximum (PyTorch's
choice), where that maximum is above zero (ReLU's gradient at 0 is 0); a thread per output
writes its four inputs' gradients, so no two threads write one element and nothing is added
atomically. Rows and columns that no window covers (odd H or W) get 0 from the caller.

Not rungs: one kernel each, no ladder climbed; ``tests/test_ops.py`` checks them against
PyTorch's float64 ``max_pool2d(relu(x))`` and its autograd.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import cuda, float32, uint32

from ladder.core.fastcall import NumbaLaunch, Operand, PlanCache, intake

THREADS = 256
PER_THREAD = 4  # outputs per thread, a grid's width apart: their 16 loads issued together
MAX_BLOCKS = 65535 * 8
LIMIT = 2**31  # elements: the index arithmetic is 32-bit (a larger input falls back)


@cuda.jit(device=True, inline="always")
def _corner(index, out_h, out_w, height, width):
    """The flat offset of the top-left input of output ``index``'s window: output (plane p,
    row i, column j) of a (planes, out_h, out_w) output reads rows 2i and 2i + 1, columns 2j
    and 2j + 1 of plane p of a (planes, height, width) input."""
    j = index % out_w
    rows = index // out_w  # p * out_h + i
    i = rows % out_h
    p = rows // out_h
    return (p * height + uint32(2) * i) * width + uint32(2) * j


@cuda.jit
def relu_max_pool_kernel(x, y, height, width):
    out_h, out_w = height // uint32(2), width // uint32(2)
    total = uint32(y.shape[0])
    stride = uint32(cuda.gridsize(1))
    best = cuda.local.array(PER_THREAD, float32)
    first = uint32(cuda.grid(1))
    while first < total:
        for k in range(PER_THREAD):  # every load first: nothing stored in between
            index = first + uint32(k) * stride
            if index < total:
                corner = _corner(index, out_h, out_w, height, width)
                top = max(float32(x[corner]), float32(x[corner + uint32(1)]))
                bottom = max(float32(x[corner + width]), float32(x[corner + width + uint32(1)]))
                best[k] = max(top, bottom)
        for k in range(PER_THREAD):
            index = first + uint32(k) * stride
            if index < total:
                y[index] = max(best[k], float32(0.0))
        first += stride * uint32(PER_THREAD)


@cuda.jit
def relu_max_pool_backward_kernel(x, dy, dx, height, width):
    out_h, out_w = height // uint32(2), width // uint32(2)
    total = uint32(dy.shape[0])
    index = uint32(cuda.grid(1))
    while index < total:
        corner = _corner(index, out_h, out_w, height, width)
        # the first maximum in PyTorch's scan order: (0,0), (0,1), (1,0), (1,1)
        best = float32(x[corner])
        which = uint32(0)
        for k in range(1, 4):
            v = float32(x[corner + uint32(k >> 1) * width + uint32(k & 1)])
            if v > best:
                best = v
                which = uint32(k)
        g = float32(dy[index]) if best > float32(0.0) else float32(0.0)
        for k in range(4):
            dx[corner + uint32(k >> 1) * width + uint32(k & 1)] = g if k == which else float32(0.0)
        index += uint32(cuda.gridsize(1))


def _plan(kernel: Any, per_thread: int) -> PlanCache:
    """Plans of ``kernel`` (operands, then height and width), ``per_thread`` outputs a thread."""

    def build(x: Operand, pooled: Operand, height: int, width: int) -> NumbaLaunch:
        blocks = -(-pooled.shape[0] // (THREADS * per_thread))
        scalars = (np.uint32(height), np.uint32(width))
        return NumbaLaunch(kernel, max(1, min(blocks, MAX_BLOCKS)), THREADS, scalars=scalars)

    return PlanCache(build)


FORWARD_PLANS = _plan(relu_max_pool_kernel, PER_THREAD)
BACKWARD_PLANS = _plan(relu_max_pool_backward_kernel, 1)


def _flat(op: Operand, size: int, what: str) -> None:
    if op.ndim != 1 or not op.contiguous:
        raise ValueError(f"{op.name} must be 1-D and contiguous ({what}), got shape {op.shape}")
    if op.shape[0] != size:
        raise ValueError(f"{op.name} must hold {size} elements ({what}), got {op.shape[0]}")


def _check(x: Operand, pooled: Operand, height: int, width: int) -> None:
    if height < 2 or width < 2:
        raise ValueError(f"height and width must be at least 2, got {height} x {width}")
    if x.ndim != 1 or not x.contiguous or x.shape[0] % (height * width):
        raise ValueError(
            f"x must be 1-D and contiguous, planes of {height} x {width}, got shape {x.shape}"
        )
    if x.shape[0] >= LIMIT:
        raise ValueError(f"x has {x.shape[0]} elements; the kernels index up to {LIMIT}")
    planes = x.shape[0] // (height * width)
    _flat(pooled, planes * (height // 2) * (width // 2), "planes x height/2 x width/2")
    if pooled.dtype != x.dtype:
        raise ValueError(f"{pooled.name} must have x's dtype {x.dtype}, got {pooled.dtype}")


def relu_max_pool(x: Any, y: Any, height: int, width: int) -> None:
    """``y = max_pool2d(relu(x), 2)`` for ``x``, planes of ``height`` x ``width`` (batch and
    channels flattened, the planes one after another in a 1-D array) and ``y``, the planes of
    ``height // 2`` x ``width // 2``; one dtype (float32 or float16)."""
    x, y = intake(x, "x"), intake(y, "y")
    _check(x, y, height, width)
    if y.shape[0]:
        FORWARD_PLANS(x, y, height, width)(x, y)


def relu_max_pool_backward(x: Any, dy: Any, dx: Any, height: int, width: int) -> None:
    """``dx``, the gradient of ``relu_max_pool``'s input ``x`` given its output's gradient
    ``dy`` (the layouts of ``relu_max_pool``), written in every element that a window covers
    (the caller zeroes the others)."""
    x, dy, dx = intake(x, "x"), intake(dy, "dy"), intake(dx, "dx")
    _check(x, dy, height, width)
    _flat(dx, x.shape[0], "x's")
    if dx.dtype != x.dtype:
        raise ValueError(f"dx must have x's dtype {x.dtype}, got {dx.dtype}")
    if dy.shape[0]:
        BACKWARD_PLANS(x, dy, height, width)(x, dy, dx)
