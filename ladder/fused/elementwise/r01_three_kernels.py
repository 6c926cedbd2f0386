"""Three kernels: t = a * x, u = t + b, y = relu(u), each its own kernel through memory.

What changes: nothing yet; this is where the ladder starts. y = relu(a * x + b) runs the way
eager PyTorch or NumPy-style code runs it, one kernel per operation, the intermediates t and u
written to device memory by one kernel and read back by the next. Per element, in float32:

    t = a * x      read x (4 bytes), write t (4)
    u = t + b      read t (4), write u (4)
    y = relu(u)    read u (4), write y (4)

24 bytes where the fused chain needs 8 (read x, write y): 1.61 GB instead of 537 MB at
8192 x 8192 (a and b, 2 x 32 KB, are noise). In float16, 12 bytes instead of 4, t and u stored
in float16 between kernels (each kernel computes its one operation in float32). Each kernel is
the plainest elementwise kernel: block (32, 8), one element per thread, a warp on 32 consecutive
columns of one row (coalesced 128-byte float32 accesses), rows along the grid's x dimension and
column tiles along y (at most 65535: 2 million columns). The three share one signature (source,
a, b, destination), as a library's family of elementwise kernels would. t and u are allocated
once per shape and kept, as a framework's caching allocator would (no allocation is timed).
ptxas (sm_90): 14 registers for scale and shift, 12 for relu; no spills (``ladder check``).
Why: the baseline. Fusion's whole gain is the bytes and the launches counted here.
Prediction: bound by memory at three times the fused kernel's bytes, so at best a third of its
speed, plus two launches. With one element per thread and 2048 threads per SM, one load each
in flight is 8 KB per SM in float32 (4 KB in float16), where Little's law asks for some 35 KB
(`fused`): it may also fall short of the copy bandwidth on its own bytes.
Measured: on an NVIDIA H200 (results/nvidia-h200.json, ``ladder bench``, 8192 x 8192): 0.694 ms
in float32, 2.322 TB/s on the bytes it moves, 0.54 of the 4.268 TB/s copy; 0.621 ms in float16,
1.297 TB/s on its bytes, 0.30 of the copy. `fused` is 5.32x faster in float32 (0.130 ms).
Verdict: missed, on the side the prediction warned of. Three times the bytes account for 3x of
the 5.32x; the rest is this rung reaching only 0.54 of the copy on its own bytes. float16 takes
0.90 of float32's time for half the bytes, what a kernel limited by the loads it keeps in
flight rather than by bytes would show; no profile of this rung is in results/ to confirm it.

Lab notes: docs/notes/fused.md
"""

from typing import Any

import numpy as np
from numba import cuda, float32, uint32

from ladder.fused.problem import ELEMENTWISE, WORKSPACE_PLANS, fused_rung, workspace

DTYPES = ("float32", "float16")
BLOCK_X, BLOCK_Y = 32, 8  # threads along a row, rows per block
MAX_GRID_Y = 65535

U_BLOCK_X, U_BLOCK_Y = np.uint32(BLOCK_X), np.uint32(BLOCK_Y)


SCALE, SHIFT, RELU = 0, 1, 2  # the step a kernel does (a compile-time constant in it)


def make_step(op: int):
    """One elementwise step as its own kernel: ``dst = src * a``, ``src + b`` or ``relu(src)``."""

    @cuda.jit
    def step_kernel(src, a, b, dst):
        row = uint32(cuda.blockIdx.x) * U_BLOCK_Y + uint32(cuda.threadIdx.y)
        col = uint32(cuda.blockIdx.y) * U_BLOCK_X + uint32(cuda.threadIdx.x)
        if row < uint32(src.shape[0]) and col < uint32(src.shape[1]):
            v = float32(src[row, col])
            if op == SCALE:
                v = v * float32(a[col])
            elif op == SHIFT:
                v = v + float32(b[col])
            else:
                v = max(v, float32(0.0))
            dst[row, col] = v  # rounded to dst's dtype (float16: cvt.rn.f16.f32)

    return step_kernel


scale_kernel = make_step(SCALE)  # t = a * x
shift_kernel = make_step(SHIFT)  # u = t + b
relu_kernel = make_step(RELU)  # y = relu(u)


def _bytes(size: tuple[int, ...], dtype: str) -> float:
    rows, cols = size
    # read x, write t, read t, write u, read u, write y; a and b once
    return float((6 * rows * cols + 2 * cols) * np.dtype(dtype).itemsize)


@fused_rung(
    ELEMENTWISE,
    name="three-kernels",
    parent=None,
    title="Three kernels, intermediates in memory",
    dtypes=DTYPES,
    bytes_moved=_bytes,
    plans_kept=WORKSPACE_PLANS,  # each plan holds t and u, two copies of x
)
def geometry(x: Any, a: Any, b: Any, out: Any) -> list:
    """Scale, shift, ReLU in order, one thread per element on the same grid; t and u, the
    intermediates, the plan's own buffers."""
    rows, cols = x.shape
    grid = ((rows + BLOCK_Y - 1) // BLOCK_Y, (cols + BLOCK_X - 1) // BLOCK_X)
    if grid[1] > MAX_GRID_Y:
        raise ValueError(f"{cols} columns need {grid[1]} blocks along y; at most {MAX_GRID_Y}")
    t, u = workspace(x.shape, x.dtype, "t"), workspace(x.shape, x.dtype, "u")
    block = (BLOCK_X, BLOCK_Y)
    return [
        (scale_kernel, grid, block, (x, a, b, t)),
        (shift_kernel, grid, block, (t, a, b, u)),
        (relu_kernel, grid, block, (u, a, b, out)),
    ]
