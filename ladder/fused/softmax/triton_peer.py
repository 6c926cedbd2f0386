"""Triton peer: row softmax, one program per row, the row held in registers.

What the program does: program ``r`` loads row ``r`` as one block of ``BLOCK`` values (the
next power of two of ``cols``, padding masked to -inf), takes ``tl.max``, ``tl.exp(x - max)``
and ``tl.sum`` of the block, and stores ``e / sum``: one read and one write of every element,
float32 inside for float16 rows. Rows longer than ``MAX_BLOCK`` columns do not fit: they are
walked in tiles of ``TILE``, first with the online softmax (a running max and a sum rescaled by
``exp(m - m')`` whenever the max grows), then again to write, two reads and one write.
``num_warps`` is chosen so that a thread holds at most 32 values.

What Triton did that the Numba ladder did by hand: rung 5 (``r05_rows_in_registers.py``) has
its row in a ``cuda.local.array`` of compile-time size whose loops unroll, chooses among five
thread-group shapes by row length, clamps addresses so that its loads issue unpredicated, writes
16-byte ``ld.global.v4`` loads through an LLVM intrinsic when rows are aligned and a scalar
kernel when they are not, and reduces max and sum by xor shuffles within a warp plus one
shared-memory exchange across warps. Here a block is a value: ``tl.max`` and ``tl.sum`` emit
the shuffles and the shared exchange, the compiler splits the block over the threads and
vectorizes the accesses when Triton can prove alignment (it specializes pointers and ``cols``
on divisibility by 16), and masking the edge is one ``mask=`` argument.

What Triton could not do or made hard: the row must fit a block whose size is a compile-time
power of two, so a 5000-column row computes on 8192 lanes, and each row length past a power of
two compiles a new kernel. The block size and ``num_warps`` (and thus registers per thread) are
the user's choice; nothing in the language says whether the block stayed in registers or
spilled (the PTX does). Long rows need a second kernel path written by hand.

Measured (NVIDIA H200, ``results/nvidia-h200.json``): at 8192 x 8192 it takes 0.134 ms in float32
and 0.068 ms in float16, rung 5's 0.134 and 0.071: both move the minimum at about 4.0 TB/s, the
copy's pace. The verdict: the block-as-a-value program reaches what rung 5 reached by hand, and
passes ``torch.compile`` (0.152 and 0.153 ms).
"""

from __future__ import annotations

from typing import Any

from ladder.core import triton_kernels
from ladder.core.rung import rung
from ladder.core.torch_views import tensors
from ladder.fused.problem import SOFTMAX, check_arrays

MAX_BLOCK = 16384  # longest row held whole: 32 values per thread at 16 warps, as rung 5's
TILE = 4096  # longer rows: the tile of the two passes

# Triton's modules, bound by ``triton_kernels.builder`` at ``_kernel``'s first call: importing
# ladder never imports Triton, and Triton reads ``tl`` from this module's globals.
triton: Any = None
tl: Any = None


@triton_kernels.builder
def _kernel() -> Any:

    @triton.jit
    def softmax_kernel(x_ptr, y_ptr, cols, BLOCK: tl.constexpr, ONE_BLOCK: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)  # 64-bit: rows * cols may pass 2**31
        x_row = x_ptr + row * cols
        y_row = y_ptr + row * cols
        offs = tl.arange(0, BLOCK)  # the lanes of one block; the compiler spreads them
        if ONE_BLOCK:
            # the whole row in registers: one read, one write
            mask = offs < cols
            x = tl.load(x_row + offs, mask=mask, other=-float("inf")).to(tl.float32)
            e = tl.exp(x - tl.max(x, axis=0))  # padding: exp(-inf) = 0, so it adds nothing
            y = e / tl.sum(e, axis=0)
            tl.store(y_row + offs, y.to(y_ptr.dtype.element_ty), mask=mask)
        else:
            # a long row: the online softmax over tiles, then a second read to write
            m = -float("inf")  # the running max
            total = 0.0  # the running sum of exp(x - m)
            for start in range(0, cols, BLOCK):
                mask = start + offs < cols
                x = tl.load(x_row + start + offs, mask=mask, other=-float("inf")).to(tl.float32)
                m_new = tl.maximum(m, tl.max(x, axis=0))  # finite: every tile has a value
                total = total * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), axis=0)
                m = m_new
            inv = 1.0 / total
            for start in range(0, cols, BLOCK):
                mask = start + offs < cols
                x = tl.load(x_row + start + offs, mask=mask, other=0.0).to(tl.float32)
                y = tl.exp(x - m) * inv
                tl.store(y_row + start + offs, y.to(y_ptr.dtype.element_ty), mask=mask)

    return softmax_kernel


def block_for(cols: int) -> tuple[int, bool, int]:
    """(BLOCK, ONE_BLOCK, num_warps) for rows of ``cols`` columns."""
    return triton_kernels.row_block(cols, MAX_BLOCK, TILE)


@rung(
    name="triton",
    title="Triton: a program per row, the row in registers",
    dtypes=("float32", "float16"),
    needs=("triton",),
    peer=True,
)
def launch(x: Any, out: Any = None) -> Any:
    (x,), out, _ = check_arrays(SOFTMAX, (x,), out, ("float32", "float16"))
    rows, cols = x.shape
    if rows and cols:
        block, one_block, warps = block_for(cols)
        tx, ty = tensors(x, out)
        _kernel()[(rows,)](tx, ty, cols, BLOCK=block, ONE_BLOCK=one_block, num_warps=warps)
    return out
