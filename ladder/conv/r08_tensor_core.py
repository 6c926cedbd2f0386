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

import functools
from dataclasses import dataclass
from typing import Any

from ladder.conv.tc import plan as tc
from ladder.core.rung import rung

SOURCE = tc.source(__file__, "r08_tensor_core.cu", archs=("sm_80", "sm_90"))

# T (m16 tiles, 2T output rows, per warp job) compiled for each NT (n8 tiles, 8 NT filters);
# the packed kernels are those of NT = 1 (4 filters x 2 shifts)
TILES = {1: (10, 6, 2), 2: (6, 2)}
CHUNKED_TILES = 2  # T of the kernels that stage channels in chunks inside each round


@dataclass(frozen=True)
class Plan(tc.Layout):
    """Rung 8's launch: mma.sync jobs of one warp, packed (at most 4 filters) or not."""

    @property
    def kernel_name(self) -> str:
        mode = "chunked_" if self.chunked else "pack_" if self.packed else ""
        return f"conv_tc_{mode}t{self.tiles}_n{self.n_tiles}"


def plan(size: tuple[int, ...], smem_limit: int = tc.SMEM_LIMIT) -> Plan:
    """The launch plan for (B, C, M, H, W, K): a whole image per item when it fits in
    SMEM_TARGET bytes, else bands of rows, else (up to smem_limit) channels in chunks."""
    b, c, m, h, w, k = (int(v) for v in size)
    size = (b, c, m, h, w, k)
    # Packing fills conv1's 4 empty filter slots; with K a multiple of 8 the shifted copy would
    # need one more column chunk, as many mma as the slots it fills.
    packed = m <= tc.PACK_FILTERS and k % tc.Q_CHUNK != 0
    n_tiles = 2 if tc.ceil_div(m, 8) % 2 == 0 and not packed else 1
    t = tc.pick_tiles(h - k + 1, TILES[n_tiles])
    return tc.fit(
        lambda band: Plan(size, t, n_tiles, False, band, c, packed),
        lambda cc: Plan(size, CHUNKED_TILES, n_tiles, True, 2 * CHUNKED_TILES, cc),
        2 * t,
        h - k + 1,
        c,
        tc.SMEM_TARGET,
        smem_limit,
    )


@functools.lru_cache(maxsize=64)
def _configured(size: tuple[int, ...], device_id: int, smem_limit: int) -> tc.Configured:
    return tc.configure(plan(size, smem_limit), SOURCE, device_id)


@rung(
    name="tensor-core",
    title="Fused implicit GEMM on tensor cores (mma.sync, pixels x filters, FP32 sums)",
    dtypes=("float16",),
    needs=("cupy",),
    units="tensor",
    min_cc=(8, 0),
)
def launch(x: Any, w: Any, out: Any = None, *, stream: Any = 0) -> Any:
    return tc.launch(x, w, out, stream, _configured)
