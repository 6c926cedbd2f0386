"""Rung 8, tensor cores: the convolution as one fused implicit GEMM on mma.sync (FP32 sums).

The rungs below compute on CUDA cores, one multiply-add per lane per instruction. Read as a
GEMM, y[b, m, h, w] = sum over k = (c, p, q) of W[m][k] X[k][(b, h, w)], it is
a product of a tiny matrix (M x C K K: 4 x 49 for conv1, 16 x 196 for conv2) with a huge one
(C K K x B Ho Wo: 64 million and 11.6 million columns), and tensor cores do 2048 multiply-adds
per warp instruction. This rung moves the arithmetic to them (``r08_tensor_core.cu``).

Why the library is slow here. cuDNN's kernels and "im2col + cuBLAS" (the two references) are
tuned for wide layers: GEMM tiles of 64 to 256 filters and deep k loops. With 4 or 16 filters and
49 or 196 taps most of every tile is padding, and the unrolled im2col matrix repeats every
input K K = 49 times: conv1's is 6.3 GB of half, ten times the 0.66 GB the layer must move.
What remains of the layer is moving bytes, so the kernel has to read each input byte from DRAM
once, build the im2col operand only in registers, and still keep the tensor cores fed.

The GEMM, and which side is which. mma.m16n8k16 multiplies a 16 x 16 A by a 16 x 8 B. Filters
on the A side would fill 4 of conv1's 16 rows; here the pixels are A (a tile is 8 output
columns x 2 output rows) and the filters are B: 8 filter slots per n8 tile, half used by conv1,
all by conv2 (two n8 tiles). The same orientation suits both layers (and any M, in groups of 8
or 16 filters), so it is not chosen per shape; what is chosen per shape is how many tiles a warp
stacks (T below), whether it holds one or two n8 tiles (NT), and whether it packs.

Packing (M <= 4, as in conv1). Half of conv1's filter slots would multiply zeros, so an n8 tile
holds 4 filters x 2 column shifts instead: B'[(p, q)][(f, s)] = w[f][p][q - s], and A row g is
output column 2j of a column pair j. Then D[g][(f, s)] = sum x[h + p][2j + q] w[f][p][q - s] =
y[f][h][2j + s]: one mma covers 16 output columns, not 8, and lane (g, t) ends holding filter t
at two adjacent columns, ready for one half2 store. The shifted copy needs column K of the
8-column chunk, which K = 7 leaves free (K a multiple of 8 would need a second chunk, so the
planner does not pack it). A side effect: a packed lane reads only even input columns, so only
their words are staged, half the rewrite.

The k ordering makes the im2col operand cheap. A k16 step is two filter rows (p, p + 1) of one
channel, 8 filter columns each (an 8th column of zero weights when K = 7; the last, odd filter
row is one m16n8k8). A lane of mma's A fragment holds two neighbouring k of one pixel, which
are then two neighbouring input pixels of one row, x[c][h + p][w + q], x[c][h + p][w + q + 1],
at any parity of w: call the 32-bit "pair word" of input columns col, col + 1 of row r F(r).
Tile i's A registers at k16 step j are rows (2k, 2k + 1, 2k + 1, 2k + 2) with k = i + j: they
depend only on the diagonal k, so the loop runs over diagonals and each quad serves every
(tile, step) on it. The input is staged in shared memory as these quads, 16 bytes each, one per
two rows of a column (an odd number per column: a quarter warp's 8 columns fall in 8 groups of
banks), so a lane fetches an A fragment with one 16-byte load into four consecutive registers,
which is where HMMA reads it from. A warp with T tiles loads T + 3 quads per 8 filter rows and
issues 4T mma per n8 tile: for conv1 (T = 10) 13 loads and 40 mma.

The weights live in shared memory as ready-made B fragments (256 bytes per k16 x n8 tile, one
64-bit load per lane), built once per block: 1 KB for conv1, 8 KB for conv2.

Work split. A block is persistent and takes whole images (bands of rows when an image does not
fit, channel chunks when even a band does not): cp.async copies the image's rows in 16-byte
chunks into a raw buffer, the warps rewrite them as quads (zeros past the image), and the
next image's copy is issued at once, landing while the warps compute. A warp job is 8 columns
x 2T rows x 8 NT filters; columns are numbered across sub-bands of 2T rows so that a group of 8
may wrap from one to the next (conv2's Wo = 34 wastes 2%, not 15%). The planner picks T from
{10, 6, 2} (NT = 1, packed or not) or {6, 2} (NT = 2) by padded rows and per-window overhead:
conv1 runs ``conv_tc_pack_t10_n1`` (16 columns x 20 rows x 4 filters per job, 20 jobs per image
in 3 rounds, 45.4 KB of shared memory), conv2 ``conv_tc_t6_n2`` (36 of its 34 rows, 13 jobs in
2 rounds, 75.5 KB).

The epilogue rounds each 8 x 8 (pixels x filters) half of a tile to half and transposes it in
registers with ``movmatrix``, so a lane holds two adjacent pixels of one filter: one half2 store
per lane, a warp writing 16 contiguous bytes per filter row (the neighbouring job fills the
other half of each 32-byte sector in L2). When an unpacked group has at most 4 live filters,
the tile's second pixel row is first shuffled into the lanes of the dead filters, so one
transpose and one store cover both rows. A packed tile needs neither: its lanes already hold
adjacent pixels, and a warp writes 32 contiguous bytes per filter row.

Prediction (H200: 4.2 TB/s copy bandwidth; mma.sync, not wgmma, about 450 to 500 TFLOP/s: rung
15 of the GEMM ladder measures 451 and 456 TFLOP/s on it, results/nvidia-h200.json). conv1
moves 0.66 GB, a floor of 0.157 ms, and issues 14.0 million k16-equivalent mma (57
GFLOP-equivalent of tensor work for 25 GFLOP of convolution: half the filter slots and 7 of 56
k slots are padding), about 0.12 ms, so it should be memory- and issue-bound: 40 jobs x about
290 instructions per image, plus the rewrite of the input, is about 0.17 to 0.19 ms. conv2
moves 0.50 GB (0.119 ms) but needs 21.8 million k16-equivalent mma (89.5 GFLOP-equivalent for
72.5 GFLOP, 81% useful: 49 of 56 k slots, 1,156 of 1,248 pixels), 0.18 to 0.2 ms of tensor
time: the tensor cores, not memory, set its time. Predicted: conv1 0.17 to 0.23 ms, conv2 0.17
to 0.21 ms, both within 2x of their floors and several times faster than cuDNN on these shapes.

Measured on an H200: the prediction missed by a factor of three. The first version of this
kernel (commit 98a7c13) took 0.643 ms (conv1) and 0.765 ms (conv2). Nsight Compute
(results/nvidia-h200-profile-conv-r08-before.json) showed why: the kernel was bound neither by
memory (DRAM 21% and 13% busy) nor by the tensor cores, but by its other instructions. It
executed 350 and 363 million warp instructions, about 35,000 per image, of which HMMA were only
4.6% and 6.9%; the schedulers issued on 57% and 50% of cycles, with 4 warps each to choose from.
The prediction had counted about 290 instructions per warp job; the job cost three times that.
Two things the count left out: the rewrite of the staged input into pair-expanded words (27% of
conv1's instructions, 44% of conv2's: one warp per input row, most lanes idle on conv2's
40-column rows, a run-time division per row) and run-time integer divisions (by Wo, by the
number of column groups, by bands and chunks), which the GPU does in software, about 25
instructions each, six per job.

The change: every run-time division became one multiply-high by a magic number that the
launcher computes (``fast_division``; passed as parameters, so they cost no registers: the
first try built them in the kernel, which pushed the two main kernels to the 128-register cap
and into spills); the per-job group and filter-group indices are kept by subtraction across
rounds; and the rewrite became one walk of all 256 threads over a channel's words, stepping by
a precomputed (rows, columns) stride with no division in the loop. Predicted: about 19,000 and
16,000 instructions per image (46% and 56% fewer), near 0.35 ms per layer. Measured
(results/nvidia-h200-profile-conv1-unpacked.json, -conv2-pair-words.json): 268 and 242 million
warp instructions, about 26,800 and 24,200 per image (23% and 33% fewer), HMMA 6.0% and 10.3%
of them. The old rewrite loop cost 110 warp instructions per input row on conv1 and 95 on conv2
(relayout_instructions in the first version's profile): about 37 per 32 words on conv1's
94-word rows, where most of the cost is the loads, stores and edge tests of every word, which
the new walk still pays; about 76 per 32 words on conv2's 40-word rows, whose second pass left
most lanes idle, which is likely why conv2 gained more than conv1. Timed by ``ladder bench``
(results/nvidia-h200.json as of commit ab5b11d): 0.543 ms (conv1) and 0.556 ms (conv2), 1.099
ms for both, 17.12x cuDNN FP32's 18.817 ms in the same run (target: 5x, met). Against the
floors of 0.156 and 0.117 ms that is 3.49x and 4.74x (target: within 2x, missed). A variant
with three blocks per SM (``__launch_bounds__(256, 3)``, 80 registers) was slower on both
layers, so two blocks of 8 warps stay.

What limited it then: the work around the mma (issue slots 56% and 47% busy, occupancy 24%:
121 registers per thread allow 16 warps per SM), with conv2 also waiting at the staging
barriers (only two rounds of jobs per image).

Packing conv1 (described above). Predicted: half the mma (HMMA 16 to 8 million), half the jobs
per image (40 to 20), no shuffle or transpose before the stores and half the rewrite, about
16,800 warp instructions per image instead of 26,800, so 0.25 to 0.29 ms. Measured: Nsight
Compute counts 14,395 per image (results/nvidia-h200-profile-conv-r08-sass.json, "pair_words";
the unpacked kernel's was 26,800), and 8 million HMMA.

Quads. The same per-instruction counts showed what the instruction estimate had missed: of the
144 instructions of conv2's window (48 of them HMMA), 66 were register moves (MOV and
IMAD.MOV), and 40 of conv1's 114. HMMA reads its A operand from four consecutive registers,
and the quad built from pair words, (F(2k), F(2k + 1), F(2k + 1), F(2k + 2)), repeats one
of them, so ptxas assembled each quad with register copies. Staging
the quads themselves (twice the shared memory of the words, one 16-byte load each) removes
them all. Predicted: about 65 instructions per window and 14% fewer instructions for conv2,
with the rewrite costing about what it did (half as many entries, each of three words).
Measured: windows of 71 (conv2) and 63 (conv1) instructions with no moves, 20,075 and 13,007
warp instructions per image (17% and 10% fewer; "quads" in the same file).

Timed by ``ladder bench`` after both changes (results/nvidia-h200.json as of commit d458bf8):
0.261 ms (conv1) and
0.527 ms (conv2), 0.788 ms for both, 23.89x cuDNN FP32's 18.826 ms in the same run (target: 5x,
met). Against the floors that is 1.67x for conv1 (target: within 2x, met; it was 3.49x) and
4.49x for conv2 (missed; it was 4.74x). conv1 now keeps DRAM 50% busy (Nsight Compute,
results/nvidia-h200-profile-conv1.json). conv2 gained 5% for 17% fewer instructions because it
is no longer bound by issuing them: the schedulers issue on 42% of cycles (-conv2.json), and the
warp samples show why the rest are lost: waiting on fixed-latency results (28%, chains of mma
into the same accumulators and the address arithmetic before loads), at the staging barriers
(21%), and on shared-memory loads (15%).

How far conv2 can go differs from conv1. conv1's tensor work is now 28.7 GFLOP-equivalent (7
million k16-equivalent mma), a small part of its time. conv2's 89.5 GFLOP-equivalent takes
0.196 to 0.198 ms at the 451 to 456 TFLOP/s that mma.sync reaches in the GEMM ladder (rung 15),
83 to 85% of the 0.235 ms that twice its floor (0.117 ms) allows, leaving about 15% for
staging, rewriting and storing, which a large GEMM does not have to fit beside its mma. So
conv2's target is not expected with mma.sync. Steps not yet taken: stage the next image while
the warps compute the current one, which removes most barrier waits; stage only even columns
for conv2 too, with both column shifts as separate n8 tiles (the packing idea without empty
slots to fill: half the rewrite and half the quads, so that two buffers of them, 2 x 27 KB
instead of 2 x 54 KB, still leave room for two blocks per SM; no transpose); and Hopper's wgmma
(rung 16 of the GEMM ladder: 676 and 686 TFLOP/s, 0.130 to 0.132 ms for the same work, about
44% of the budget left), or less padding (19% of conv2's tensor work multiplies the 8th, zero
filter column and padded pixels).

Leaner packed stores and aligned input words (found while working on rung 9, whose kernel this
is; its docstring has the SASS reading). The general epilogue tests both halves of a pair, their
row and their alignment at every store and rebuilt a 64-bit address each time, about 13
instructions per store; when Wo is even and y 4-byte aligned, a packed pair is always two
adjacent, aligned outputs of one row, so that case stores one 32-bit word with only a row test
(about 6.5 instructions). When W is even, a packed column's pair word is one aligned 32-bit word
of the staged rows: one load and one test instead of two and four. conv1 (W = 86, Wo = 80) takes
both. Measured by Nsight Compute (results/nvidia-h200-profile-conv1-lean.json): 10,895 warp
instructions per image instead of 13,007 (16% fewer), DRAM 59% busy instead of 50%; by ``ladder
bench`` (results/nvidia-h200.json as of commit aa80e78): conv1 0.222 ms, 15% faster than 0.261,
1.43x its floor (target: within 2x, met), and rung 8's sum 0.740 ms, 25.44x cuDNN FP32's 18.818
ms in the same run (target: 5x, met). conv2 runs unpacked on this rung and is unchanged (0.518
ms, 4.44x).

compute-sanitizer (``ladder sanitize conv``, results/nvidia-h200-sanitize-conv.json) found one
invalid 16-byte read in this rung: the last cp.async chunk of x crossed the end of the array
when B C H W is not a multiple of 8 (src-size zero-filled the tail, but the access still
crossed). That chunk is now copied half by half; memcheck and racecheck report no errors.

ptxas reports (``ladder check conv --rungs tensor-core``, sm_90; sm_80 in brackets), with
``__launch_bounds__(256, 2)``: conv_tc_pack_t10_n1 125 registers (124), conv_tc_t6_n2 124
(119), conv_tc_t10_n1 128 (127), conv_tc_pack_t6_n1 and conv_tc_t6_n1 95 (92, 93),
conv_tc_t2_n2 76 (75), conv_tc_pack_t2_n1 and conv_tc_t2_n1 60 and 61 (60, 59), and the
chunked kernels 64 and 77 (60, 72); no spill stores or loads, no stack, in any of them. Two
blocks of 8 warps fit per SM.

Checked without a GPU by ``tests/test_conv_tensor_core_emulation.py``: a lane-by-lane NumPy
emulation of the kernel (the .cu index formulas, the planner's layout, the PTX fragment tables
of m16n8k16, m16n8k8 and movmatrix) over odd shapes, every kernel variant, bands, channel
chunks, packed kernels (odd Wo, K = 1 and 8, M = 1 and 9), K up to 12, C K K = 3240 and
M = 70, against float64, with every output stored once; both paths of the packed rewrite (even
and odd W) and of the packed epilogue (aligned pairs, and the general one for odd Wo or a
misaligned y).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ladder.conv.problem import LayerShape, check_arrays, size_of
from ladder.core import cuda_cpp
from ladder.core.cuda_cpp import pointer
from ladder.core.rung import rung

SOURCE = cuda_cpp.source(__file__, "r08_tensor_core.cu", archs=("sm_80", "sm_90"))

# The same constants as r08_tensor_core.cu (tests/test_conv_tensor_core_emulation.py checks)
NWARPS = 8  # warps per block
THREADS = 32 * NWARPS
P_BLOCK = 8  # filter rows per window: PAIRS k16 steps (the last may be a k8 step)
PAIRS = P_BLOCK // 2
Q_CHUNK = 8  # filter columns per k8 half of a k16 step
FRAG_BYTES = 256  # one B fragment (k16 x n8): 32 lanes x (b0, b1)
QUAD_BYTES = 16  # one A quad: four 32-bit pair words
ALIGN = 16  # bytes: x is read in 16-byte cp.async chunks

# T (m16 tiles, 2T output rows, per warp job) compiled for each NT (n8 tiles, 8 NT filters)
TILES = {1: (10, 6, 2), 2: (6, 2)}  # packed kernels: those of NT = 1 (4 filters x 2 shifts)
PACK_FILTERS = 4  # filters of a packed n8 tile
WARPGROUP = 4  # warps of a wgmma job (rung 9)
WG_TILES = {1: (1,), 2: (1,), 4: (3, 2, 1)}  # rung 9: T per NT (n8 tiles: 4 NT filters)
WG_CHUNKED = (1, 4)  # rung 9's chunked kernel: (T, NT)
WGB_TILES = {2: (2, 1), 4: (2, 1), 8: (2, 1)}  # rung 10: T per NT (n8 tiles: 2 NT filters)
WGB_CHUNKED = (1, 8)  # rung 10's chunked kernel: (T, NT)
JOB_TILES = {1: (2, 1), 2: (1,), 3: (1,), 4: (1,)}  # rung 11: T by C (K <= 7), C 4T + 4 quads
CHUNKED_TILES = 2  # the kernels that stage channels in chunks inside each round
SMEM_TARGET = 96 * 1024  # bytes a block tries to stay under: two blocks per SM, like registers
# rung 12 (bulk copies) also holds an image's output: two blocks per SM take all of sm_90's
# 228 KB (1 KB of each block's is the system's)
BULK_SMEM_TARGET = 113 * 1024
SMEM_LIMIT = 227 * 1024  # the opt-in maximum per block on sm_90 (sm_80: 163 KB)
# the kernel's scalar parameters after the three pointers, in order (the .cu macro's list)
PARAMS = (
    "x_halves", "B", "C", "M", "H", "W", "K", "Ho", "Wo", "QC", "PB", "Wn", "NFG", "NTP",
    "band_rows", "RIN", "bands", "items", "chunk_channels", "chunks", "cols", "quad_stride",
    "slot_chunks", "quads_at", "raw_at", "bands_magic", "bands_shift", "wn_magic", "wn_shift",
    "slot_magic", "slot_shift", "cols_magic", "cols_shift", "step_rows", "step_cols", "out_at",
    "bar_at",
)  # fmt: skip


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def fast_division(d: int) -> tuple[int, int]:
    """(magic, shift) for the kernel's ``fast_div``: n // d == (umulhi(n, magic) + n) >> shift
    for 0 <= n < 2**31, with shift = ceil(log2 d) and magic = ceil(2**(32 + shift) / d) - 2**32
    (a 33-bit multiplier whose top bit is the ``+ n``). One multiply-high replaces a run-time
    integer division, which the GPU does in software."""
    if d < 1:
        raise ValueError(f"a divisor must be at least 1, got {d}")
    shift = (d - 1).bit_length()
    return _ceil(1 << (32 + shift), d) - (1 << 32), shift


def _fast_div_part(divisor: str, part: int) -> property:
    """A Plan property: part 0 (magic) or 1 (shift) of ``fast_division`` of another property."""
    return property(lambda plan: fast_division(getattr(plan, divisor))[part])


@dataclass(frozen=True)
class Plan(LayerShape):
    """How one launch covers a shape: the kernel, the item (band x channel chunk) sizes and
    the shared-memory layout. Everything the kernel does not compute itself is here."""

    size: tuple[int, int, int, int, int, int]  # (B, C, M, H, W, K)
    tiles: int  # T: m16 tiles stacked per warp job, 2T output rows
    n_tiles: int  # NT: n8 tiles per warp job, 8 NT filters
    chunked: bool  # channels staged in chunks inside each round
    band_rows: int  # output rows per item, a multiple of 2T
    chunk_channels: int  # channels staged at once
    packed: bool = False  # two output columns per n8 tile (rung 8: at most 4 filters; see the .cu)
    wgmma: bool = False  # rung 9's kernels: warpgroup jobs (4 warps) and wgmma (r09_wgmma.cu)
    blocks: bool = False  # rung 10's: row shifts packed too, 2 x 2 output blocks (wgmma only)
    one_group: bool = False  # rung 11's: one wgmma group per job, a sliding rewrite (blocks)
    bulk: bool = False  # rung 12's: rung 11's with bulk copies in (and out: see out_bytes)
    out_buffer: bool = True  # rung 12: stage whole images' output in shared memory if it can

    @property
    def tile_rows(self) -> int:
        """Output rows of an m16 tile: two, or (blocks) two block rows of two."""
        return 4 if self.blocks else 2

    # shapes derived from the size (and Ho, Wo from LayerShape)
    @property
    def QC(self) -> int:
        """8-column chunks of a filter row; packed, the shifted copy reaches column K."""
        return _ceil(self.size[5] + self.packed, Q_CHUNK)

    @property
    def PB(self) -> int:
        """8-row blocks of a filter; with row shifts, the shifted copy reaches row K."""
        return _ceil(self.size[5] + self.blocks, P_BLOCK)

    @property
    def Wn(self) -> int:
        """Columns per sub-band row as jobs number them: output columns, or column pairs."""
        return _ceil(self.Wo, 2) if self.packed else self.Wo

    @property
    def NFG(self) -> int:
        per_group = (PACK_FILTERS if self.packed else 8) * self.n_tiles
        return _ceil(self.size[2], per_group // 2 if self.blocks else per_group)

    @property
    def NTP(self) -> int:
        return self.NFG * self.n_tiles

    @property
    def RIN(self) -> int:
        return self.band_rows + self.size[5] - 1

    @property
    def bands(self) -> int:
        return _ceil(self.Ho, self.band_rows)

    @property
    def items(self) -> int:
        return self.size[0] * self.bands

    @property
    def chunks(self) -> int:
        return _ceil(self.size[1], self.chunk_channels)

    @property
    def x_halves(self) -> int:
        b, c, _, h, w, _ = self.size
        return b * c * h * w

    # shared memory: B fragments | the input's A quads | raw input slots
    @property
    def cols(self) -> int:
        """Quad columns per channel: one past the widest a window reads, w + 8 qc + 2t
        (packed: column pair j reads quad columns j + 4 qc + t)."""
        if self.packed:
            return self.Wn + Q_CHUNK // 2 * self.QC - 1
        return self.Wo + Q_CHUNK * self.QC - 2

    @property
    def quad_stride(self) -> int:
        """Quads per column: one per two input rows, an odd count so that the 8 columns of a
        quarter warp's 16-byte loads fall in 8 different groups of 4 banks. With row shifts
        (blocks) a column holds every quad a window can read, up to quad 2T + 1 of the last
        window of the last sub-band (2T quads per sub-band, 4 per window)."""
        if self.blocks:
            sub_bands = self.band_rows // (self.tile_rows * self.tiles)
            return (2 * self.tiles * sub_bands + 4 * self.PB - 2) | 1
        return _ceil(self.RIN, 2) | 1

    @property
    def slot_chunks(self) -> int:
        """16-byte chunks per channel's raw slot: its rows and up to 7 halves of skew."""
        return (self.RIN * self.size[4] + 14) // 8

    @property
    def frag_bytes(self) -> int:
        return self.chunk_channels * self.QC * self.PB * PAIRS * self.NTP * FRAG_BYTES

    @property
    def quads_at(self) -> int:
        return self.frag_bytes

    @property
    def quad_bytes(self) -> int:
        return self.chunk_channels * self.cols * self.quad_stride * QUAD_BYTES

    @property
    def raw_at(self) -> int:
        return self.quads_at + self.quad_bytes

    @property
    def raw_end(self) -> int:
        return self.raw_at + self.chunk_channels * self.slot_chunks * 16

    @property
    def out_bytes(self) -> int:
        """Rung 12's output buffer: a whole image's output (M Ho Wo halves), when an item is a
        whole image, Wo is even (the epilogue's 32-bit pairs) and M Ho Wo is a multiple of 8
        (every image's output 16-byte aligned, a whole number of 16-byte chunks); else 0."""
        _, _, m, _, _, _ = self.size
        halves = m * self.Ho * self.Wo
        whole = self.bulk and self.out_buffer and self.bands == 1
        whole = whole and self.Wo % 2 == 0 and halves % 8 == 0
        return 2 * halves if whole else 0

    @property
    def out_at(self) -> int:
        return self.raw_end if self.out_bytes else 0

    @property
    def bar_at(self) -> int:
        """Rung 12's mbarrier (8 bytes), after everything else; 0 (unused) otherwise."""
        return self.raw_end + self.out_bytes if self.bulk else 0

    @property
    def smem_bytes(self) -> int:
        return self.bar_at + 8 if self.bulk else self.raw_end

    # the divisors of the kernel's index arithmetic, as fast_div multipliers and shifts
    bands_magic = _fast_div_part("bands", 0)
    bands_shift = _fast_div_part("bands", 1)
    wn_magic = _fast_div_part("Wn", 0)
    wn_shift = _fast_div_part("Wn", 1)
    slot_magic = _fast_div_part("slot_chunks", 0)
    slot_shift = _fast_div_part("slot_chunks", 1)
    cols_magic = _fast_div_part("cols", 0)
    cols_shift = _fast_div_part("cols", 1)

    @property
    def step_rows(self) -> int:
        """Rows of a channel's quads that THREADS quads span in the relayout walk."""
        return THREADS // self.cols

    @property
    def step_cols(self) -> int:
        return THREADS % self.cols

    @property
    def kernel_name(self) -> str:
        if self.one_group:
            kind = "wgk" if self.bulk else "wgj"
            return f"conv_{kind}_c{self.size[1]}_t{self.tiles}_n{self.n_tiles}"
        if self.blocks:
            return f"conv_wgb_{'chunked_' if self.chunked else ''}t{self.tiles}_n{self.n_tiles}"
        if self.wgmma:  # always packed
            return f"conv_wg_{'chunked_' if self.chunked else ''}t{self.tiles}_n{self.n_tiles}"
        mode = "chunked_" if self.chunked else "pack_" if self.packed else ""
        return f"conv_tc_{mode}t{self.tiles}_n{self.n_tiles}"

    @property
    def job_warps(self) -> int:
        """Warps per job: one (mma.sync), or the 4 of a warpgroup (wgmma)."""
        return WARPGROUP if self.wgmma else 1

    @property
    def rounds(self) -> int:
        """Rounds of jobs in a full band (NWARPS / job_warps jobs per round)."""
        sub_bands = _ceil(min(self.band_rows, self.Ho), self.tile_rows * self.tiles)
        groups = _ceil(sub_bands * self.Wn, 8)
        jobs = _ceil(groups, self.job_warps) * self.NFG
        return _ceil(jobs, NWARPS // self.job_warps)

    def params(self) -> dict[str, int]:
        """PARAMS by name: the size, then what the launcher derives for the kernel."""
        given = dict(zip(("B", "C", "M", "H", "W", "K"), self.size, strict=True))
        return {name: given[name] if name in given else getattr(self, name) for name in PARAMS}

    def scalars(self) -> tuple[Any, ...]:
        """The kernel's arguments after the pointers to x, w and y: PARAMS, typed."""
        typed = [
            np.int64(v) if name == "x_halves" else (np.uint32 if "magic" in name else np.int32)(v)
            for name, v in self.params().items()
        ]
        return tuple(typed)


def _tiles(ho: int, choices: tuple[int, ...]) -> int:
    """T for a height: fewest padded rows weighted by the per-window overhead (the window's
    2T + 7 row loads and the B fragments serve 2T rows), larger T on ties."""
    return min(choices, key=lambda t: (_ceil(ho, 2 * t) * 2 * t * (1 + 2 / t), -t))


def _wg_tiles(
    ho: int, wn: int, n_filter_groups: int, choices: tuple[int, ...], tile_rows: int = 2
) -> int:
    """Rung 9's T for a whole image: fewest rounds of warpgroup jobs (a job spans 4 groups of 8
    columns, NWARPS / 4 jobs per round) times a job's cost, taken as T + 1 (its T tiles plus
    the per-window overhead that they share: quad loads, fence, wait, epilogue setup); larger T
    on ties. On conv2 this picks T = 3 (2 even rounds of 2 jobs, 768 A rows per image) over
    T = 2 (3 rounds of 5 jobs, 640 A rows): measured 0.412 and 0.423 ms, T = 1 0.467 ms, in
    one-off timings (results/nvidia-h200-conv-wgmma-plans.json). After the leaner stores the
    order of T = 2 and 3 flipped (0.374 against 0.384 ms, "after_lean_stores" in that file);
    the score was left as it is, 3% off on conv2. Rung 10's tiles are 4 rows (tile_rows), and
    its ties go to the smaller T: on conv2 T = 1 (3 rounds of 5 jobs) and T = 2 (2 rounds of 3)
    tie, and T = 1 measured 0.382 ms against 0.411 (one-off timings,
    results/nvidia-h200-conv-row-shift-plans.json)."""
    span, slots = 8 * WARPGROUP, NWARPS // WARPGROUP

    def cost(t: int) -> tuple[int, int]:
        jobs = _ceil(_ceil(ho, tile_rows * t) * wn, span) * n_filter_groups
        return _ceil(jobs, slots) * (t + 1), t if tile_rows == 4 else -t

    return min(choices, key=cost)


def plan(
    size: tuple[int, ...],
    smem_limit: int = SMEM_LIMIT,
    wgmma: bool = False,
    blocks: bool = False,
    one_group: bool = False,
    bulk: bool = False,
) -> Plan:
    """The launch plan for (B, C, M, H, W, K): a whole image per item when it fits in
    SMEM_TARGET bytes, else bands of rows, else (up to smem_limit) channels in chunks.
    ``wgmma``: rung 9's kernels (always packed; NT = 1, 2 or 4 n8 tiles by M). ``blocks``:
    rung 10's (wgmma, row shifts packed too; NT = 2, 4 or 8 by M). ``one_group``: rung 11's,
    rung 10's with one wgmma group per job where C is in JOB_TILES (which limits T: every
    channel's quads are in registers at once), K <= 7 (one window per channel) and no channel
    chunks are needed; rung 10's kernels otherwise. ``bulk``: rung 12's, rung 11's with bulk
    copies where rung 11's applies, with a shared-memory budget that fits a whole image's
    output too (BULK_SMEM_TARGET); rung 10's kernels otherwise."""
    b, c, m, h, w, k = (int(v) for v in size)
    size = (b, c, m, h, w, k)
    ho = h - k + 1
    blocks = blocks or one_group or bulk
    wgmma = wgmma or blocks
    one_group = (one_group or bulk) and c in JOB_TILES and k + 1 <= P_BLOCK
    bulk = bulk and one_group
    target = BULK_SMEM_TARGET if bulk else SMEM_TARGET
    if blocks:
        packed = True
        n_tiles = 2 if m <= PACK_FILTERS else 4 if m <= 2 * PACK_FILTERS else 8
        groups = _ceil(m, PACK_FILTERS * n_tiles // 2)
        tiles = JOB_TILES[c] if one_group else WGB_TILES[n_tiles]
        t = _wg_tiles(ho, _ceil(w - k + 1, 2), groups, tiles, tile_rows=4)
        chunked_t, chunked_nt = WGB_CHUNKED
    elif wgmma:
        packed = True
        n_tiles = 1 if m <= PACK_FILTERS else 2 if m <= 2 * PACK_FILTERS else 4
        groups = _ceil(m, PACK_FILTERS * n_tiles)
        t = _wg_tiles(ho, _ceil(w - k + 1, 2), groups, WG_TILES[n_tiles])
        chunked_t, chunked_nt = WG_CHUNKED
    else:
        # Packing fills conv1's 4 empty filter slots; with K a multiple of 8 the shifted copy
        # would need one more column chunk, as many mma as the slots it fills.
        packed = m <= PACK_FILTERS and k % Q_CHUNK != 0
        n_tiles = 2 if _ceil(m, 8) % 2 == 0 and not packed else 1
        t = _tiles(ho, TILES[n_tiles])
        chunked_t, chunked_nt = CHUNKED_TILES, n_tiles
    rows = (4 if blocks else 2) * t
    for budget in dict.fromkeys((min(target, smem_limit), smem_limit)):
        for band in range(_ceil(ho, rows) * rows, 0, -rows):
            found = Plan(size, t, n_tiles, False, band, c, packed, wgmma, blocks, one_group, bulk)
            if found.smem_bytes <= budget:
                return _checked(found)

    def chunked(cc: int) -> Plan:
        band = (4 if blocks else 2) * chunked_t
        return Plan(size, chunked_t, chunked_nt, True, band, cc, wgmma, wgmma, blocks)

    for budget in dict.fromkeys((min(SMEM_TARGET, smem_limit), smem_limit)):
        for cc in range(c, 0, -1):
            if chunked(cc).smem_bytes <= budget:
                return _checked(chunked(cc))
    raise ValueError(
        f"conv size {size} is too large for this rung: one channel's input rows and weights "
        f"need {chunked(1).smem_bytes} bytes of shared memory, more than the {smem_limit} a "
        "block can have"
    )


def out_buffer_or_not(found: Plan, blocks_per_sm: Callable[[int], int]) -> Plan:
    """Rung 12's plan with its output buffer, unless the buffer's shared memory would cost a
    resident block per SM (``blocks_per_sm``: blocks for a block's shared-memory bytes, for the
    plan's kernel): then the plan without it (the jobs store to global memory). conv1 at 70
    registers fits 3 blocks per SM without the 50 KB buffer and 2 with it, and measured
    0.2379 ms without it against 0.2628 with it (one-off timings on the H200,
    results/nvidia-h200-conv-bulk-variants.json); conv2 runs 2 blocks either way (128
    registers) and keeps it."""
    if not found.out_bytes:
        return found
    lean = dataclasses.replace(found, out_buffer=False)
    return lean if blocks_per_sm(lean.smem_bytes) > blocks_per_sm(found.smem_bytes) else found


def _checked(found: Plan) -> Plan:
    """The kernel counts items and the elements of one output plane in int32."""
    if found.items >= 2**31 or found.Ho * found.Wo >= 2**31:
        raise ValueError(f"conv size {found.size} is too large for this rung's int32 indexing")
    return found


def cupy_stream(stream: Any) -> Any:
    """A context that makes CuPy launch on ``stream`` (a Numba or CuPy stream, or 0)."""
    import cupy

    if stream is None or (isinstance(stream, int) and stream == 0):
        return contextlib.nullcontext()
    if isinstance(stream, cupy.cuda.Stream):
        return stream
    from_external = getattr(cupy.cuda.Stream, "from_external", None)  # CuPy 14 and later
    if from_external is not None:
        return from_external(stream)
    return cupy.cuda.ExternalStream(int(stream.__cuda_stream__()[1]))


def blocks_per_sm(kernel: Any, smem: int, device: Any, threads: int = THREADS) -> int:
    """Resident blocks per SM for this kernel, its shared memory and ``threads`` per block (the
    driver's answer, or the register and shared-memory arithmetic when the driver call is not
    available)."""
    try:
        from cupy_backends.cuda.api import driver

        found = driver.occupancyMaxActiveBlocksPerMultiprocessor(kernel.kernel.ptr, threads, smem)
        if found > 0:
            return int(found)
    except Exception:  # fall back to the arithmetic below
        pass
    attrs = device.attributes
    regs = _ceil(int(kernel.num_regs), 8) * 8 * threads
    by_regs = attrs["MaxRegistersPerMultiprocessor"] // max(regs, 1)
    by_smem = attrs["MaxSharedMemoryPerMultiprocessor"] // (smem + 1024)
    return max(1, min(by_regs, by_smem, attrs["MaxThreadsPerMultiProcessor"] // threads))


@functools.lru_cache(maxsize=64)
def _configure(
    size: tuple[int, ...],
    device_id: int,
    source: cuda_cpp.CudaSource,
    wgmma: bool,
    blocks: bool,
    one_group: bool,
    fallback: cuda_cpp.CudaSource | None = None,
    bulk: bool = False,
) -> tuple[Plan, Any, int, tuple[Any, ...]]:
    """The plan, the loaded kernel (opted in to its shared memory), the grid and the scalar
    arguments for a size on a device: computed once, so that a timed launch queries nothing."""
    import cupy

    device = cupy.cuda.Device(device_id)
    smem_limit = int(device.attributes["MaxSharedMemoryPerBlockOptin"])
    found = plan(size, smem_limit, wgmma, blocks, one_group, bulk)
    # rung 11's and 12's planner falls back to rung 10's kernels, which are in rung 10's source
    fell_back = (one_group or bulk) and not found.one_group
    kernel = (fallback if fell_back else source).kernel(found.kernel_name)
    if kernel.max_dynamic_shared_size_bytes < found.smem_bytes:
        kernel.max_dynamic_shared_size_bytes = found.smem_bytes
    found = out_buffer_or_not(found, lambda smem: blocks_per_sm(kernel, smem, device))
    per_sm = blocks_per_sm(kernel, found.smem_bytes, device)
    grid = min(found.items, int(device.attributes["MultiProcessorCount"]) * per_sm)
    return found, kernel, grid, found.scalars()


def run(
    x: Any,
    w: Any,
    out: Any,
    stream: Any,
    source: cuda_cpp.CudaSource,
    wgmma: bool = False,
    blocks: bool = False,
    one_group: bool = False,
    fallback: cuda_cpp.CudaSource | None = None,
    bulk: bool = False,
) -> Any:
    """Check the arrays and launch ``source``'s kernel for their size (this rung's, or with
    ``wgmma`` rung 9's, with ``blocks`` rung 10's, with ``one_group`` rung 11's and with ``bulk``
    rung 12's, which share the planner and the launch). ``fallback``: the source of the kernels
    a ``one_group`` or ``bulk`` plan falls back to (rung 10's)."""
    import cupy

    x, w, out, _ = check_arrays(x, w, out, ("float16",))
    size = size_of(x, w)
    if out.size == 0:
        return out
    with cupy_stream(stream):
        if size[1] == 0:  # no channels: every sum is empty
            cupy.asarray(out).fill(0)
            return out
        found, kernel, grid, scalars = _configure(
            size, cupy.cuda.runtime.getDevice(), source, wgmma, blocks, one_group, fallback, bulk
        )
        x_at = int(pointer(x))
        if x_at % ALIGN:  # cp.async reads 16-byte chunks: copy x to aligned memory
            aligned = cupy.asarray(x).copy()
            x_at = int(pointer(aligned))
        pointers = (np.uint64(x_at), pointer(w), pointer(out))
        kernel((grid,), (THREADS,), (*pointers, *scalars), shared_mem=found.smem_bytes)
    return out


@rung(
    name="tensor-core",
    title="Fused implicit GEMM on tensor cores (mma.sync, pixels x filters, FP32 sums)",
    dtypes=("float16",),
    needs=("cupy",),
    units="tensor",
    min_cc=(8, 0),
)
def launch(x: Any, w: Any, out: Any = None, *, stream: Any = 0) -> Any:
    return run(x, w, out, stream, SOURCE)
