"""The operands swapped: filters on wgmma's M with their weights in registers for the
whole kernel, pixels on a wide N read by descriptor from shared memory (sm_90a only).

What changes: the sides of the multiply (``r13_filters_on_m.cu``, a kernel of its own). A row of
A is a (filter, dy, dx): 16 filters x 2 x 2 output shifts fill wgmma's 64 rows, and
A[(f, dy, dx)][(c, p, q)] = w[f][c][p - dy][q - dx] over an 8 x 8 window per channel (49 of 64
taps non-zero for K = 7). Those weights never change, so each thread loads its A fragments once,
before the first image (64 registers for conv2), and no job loads A again. A column of B is a
2 x 2 output block; N = 152 blocks per job, so conv2's 17 x 17 blocks per image are two jobs
(5% padding). The rewrite stores every input row as 16-byte chunks (each input value 4 times),
rows ordered by parity, so that one descriptor per k16 step addresses B (the .cu header has the
layout). Jobs are issued in pairs into two sets of accumulators, so job 0's epilogue runs under
job 1's multiplies. The epilogue stores half2 pairs into the image's output buffer at offsets
from a table built once per block; one bulk copy writes the image out, and the input comes in
by one bulk copy per image, two images ahead. Where it applies: 1 to 4 channels, K <= 7, 5 to
16 filters and an image whose buffers fit; elsewhere (conv1's 4 filters included) `wgmma-bulk` runs.
Why: `wgmma-bulk`'s conv2 time is the chain inside each job: load the A quads, multiply, wait,
store. Here no job loads A, each instruction does 2.4 times the work of one of `wgmma-bulk`'s (64 x
152 x 16 against 64 x 64 x 16), and the second set of accumulators overlaps one job's stores with
the next one's multiplies.
Prediction: 32 multiplies of 64 x 152 x 16 per image are about 2,400 cycles of one SM's tensor
cores, 75.8 images per SM: about 0.10 ms at 1.8 GHz, below conv2's memory floor (0.117 ms). About
2,500 warp instructions per image (`wgmma-bulk`: 9,551). So conv2 near 0.15 ms, bound by memory and
the tensor cores together, within 2x its floor (0.235 ms; the floor is 0.117) for the first time.
Measured: on an NVIDIA H200 by ``ladder bench`` (results/nvidia-h200.json): conv2 0.177 ms
(`wgmma-bulk`: 0.255), 1.51x its floor; conv1 0.219 ms on `wgmma-bulk`'s kernels, 1.42x; the sum
45.48x faster than cuDNN FP32. All three targets are met: the sum at least 5x faster than cuDNN
FP32, each layer within 2x of its floor. Nsight Compute on conv2
(lab/conv/2026-11-24-filters-on-m/nvidia-h200-profile-conv2-filters-on-m.json): 3,683 warp
instructions per image, 128 of them HGMMA, the schedulers issuing on 26.3% of cycles, DRAM 54.55%
busy.
Verdict: the target held; 0.15 ms missed. Instructions are not the limit (issue on a quarter of
cycles). One-off runs of the first version with one stage left out
(lab/conv/2026-11-24-filters-on-m/nvidia-h200-conv-filters-on-m-tried.json) each saved 0.03 to 0.06
ms (rewrite, multiplies, epilogue), together more than the kernel's distance from its memory floor:
their latencies lie on one chain per block, which two blocks per SM do not hide. Pairing the jobs
and loading table entries ahead shortened the chain (stall samples waiting for the multiplies: 26.8%
to 11.7%, lab/conv/2026-11-24-filters-on-m/nvidia-h200-profile-conv2-filters-on-m-sass.json); the
rewrite of the next image still cannot start before the last job of this one has read the chunks.

Lab notes: docs/notes/conv.md#rung-13-filters-on-m
"""

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np

from ladder.conv import r12_bulk as r12
from ladder.conv.problem import LayerShape, conv_rung, size_of
from ladder.conv.tc import plan as tc
from ladder.core import cuda_cpp

# Constants the kernel shares, passed to NVRTC as -D options (DEFINES): one source
THREADS = 128  # FM_THREADS: a block is one warpgroup
NT = 152  # FM_NT: pixel blocks (2 x 2 outputs) per job, wgmma's N
RAW_SLOTS = 2  # FM_RAW_SLOTS: raw images in flight per block
JOBS = 2  # FM_JOBS: jobs issued together (one's epilogue under the other's multiplies)
BARS_BYTES = 64  # FM_BARS_BYTES: the mbarriers, first in shared memory
BULK_IN, BULK_OUT, PAIRED = 1, 2, 4  # FM_BULK_IN, FM_BULK_OUT, FM_PAIRED
INVALID, HI_INVALID = 1 << 31, 1 << 30  # FM_INVALID, FM_HI_INVALID: table flags

