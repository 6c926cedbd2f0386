"""Hopper's warpgroup MMA: `tensor-core`'s fused convolution issued as wgmma (sm_90a only).

What changes: how the multiply is issued (``r09_wgmma.cu``). A job belongs to a warpgroup of 4
warps instead of one warp, and each k16 step is one ``wgmma.mma_async.m64nNk16`` for the whole
group: each warp supplies its own 16 A rows from its registers (the quads, as on `tensor-core`). The
weights are not loaded into registers at all: wgmma reads them from shared memory through a
matrix descriptor, so they are staged as 8 x 8 core matrices (``stage_core_matrices`` in
``ladder/conv/tc/wgmma_jobs.cuh``). wgmma is asynchronous: a window loads its quads, fences, issues
its multiplies as one group and waits for that group before the next window overwrites the same
A registers (``wgmma_window``). Every job is packed, N = 8, 16 or 32 by the number of filters
(conv2's 16 filters x 2 column shifts fill m64n32k16); the staging and epilogue are `tensor-core`'s.
Why: at mma.sync's rate conv2's tensor work alone fills most of its 2x budget (`tensor-core`). A
microbenchmark on the H200 (lab/gemm/2026-11-23-wgmma-shapes/nvidia-h200-wgmma-shapes.json, constant
operands, so upper bounds; a whole GEMM on mma.sync reaches 451, `gemm/warp-tile-64`): mma.sync
m16n8k16 631 TFLOP/s at best, wgmma with A in registers 280 (N = 8), 524 (16), 854 (32), 969 (64).
And the B fragment loads (8 of `tensor-core`'s 17 loads per window) leave the window.
Prediction: conv2 on m64n32k16 at about 850 TFLOP/s: with T = 3, 768 A rows per image, 126
GFLOP-equivalent, about 0.15 ms of tensor time; if staging, rewrite and epilogue overlapped as on
`tensor-core`, conv2 falls from 0.52 toward 0.3 ms. conv1 gets slower: its 4 filters make N = 8,
the shape that reaches 280 TFLOP/s, under half of mma.sync.
Measured: on an NVIDIA H200 by ``ladder bench`` (results/nvidia-h200.json): conv2 0.383 ms
(`tensor-core`: 0.519), 3.29x its floor; conv1 0.575 ms (`tensor-core`: 0.224), 3.72x; the sum
18.77x faster than cuDNN FP32. Nsight Compute on conv2
(lab/conv/2026-11-23-wgmma/nvidia-h200-profile-conv2-wgmma-lean.json): 16,638 warp instructions per
image, the schedulers issuing on 47% of cycles, HGMMA far from busy.
Verdict: conv1 held (slower, as predicted); conv2 is 1.35x faster than on `tensor-core` but missed
0.3 ms and its target (within 2x of the floor). The tensor cores were never the limit: the
first version ran 19,792 instructions per image, about `tensor-core`'s, and its stall samples
(lab/conv/2026-11-23-wgmma/nvidia-h200-profile-conv2-wgmma-sass.json) sat 41% in the windows, 29% in
the epilogue, 12% in the rewrite and 12% at the second staging barrier. Each window must wait for
its own group (leaving one in flight gave wrong results; two alternating windows made ptxas
serialize every wgmma), so removing the B loads took instructions out and the wait put time back.
Leaner stores then cut 16% of the instructions, but issue fell from 52% to 47% of cycles: conv2
waits, it does not issue. conv1 stays best on `tensor-core`.

Lab notes: docs/notes/conv.md#rung-9-wgmma
"""

import functools
from dataclasses import dataclass
from typing import Any

from ladder.conv.problem import conv_rung
from ladder.conv.tc import plan as tc

SOURCE = tc.source(__file__, "r09_wgmma.cu", archs=("sm_90a",), arch_specific=True)

TILES = {1: (1,), 2: (1,), 4: (3, 2, 1)}  # T compiled for each NT (n8 tiles: 4 NT filters)
CHUNKED = (1, 4)  # the chunked kernel's (T, NT)


@dataclass(frozen=True)
class Plan(tc.Layout):
    """Rung 9's launch: packed warpgroup jobs on wgmma."""

    packed: bool = True
    job_warps: int = tc.WARPGROUP

    @property
    def kernel_name(self) -> str:
        return f"conv_wg_{'chunked_' if self.chunked else ''}t{self.tiles}_n{self.n_tiles}"


def plan(size: tuple[int, ...], smem_limit: int = tc.SMEM_LIMIT) -> Plan:
    """As rung 8's planner, with NT = 1, 2 or 4 n8 tiles by M (4 filters each) and T for the
    fewest rounds of warpgroup jobs per image (``tc.pick_warpgroup_tiles``)."""
    b, c, m, h, w, k = (int(v) for v in size)
    size = (b, c, m, h, w, k)
    ho = h - k + 1
    n_tiles = 1 if m <= tc.PACK_FILTERS else 2 if m <= 2 * tc.PACK_FILTERS else 4
    groups = tc.ceil_div(m, tc.PACK_FILTERS * n_tiles)
    t = tc.pick_warpgroup_tiles(ho, tc.ceil_div(w - k + 1, 2), groups, TILES[n_tiles])
    chunked_t, chunked_nt = CHUNKED
    return tc.fit(
        lambda band: Plan(size, t, n_tiles, False, band, c),
        lambda cc: Plan(size, chunked_t, chunked_nt, True, 2 * chunked_t, cc),
        2 * t,
        ho,
        c,
        tc.SMEM_TARGET,
        smem_limit,
    )


@functools.lru_cache(maxsize=64)
def _configured(size: tuple[int, ...], device_id: int, smem_limit: int) -> tc.Configured:
    return tc.configure(plan(size, smem_limit), SOURCE, device_id)


@conv_rung(
    name="wgmma",
    parent="tensor-core",
    title="Hopper: the fused convolution on wgmma (warpgroup jobs, weights from shared memory)",
    dtypes=("float16",),
    needs=("cupy",),
    units="tensor",
    sm90a="wgmma",
)
def geometry(x: Any, w: Any, out: Any) -> Any:
    """The configured kernel for this size on this device (``tc.launch_plan``)."""
    return tc.launch_plan(x, w, out, _configured)
