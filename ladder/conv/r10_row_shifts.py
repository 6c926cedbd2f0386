"""Rung 10, row shifts packed too: 2 x 2 output blocks fill wgmma's N = 64 (sm_90a only).

What changes from rung 9 is the packing (``r10_row_shifts.cu``: rung 9's kernel with the
layout's PACK == 2 paths in ``ladder/conv/tc/``). Rung 9 packs 2 column shifts into each n8
tile, so an A row is a pair of output columns; rung 10 also packs 2 row shifts, as a second n8
tile per group of 4 filters whose weights sit one filter row down: an A row is a 2 x 2 block of
outputs, and conv2's 16 filters x 2 column shifts x 2 row shifts fill N = 64. An m16 tile is
then 4 output rows (A row g: block row 2i, A row g + 8: block row 2i + 1), and the A registers
of tile i at k16 step j are input rows 2k, 2k + 2, 2k + 1, 2k + 3 with k = 2i + j, staged by the
rewrite as one 16-byte quad (rung 9's quads are rows 2k, 2k + 1, 2k + 1, 2k + 2 with k = i + j).
A window of T tiles loads 2T + 2 quads for its 4T multiplies. A window spans 8 input rows below
each block row: filter rows 0 to 7 at row shift 0 and -1 to 6 at shift 1, so K = 7 needs one
window per channel, and a filter of K rows ceil((K + 1) / 8) (as the column shift's chunks).
conv1's 4 filters fill N = 16.

Why. Every A register a multiply reads now feeds twice the outputs: per image half the wgmma
instructions, each at a wider shape (and, at the same T, half the quad loads). The
microbenchmark rung 9 cites (results/nvidia-h200-wgmma-shapes.json) measured wgmma with A in
registers at 969 TFLOP/s for N = 64 against 854 for N = 32, and 524 for N = 16 against 280 for
N = 8 (conv1 on rung 9).

Prediction. conv2 at T = 1 issues 80 m64n64k16 per image (10.5 MFLOP-equivalent against
rung 9's 12.6), about 0.11 ms of tensor time at 969 TFLOP/s. Rung 9's windows took about
6,600 of its 16,638 warp instructions per image (7,936 before its leaner windows, which cut
105 instructions per window to 87); halving them and keeping the rest
(rewrite, staging, epilogue) would leave about 13,000, so conv2 near 0.3 ms if it stayed bound
by issuing them, 0.23 ms if the waits went with them. conv1 should gain most: rung 9's N = 8
is the slowest wgmma shape.

Measured by ``ladder bench`` (results/nvidia-h200.json as of commit 1cf1c44): conv2 0.377 ms
against rung 9's 0.380 in the same run, 3.24x its floor (target: within 2x, missed); conv1 0.291
ms against rung 9's 0.571 and rung 8's 0.222, 1.88x its floor; the sum 0.668 ms, 28.17x cuDNN
FP32's 18.815 ms, then the best sum on the ladder (rung 8: 0.740 ms). The prediction missed
conv2 entirely.

Why. Nsight Compute (results/nvidia-h200-profile-conv2-row-shifts.json) counts 17,934 warp
instructions per image on conv2, more than rung 9's 16,638, with 320 HGMMA per image instead
of 768 and the schedulers issuing on 51% of cycles (rung 9: 47%). Per region
(results/nvidia-h200-profile-conv2-row-shifts-sass.json, a one-off ncu run): the windows
still take 7,200 (4,960 of loop control, addresses, predicates and quad loads, 1,520 around
the multiplies, 720 at the wait), because a window has a fixed cost and a T = 1 window spreads
it over 4 multiplies where rung 9's T = 3 spread it over 12; the rest did not change at all:
the epilogue 4,269, the rewrite 3,156, the copy of the next input 1,344, job setup 1,048. The
stall samples follow: 42% in the windows (13% around the multiplies, 12% at the wait), 16% in
the epilogue, 14% in the rewrite, 15% at the two staging barriers. T = 2 halves the windows'
share per multiply, but 3 jobs then fill two rounds of 2 warpgroups, one idle in the second:
T = 2 measured 0.408 ms and T = 1 0.378 on conv2 (one-off timings,
results/nvidia-h200-conv-row-shift-plans.json; on conv1 T = 2 0.290 against 0.352), so the
planner, whose score ties on conv2, takes the smaller T on a tie for this rung. conv1 runs at
1.88x its floor with 16,334 instructions per image, issuing on 60% of cycles with DRAM 45% busy
(results/nvidia-h200-profile-conv1-row-shifts.json): issue-bound, like rung 8, which has fewer
instructions per image on it.

What limits conv2 now: the work of an image outside its windows, about 10,700 warp
instructions (rewrite, copy, barriers, setup, epilogue) that the same warps issue between the
windows, and the windows' fixed costs on top. Next steps: one window per job for all of a
small C (conv2: 4 channels, 16 quads, one wait instead of four), the rewrite taken off the
warps that compute (a producer warpgroup, or quads copied in place by cp.async), and stores
staged through shared memory so that whole lines leave at once.

ptxas (``ladder check conv --rungs wgmma-blocks``, sm_90a, ``__launch_bounds__(256, 2)``):
conv_wgb_t1_n8 94 registers, conv_wgb_t2_n8 122, conv_wgb_t2_n4 101, conv_wgb_t1_n4 77,
conv_wgb_t2_n2 87, conv_wgb_t1_n2 70, conv_wgb_chunked_t1_n8 98; no spills, and nvcc's ptxas
prints no wgmma serialization notes (C75xx). compute-sanitizer's memcheck and racecheck report
no errors (results/nvidia-h200-sanitize-conv.json). Checked without a GPU by
``tests/test_conv_tensor_core_emulation.py``: the lane-level emulation of rungs 8 and 9 with
the row shifts (quads, weights, windows, both epilogues), on odd shapes, K = 1, 5, 7, 8 and
12, channel chunks, bands and 20 and 40 filters.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from ladder.conv.tc import plan as tc
from ladder.core.rung import rung

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


@rung(
    name="wgmma-blocks",
    title="Hopper: wgmma on 2 x 2 output blocks (row shifts packed too, N = 64 for 16 filters)",
    dtypes=("float16",),
    needs=("cupy",),
    units="tensor",
    min_cc=(9, 0),
    max_cc=(9, 0),
)
def launch(x: Any, w: Any, out: Any = None, *, stream: Any = 0) -> Any:
    return tc.launch(x, w, out, stream, _configured)
