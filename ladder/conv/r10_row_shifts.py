"""Row shifts packed too: 2 x 2 output blocks fill wgmma's N = 64 (sm_90a only).

What changes: the packing (``r10_row_shifts.cu``: `wgmma`'s kernel with the layout's PACK == 2
paths of ``rewrite_quads``, ``stage_core_matrices`` and ``wgmma_window`` in ``ladder/conv/tc/``).
`wgmma` packs 2 column shifts into each n8 tile, so an A row is a pair of output columns;
`wgmma-blocks` also packs 2 row shifts, as a second n8 tile per 4 filters whose weights sit one
filter row down. An A row is then a 2 x 2 block of outputs, conv2's 16 filters x 2 x 2 shifts fill
N = 64 and conv1's 4 filters N = 16. An m16 tile covers 4 output rows; the quads become input rows
2k, 2k + 2, 2k + 1, 2k + 3 (k = 2i + j), and a window of T tiles loads 2T + 2 quads for its 4T
multiplies. One window covers a channel when K <= 7. On conv2 the planner takes T = 1 (its score
ties with T = 2; this rung takes the smaller T on a tie).
Why: every A register a multiply reads now feeds twice the outputs: per image half the wgmma
instructions, each at a wider shape
(lab/gemm/2026-11-23-wgmma-shapes/nvidia-h200-wgmma-shapes.json: 969 TFLOP/s at N = 64 against 854
at N = 32, and 524 at N = 16 against 280 at N = 8, conv1 on `wgmma`).
Prediction: conv2 issues 80 m64n64k16 per image, about 0.11 ms of tensor time at 969 TFLOP/s.
`wgmma`'s windows took about 6,600 of its 16,638 warp instructions per image; halving them and
keeping the rest (rewrite, staging, epilogue) leaves about 13,000: conv2 near 0.3 ms if it
stayed bound by issuing them, 0.23 ms if the waits went with them. conv1 should gain most:
`wgmma`'s N = 8 is the slowest wgmma shape.
Measured: on an NVIDIA H200 by ``ladder bench`` (results/nvidia-h200.json): conv2 0.381 ms (`wgmma`:
0.383), 3.27x its floor; conv1 0.293 ms (`wgmma`: 0.575, `tensor-core`: 0.224), 1.89x; the sum
26.70x faster than cuDNN FP32. Nsight Compute on conv2
(lab/conv/2026-11-23-row-shifts/nvidia-h200-profile-conv2-row-shifts.json): 17,934 warp
instructions per image (`wgmma`: 16,638), 320 HGMMA per image instead of 768 (Nsight counts an
HGMMA per warp: 4 per wgmma), the schedulers issuing on 51% of cycles.
Verdict: conv1 held (1.97x over `wgmma`, still behind `tensor-core`: 16,334 instructions per image,
issuing on 60% of cycles, DRAM 45% busy, lab/conv/2026-11-23-row-shifts/nvidia-h200-profile-conv1-
row-shifts.json). conv2 missed entirely. A window has a fixed cost, and T = 1 spreads it over 4
multiplies where `wgmma`'s T = 3 spread it over 12. Per region of the SASS (lab/conv/2026-11-23-row-
shifts/nvidia-h200-profile-conv2-row-shifts-sass.json) the windows still take 7,200 instructions per
image (4,960 of loop control, addresses, predicates and quad loads) and the rest did not change
(epilogue 4,269, rewrite 3,156, copy of the next input 1,344). T = 2 halves the windows' share per
multiply, but conv2's 3 jobs then leave one of 2 warpgroups idle in the second round: 0.408 ms
against 0.378 for T = 1 (one-off timings, lab/conv/2026-11-23-row-shifts/nvidia-h200-conv-row-shift-
plans.json).

Lab notes: docs/notes/conv.md#rung-10-wgmma-blocks
"""

import functools
from dataclasses import dataclass
from typing import Any

from ladder.conv.problem import conv_rung
from ladder.conv.tc import plan as tc

SOURCE = tc.source(__file__, "r10_row_shifts.cu", archs=("sm_90a",), arch_specific=True)

TILES = {2: (2, 1), 4: (2, 1), 8: (2, 1)}  # T compiled for each NT (n8 tiles: 2 NT filters)
CHUNKED = (1, 8)  # the chunked kernel's (T, NT)


@dataclass(frozen=True)
class Plan(tc.Layout):
    """Rung 10's launch: warpgroup jobs on 2 x 2 output blocks (row shifts packed too)."""

    packed: bool = True
    row_shifts: bool = True
    job_warps: int = tc.WARPGROUP

    @property
    def kernel_name(self) -> str:
        return f"conv_wgb_{'chunked_' if self.chunked else ''}t{self.tiles}_n{self.n_tiles}"


def n_tiles_for(m: int) -> int:
    """n8 tiles per job: 2 (4 filters x 2 row shifts), 4 or 8 by M."""
    return 2 if m <= tc.PACK_FILTERS else 4 if m <= 2 * tc.PACK_FILTERS else 8


def plan(size: tuple[int, ...], smem_limit: int = tc.SMEM_LIMIT) -> Plan:
    """As rung 9's planner, with 4-row tiles (ties go to the smaller T)."""
    b, c, m, h, w, k = (int(v) for v in size)
    size = (b, c, m, h, w, k)
    ho = h - k + 1
    n_tiles = n_tiles_for(m)
    groups = tc.ceil_div(m, tc.PACK_FILTERS * n_tiles // 2)
    t = tc.pick_warpgroup_tiles(ho, tc.ceil_div(w - k + 1, 2), groups, TILES[n_tiles], tile_rows=4)
    chunked_t, chunked_nt = CHUNKED
    return tc.fit(
        lambda band: Plan(size, t, n_tiles, False, band, c),
        lambda cc: Plan(size, chunked_t, chunked_nt, True, 4 * chunked_t, cc),
        4 * t,
        ho,
        c,
        tc.SMEM_TARGET,
        smem_limit,
    )


@functools.lru_cache(maxsize=64)
def _configured(size: tuple[int, ...], device_id: int, smem_limit: int) -> tc.Configured:
    return tc.configure(plan(size, smem_limit), SOURCE, device_id)


@conv_rung(
    name="wgmma-blocks",
    parent="wgmma",
    title="Hopper: wgmma on 2 x 2 output blocks (row shifts packed too, N = 64 for 16 filters)",
    dtypes=("float16",),
    needs=("cupy",),
    units="tensor",
    sm90a="wgmma",
)
def geometry(x: Any, w: Any, out: Any) -> Any:
    """The configured kernel for this size on this device (``tc.launch_plan``)."""
    return tc.launch_plan(x, w, out, _configured)
