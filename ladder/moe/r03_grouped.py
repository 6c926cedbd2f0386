"""Grouped: one launch per GEMM for all experts, scheduled by tiles on the GPU.

What changes: `sorted-tokens`'s loop over experts becomes one launch per weight matrix.
``scan_offsets`` already counts each expert's tiles of 16 rows (tile_starts, its second prefix
sum), so block row b of the grid works for the expert e with tile_starts[e] <= b < tile_starts[e +
1] (``common.tile_expert``; experts with no rows have no tiles), on rows offsets[e] + 16·(b -
tile_starts[e]) onward, and multiplies by w1[e] (or w2[e]). The host cannot know how many tiles
there are without waiting for the GPU, so the grid has as many block rows as there can ever be, T·k
/ 16 + E rounded up, and the blocks past the last tile return at once. Nothing comes back to the
host: the whole layer is eight kernels queued in a row (four route, then the gather, the two GEMMs
and the combine), and can be captured in a CUDA graph. The block's loop is `sorted-tokens`'s GEMM
(``common.tile_dot``); only the scheduling is new. The same kernel is this rung of
``grouped-gemm``, the expert GEMM alone, whose offsets come from the caller: the one-thread kernel
that makes their schedule checks them too (no copy, no wait), and bad ones get no tiles and a
ValueError later (``launch_grouped_gemm``).
Why: `sorted-tokens` waits for the offsets, then launches 2·E GEMMs from the host one after the
other; where the experts' GEMMs are short, the host's launches set the pace (at OLMoE's size
`sorted-tokens` spends 26,785 µs of host time per call). One grid per GEMM, whatever E, and no
wait.
Prediction: within a few percent of `sorted-tokens` at both benchmark sizes, where the GPU's 536 and
77 ms of GEMMs hide the host's launches; many times faster where the experts are small enough
that the launches are the time (float32 at a quarter of OLMoE's widths).
Measured: on an NVIDIA H100 (lab/moe/2026-11-26-bench/nvidia-h100-80gb-hbm3-moe.json), float16:
536.623 ms at the Mixtral-like size (`sorted-tokens`: 536.201 ms), 73.920 ms at OLMoE's
(`sorted-tokens`: 77.195 ms); host time per call 765 and 845 µs. Float32 at a quarter of OLMoE's
widths (T = 2048, d = 512, f = 256): 1.516 ms against `sorted-tokens`'s 26.828 ms, and a CUDA graph
replays it. The first expert GEMM alone (``grouped-gemm``) on an NVIDIA H200 by ``ladder bench``
(results/nvidia-h200.json), against PyTorch's loop of one matmul per group (offsets read on the
host): float32 at a quarter of the widths, 0.696 ms with 64 groups (16384 × 512 × 256) against the
loop's 1.375 ms, 4.035 ms with 8 (4096 × 1024 × 3584) against its 0.898 ms; float16 at the full
sizes, 270.085 and 36.368 ms (7.12 and 7.56 TFLOP/s), half the rows in group 0 270.243 and 36.079
ms, against ``torch._grouped_mm``'s 2.518 and 1.440 ms.
Verdict: held: 1.00x and 1.04x at the benchmark sizes; 17.7x at the quarter size, where
`sorted-tokens`'s host time per call (26,527 µs) was nearly all of its 26.828 ms. The GEMM alone on
the H200 shows the same trade against a host loop: 1.98x the loop's speed with 64 small groups,
where the loop's host time per call (1,416 µs) is about all of its time, and 0.22x with 8 large
ones, where cuBLAS's FP32 GEMM (33.47 TFLOP/s) outruns these 16 × 16 tiles (7.45); in float16 0.009x
and 0.040x the tensor cores of ``torch._grouped_mm``, the step `wgmma-grouped` takes.

Lab notes: docs/notes/moe.md
"""

from typing import Any

import numpy as np
from numba import cuda, float32

from ladder.core.fastcall import numba_array
from ladder.moe.common import (
    ELEMENTWISE,
    TILE,
    OffsetsCheck,
    combine,
    gather_rows,
    grid_for,
    kernel_args,
    max_tiles,
    silu,
    tile_dot,
    tile_expert,
    tile_starts_of,
)
from ladder.moe.problem import grouped_rung, moe_rung
from ladder.moe.r02_sorted_tokens import Buffers


@cuda.jit
def grouped_matmul_silu(rows, w1, offsets, tile_starts, h):
    """h[rows of e] = silu(rows[rows of e] @ w1[e]), every expert in one grid."""
    sa = cuda.shared.array((TILE, TILE), float32)
    sb = cuda.shared.array((TILE, TILE), float32)
    e = tile_expert(tile_starts, cuda.blockIdx.y)
    if e < 0:
        return  # the whole block: past the last tile
    row = offsets[e] + (cuda.blockIdx.y - tile_starts[e]) * TILE + cuda.threadIdx.y
    end = min(offsets[e + 1], rows.shape[0])
    col = cuda.blockIdx.x * TILE + cuda.threadIdx.x
    acc = tile_dot(rows, row if row < end else -1, w1[e], col, sa, sb)
    if row < end and col < h.shape[1]:
        h[row, col] = silu(acc)