SHIFTS = 4  # output shifts (dy, dx) per filter on M: 2 x 2 blocks
ROWS = 64  # wgmma's M
MAX_CHANNELS = 4  # 4 k16 steps x 4 registers per channel stay in registers: 64 for C = 4
MAX_K = 7  # an 8 x 8 window covers a 2 x 2 block of a 7 x 7 filter
MIN_FILTERS = 5  # at most 4 filters fill a quarter of M: rung 12's packed kernels do better
CHUNK = 16  # bytes of a rewritten chunk: 8 halves, one core-matrix row
OVERREAD = 32  # bytes the rewrite may load past the end of a raw row (two 16-byte words)
PARAMS = (
    "B", "M", "H", "W", "K", "Ho", "Wo", "NP", "G", "R", "RW", "tiles", "tab_at", "raw_at",
    "raw_bytes", "rep_at", "rep_chunks", "out_at",
)  # fmt: skip


DEFINES = {
    "FM_THREADS": THREADS,
    "FM_NT": NT,
    "FM_RAW_SLOTS": RAW_SLOTS,
    "FM_JOBS": JOBS,
    "FM_BARS_BYTES": BARS_BYTES,
    "FM_BULK_IN": BULK_IN,
    "FM_BULK_OUT": BULK_OUT,
    "FM_PAIRED": PAIRED,
    "FM_INVALID": f"{INVALID:#x}u",
    "FM_HI_INVALID": f"{HI_INVALID:#x}u",
    "FM_PARAMETERS": ", ".join(f"int {name}" for name in PARAMS),
    "FM_ARGUMENTS": ", ".join(PARAMS),
}
SOURCE = cuda_cpp.source(
    __file__,
    "r13_filters_on_m.cu",
    archs=("sm_90a",),
    arch_specific=True,
    options=tuple(f"-D{name}={value}" for name, value in DEFINES.items()),
)


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def _round(a: int, b: int) -> int:
    return _ceil(a, b) * b


