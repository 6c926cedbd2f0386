"""Sorted tokens: count, scan and permute on the GPU, so each expert's rows are contiguous.

What changes: the host no longer reads every token's experts. Four small kernels route
(``common.Routing``): ``top_k_softmax`` as in `expert-loop`; ``count_experts`` adds one per (token,
expert) pair to its expert's counter (atomics); ``scan_offsets`` turns the counts into each
expert's first row (an exclusive prefix sum: E is small, so one thread does it); ``permute`` gives
each pair a row of its expert by an atomic take from that expert's cursor, and records both
directions (row → pair, pair → row). ``common.gather_rows`` copies x's rows into that order once
for all experts, so expert e's rows are one contiguous slice, offsets[e] .. offsets[e+1]. The host
reads only those E + 1 offsets (one wait instead of `expert-loop`'s T·k ids) and loops over the
experts with slices, no per-expert index arrays or allocations; ``common.combine`` sums each
token's k rows back, gate-weighted, in slot order (the same sum on every call). The experts'
outputs are stored in the input dtype (`expert-loop` kept them in float32): one more rounding.
Why: `expert-loop`'s host work grows with T·k (NumPy over every id, an upload per expert); sorting
on the GPU makes it O(E), and the slices make each expert's GEMM read contiguous rows.
Prediction: the same GEMMs as `expert-loop` (about 490 and 70 ms), and most of `expert-loop`'s time
above them gone: a few percent at the Mixtral-like size, most of the 65 ms at OLMoE's.
Measured: on an NVIDIA H100 (lab/moe/2026-11-26-bench/nvidia-h100-80gb-hbm3-moe.json), float16:
536.201 ms at the Mixtral-like size (`expert-loop`: 557.052 ms), 77.195 ms at OLMoE's
(`expert-loop`: 135.547 ms); the host's time per call fell from 558,833 to 4,823 µs and from
137,247 to 26,785 µs.
Verdict: held: 1.04x `expert-loop` with 8 big experts, 1.76x with 64 small ones. The host still
waits for the offsets and then queues 2·E GEMMs; at E = 64 that queue is most of its time.

Lab notes: docs/notes/moe.md
"""

from typing import Any

import numpy as np
from numba import cuda

from ladder.core.fastcall import numba_array
from ladder.moe.common import (
    ELEMENTWISE,
    TILE,
    Routing,
    combine,
    count_experts,
    gather_rows,
    grid_for,
    kernel_args,
    matmul,
    matmul_grid,
    matmul_silu,
    permute,
    scan_offsets,
)
from ladder.moe.problem import moe_rung


class Buffers:
    """A call's device buffers for one signature of the operands: the routing's, and x's
    rows in expert order, h and the experts' outputs (T·k rows each, in the input's dtype)."""

    def __init__(self, x: Any, w1: Any, w2: Any, k: int) -> None:
        tokens, d = x.shape
        experts, _, f = w1.shape
        dtype = np.dtype(x.dtype)
        self.routing = Routing(tokens, experts, k, TILE)
        self.rows = cuda.device_array((tokens * k, d), dtype)
        self.h = cuda.device_array((tokens * k, f), dtype)
        self.expert_out = cuda.device_array((tokens * k, d), dtype)


@moe_rung(
    name="sorted-tokens",
    parent="expert-loop",
    title="Count, scan and permute on the GPU; contiguous experts",
    plan=Buffers,
    not_in_a_graph="cannot be captured: moe rung 2 reads the offsets on the host",
)
def layer(b: Any, x: Any, logits: Any, w1: Any, w2: Any, y: Any, shape: Any, stream: Any) -> None:
    """Route (count, scan, permute) into the plan's buffers, gather the rows in expert order,
    read the E + 1 offsets on the host, the two GEMMs per expert, combine."""
    k = shape.k
    nw1, nw2 = numba_array(w1), numba_array(w2)
    route = b.routing
    route.run(numba_array(logits), stream)
    rows = shape.slots
    gather_rows[grid_for(rows, shape.d), ELEMENTWISE, stream](
        numba_array(x), route.perm_slot, k, b.rows
    )
    offsets = route.offsets.copy_to_host(stream=stream)
    if stream:
        stream.synchronize()  # the host waits for the E + 1 offsets only
    for e in range(shape.experts):
        lo, hi = int(offsets[e]), int(offsets[e + 1])
        if hi == lo:
            continue
        matmul_silu[matmul_grid(hi - lo, shape.f), (TILE, TILE), stream](
            b.rows[lo:hi], nw1[e], b.h[lo:hi]
        )
        matmul[matmul_grid(hi - lo, shape.d), (TILE, TILE), stream](
            b.h[lo:hi], nw2[e], b.expert_out[lo:hi]
        )
    combine[grid_for(*y.shape), ELEMENTWISE, stream](
        b.expert_out, route.slot_row, route.gates, numba_array(y)
    )


# what ``ladder check`` compiles for this rung: the kernels it introduces
KERNELS = {
    "count_experts": count_experts,
    "scan_offsets": scan_offsets,
    "permute": permute,
    "gather_rows": gather_rows,
    "combine": combine,
}
KERNEL_ARGS = {name: kernel_args(name) for name in KERNELS}
