"""Rung 15, mma.sync: the warp-level tensor-core instruction in PTX, fed by ldmatrix.

Rungs 13 and 14 staged A and B in shared memory (14 through a 4-stage cp.async ring) but still
multiplied through the WMMA API, whose fragments are opaque: ``load_matrix_sync`` takes one
pointer and a leading dimension, so the tiles had to be plain padded rows, and the accumulator
layout is unknown, so C went out through a shared-memory staging tile. This rung drops
``<mma.h>`` and writes the instructions underneath it as inline PTX (``r15_mma_sync.cu``):

- ``mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32`` multiplies a 16 x 16 tile of A by a
  16 x 8 tile of B into 16 x 8 FP32 accumulators (2048 multiply-adds per warp instruction). Its
  fragment layout is documented (PTX ISA, "Matrix Fragments for mma.m16n8k16"): with
  g = lane / 4 and t = lane % 4, a lane holds A rows g and g + 8 at k columns 2t, 2t + 1 and
  2t + 8, 2t + 9 (four registers of two halves), B column g at the same k rows (two registers)
  and C rows g and g + 8 at columns 2t, 2t + 1 (four floats).
- ``ldmatrix.sync.aligned.m8n8.x4`` loads four 8 x 8 half matrices from shared memory in one
  warp instruction, each lane giving the address of one 16-byte row, and delivers them in
  exactly that fragment layout: one ldmatrix per 16 x 16 A fragment. B is stored K x N with N
  contiguous ("MN-major"), but mma wants each lane to hold a column of B; ``.trans`` delivers
  the transpose, so one ``ldmatrix.x4.trans`` fills the B fragments of two n8 tiles.
- The per-lane addresses let the tiles be swizzled instead of padded (below), and the known
  accumulator layout lets the epilogue convert to half2 and store C straight from registers.

The block tile grows from rung 14's 128 x 128 x 32 to 128 x 256 x 32, and each of the 8 warps
owns a 64 x 64 tile of C instead of 64 x 32: 4 x 8 mma tiles, 128 FP32 accumulators per
thread. Per k16 step a warp issues 4 ldmatrix for A, 4 for B and 32 mma: 4 KB read from
shared memory for 65,536 multiply-adds (32 FLOP per byte), each A fragment used by 8 mma and
each B fragment by 4. Fragments are double-buffered in registers: the next k16 step's ldmatrix
is issued before the current step's 32 mma. Per K tile a block moves 24 KB from L2 or DRAM for
1,048,576 multiply-adds (85 FLOP per byte, against 64 for rung 14's tile).

Global to shared: rung 14's 4-stage ring and group counting (tile g in commit group g, empty
groups past the end of K, ``cp.async.wait_group 2`` and one barrier per K tile), now with
24 KB stages (A 128 x 32, B 32 x 256: 96 KB of dynamic shared memory) filled by six 16-byte
``cp.async.cg`` per thread, three tiles ahead of the one being multiplied. The wait and the
barrier come before the last k16 step of a tile, so the next tile's first fragments are
loaded while that step's mma run.

Swizzle instead of padding. Shared memory has 32 four-byte banks; a 16-byte chunk spans 4 of
them, so the bank group of byte address x is (x / 16) % 8, and an 8 x 8 ldmatrix matrix (8
rows of one chunk) is served in one pass only if its 8 chunks sit in 8 different groups.
Unswizzled, 8 consecutive A rows (64 bytes each) at one k chunk land in 2 groups (4-way
conflict) and 8 B rows (512 bytes each) at one n chunk in 1 group (8-way). Each row's chunks
are therefore permuted by an XOR of the chunk index with bits of the row index:

    A: chunk' = chunk ^ ((row >> 1) & 3)        B: chunk' = chunk ^ (row & 7)

For A, 8 consecutive rows give 8 distinct pairs (row % 2, (row >> 1) & 3), hence 8 groups;
for B, row & 7 runs through 0..7. A permutation within a row keeps the cp.async stores
conflict-free too (8 consecutive threads write one B row's 8 consecutive chunks, or two A
rows' 4 chunks each), and unlike rung 14's padded rows (2,560 bytes per stage, 16 %) it costs
no bytes. The XOR depends only on the lane, the k step (A) and the n-tile pair (B), so the
ldmatrix addresses are computed once, before the loop.

The grid is one-dimensional and rasterized in groups of 16 block rows, so the ~132 blocks
resident at once cover about a 2048 x 2048 square of C and share its rows of A and columns of
B in L2. At 4096 the grid is 512 blocks, 3.9 waves of 132 SMs; at 8192, 2048 blocks (15.5).
Edges: the launcher pads M to 128, N to 256 and K to 32.

ptxas reports (CUDA 13.0, sm_90): 236 registers per thread, 0 bytes of spill stores and loads,
0 bytes of stack (sm_80: 234 registers, no spills). With 98,304 bytes of dynamic shared memory
and 256 x 236 registers a block, one block (8 warps) runs per SM, against rung 14's two.

Why it still stops short of cuBLAS on Hopper: mma.sync is Ampere's instruction (HMMA in the
SASS). Each warp must load every operand into registers (ldmatrix), issue its own small
synchronous MMAs and compute every copy address, and all of that shares the issue slots and
register file with the math. cuBLAS on H100/H200 uses ``wgmma.mma_async``: a warpgroup of 4
warps multiplies 64 x N x 16 tiles read directly from swizzled shared memory, asynchronously,
while the TMA copy engine moves tiles from global memory without any thread instructions.
Rung 16 introduces both.

Prediction: a clear step above the WMMA rungs (wider warp tiles, no bank conflicts, no staging
epilogue), and on an A100-class GPU, where mma.sync is the native path, near cuBLAS. On an
H100/H200 it should stop well short of cuBLAS HGEMM: hand-written mma.sync kernels are
commonly reported at about 60-70% of it there (predicted, not measured).

Measured on an H200 by ``ladder bench`` (results/nvidia-h200.json): 451.06 TFLOP/s at 4096³
(0.592x cuBLAS HGEMM) and 456.44 at 8192³ (0.611x): at the bottom of the range predicted above
at 8192³ and just below it at 4096³. The fastest rung without Hopper's own instructions.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ladder.core import cuda_cpp
from ladder.core.rung import rung
from ladder.gemm.tensor_core import launch_tiled

SOURCE = cuda_cpp.source(__file__, "r15_mma_sync.cu", archs=("sm_80", "sm_90"))
BM, BN, BK = 128, 256, 32  # a block's tile of C, and the K step (as in the .cu file)
STAGES = 4  # depth of the cp.async ring
THREADS = 256  # 8 warps, each a 64 x 64 tile of C
SMEM_BYTES = STAGES * (BM * BK + BK * BN) * 2  # 98,304: above the 48 KB default, so opted in


@rung(
    name="mma-sync",
    title="mma.sync + ldmatrix, swizzled 4-stage cp.async, 64 x 64 warp tiles",
    dtypes=("float16",),
    needs=("cupy",),
    units="tensor",
    min_cc=(8, 0),
)
def launch(A: Any, B: Any, C: Any = None) -> Any:
    kernel = SOURCE.kernel("mma_sync_gemm")
    if kernel.max_dynamic_shared_size_bytes < SMEM_BYTES:
        kernel.max_dynamic_shared_size_bytes = SMEM_BYTES  # over the 48 KB default

    def body(a: np.uint64, b: np.uint64, c: np.uint64, m: int, n: int, k: int) -> None:
        grid = ((m // BM) * (n // BN),)  # 1-D: the kernel maps it to tiles, 16 block rows a group
        args = (a, b, c, np.int32(m), np.int32(n), np.int32(k))
        kernel(grid, (THREADS,), args, shared_mem=SMEM_BYTES)

    return launch_tiled(A, B, C, (BM, BN, BK), body)