@dataclass(frozen=True)
class Plan(LayerShape):
    """The layout of one launch: the derived sizes and where each buffer is in shared memory
    (byte offsets). The kernel computes nothing of this itself."""

    size: tuple[int, int, int, int, int, int]  # (B, C, M, H, W, K)

    @property
    def NY(self) -> int:
        """Rows of 2 x 2 output blocks."""
        return _ceil(self.Ho, 2)

    @property
    def NP(self) -> int:
        """2 x 2 output blocks per block row."""
        return _ceil(self.Wo, 2)

    @property
    def G(self) -> int:
        """Output blocks of an image: wgmma's N, over all jobs."""
        return self.NY * self.NP

    @property
    def tiles(self) -> int:
        """Jobs per image, a multiple of JOBS (a padding job's blocks are all past G)."""
        return _round(_ceil(self.G, NT), JOBS)

    @property
    def R(self) -> int:
        """Input rows rewritten per channel: every row a block's 8 x 8 window reaches."""
        return 2 * self.NY + 6

    @property
    def shape_bulk_in(self) -> bool:
        """The raw image is x's own bytes (no padding rows or columns), in 16-byte rows."""
        _, c, _, h, w, _ = self.size
        return self.R == h and 2 * self.NP + 6 == w and w % 8 == 0 and c * h * w * 2 < 2**20

    @property
    def RW(self) -> int:
        """Halves per raw row: x's W when copied as it is, else the window's reach rounded
        up to 16 bytes (the rewrite reads 16-byte words)."""
        return self.size[4] if self.shape_bulk_in else _round(2 * self.NP + 6, 8)

    @property
    def shape_bulk_out(self) -> bool:
        """Every image's output starts 16-byte aligned and is a whole number of 16 bytes."""
        _, _, m, *_ = self.size
        return (m * self.Ho * self.Wo * 2) % 16 == 0

    @property
    def paired(self) -> bool:
        """dx = 0, 1 of a block are one aligned 32-bit word (Wo even)."""
        return self.Wo % 2 == 0

    @property
    def tab_at(self) -> int:
        return BARS_BYTES

    @property
    def raw_at(self) -> int:
        return _round(self.tab_at + 2 * self.tiles * NT * 4, 128)

    @property
    def raw_bytes(self) -> int:
        """A raw slot, with OVERREAD bytes after the image: the rewrite's loads ahead reach up
        to that far past a row (words it never stores), and must not touch memory that another
        thread or a bulk copy is writing meanwhile (the next slot, the chunks)."""
        return _round(self.size[1] * self.R * self.RW * 2 + OVERREAD, 128)

    @property
    def rep_at(self) -> int:
        return self.raw_at + RAW_SLOTS * self.raw_bytes

    @property
    def rep_chunks(self) -> int:
        """Chunks of the rewritten input, with the zero tail that padding blocks read: the
        last step of the last channel (odd rows, j = 3) reads chunks up to that row + tiles
        NT. And compute-sanitizer's memcheck takes a multiply's B operand as one span of 2 NT
        chunks (N x 16 halves) from the step's start, whatever the descriptor's offsets, so the
        tail also reaches the end of that span for the last job's last step (only small
        images need it: conv2's chunks already do)."""
        c, r, np_ = self.size[1], self.R, self.NP
        odd_half_end = ((c - 1) * r + r // 2 + 3) * np_ + self.tiles * NT
        checked_span_end = ((c - 1) * r + 3) * np_ + (self.tiles + 1) * NT
        return max(c * r * np_, odd_half_end, checked_span_end)

    @property
    def out_at(self) -> int:
        return _round(self.rep_at + CHUNK * self.rep_chunks, 128)

    @property
    def smem_bytes(self) -> int:
        _, _, m, *_ = self.size
        return self.out_at + _round(m * self.Ho * self.Wo * 2, 16)

    @property
    def kernel_name(self) -> str:
        return f"conv_fm_c{self.size[1]}"

    def params(self) -> dict[str, int]:
        b, _, m, h, w, k = self.size
        named = {"B": b, "M": m, "H": h, "W": w, "K": k}
        return {name: named[name] if name in named else getattr(self, name) for name in PARAMS}

    def flags(self, x_at: int, y_at: int) -> int:
        """The paths of one launch: bulk copies where the shapes and the pointers allow."""
        return (
            (BULK_IN if self.shape_bulk_in and x_at % 16 == 0 else 0)
            | (BULK_OUT if self.shape_bulk_out and y_at % 16 == 0 else 0)
            | (PAIRED if self.paired else 0)
        )

    def scalars(self, x_at: int, y_at: int) -> tuple[Any, ...]:
        return (*(np.int32(v) for v in self.params().values()), np.int32(self.flags(x_at, y_at)))


def plan(size: tuple[int, ...], smem_limit: int = tc.SMEM_LIMIT) -> Plan | None:
    """This rung's layout for ``size``, or None where its kernel does not apply and rung 12
    runs instead: more than 4 channels (the weights would not fit in registers), filters
    larger than 7 x 7 (the 8 x 8 window), at most 4 filters (a quarter of wgmma's M), more than
    16 (one job holds 16 filters x 4 shifts), or an image whose buffers exceed ``smem_limit``."""
    b, c, m, h, w, k = (int(v) for v in size)
    if not (1 <= c <= MAX_CHANNELS and k <= MAX_K and MIN_FILTERS <= m <= ROWS // SHIFTS):
        return None
    found = Plan((b, c, m, h, w, k))
    # descriptor fields are 14 bits of 16-byte units: LBO = R/2 NP chunks
    if found.smem_bytes > smem_limit or (found.R // 2) * found.NP >= 2**14:
        return None
    return found


@functools.lru_cache(maxsize=64)
def _configure(size: tuple[int, ...], device_id: int) -> tuple[Plan, Any, int] | None:
    """The plan, the loaded kernel (opted in to its shared memory) and the grid for a size on
    a device, or None (rung 12 runs): computed once, so that a timed launch queries nothing."""
    import cupy

    device = cupy.cuda.Device(device_id)
    found = plan(size, int(device.attributes["MaxSharedMemoryPerBlockOptin"]))
    if found is None:
        return None
    kernel = SOURCE.kernel(found.kernel_name)
    if kernel.max_dynamic_shared_size_bytes < found.smem_bytes:
        kernel.max_dynamic_shared_size_bytes = found.smem_bytes
    per_sm = cuda_cpp.blocks_per_sm(kernel, found.smem_bytes, device, THREADS)
    grid = min(found.size[0], int(device.attributes["MultiProcessorCount"]) * per_sm)
    return found, kernel, grid


@conv_rung(
    name="filters-on-m",
    parent="wgmma-bulk",
    title="Hopper: filters on wgmma's M (weights in registers), pixels on a wide N (shared memory)",
    dtypes=("float16",),
    needs=("cupy",),
    units="tensor",
    sm90a="wgmma",
)
def geometry(x: Any, w: Any, out: Any) -> Any:
    """This rung's configured kernel on a grid of resident blocks, or `wgmma-bulk`'s plan where
    it does not apply (and for no channels). The flags depend on x's and out's 16-byte
    alignment, which is part of the signature."""
    configured = _configure(size_of(x, w), tc.device_facts()[0])
    if configured is None:
        return r12.geometry(x, w, out)
    found, kernel, grid = configured
    scalars = found.scalars(x.ptr, out.ptr)
    return tc.kernel_launch(kernel, grid, THREADS, found.smem_bytes, scalars, copy_x=False)
