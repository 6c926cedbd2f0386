"""Rung 9, Hopper's warpgroup MMA: rung 8's fused convolution issued as wgmma (sm_90a only).

What changes from rung 8 is how the multiply is issued (``r09_wgmma.cu``, a copy of rung 8's
kernel: a job belongs to a warpgroup of 4 warps instead of one warp, each k16 step is one
``wgmma.mma_async.m64nNk16`` for the whole group (each warp supplies its own 16 A rows from its
own registers: the A fragment of wgmma's register form is mma.sync's), and the weights are not
loaded into registers at all: wgmma reads them from shared memory through a matrix descriptor,
so they are staged as 8 x 8 "core matrices" (PTX's K-major layout without swizzle) instead of
per-lane fragments. The staging, the A quads, the packing and the epilogue are rung 8's. Every
job is packed (4 filters x 2 column shifts per n8 tile), with N = 8, 16 or 32 (NT = 1, 2 or 4 n8
tiles) by the number of filters: conv2's 16 filters x 2 shifts fill m64n32k16.

Why. Rung 8's docstring ends on arithmetic: at mma.sync's rate conv2's tensor work alone fills
most of twice its floor. A microbenchmark on the H200 (results/nvidia-h200-wgmma-shapes.json,
constant operands, so upper bounds) measured what each instruction shape can reach: mma.sync
m16n8k16 631 TFLOP/s at best, wgmma with A in registers 280 (N = 8), 524 (N = 16), 854 (N =
32) and 969 (N = 64). The same run checked the layouts this rung relies on: one m64nNk16
against NumPy for N = 8, 16 and 32 is exact with the descriptor's LBO = 128 bytes (between the
two k8 halves of an entry) and SBO = 256 (between n8 tiles), and wrong with the two swapped.

Prediction. conv2 on m64n32k16 at about 850 TFLOP/s: with T = 3 (the planner's choice, below)
a job computes 768 A rows per image, 126 GFLOP-equivalent over 10,000 images, about 0.15 ms of
tensor time (rung 8's mma.sync work took about 0.2 ms at its GEMM-ladder rate), and wgmma
takes the B fragment loads (8 of rung 8's 17 loads per window) and their address arithmetic
out of the window. If the rest (staging, rewrite, epilogue) overlapped as well as on rung 8,
conv2 would fall from 0.52 toward 0.3 ms. conv1 should get slower: it has 4 filters, so its
packed tiles are N = 8, the shape that reaches 280 TFLOP/s, less than half of mma.sync.

Three things the first version got wrong, each found on the GPU and each a rule of wgmma:
- ptxas keeps the A registers of every wgmma that has not completed alive, and serialized all
  multiplies (its warning C7511) when a window per filter-row count (rung 8's switch over
  taps) left as many register arrays alive across windows as there were cases; a multiply
  under a run-time branch (skipping steps past the last filter row) serialized them too
  (C7520, "divergent path"). So every window issues all four k16 steps, with zero weights
  past the filter and zero A quads where none are staged: no waste for K = 7 (ceil(7 / 2) = 4
  steps), up to 4x for a 1 x 1 filter.
- Writing an A register before the wgmma that reads it has completed is undefined, and the
  next window's loads write the same registers (a run-time loop). With one group left in
  flight (``wait_group 1``) conv2's outputs were wrong by 1e-3 to 26%, different on every
  run; ``wait_group 0`` after each window fixed it and cost 1.4% (0.421 against 0.415 ms in
  one-off timings, results/nvidia-h200-conv-wgmma-plans.json).
- wgmma reads B through the async proxy and the weights are written with ordinary stores, so
  each thread issues ``fence.proxy.async.shared::cta`` after writing them (before the staging
  barrier); the accumulators are pinned after the final wait (an empty asm that "writes"
  them) so that the compiler cannot move the epilogue's reads above it.

Measured by ``ladder bench`` (results/nvidia-h200.json as of commit 5e895e6): conv2 0.410 ms
against rung 8's 0.519
in the same run, 21% faster, 3.51x its floor of 0.117 ms (rung 8: 4.44x; target: within 2x,
missed). conv1 0.605 ms against rung 8's 0.264 (3.91x, rung 8 1.71x), as predicted slower.
Against cuDNN FP32's sum (18.823 ms) rung 9 is 18.55x faster, rung 8 24.05x.

Why conv2 gained 21% and not the predicted 40%. Nsight Compute (results/nvidia-h200-profile-
conv2-wgmma.json) counts 19,792 warp instructions per image, about as many as rung 8 (20,075
in its profile), with the schedulers issuing on 52% of cycles, so the tensor pipes (HGMMA is
3.9% of the instructions, each a 64 x 32 x 16 multiply) are far from busy. The per-instruction
counts (results/nvidia-h200-profile-conv2-wgmma-sass.json, a one-off ncu run) show where the
instructions and the warps' waiting go per image: the wgmma windows 7,936 instructions (41% of
the stall samples; each window issues 12 HGMMA among about 124 instructions of loop control,
quad loads, descriptor moves to uniform registers, the fence and the wait), the epilogue 5,144
(29%: 24 stores per job, each with its own bounds and alignment tests), the rewrite of the
input 3,796 (12%) and the second staging barrier with the next image's copy 2,290 (12%).
Removing the B loads took instructions out of the window, and the wait after each window put
time back in. The tile count matters for the same reason: T = 3 (2 even rounds of 2 warpgroup
jobs per image, 768 A rows) measured 0.412 ms in one-off timings (results/nvidia-h200-conv-
wgmma-plans.json), T = 2 (5 jobs in 3 rounds,
one warpgroup idle in the last, 640 A rows) 0.423 ms with 13.5% of its samples at the staging
barrier, T = 1 (10 jobs, 640 rows, 4 HGMMA per window) 0.467 ms; the planner scores rounds x
(T + 1).

Leaner stores, aligned input words, shorter windows (the first steps this docstring listed
next, as of commit 5e895e6). Reading the SASS of conv_wg_t3_n4 (``cuobjdump -sass`` of the
``nvcc -cubin -arch=sm_90a`` build) showed what the counts meant: each of a job's 24 stores
took about 13 instructions (two halves' bounds, the row, the alignment, and a 64-bit address
rebuilt per store), each window 105 instructions around its 12 HGMMA (12 register clears and 6
tests for quads, of which the first T are always loaded, and 24 R2UR moving descriptors into
uniform registers),
and each quad of the rewrite 6 16-bit loads and 12 tests. The changes, all in rung 8's shared
code except the window: when Wo is even and y 4-byte aligned (conv1, conv2) a packed pair is
always two adjacent, aligned outputs of one row, so the epilogue stores one 32-bit word per
(tile, row, n8 tile) with only a row test, from a per-filter pointer plus a 32-bit offset (an
empty asm keeps the compiler from folding the pointer back into 64-bit arithmetic per store:
6.5 instructions per store with predication instead of branches); when W is even a packed
column's pair word is one aligned 32-bit word of the staged rows; the first T quads of a window
are loaded without a test (loaded >= T), and the multiplies are issued step by step (j outer,
tile inner: the same order per accumulator, one descriptor per step). Predicted from the static
counts: about a quarter fewer instructions per image (windows 87 instead of 105 per 12 HGMMA,
epilogue about half), so about 0.3 ms if conv2 stayed bound by issuing them. Measured by Nsight
Compute (results/nvidia-h200-profile-conv2-wgmma-lean.json): 16,638 warp instructions per
image instead of 19,792 (16% fewer), but the schedulers now issue on 47% of cycles instead of
52%: the instructions went, the waiting stayed. ``ladder bench`` (results/nvidia-h200.json as
of commit aa80e78):
conv2 0.380 ms (6.7% faster than 0.410 as of commit 5e895e6), 3.26x its floor of 0.117 ms
(target: within 2x, missed); conv1 0.584 ms; rung 9's sum 0.965 ms, 19.50x cuDNN FP32's 18.818
ms in the same run. The same changes made rung 8's conv1 15% faster (its docstring).

One step tried and reverted: keeping one window in flight. Each window waited (wait_group 1)
for the one before the previous and the windows alternated between two call sites, each with
its own A registers, so the next window's loads could overlap the previous one's multiplies.
ptxas then serialized every wgmma, an arrive and a wait around each of the 24 HGMMA (SASS of
the same build, no warning printed); it did the same with the pairs unconditional. So every
window still waits for its own group.

What limits conv2 now: waiting, not issuing. Each window waits for its 12 multiplies before the
next loads its quads, and a block waits at two barriers per image while it rewrites the input.
With 4 warps per scheduler (114 registers allow two blocks of 8 warps per SM) the other
warpgroups cover only part of it. One-off timings of the forced plans after these changes
(results/nvidia-h200-conv-wgmma-plans.json, "after_lean_stores"): T = 2 0.374 ms, T = 3 (the
planner's) 0.384, T = 1 0.439; the planner's choice was left as it is, 3% off. conv1 stays on
rung 8: packing only 4 filters cannot fill a wide wgmma.

Tried next, and not landed (branch conv-r10-wide-wgmma): both operands from shared memory with
the operands swapped, filters on M (16 filters x 2 column shifts x 2 row shifts = 64 rows) and
pixels on a wide N (conv2's 289 2 x 2 pixels per image as two jobs of N = 152), the input
rewritten once per image as 16-byte rows of B (4x its bytes), so that a job's 16 multiplies are
one group with no A registers and 73% of the tensor work is useful (here 57%). Correct on every
shape tried on the H200, but slower: conv2 0.458 ms against this rung's 0.382 in the same run
(one-off timings, results/nvidia-h200-conv-wide-wgmma.json). Nsight Compute
(results/nvidia-h200-profile-conv2-wide-wgmma.json) counts 13,569 warp instructions per image
with the schedulers issuing on 33% of cycles: the instructions moved from the windows into the
rewrite and the stores (per region, results/nvidia-h200-profile-conv2-wide-wgmma-sass.json), and
a version that rewrote the next image under the multiplies (two buffers, one block per SM) took
0.533 ms, its epilogue exposed. The tensor work was never the limit at this size. Next steps:
take the rewrite off the warps that compute and store (a producer warpgroup, or TMA's im2col
mode, which needs a driver call CuPy does not expose) and stage the stores through shared
memory so that whole lines leave at once; more warps per SM.

ptxas (``ladder check conv --rungs wgmma``, sm_90a, ``__launch_bounds__(256, 2)``):
conv_wg_t3_n4 114 registers, conv_wg_t2_n4 100, conv_wg_t1_n4 79, conv_wg_t1_n2 72,
conv_wg_t1_n1 65, conv_wg_chunked_t1_n4 83; no spills and no ptxas performance warnings.
compute-sanitizer's memcheck and racecheck report no errors (results/nvidia-h200-sanitize-conv
.json). Checked without a GPU by ``tests/test_conv_tensor_core_emulation.py``, whose lane-by-
lane emulation reads B from the core-matrix layout as the PTX ISA defines it.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from ladder.conv.tc import plan as tc
from ladder.core.rung import rung

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


@rung(
    name="wgmma",
    title="Hopper: the fused convolution on wgmma (warpgroup jobs, weights from shared memory)",
    dtypes=("float16",),
    needs=("cupy",),
    units="tensor",
    min_cc=(9, 0),
    max_cc=(9, 0),
)
def launch(x: Any, w: Any, out: Any = None, *, stream: Any = 0) -> Any:
    return tc.launch(x, w, out, stream, _configured)
