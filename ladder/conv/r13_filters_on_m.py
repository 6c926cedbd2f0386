"""Rung 13, the operands swapped: filters on wgmma's M with their weights in registers for the
whole kernel, pixels on a wide N read by descriptor from shared memory (sm_90a only).

What changes from rung 12 (``r13_filters_on_m.cu``, a kernel of its own). Rungs 8 to 12 put
pixels on the A side of the multiply and the filters on B: every job loaded its A fragments
(the input quads, 64 registers per thread on conv2) from shared memory, issued 16 multiplies
of N = 64, waited, and stored. Here the sides are swapped. A row of A is a (filter, dy, dx):
16 filters x 2 x 2 output shifts fill wgmma's 64 rows, and A[(f, dy, dx)][(c, p, q)] =
w[f][c][p - dy][q - dx] over an 8 x 8 window per channel (49 of its 64 taps non-zero for
K = 7). Those weights never change, so each thread loads its A fragments once, before the
first image: 4 k16 steps x 4 registers per channel, 64 registers for conv2, and no job loads
A again. A column of B is a 2 x 2 output block g; N = 152 blocks per job, so conv2's 17 x 17
blocks per image are two jobs (5% padding) of 16 multiplies each, 2.4 times the work of one
of rung 12's per instruction.

wgmma reads B from shared memory as 8 x 8 core matrices: 8 columns of 16 contiguous bytes
(8 consecutive k). Column g of the k8 half (c, p) must be x[c][2Y + p][2n .. 2n + 7], so the
rewrite stores every input row as its NP = ceil(Wo / 2) 16-byte chunks (each input value 4
times), with the rows ordered by parity: then the chunks of one k8 half are consecutive in g
across block rows, and the odd half of every k16 step lies a fixed distance after the even one.
One descriptor per step, its two offsets constant (the .cu header has the layout). The
epilogue: a lane holds dx = 0 and dx = 1 of one (f, dy) at each of its columns, two adjacent
outputs, one 32-bit store into the image's output buffer at an offset read from a table built
once per block; one bulk copy writes the image out, as on rung 12. The input comes in by one
bulk copy per image, two images ahead.

This was tried before (rung 9's docstring records it: both operands from shared memory, 13,569
warp instructions per image, slower than rung 9). What is different: the weights in registers
(no A traffic at all), the parity order (one descriptor per step) and the table; that try's
first version spent 4,416 instructions per image on its rewrite and 5,096 on an epilogue that
searched each pixel's row (results/nvidia-h200-profile-conv2-wide-wgmma-sass.json).

Prediction. 32 multiplies of 64 x 152 x 16 per image are about 2,400 cycles of one SM's tensor
cores, 75.8 images per SM: about 0.10 ms at 1.8 GHz, below conv2's memory floor (0.117 ms).
About 2,500 warp instructions per image (rung 12: 9,551): the rewrite a few hundred, each job's
epilogue 19 x 9 instructions per warp. So conv2 near 0.15 ms, bound by memory and the tensor
cores together: within its 2x target (0.233 ms) for the first time.

Measured, first version (one job at a time; results/nvidia-h200-conv-filters-on-m-tried.json,
one-off timings in ladder's harness, rungs interleaved): conv2 0.191 ms against rung 12's 0.260
in the same run, within 2x of its floor, but not the 0.15 predicted. Nsight Compute
(results/nvidia-h200-profile-conv2-filters-on-m-sass.json, per region of the SASS): 3,285 warp
instructions per image, the schedulers issuing on 18.6% of cycles, so the instructions were not
the limit; 26.8% of the stall samples waited for the multiplies, 29.9% were in the epilogue
(each store waited for the table entry loaded just before it), 13.1% in the rewrite (890
instructions: a thread per row, each 16-byte word waited for before its stores) and 8.1% at the
barrier after it (160 rows on 128 threads). Leaving one stage out (kernel 0.196 ms in that
timing): without the rewrite 0.165, without the multiplies 0.138, without the epilogue 0.134
(at 40 registers: ptxas dropped the multiplies too, whose results nothing read). Each of the
three saved 0.03 to 0.06 ms, together more than the kernel's distance from its memory floor:
their latencies lay on one chain per block, which two blocks per SM did not hide. The bulk
store was not on it (without it, 0.204: no faster).

Three changes, all to that chain. (1) The jobs are issued in pairs into two sets of
accumulators, and job 0's epilogue runs while job 1 multiplies: 242 registers, which costs
nothing, since shared memory (106 KB per block) already limits an SM to two blocks. (2) The
epilogue loads its table entries two n8 blocks ahead of the stores that use them. (3) The
rewrite takes half rows, so 320 items spread over 128 threads, and loads each 16-byte word one
group ahead of the stores; a job's first multiply writes the accumulators without reading them
(scale-d false, an "=f" operand), so they are dead outside the jobs and the rewrite has the
registers. In between, a version with (1), (2) at 4 entries ahead and the rewrite split into
items of 4 chunks ran 0.196 ms: its profile (the same file) counts 4,412 warp instructions per
image, 2,144 of them in the rewrite, whose index arithmetic ran with the accumulators live
(every multiply read them).

Measured, this version (the same two files): conv2 0.176 ms in the harness against rung 12's
0.262. 3,683 warp instructions per image, more than the first version: its rewrite ran 1,425
instead of 890 (the half rows pay their set-up twice, and every shifted chunk is assembled in 4
consecutive registers by moves). Issue slots busy on 23.8% of cycles, DRAM 54.7% busy. The
waits for the multiplies fell from 26.8% of the stall samples to 11.7% (job 0 8.9%, job 1
2.8%), the epilogues hold 25.7%, the rewrite 26.5% and the barrier after it 7.5%. Variants of
this version (one text edit each, raw launches): one job at a time 0.186 ms against 0.179, all
table entries loaded first (one job) 0.199, entries 4 ahead 0.184, 1 ahead 0.177: 1% faster
than 2 ahead (0.1787 and 0.1786 for the kernel itself) in this one run, and left at 2. The raw
slots were then padded by 32 bytes (below), the same code with its later buffers 256 bytes
further on.

Measured by ``ladder bench`` (results/nvidia-h200.json, at commit ce7e7f7's kernels, the slots
padded): conv2 0.174 ms against rung 12's 0.261 in the same run, 1.49x its floor of 0.117 ms
(target: within 2x, met, the first rung to meet it); conv1 0.220 ms on rung 12's kernels, 1.41x
its floor (met); the sum 0.394 ms, 47.75x cuDNN FP32's 18.819 ms (target: 5x, met). One rung
now meets all three targets of the convolution ladder. Nsight Compute (``ladder profile``,
results/nvidia-h200-profile-conv2-filters-on-m.json, the same commit): 179.4 us, DRAM 54.5%
busy, issue on 26.3% of cycles (its metric: instructions issued per cycle over the peak), 3,683
warp instructions per image (rung 12: 9,551), 128 of them HGMMA (32 warpgroup multiplies of 64
x 152 x 16; rung 12 issued 80 of 64 x 64 x 16).

What limits conv2 now: the order inside a block. The rewrite of the next image cannot start
before the last job of this one has read the chunks, so each block runs rewrite, multiplies
and epilogues in turn, and only the other block on the SM fills the gaps. Next: rewrite the
next image into a second buffer under this image's multiplies (44 KB more: one block per SM,
so with a producer warpgroup beside two that compute), or fewer register moves in the rewrite.

Where it applies: 1 to 4 channels (their weights in registers), K <= 7 (the 8 x 8 window), 5 to
16 filters, and an image whose buffers fit in shared memory; elsewhere rung 12 runs. conv1 (4
filters) runs rung 12's kernels: its filters would fill a quarter of wgmma's rows, which rung
12's packed kernel does better. The bulk copy in needs the image to be x's own bytes in 16-byte
rows (Ho and Wo even, K = 7, W a multiple of 8), under 1 MiB (an mbarrier counts at most that
many bytes) and x 16-byte aligned; otherwise the threads copy it, with zeros past the image. Wo
odd stores the two halves apart; an output not 16-byte aligned per image is copied out by the
threads. Each raw slot ends in 32 spare bytes: the rewrite's loads ahead reach up to two
16-byte words past a row (words it never stores), and without them those loads read the next
slot while a bulk copy wrote it, or chunks while other threads wrote them (a review found it;
compute-sanitizer had not reached it, each block taking one image).

ptxas (``ladder check conv --rungs filters-on-m``, sm_90a): conv_fm_c4 242 registers,
conv_fm_c3 228, conv_fm_c2 210, conv_fm_c1 194, no spills. Checked without a GPU by
``tests/test_conv_filters_on_m.py``: a NumPy emulation of the kernel (the layout, the
descriptors and the fragments from the PTX ISA's definitions, the rewrite's loop and what its
loads may reach) on conv2's shape, odd Wo and Ho, K = 1, 3, 5, 6 and 7, C = 1 to 4, several
jobs and a padding job, and the threads' copy in. On the GPU, besides the problem's test sizes,
the same file runs more images than blocks (slot reuse, the mbarrier's second phase, the output
buffer written again after a bulk store), paired stores with odd Ho, and misaligned x and y.
compute-sanitizer (``ladder sanitize conv``, results/nvidia-h200-sanitize-conv.json, with 600
small images so that blocks take several): memcheck first reported 488 invalid shared reads of
4,864 bytes (results/nvidia-h200-conv-filters-on-m-tried.json, sanitize_before_tail), a
multiply's B operand taken as one span of N x 16 halves from its start address (not the core
matrices its descriptor addresses), which ran past small images' zero tail; the tail now covers
that span (conv2's layout is unchanged), and memcheck and racecheck report no errors.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np

from ladder.conv import r12_bulk as r12
from ladder.conv.problem import LayerShape, check_arrays, size_of
from ladder.conv.tc import plan as tc
from ladder.core import cuda_cpp
from ladder.core.cuda_cpp import pointer
from ladder.core.rung import rung

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


@rung(
    name="filters-on-m",
    title="Hopper: filters on wgmma's M (weights in registers), pixels on a wide N (shared memory)",
    dtypes=("float16",),
    needs=("cupy",),
    units="tensor",
    min_cc=(9, 0),
    max_cc=(9, 0),
)
def launch(x: Any, w: Any, out: Any = None, *, stream: Any = 0) -> Any:
    import cupy

    x, w, out, _ = check_arrays(x, w, out, ("float16",))
    size = size_of(x, w)
    configured = None if out.size == 0 else _configure(size, cupy.cuda.runtime.getDevice())
    if configured is None:  # rung 12's kernels (and no work for an empty output)
        return r12.launch(x, w, out, stream=stream)
    found, kernel, grid = configured
    x_at, y_at = int(pointer(x)), int(pointer(out))
    with cuda_cpp.cupy_stream(stream):
        kernel(
            (grid,),
            (THREADS,),
            (np.uint64(x_at), pointer(w), np.uint64(y_at), *found.scalars(x_at, y_at)),
            shared_mem=found.smem_bytes,
        )
    return out
