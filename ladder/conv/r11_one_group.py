"""Rung 11, one wgmma group per job: every channel's quads in registers, one wait (sm_90a only).

What changes from rung 10 (``r11_one_group.cu``: rung 10's kernel with one group per job,
``one_group_job``, the sliding rewrite and the leaner epilogue, ``store_lean``):

- Rung 10 runs one window per channel: load its quads, fence, 4 multiplies (T = 1), commit,
  wait. On conv2 that is 4 windows and 4 waits per job, and each window pays its loop control,
  address arithmetic and predicates again for only 4 multiplies. Here the channel count is a
  compile-time constant (C = 1 to 4, K <= 7 so that one window covers a channel), and a job
  loads all C x (2T + 2) quads at once (64 registers for conv2), fences once, issues its
  C x 4T multiplies and waits once; every quad address and descriptor is a constant offset from
  the first (ptxas folds the zero accumulators into the first multiply).
- The rewrite of the raw input into quads slides down column segments: quad k + 1 holds input
  rows 2k + 2 .. 2k + 5, two of quad k's four, so a thread that walks a third of a column down
  loads two pair words per quad and does no index arithmetic per quad (rung 10: a thread takes
  quads THREADS apart and recomputes four addresses and tests for each).
- The epilogue keeps one pointer per filter (rung 10 builds one per n8 tile: two per filter at
  the two row shifts) and the row offsets and tests once per job.

Shapes rung 11 does not cover (C > 4, K > 7, channels staged in chunks) run rung 10's kernels.
T is 1 from C = 2 up (at C = 2, T = 2 and N = 64, ptxas serialized the wgmma for want of
registers, C7512); at C = 1 the planner chooses T as for rung 10.

Prediction. Rung 10's profile of conv2 (results/nvidia-h200-profile-conv2-row-shifts-sass.json)
put 7,200 warp instructions per image in the windows, 3,156 in the rewrite and 4,269 in the
epilogue, of 17,934. One group per job was to leave about a fifth of the windows, the sliding
rewrite about half of the rewrite: near 11,000 instructions per image, so 0.23 ms for conv2 if
the schedulers kept issuing on half of the cycles, as on rung 10.

Measured by ``ladder bench`` (results/nvidia-h200.json as of commit f7426fa): conv2 0.290 ms
against rung 10's 0.381 in the same run, 2.48x its floor (target: within 2x, 0.234 ms: missed);
conv1 0.235 ms (1.51x its floor; rung 8: 0.223); the sum 0.526 ms, 35.88x cuDNN FP32's 18.856
ms, then the best sum on the ladder. Nsight Compute
(results/nvidia-h200-profile-conv2-one-group.json): 11,223 warp instructions per image on conv2
(rung 10: 17,934), 320 HGMMA per image as before, but the schedulers issue on 42.55% of cycles
(rung 10: 51%). The instructions went as predicted; the time did not follow them all the way.

Why. Per region (results/nvidia-h200-profile-conv2-one-group-sass.json, a one-off ncu run):
the multiplies and their one wait take 1,640 instructions per image, the quad loads and job
setup 1,940 (rung 10's windows: 7,200 together), the rewrite 1,649 (3,156), the epilogue
3,690 (4,269), the copy of the next input 1,285. With fewer instructions to hide them behind,
the waits show: 13% of the stall samples at the first staging barrier, where warps that
finished their jobs wait for the others (conv2 has 5 warpgroup jobs for 2 slots: 3 rounds,
one slot idle in the last) and for the next image's copy, 18% in the multiplies and their wait
and 20% in the quad loads before them, 22% in the epilogue. 2 blocks of 8 warps per SM (128
registers for conv2's kernel) leave 4 warps per scheduler to hide them with.

What limits conv2 now: not instructions alone but latency that 16 warps per SM cannot cover,
the staging barriers (every warp waits for the rewrite, and for the slowest job of the last
round) and the wgmma wait, after which each warpgroup stores its outputs before it can start
the next job. Next steps: warp specialization (a producer warpgroup that copies and rewrites
the next image while the others compute, so that no barrier spans the whole block), or
accumulators for two jobs so that a job's multiplies overlap the previous job's stores; both
need registers this kernel does not have at 2 blocks per SM.

ptxas (``ladder check conv --rungs wgmma-one-group``, sm_90a, ``__launch_bounds__(256, 2)``):
conv_wgj_c4_t1_n8 (conv2) 128 registers, conv_wgj_c1_t2_n2 (conv1) 70, the others 64 to 124;
no spills, and nvcc's ptxas prints no wgmma serialization notes (C75xx). compute-sanitizer's
memcheck and racecheck report no errors (results/nvidia-h200-sanitize-conv.json). Checked
without a GPU by ``tests/test_conv_tensor_core_emulation.py``: the lane-level emulation runs
the one-group job, the sliding rewrite and the per-filter epilogue on every rung-11 kernel
variant, odd shapes, K = 1, 5, 6 and 7, bands of rows, and the fallbacks to rung 10.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from ladder.conv import r10_row_shifts as r10
from ladder.conv.tc import plan as tc
from ladder.core.rung import rung

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


@rung(
    name="wgmma-one-group",
    title="Hopper: one wgmma group per job (every channel's quads in registers, one wait)",
    dtypes=("float16",),
    needs=("cupy",),
    units="tensor",
    min_cc=(9, 0),
    max_cc=(9, 0),
)
def launch(x: Any, w: Any, out: Any = None, *, stream: Any = 0) -> Any:
    return tc.launch(x, w, out, stream, _configured, fallback=r10.launch)
