"""One wgmma group per job: every channel's quads in registers, one wait (sm_90a only).

What changes: three parts of `wgmma-blocks`'s kernel (``r11_one_group.cu``). (1) One group per job
(``one_group_job`` in ``ladder/conv/tc/wgmma_jobs.cuh``): the channel count is a compile-time
constant (C = 1 to 4, K <= 7 so that one window covers a channel), and a job loads all
C x (2T + 2) quads at once (64 registers for conv2), fences once, issues its C x 4T multiplies
and waits once; every quad address and descriptor is a constant offset from the first.
(2) A sliding rewrite (``rewrite_quads_sliding`` in tc/staging.cuh): quad k + 1 shares two of
quad k's four rows, so a thread walking a third of a column down loads two pair words per quad
and does no index arithmetic per quad. (3) A leaner epilogue (``store_lean`` in
tc/epilogue.cuh): one pointer per filter, and the row offsets and tests once per job. Shapes
it does not cover (C > 4, K > 7, channels in chunks) run `wgmma-blocks`'s kernels. T is 1 from C = 2
up (at C = 2, T = 2 and N = 64 ptxas serialized the wgmma for want of registers).
Why: `wgmma-blocks` runs one window per channel, 4 windows and 4 waits per conv2 job, each paying
loop control, address arithmetic and predicates for only 4 multiplies; its rewrite recomputes four
addresses and tests for every quad.
Prediction: `wgmma-blocks`'s conv2 profile
(lab/conv/2026-11-23-row-shifts/nvidia-h200-profile-conv2-row-shifts-sass.json) put 7,200 warp
instructions per image in the windows, 3,156 in the rewrite and 4,269 in the epilogue, of 17,934.
One group per job leaves about a fifth of the windows, the sliding rewrite about half of the
rewrite: near 11,000 per image, so conv2 near 0.23 ms if the schedulers kept issuing on half of the
cycles.
Measured: on an NVIDIA H200 by ``ladder bench`` (results/nvidia-h200.json): conv2 0.288 ms
(`wgmma-blocks`: 0.381), 2.47x its floor; conv1 0.234 ms (`wgmma-blocks`: 0.293; `tensor-core`:
0.224), 1.51x; the sum 34.48x faster than cuDNN FP32. Nsight Compute on conv2
(lab/conv/2026-11-23-one-group/nvidia-h200-profile-conv2-one-group.json): 11,223 warp instructions
per image, 320 HGMMA as before, the schedulers issuing on 42.55% of cycles (`wgmma-blocks`: 51%).
Verdict: the instructions went as predicted; the time did not follow them all the way. With
fewer instructions to hide them behind, the waits show (per region,
lab/conv/2026-11-23-one-group/nvidia-h200-profile-conv2-one-group-sass.json): 13.3% of the stall
samples at the first staging barrier, where warps wait for the slowest job of the last round (5
warpgroup jobs for 2 slots: 3 rounds, one slot idle in the last) and for the next image's copy;
18.1% in the multiplies and their wait, 19.6% in the quad loads before them, 21.8% in the epilogue.
2 blocks of 8 warps per SM (128 registers for conv2's kernel) leave 4 warps per scheduler to hide
them.

Lab notes: docs/notes/conv.md#rung-11-wgmma-one-group
"""

import functools
from dataclasses import dataclass
from typing import Any

from ladder.conv import r10_row_shifts as r10
from ladder.conv.problem import conv_rung
from ladder.conv.tc import plan as tc

SOURCE = tc.source(__file__, "r11_one_group.cu", archs=("sm_90a",), arch_specific=True)

TILES = {1: (2, 1), 2: (1,), 3: (1,), 4: (1,)}  # T compiled for each C (K <= 7): C (2T + 2) quads


@dataclass(frozen=True)
class Plan(r10.Plan):
    """Rung 11's launch: rung 10's layout, one wgmma group per job (C in TILES, K <= 7)."""

    @property
    def kernel_name(self) -> str:
        return f"conv_wgj_c{self.size[1]}_t{self.tiles}_n{self.n_tiles}"


def plan(
    size: tuple[int, ...],
    smem_limit: int = tc.SMEM_LIMIT,
    kind: type[Plan] = Plan,
    target: int = tc.SMEM_TARGET,
) -> Plan | None:
    """Rung 10's layout with T from TILES[C], where a job can hold every channel's quads (C in
    TILES), one window covers a channel (K + 1 <= 8: the row-shifted copy reaches row K) and
    no channel chunks are needed; else None, and rung 10 runs."""
    b, c, m, h, w, k = (int(v) for v in size)
    size = (b, c, m, h, w, k)
    if c not in TILES or k + 1 > tc.P_BLOCK:
        return None
    ho = h - k + 1
    n_tiles = r10.n_tiles_for(m)
    groups = tc.ceil_div(m, tc.PACK_FILTERS * n_tiles // 2)
    t = tc.pick_warpgroup_tiles(ho, tc.ceil_div(w - k + 1, 2), groups, TILES[c], tile_rows=4)
    found = tc.fit(
        lambda band: kind(size, t, n_tiles, False, band, c), None, 4 * t, ho, c, target, smem_limit
    )
    return found  # type: ignore[return-value]


@functools.lru_cache(maxsize=64)
def _configured(size: tuple[int, ...], device_id: int, smem_limit: int) -> tc.Configured | None:
    found = plan(size, smem_limit)
    return None if found is None else tc.configure(found, SOURCE, device_id)


@conv_rung(
    name="wgmma-one-group",
    parent="wgmma-blocks",
    title="Hopper: one wgmma group per job (every channel's quads in registers, one wait)",
    dtypes=("float16",),
    needs=("cupy",),
    units="tensor",
    sm90a="wgmma",
)
def geometry(x: Any, w: Any, out: Any) -> Any:
    """The configured kernel for this size on this device (``tc.launch_plan``), or
    `wgmma-blocks`'s where this rung's kernel does not apply."""
    return tc.launch_plan(x, w, out, _configured, fallback=r10.geometry)
