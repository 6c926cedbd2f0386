"""Triton peer: the elementwise chain y = relu(a * x + b), one program per 2-D tile of x.

What the program does: program ``(i, j)`` owns a tile of ``BLOCK_R`` rows x ``BLOCK_C``
columns of x (``BLOCK_C`` up to 1024 columns, the next power of two of ``cols`` for narrower
matrices; ``BLOCK_R`` rows to make ``TILE_ELEMENTS`` values). It loads its columns of a and b
once, as vectors, broadcasts them down the tile's rows (``a[None, :]``), and computes
``max(a * x + b, 0)`` in float32 on the whole tile, converting float16 on the way in and out:
one read of x, one write of y, the problem's minimum. Edges are one mask, rows and columns.
``num_warps = 8``: 16 values per thread, 64 bytes in flight per float32 thread.

What Triton did that the Numba ladder did by hand: rung 3 (``r03_fused.py``) fixes a block of
(64, 4) threads over a 16 x 256 tile, gives each thread 4 adjacent columns in 4 rows and issues
their loads before using any of them, emits 16-byte ``ld.global.v4.f32`` (8-byte for float16)
through LLVM vector intrinsics of its own (``ladder.core.intrinsics``), checks alignment to pick
that kernel or a scalar one, and splits a 1-D grid into row and column tiles to stay clear of
gridDim.y's 65535. Here the tile is a value and the compiler assigns its elements to threads,
vectorizes the accesses when the pointers and ``cols`` are known to be multiples of 16 (Triton
specializes the kernel on that); float16 and float32 are the same source.

What Triton could not do or made hard: nothing in the program says how wide the accesses came
out; an unaligned view or a width that is not a multiple of 16 quietly gets a narrower kernel
(the PTX tells). Block sizes must be powers of two, so a 1000-column matrix is covered by
1024-column tiles with 24 masked lanes each. The column tiles are the grid's second dimension,
whose 65535 limit caps ``cols`` at 65535 x 1024.

Measured (NVIDIA H200, ``results/nvidia-h200.json``): at 8192 x 8192 it takes 0.137 ms in float32
and 0.072 ms in float16, rung 3's 0.131 and 0.068 and ``torch.compile``'s 0.130 and 0.068: within 5
to 6% of them, all at the copy's pace (3.9 and 3.7 TB/s). The verdict: the minimum bytes, a little
less of the copy's rate than rung 3.
"""

from __future__ import annotations

from typing import Any

from ladder.core import triton_kernels
from ladder.core.rung import rung
from ladder.core.torch_views import tensors
from ladder.fused.problem import ELEMENTWISE, check_arrays

MAX_BLOCK_C = 1024  # columns per tile
TILE_ELEMENTS = 4096  # values per program
WARPS = 8

# Triton's modules, bound by ``triton_kernels.builder`` at ``_kernel``'s first call: importing
# ladder never imports Triton, and Triton reads ``tl`` from this module's globals.
triton: Any = None
tl: Any = None


@triton_kernels.builder
def _kernel() -> Any:

    @triton.jit
    def affine_relu_kernel(
        x_ptr, a_ptr, b_ptr, y_ptr, rows, cols, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr
    ):
        r = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
        c = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
        in_cols = c < cols
        # a and b once per program, as vectors over its columns (cached: every tile reads them)
        a = tl.load(a_ptr + c, mask=in_cols).to(tl.float32)
        b = tl.load(b_ptr + c, mask=in_cols).to(tl.float32)
        mask = (r[:, None] < rows) & in_cols[None, :]
        offs = r[:, None].to(tl.int64) * cols + c[None, :]  # 64-bit: rows * cols may pass 2**31
        x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
        y = tl.maximum(a[None, :] * x + b[None, :], 0.0)  # the multiply and add fuse: one FMA
        tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)

    return affine_relu_kernel


def tile_for(cols: int) -> tuple[int, int]:
    """(BLOCK_R, BLOCK_C) for a matrix of ``cols`` columns."""
    block_c = min(MAX_BLOCK_C, max(triton_kernels.next_power_of_2(cols), 16))
    return TILE_ELEMENTS // block_c, block_c


@rung(
    name="triton",
    title="Triton: one program per 2-D tile, a and b broadcast",
    dtypes=("float32", "float16"),
    needs=("triton",),
    peer=True,
)
def launch(x: Any, a: Any, b: Any, out: Any = None) -> Any:
    dtypes = ("float32", "float16")
    (x, a, b), out, _ = check_arrays(ELEMENTWISE, (x, a, b), out, dtypes)
    rows, cols = x.shape
    if rows and cols:
        block_r, block_c = tile_for(cols)
        grid = ((rows + block_r - 1) // block_r, (cols + block_c - 1) // block_c)
        tx, ta, tb, ty = tensors(x, a, b, out)
        _kernel()[grid](
            tx, ta, tb, ty, rows, cols, BLOCK_R=block_r, BLOCK_C=block_c, num_warps=WARPS
        )
    return out
