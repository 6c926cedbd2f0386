"""Fused gather and scatter: the first GEMM reads x's rows where they are, the second
writes each result, gate-weighted, to its token's slot.

What changes: two copies leave. `grouped` copies x's rows into expert order (``gather_rows``)
before the first GEMM, and the combine reads each expert output through slot_row and
multiplies by its gate. Here the first GEMM's loads go through the permutation: row r of
expert e loads x[perm_slot[r] / k] straight into the shared tile (``common.tile_dot`` takes any
row per thread), so the permuted copy of x is never written. The second GEMM's epilogue
multiplies by the row's gate and stores to the row's (token, slot) place, perm_slot[r], so its
output is already in token order, T × k rows; ``combine_slots`` adds each token's k
consecutive rows. The diff from `grouped`: the two kernels' addressing and epilogue, that new
combine, and buffers without the gathered copy; each expert output is now gate-weighted and
rounded to the input dtype before the sum.
Why: the gathered copy of x is T·k·d elements written and read again (at the Mixtral-like size
268 MB of traffic for float16), and the combine's indirect, gate-weighted reads become
contiguous ones.
Prediction: within 1% of `grouped`. The gather it saves takes 0.334 ms at the Mixtral-like size and
0.666 ms at OLMoE's (`wgmma-grouped`'s copy of it,
lab/moe/2026-11-26-split/nvidia-h100-80gb-hbm3-moe-split.json), under 1% of `grouped`'s 536 and 74
ms; the gathered loads are not coalesced across a tile's rows (each comes from anywhere in x), but
each row's 16 elements still are.
Measured: on an NVIDIA H100 (lab/moe/2026-11-26-bench/nvidia-h100-80gb-hbm3-moe.json), float16:
538.382 ms at the Mixtral-like size (`grouped`: 536.623 ms), 74.504 ms at OLMoE's (`grouped`:
73.920 ms).
Verdict: held, as a wash: 0.99x. Saving two memory-bound copies cannot show under CUDA-core
GEMMs over 100 times longer; the gathered rows cost the first GEMM about as much. The fused epilogue
stays (`wgmma-grouped` keeps it); the fused gather cannot follow the GEMMs onto TMA.

Lab notes: docs/notes/moe.md
"""

from typing import Any

import numpy as np
from numba import cuda, float32

from ladder.core.fastcall import numba_array
from ladder.moe.common import (
    ELEMENTWISE,
    TILE,
    Routing,
    grid_for,
    kernel_args,
    silu,
    tile_dot,
    tile_expert,
)
from ladder.moe.problem import moe_rung
from ladder.moe.r03_grouped import grouped_grid


@cuda.jit
def gathered_matmul_silu(x, perm_slot, k, w1, offsets, tile_starts, h):
    """h[rows of e] = silu(x[tokens of those rows] @ w1[e]): rung 3's kernel reading x in place."""
    sa = cuda.shared.array((TILE, TILE), float32)
    sb = cuda.shared.array((TILE, TILE), float32)
    e = tile_expert(tile_starts, cuda.blockIdx.y)
    if e < 0:
        return
    row = offsets[e] + (cuda.blockIdx.y - tile_starts[e]) * TILE + cuda.threadIdx.y
    end = offsets[e + 1]
    col = cuda.blockIdx.x * TILE + cuda.threadIdx.x
    token = perm_slot[row] // k if row < end else -1
    acc = tile_dot(x, token, w1[e], col, sa, sb)
    if row < end and col < h.shape[1]:
        h[row, col] = silu(acc)


@cuda.jit
def scattered_matmul(h, w2, offsets, tile_starts, perm_slot, gates, slots):
    """slots[pair of row] = gate of that pair · (h[row] @ w2[e]): the output in token order."""
    sa = cuda.shared.array((TILE, TILE), float32)
    sb = cuda.shared.array((TILE, TILE), float32)
    e = tile_expert(tile_starts, cuda.blockIdx.y)
    if e < 0:
        return
    row = offsets[e] + (cuda.blockIdx.y - tile_starts[e]) * TILE + cuda.threadIdx.y
    end = offsets[e + 1]
    col = cuda.blockIdx.x * TILE + cuda.threadIdx.x
    acc = tile_dot(h, row if row < end else -1, w2[e], col, sa, sb)
    if row < end and col < slots.shape[1]:
        pair = perm_slot[row]
        k = gates.shape[1]
        slots[pair, col] = gates[pair // k, pair % k] * acc


@cuda.jit
def combine_slots(slots, k, y):
    """y[t, c] = Σ_j slots[t·k + j, c]: the k gate-weighted rows of token t, in slot order."""
    c, t = cuda.grid(2)
    if t < y.shape[0] and c < y.shape[1]:
        acc = float32(0.0)
        for j in range(k):
            acc += float32(slots[t * k + j, c])
        y[t, c] = acc


class Buffers:
    """Rung 3's buffers without the gathered copy of x: the routing's, h, and the slots."""

    def __init__(self, x: Any, w1: Any, w2: Any, k: int) -> None:
        tokens, d = x.shape
        experts, _, f = w1.shape
        self.routing = Routing(tokens, experts, k, TILE)
        self.h = cuda.device_array((tokens * k, f), np.dtype(x.dtype))
        self.slots = cuda.device_array((tokens * k, d), np.dtype(x.dtype))


@moe_rung(
    name="fused-gather-scatter",
    parent="grouped",
    title="Gather fused into the loads, scatter into the epilogue",
    plan=Buffers,
)
def layer(b: Any, x: Any, logits: Any, w1: Any, w2: Any, y: Any, shape: Any, stream: Any) -> None:
    """Route, the first grouped GEMM reading x's rows where they are, the second writing each
    row gate-weighted into its token's slot, then the slots summed per token."""
    k = shape.k
    route = b.routing
    route.run(numba_array(logits), stream)
    rows, block = shape.slots, (TILE, TILE)
    gathered_matmul_silu[grouped_grid(rows, shape.f, shape.experts), block, stream](
        numba_array(x), route.perm_slot, k, numba_array(w1), route.offsets, route.tile_starts, b.h
    )
    scattered_matmul[grouped_grid(rows, shape.d, shape.experts), block, stream](
        b.h, numba_array(w2), route.offsets, route.tile_starts, route.perm_slot, route.gates,
        b.slots,
    )  # fmt: skip
    combine_slots[grid_for(*y.shape), ELEMENTWISE, stream](b.slots, k, numba_array(y))


# what ``ladder check`` compiles for this rung: the kernels it introduces
KERNELS = {
    "gathered_matmul_silu": gathered_matmul_silu,
    "scattered_matmul": scattered_matmul,
    "combine_slots": combine_slots,
}
KERNEL_ARGS = {name: kernel_args(name) for name in KERNELS}
