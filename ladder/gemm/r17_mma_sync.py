"""mma.sync: `cp-async`'s kernel with WMMA replaced by the PTX under it, ldmatrix and mma.sync.

What changes: the instructions of the math (``r17_mma_sync.cu``); `cp-async`'s 128 x 128 x 32
block tiles, 8 warps of 64 x 32, 4-stage cp.async ring and padded rows stay. The instructions
come from ``ladder/core/cuda``:
- ``mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32`` (``mma_16816``) multiplies a 16 x 16
  tile of A by a 16 x 8 tile of B into 16 x 8 FP32 sums, 4 x 4 of them per warp per k16 step.
  Its fragment layout is documented (PTX ISA, "Matrix Fragments for mma.m16n8k16"): with g =
  lane / 4 and t = lane % 4, a lane holds A rows g and g + 8 at k columns 2t, 2t + 1 and 2t + 8,
  2t + 9, B column g at the same k rows, and C rows g and g + 8 at columns 2t, 2t + 1.
- ``ldmatrix.sync.aligned.m8n8.x4`` loads four 8 x 8 half matrices from shared memory in that
  layout, each lane giving the address of one 16-byte row; ``.trans`` delivers B (stored K x N)
  transposed, as mma wants it. Each lane's row addresses are worked out once, before the K loop.
- The epilogue stores each lane's sums from registers as half2. This comes with the first
  change, not as a second idea: WMMA's accumulator layout is opaque, so `cp-async` had to stage
  its sums through shared memory to know where they go; mma.sync's is the one above.
Why: the fragment layouts become the kernel's own, each lane's row addresses included, so the
next rung can lay shared memory out as ``load_matrix_sync`` (one pointer and a leading dimension)
cannot read it (`swizzle`). By itself the step changes less than it seems: WMMA compiles to
these same instructions.
Prediction: per K tile a warp issues the same 32 HMMA.16816 and 12 LDSM (ldmatrix) as in
`cp-async`, but 84 instructions in all against 117 (ptxas of CUDA 13.0, sm_90; sm_80: 82 against
112): WMMA's loads work out every fragment's address again each tile. The tensor pipe, not
issue, should set the pace: at the 631.6 TFLOP/s mma.sync reaches on an H200
(lab/gemm/2026-11-23-wgmma-shapes/nvidia-h200-wgmma-shapes.json) a sub-partition retires an
HMMA.16816 about every 7 cycles, 870 cycles for its 4 warps' 128 per K tile, against 468 issue
slots in `cp-async` and 336 here. The epilogue's 48 shared-memory accesses per thread go, once
per tile of C. Predicted: 1.0x to 1.1x `cp-async` at 4096³ and 8192³.
Measured: on an NVIDIA H200 by ``ladder bench`` (results/nvidia-h200.json): 0.477 ms at 4096³
(287.96 TFLOP/s, 0.86x `cp-async`, 0.416x cuBLAS HGEMM) and 3.706 ms at 8192³ (296.68 TFLOP/s,
0.94x, 0.386x).
Verdict: missed: slower, where 1.0x to 1.1x was predicted, so the tensor pipe does not set this
rung's pace (its HMMAs are `cp-async`'s). Why is not measured, and the layout does not point at
bank conflicts: rows 5 and 17 chunks long put each ldmatrix matrix's 8 rows in 8 bank groups,
and `cp-async`'s profile on the same rows counts few load conflicts (114 thousand,
lab/gemm/2026-11-22-profiles/nvidia-h200-profile-float16.json). Yet `swizzle`, whose K loop
issues the same LDSM and HMMA in the same order (sm_90 SASS) and whose epilogue is this one, is
1.17x faster at 4096³ and 1.15x at 8192³: the padded rows cost this kernel something the count
misses. The only layout difference the count finds is in the copies: 8 consecutive threads' A
chunks share bank groups (2-way), though a warp's 32 still take the fewest wavefronts, and
`cp-async` copies the same way. A profile of the three rungs (wavefronts per shared-memory
instruction, stall reasons) would say what it is.

Lab notes: docs/notes/gemm.md#rung-17-mma-sync
"""

from ladder.core import cuda_cpp
from ladder.gemm.problem import gemm_rung

SOURCE = cuda_cpp.source(__file__, "r17_mma_sync.cu", archs=("sm_80", "sm_90"))
BM, BN, BK = 128, 128, 32  # a block's tile of C, and the K step (as in the .cu file)
STAGES = 4  # depth of the cp.async ring
PAD = 8  # halves added to every shared row
THREADS = 256  # 8 warps, 2 (M) x 4 (N), each a 64 x 32 tile of C
# the ring: STAGES x (A tile 128 x 40 + B tile 32 x 136) halves = 75,776 bytes, as in the .cu
SMEM_BYTES = STAGES * (BM * (BK + PAD) + BK * (BN + PAD)) * 2


@gemm_rung(
    name="mma-sync",
    parent="cp-async",
    title="ldmatrix + mma.sync in place of WMMA, on cp-async's padded tiles",
    dtypes=("float16",),
    needs=("cupy",),
    units="tensor",
    min_cc=(8, 0),
    cc_needs="cp.async and mma.sync m16n8k16",
    tiles=(BM, BN, BK),
)
def geometry(m: int, n: int, k: int, dtype: str) -> tuple:
    """``mma_sync_gemm`` on tile-multiple sizes: a block of THREADS per BM x BN tile of C, the
    ring in SMEM_BYTES of dynamic shared memory."""
    return SOURCE.kernel("mma_sync_gemm"), (n // BN, m // BM), (THREADS,), SMEM_BYTES
