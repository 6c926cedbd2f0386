"""Rung 12, bulk copies: the input in and each image's output out by the TMA (sm_90a only).

What changes from rung 11 (``r12_bulk.cu``: rung 11's kernel with bulk copies in,
``copy_band_bulk``, and out of an output buffer). Hopper's Tensor Memory Accelerator copies a
contiguous run of 16-byte chunks between global and shared memory on its own (cp.async.bulk):
one instruction from one thread, no per-thread addresses or tests.

- In: one thread issues one bulk copy per channel into rung 8's raw slots (the same chunks),
  and the mbarrier the copies complete on counts their bytes; every thread waits on it where
  rung 11 waited for its cp.async group. Rung 11 had every thread issue 16-byte cp.async
  chunks, each with its own division, address and test.
- Out: the jobs store their pairs into a buffer in shared memory laid out as the image's
  output (a 32-bit shared store, its address a register plus a row offset, instead of a
  64-bit global address per store), and one thread writes the whole image out with one bulk
  copy at the next image's first staging barrier. It waits for the copy to have read the
  buffer before the second barrier, after which the next image's jobs write it again. This
  needs whole images (no bands), an even Wo, M Ho Wo a multiple of 8 (every image's output
  then starts 16-byte aligned) and the room: conv2's buffer is 37 KB, 110 KB per block with
  the rest, which still fits two blocks per SM. Without it, the jobs store to global memory as
  on rung 11.
- The buffer only where it costs no resident block (``out_buffer_or_not``): conv1's 70
  registers allow 3 blocks per SM, its 50 KB buffer only 2, so conv1 runs without it.

Prediction. Rung 11's profile of conv2 (results/nvidia-h200-profile-conv2-one-group-sass.json)
put 1,285 of its 11,223 warp instructions per image in the copy of the next input and 3,690 in
the epilogue, with 22% of the stall samples in the epilogue (global stores). The copy was to
shrink to a few dozen instructions and the epilogue to about a third, about 8,500 per image,
so conv2 near 0.23 ms, within its 2x target, if the schedulers kept issuing as often.

Measured by ``ladder bench`` (results/nvidia-h200.json): conv2 0.262 ms against rung 11's
0.291 in the same run, 2.25x its floor (target: within 2x, 0.233 ms: missed); conv1 0.221 ms
against rung 11's 0.236 and rung 8's 0.224, 1.43x its floor, the best conv1 on the ladder;
the sum 0.483 ms, 38.93x cuDNN FP32's 18.820 ms, the best sum. Nsight Compute
(results/nvidia-h200-profile-conv2-bulk.json): 9,551 warp instructions per image on conv2
(rung 11: 11,223), the schedulers issuing on 39.99% of cycles (rung 11: 42.55%). Fewer
instructions than rung 11, but not as few as predicted, and again the time fell less than
the instructions.

Which part did what (results/nvidia-h200-conv-bulk-variants.json: one-off timings, back to
back without an L2 flush, so above the bench's; two repeats each): on conv2 the output
buffer is the gain, 0.2784 and 0.2776 ms against 0.3119 and 0.3097 without it (rung 11: 0.3069
and 0.3057), and bulk input adds little on top (0.2800 and 0.2832 ms with cp.async input and
the buffer). On conv1 the bulk input is the gain, 0.2379 and 0.2365 ms against 0.2582 and
0.2559 with cp.async (rung 11: 0.2541 and 0.2524), and the buffer costs a block per SM: 0.2628
and 0.2626 ms with it.

Why conv2 is still not within 2x. The stall samples (results/nvidia-h200-profile-conv2-bulk-
stalls.json, a one-off ncu run): 13.1% on the instruction after the first staging barrier,
where warps wait for the slowest job of the last round (5 warpgroup jobs for 2 slots: the third
round has one) and for the next input; 9.7% at the wgmma wait and 5.6% at the first multiply;
5.1% waiting for the quad loads. The buffer's stores conflict too: its planes are 578 words
apart on conv2, so the 4 filters of one store fall 2 banks apart, up to 4-way conflicts (780
excess shared-store wavefronts per image). Tried and not kept, both slower in one-off timings:
deferring the wait for the copy out to after each image's first job (a second mbarrier), so
that the copy drains while the jobs compute; and splitting the last round's single job into
two halves by filters, one per slot (a half job still pays all of its quad loads and fixed
costs for half of the multiplies).

Three later tries, none kept (results/nvidia-h200-conv-bulk-tried.json, one-off, the code
on branch conv-r13-overlap):
- The rewrite ahead. A rung 13 had the last round's idle warpgroup rewrite the next image's
  first 14 quad rows of 21 (those the last job does not read) after a named barrier, while the
  other computed; staging then rewrote only the rest. The barrier's stall samples fell (the
  most on one instruction after a barrier: 4.3%, against 13.1% above; the idle warps now
  spent 5.5% waiting for the next input's mbarrier), but conv2 took 0.2889 and 0.2890 ms
  against this rung's 0.2601 and 0.2607 in the same harness run, interleaved. It ran 11,418
  warp instructions per image against 9,551 (two partial rewrites, each segment restarting
  its sliding window), and the multiplies waited longer on the shared-memory pipe (HGMMA's
  'mio' stall: 7.2% of the samples against 5.6% in the stall file above). The other block on
  the SM had been using the idle slot's cycles all along. Its conv1 kernel also grew to 82
  registers, 2 blocks per SM instead of 3: 0.2982 and 0.2984 ms against 0.2183 and 0.2187.
- A job count that divides evenly: NT = 4 on conv2 (10 jobs of 8 filters, 5 full rounds) was
  slower than NT = 8, 0.3284 and 0.3299 ms against 0.3058 and 0.3060 (raw launches without
  an L2 flush): every job loads all 16 of its quads for half the multiplies.
- Buffer stores without bank conflicts: with the filters reordered across lanes (lane t of
  filter quad q holds filter q + 4t, not 4q + t) the 4 filters of a store lie 4 planes apart,
  8 banks on conv2. Bit for bit the same output, and 0.2737 to 0.2744 ms against 0.2758 to
  0.2766 (raw launches, three repeats): under 1%.
So neither the staging's idle slot nor the buffer's conflicts is what limits conv2. What is
left is the chain inside each job (the quad loads, 16 multiplies, one wait, the epilogue, in
that order for each warpgroup), which four warpgroups per SM do not hide. Next: the epilogue
of one job under the multiplies of the next, which needs a second set of accumulators that
128 registers per thread (64 of them the quads) do not leave room for, or A read from shared
memory by the multiplies (a layout wgmma's descriptors can address) to free those 64.
Rung 13 gets both another way: it swaps the operands, so that A is the weights, loaded into
registers once per kernel (no quads per job), B the pixels, read by the multiplies from a
layout their descriptors address, and a second set of accumulators lets one job's epilogue run
under the next one's multiplies.

ptxas (``ladder check conv --rungs wgmma-bulk``, sm_90a, ``__launch_bounds__(256, 2)``):
conv_wgk_c4_t1_n8 (conv2) 128 registers and 16 bytes of spills, in the staging code (once per
image, not per job); conv_wgk_c1_t2_n2 (conv1) 70; the others 56 to 126 without spills.
compute-sanitizer's memcheck and racecheck report no errors (results/nvidia-h200-sanitize-
conv.json). Checked without a GPU by ``tests/test_conv_tensor_core_emulation.py``: the
emulation copies the input as the bulk copies do (the last chunk of x half by half), stores
into the buffer and writes each image out once, on every rung-12 kernel variant, with and
without the buffer (odd Wo, M Ho Wo not a multiple of 8, bands, a misaligned y).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from ladder.conv import r10_row_shifts as r10
from ladder.conv import r11_one_group as r11
from ladder.conv.tc import plan as tc
from ladder.core.rung import rung

# rung 11's parameters, then the byte offsets of the output buffer (0: none) and the mbarrier
PARAMS = (*tc.PARAMS, ("out_at", "int"), ("bar_at", "int"))
SOURCE = tc.source(__file__, "r12_bulk.cu", archs=("sm_90a",), arch_specific=True, params=PARAMS)
# bytes a block may take when it also holds an image's output: two blocks per SM take all of
# sm_90's 228 KB (1 KB of each block's is the system's)
SMEM_TARGET = 113 * 1024


@dataclass(frozen=True)
class Plan(r11.Plan):
    """Rung 12's launch: rung 11's, plus shared memory for an image's output (out_buffer)
    and the mbarrier the input copies complete on."""

    out_buffer: bool = True  # stage whole images' output in shared memory where it can

    PARAMS: ClassVar[tuple[tuple[str, str], ...]] = PARAMS

    @property
    def kernel_name(self) -> str:
        return f"conv_wgk_c{self.size[1]}_t{self.tiles}_n{self.n_tiles}"

    @property
    def out_bytes(self) -> int:
        """The output buffer: a whole image's output (M Ho Wo halves), when an item is a
        whole image, Wo is even (the epilogue's 32-bit pairs) and M Ho Wo is a multiple of 8
        (every image's output 16-byte aligned, a whole number of 16-byte chunks); else 0."""
        halves = self.size[2] * self.Ho * self.Wo
        whole = self.out_buffer and self.bands == 1 and self.Wo % 2 == 0 and halves % 8 == 0
        return 2 * halves if whole else 0

    @property
    def out_at(self) -> int:
        return self.raw_end if self.out_bytes else 0

    @property
    def bar_at(self) -> int:
        """The mbarrier (8 bytes), after everything else."""
        return self.raw_end + self.out_bytes

    @property
    def smem_bytes(self) -> int:
        return self.bar_at + 8


def plan(size: tuple[int, ...], smem_limit: int = tc.SMEM_LIMIT) -> Plan | None:
    """Rung 11's plan (None where rung 11 falls back: rung 10 runs), with a shared-memory
    budget that fits a whole image's output too (SMEM_TARGET)."""
    return r11.plan(size, smem_limit, kind=Plan, target=SMEM_TARGET)  # type: ignore[return-value]


def out_buffer_or_not(found: Plan, blocks_per_sm: Callable[[int], int]) -> Plan:
    """The plan with its output buffer, unless the buffer's shared memory would cost a resident
    block per SM (``blocks_per_sm``: blocks for a block's shared-memory bytes): then the plan
    without it (the jobs store to global memory). conv1 at 70 registers fits 3 blocks per SM
    without its 50 KB buffer and 2 with it; conv2 runs 2 blocks either way and keeps it."""
    if not found.out_bytes:
        return found
    lean = dataclasses.replace(found, out_buffer=False)
    return lean if blocks_per_sm(lean.smem_bytes) > blocks_per_sm(found.smem_bytes) else found


@functools.lru_cache(maxsize=64)
def _configured(size: tuple[int, ...], device_id: int, smem_limit: int) -> tc.Configured | None:
    found = plan(size, smem_limit)
    if found is None:
        return None
    return tc.configure(found, SOURCE, device_id, adjust=out_buffer_or_not)  # type: ignore[arg-type]


@rung(
    name="wgmma-bulk",
    title="Hopper: rung 11 with bulk copies (TMA) for the input and each image's output",
    dtypes=("float16",),
    needs=("cupy",),
    units="tensor",
    min_cc=(9, 0),
    max_cc=(9, 0),
)
def launch(x: Any, w: Any, out: Any = None, *, stream: Any = 0) -> Any:
    return tc.launch(x, w, out, stream, _configured, fallback=r10.launch)
