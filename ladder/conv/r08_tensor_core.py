"""Tensor cores: the convolution as one fused implicit GEMM on mma.sync (FP32 sums).

What changes: the multiply-adds move to the tensor cores (``r08_tensor_core.cu``, mma.m16n8k16
in ``ladder/core/cuda/mma_sync.cuh``). Read as a GEMM, pixels are the A side (an m16 tile: 8 output
columns x 2 rows) and the filters the B side (n8 tiles of 8 filters); the im2col operand exists
only in registers. Words used from here on (docs/glossary.md): a *pair word* is the 32 bits of
two neighbouring input columns of one row; a *quad* is four pair words, rows 2k, 2k + 1,
2k + 1, 2k + 2, the A registers of every (tile, k16 step) on diagonal k, which the *rewrite*
(``rewrite_quads`` in tc/staging.cuh) stages in shared memory so that one 16-byte load fills
them; a *window* is the loop over the quads of 8 filter rows; a *job* is one warp's 8 columns x
2T rows x 8 NT filters (*T* m16 tiles down the image, *NT* n8 tiles); a *round* is one job for
every warp of a block; a *band* is the rows of an image a block stages at once. *Packed*
(M <= 4, conv1): an n8 tile holds 4 filters x 2 column shifts, so one mma covers 16 output
columns. The weights are staged once per block as ready B fragments; each run-time division is
a multiply-high by a magic number (``fast_division`` in tc/plan.py); the epilogue stores half2.
Why: a tensor core instruction does 2048 multiply-adds per warp against 32 on CUDA cores.
cuDNN's and im2col + cuBLAS's tiles of 64 to 256 filters are mostly padding at 4 or 16 filters,
and an im2col matrix repeats every input 49 times (conv1: 6.3 GB of half against the 0.66 GB
the layer must move): read each input byte once and keep the tensor cores fed.
Prediction: the floors (fewest bytes at the 4.24 TB/s copy bandwidth) are 0.156 ms (conv1,
0.66 GB) and 0.117 ms (conv2, 0.50 GB). At mma.sync's 451 to 456 TFLOP/s (`gemm/warp-tile-64`) the
tensor work is about 0.12 ms (conv1, 57 GFLOP-equivalent unpacked) and 0.18 to 0.2 ms (conv2,
89.5). Counting about 290 instructions per job: conv1 0.17 to 0.23 ms and conv2 0.17 to
0.21 ms, both within 2x of their floors; the targets: the sum of both layers at least 5x
faster than cuDNN FP32, and each layer within 2x of its floor.
Measured: on an NVIDIA H200 by ``ladder bench`` (results/nvidia-h200.json): conv1 0.224 ms
(1.45x its floor) and conv2 0.519 ms (4.45x); the sum 24.22x faster than cuDNN FP32. Nsight
Compute: conv1 10,895 warp instructions per image, DRAM 59% busy
(lab/conv/2026-11-23-tensor-core/nvidia-h200-profile-conv1-lean.json); conv2 20,075, the schedulers
issuing on 42% of cycles (lab/conv/2026-11-23-tensor-core/nvidia-h200-profile-conv2.json).
Verdict: conv1 and the 5x target held; conv2 missed. The first version took three times the
count: it had left out the rewrite and the run-time integer divisions (about 25 instructions
each, done in software), which the magic numbers, a division-free rewrite, packing, staged
quads (no register moves) and leaner packed stores then removed. conv2's tensor work alone
takes 83 to 85% of twice its floor at mma.sync's rate, and its warps wait more than they
issue: fixed latency 28% of the stall samples, the staging barriers 21%, shared loads 15%
(lab/conv/2026-11-23-tensor-core/nvidia-h200-profile-conv-r08-sass.json): not expected with
mma.sync; `wgmma` moves on.

Lab notes: docs/notes/conv.md#rung-8-tensor-core
"""

import functools
from dataclasses import dataclass
from typing import Any

from ladder.conv.problem import conv_rung
from ladder.conv.tc import plan as tc

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


@conv_rung(
    name="tensor-core",
    parent="fp16-staging",
    title="Fused implicit GEMM on tensor cores (mma.sync, pixels x filters, FP32 sums)",
    dtypes=("float16",),
    needs=("cupy",),
    units="tensor",
    min_cc=(8, 0),
    cc_needs="cp.async and mma.sync m16n8k16",
)
def geometry(x: Any, w: Any, out: Any) -> Any:
    """The configured kernel for this size on this device (``tc.launch_plan``)."""
    return tc.launch_plan(x, w, out, _configured)