@cuda.jit
def grouped_matmul(a, w, offsets, tile_starts, out):
    """out[rows of e] = a[rows of e] @ w[e], every expert in one grid."""
    sa = cuda.shared.array((TILE, TILE), float32)
    sb = cuda.shared.array((TILE, TILE), float32)
    e = tile_expert(tile_starts, cuda.blockIdx.y)
    if e < 0:
        return
    row = offsets[e] + (cuda.blockIdx.y - tile_starts[e]) * TILE + cuda.threadIdx.y
    end = min(offsets[e + 1], a.shape[0])
    col = cuda.blockIdx.x * TILE + cuda.threadIdx.x
    acc = tile_dot(a, row if row < end else -1, w[e], col, sa, sb)
    if row < end and col < out.shape[1]:
        out[row, col] = acc


def grouped_grid(rows: int, cols: int, experts: int) -> tuple[int, int]:
    """Column tiles by the most row tiles there can be (``common.max_tiles``)."""
    return (max(1, -(-cols // TILE)), max(1, max_tiles(rows, experts, TILE)))


@moe_rung(
    name="grouped",
    parent="sorted-tokens",
    title="One grouped launch per GEMM, tiles scheduled on the GPU",
    plan=Buffers,
)
def layer(b: Any, x: Any, logits: Any, w1: Any, w2: Any, y: Any, shape: Any, stream: Any) -> None:
    """Route, gather, one grouped launch per GEMM over every expert's tiles (the grid sized for
    the most tiles there can be), combine: nothing comes back to the host."""
    k = shape.k
    route = b.routing
    route.run(numba_array(logits), stream)
    rows, block = shape.slots, (TILE, TILE)
    gather_rows[grid_for(rows, shape.d), ELEMENTWISE, stream](
        numba_array(x), route.perm_slot, k, b.rows
    )
    grouped_matmul_silu[grouped_grid(rows, shape.f, shape.experts), block, stream](
        b.rows, numba_array(w1), route.offsets, route.tile_starts, b.h
    )
    grouped_matmul[grouped_grid(rows, shape.d, shape.experts), block, stream](
        b.h, numba_array(w2), route.offsets, route.tile_starts, b.expert_out
    )
    combine[grid_for(*y.shape), ELEMENTWISE, stream](
        b.expert_out, route.slot_row, route.gates, numba_array(y)
    )


def tile_starts_for(a: Any, w: Any, offsets: Any, out: Any) -> Any:
    """The grouped GEMM's plan: a device array for each expert's first tile."""
    return cuda.device_array(offsets.shape, np.int32)


OFFSETS = OffsetsCheck("grouped-gemm/grouped")


@grouped_rung(
    name="grouped",
    parent=None,
    title="One grouped launch, tiles scheduled on the GPU",
    plan=tile_starts_for,
    offsets_check=OFFSETS,
)
def grouped_gemm(tile_starts: Any, a: Any, w: Any, offsets: Any, out: Any, stream: Any) -> None:
    """out[rows of e] = a[rows of e] @ w[e], expert e owning rows offsets[e] to offsets[e + 1]
    (int32, E + 1 of them, on the device): they must start at 0, never decrease and end at M.
    The call checks them on the GPU, in ``tile_starts_of``, and neither copies them to the host
    nor waits: it trusts no offset, only defers the report. Bad offsets get no tiles, so no
    block reads or writes a row (out is left as it was), and the ValueError naming offsets
    comes at the next call of this launcher, before it launches anything, or from
    ``check_offsets()``, which waits for the GPU: call it after the last call, and after
    replaying a graph (a replay runs no Python)."""
    noffs = numba_array(offsets)
    tile_starts_of[1, 1, stream](noffs, a.shape[0], TILE, tile_starts, OFFSETS.status)
    grouped_matmul[grouped_grid(a.shape[0], out.shape[1], w.shape[0]), (TILE, TILE), stream](
        numba_array(a), numba_array(w), noffs, tile_starts, numba_array(out)
    )


def check_offsets() -> None:
    """Wait for the GPU; raise ValueError (naming offsets) if a call of ``launch_grouped_gemm``
    not yet reported had bad offsets."""
    OFFSETS.check()


# what ``ladder check`` compiles for this rung: the kernels it introduces
KERNELS = {
    "grouped_matmul_silu": grouped_matmul_silu,
    "grouped_matmul": grouped_matmul,
    "tile_starts_of": tile_starts_of,
}
KERNEL_ARGS = {name: kernel_args(name) for name in KERNELS}
