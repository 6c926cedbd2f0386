"""Bulk copies: the input in and each image's output out by the TMA (sm_90a only).

What changes: how bytes enter and leave shared memory (``r12_bulk.cu``). Hopper's Tensor Memory
Accelerator copies a contiguous run of 16-byte chunks between global and shared memory on its own
(cp.async.bulk): one instruction from one thread. In: one thread issues one bulk copy per channel
into the raw slots, completing on an mbarrier that counts their bytes (``copy_band_bulk`` in
r12_bulk.cu); `wgmma-one-group` had every thread issue 16-byte cp.async chunks, each with its own
division, address and test. Out: the jobs store their pairs into a buffer in shared memory laid out
as the image's output (a 32-bit shared store), and one thread writes the image out with one bulk
copy at the next image's first staging barrier. The buffer needs whole images, an even Wo, M Ho Wo
a multiple of 8 and the room (conv2: 37 KB, 110 KB per block, still two blocks per SM); it is used
only where it costs no resident block (``out_buffer_or_not``): conv1's 70 registers allow 3 blocks
per SM, its 50 KB buffer only 2, so conv1 runs without it.
Why: `wgmma-one-group`'s conv2 profile
(lab/conv/2026-11-23-one-group/nvidia-h200-profile-conv2-one-group-sass.json) put 1,285 of its
11,223 warp instructions per image in the copy of the next input and 3,690 in the epilogue (a
64-bit global address per store), with 21.8% of the stall samples in the epilogue.
Prediction: the copy shrinks to a few dozen instructions and the epilogue to about a third:
about 8,500 per image, so conv2 near 0.23 ms, within 2x its floor (0.235 ms; the floor is
0.117), if the schedulers kept issuing as often.
Measured: on an NVIDIA H200 by ``ladder bench`` (results/nvidia-h200.json): conv2 0.255 ms
(`wgmma-one-group`: 0.288), 2.19x its floor; conv1 0.219 ms (`wgmma-one-group`: 0.234), 1.42x; the
sum 37.94x faster than cuDNN FP32. Nsight Compute on conv2
(lab/conv/2026-11-23-bulk/nvidia-h200-profile-conv2-bulk.json): 9,551 warp instructions per image,
the schedulers issuing on 39.99% of cycles (`wgmma-one-group`: 42.55%).
Verdict: missed: fewer instructions, but not as few as predicted, and again the time fell less
than the instructions. One-off timings of the parts (lab/conv/2026-11-23-bulk/nvidia-h200-conv-bulk-
variants.json) show conv2's gain is the output buffer and conv1's the bulk input. The stall samples
(lab/conv/2026-11-23-bulk/nvidia-h200-profile-conv2-bulk-stalls.json): 13.1% after the first staging
barrier (the slowest job of the last round, the next input), 9.7% at the wgmma wait, 5.6% at the
first multiply, 5.1% on the quad loads. Three tries (lab notes) ruled out the idle slot of the last
round and the buffer's bank conflicts; what is left is the chain inside each job (quad loads, 16
multiplies, one wait, the epilogue, in that order), which four warpgroups per SM do not hide. That
is the inference from the tries, not a direct measurement. `filters-on-m` breaks the chain.

Lab notes: docs/notes/conv.md#rung-12-wgmma-bulk
"""

import dataclasses
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from ladder.conv import r10_row_shifts as r10
from ladder.conv import r11_one_group as r11
from ladder.conv.problem import conv_rung
from ladder.conv.tc import plan as tc

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


@conv_rung(
    name="wgmma-bulk",
    parent="wgmma-one-group",
    title="Hopper: wgmma-one-group with bulk copies (TMA) for the input and each image's output",
    dtypes=("float16",),
    needs=("cupy",),
    units="tensor",
    sm90a="wgmma",
)
def geometry(x: Any, w: Any, out: Any) -> Any:
    """The configured kernel for this size on this device (``tc.launch_plan``), or
    `wgmma-blocks`'s where this rung's kernel does not apply."""
    return tc.launch_plan(x, w, out, _configured, fallback=r10.geometry)
