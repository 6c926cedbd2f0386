"""mma.sync: the warp-level tensor-core instruction in PTX, fed by ldmatrix.

What changes: the WMMA API is dropped for the instructions underneath it, as inline PTX
(``r17_mma_sync.cu``):
- ``mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32`` multiplies a 16 x 16 tile of A by a
  16 x 8 tile of B into 16 x 8 FP32 accumulators. Its fragment layout is documented (PTX ISA,
  "Matrix Fragments for mma.m16n8k16"): with g = lane / 4 and t = lane % 4, a lane holds A rows
  g and g + 8 at k columns 2t, 2t + 1 and 2t + 8, 2t + 9, B column g at the same k rows, and C
  rows g and g + 8 at columns 2t, 2t + 1.
- ``ldmatrix.sync.aligned.m8n8.x4`` loads four 8 x 8 half matrices from shared memory, each
  lane giving the address of one 16-byte row, in exactly that layout; ``.trans`` delivers B
  (stored K x N) transposed, as mma wants it.
- The block tile grows to 128 x 256 x 32 and each of the 8 warps owns a 64 x 64 tile of C (4 x 8
  mma tiles, 128 accumulators per thread); fragments are double-buffered in registers.
- Swizzle instead of padding: a 16-byte chunk spans 4 of the 32 banks, so an ldmatrix matrix
  (8 rows of one chunk) is served in one pass only if its 8 chunks sit in 8 different groups of
  4 banks. Each row's chunks are permuted by an XOR with bits of the row index (A: chunk ^
  ((row >> 1) & 3); B: chunk ^ (row & 7)), which spreads them at no cost in bytes.
- The epilogue converts to half2 and stores C straight from registers; the grid is ordered in
  groups of 16 block rows so the blocks resident together share rows of A and columns of B in L2.
Global to shared is `cp-async`'s 4-stage cp.async ring, with 24 KB stages.
Why: WMMA's fragments are opaque, so rungs `wmma-shared` and `cp-async` needed padded rows and a
staging epilogue, and their 64 x 32 warp tiles reread each fragment often. Per k16 step a warp now
issues 8 ldmatrix and 32 mma: 4 KB from shared memory for 65,536 multiply-adds (32 FLOP per byte).
Prediction: a clear step above the WMMA rungs; on an H100/H200 still well short of cuBLAS HGEMM,
at about 60-70% of it (the range commonly reported for hand-written mma.sync kernels there; a
figure from outside this project).
Measured: on an NVIDIA H200 by ``ladder bench`` (results/nvidia-h200.json): 0.309 ms at 4096³
(445.33 TFLOP/s, 1.33x `cp-async`, 0.592x cuBLAS HGEMM) and 2.422 ms at 8192³ (453.95 TFLOP/s,
1.46x, 0.645x). Nsight Compute at 4096³ (lab/gemm/2026-11-22-profiles/nvidia-h200-profile-
float16.json): shared-load bank conflicts 2 thousand (`cp-async`: 114 thousand), none on stores, SM
throughput 72.5%, occupancy 12.3% (one block per SM). A microbenchmark of the bare instruction with
constant operands (lab/gemm/2026-11-23-wgmma-shapes/nvidia-h200-wgmma-shapes.json) tops out at 631.6
TFLOP/s for mma.sync.
Verdict: held: inside the range at 8192³ and just below it at 4096³, 70-72% of what mma.sync
itself reaches on this GPU. Why 4096³ is lower is not measured; one count points at
the tail: 512 blocks of one per SM are 3.9 waves of 132 SMs (2048 blocks, 15.5 waves, at
8192³). The rest of the gap to cuBLAS is the instruction: `wgmma-descriptors`.

Lab notes: docs/notes/gemm.md#rung-15-mma-sync
"""

from ladder.core import cuda_cpp
from ladder.gemm.problem import gemm_rung

SOURCE = cuda_cpp.source(__file__, "r17_mma_sync.cu", archs=("sm_80", "sm_90"))
BM, BN, BK = 128, 256, 32  # a block's tile of C, and the K step (as in the .cu file)
STAGES = 4  # depth of the cp.async ring
THREADS = 256  # 8 warps, each a 64 x 64 tile of C
SMEM_BYTES = STAGES * (BM * BK + BK * BN) * 2  # 98,304: above the 48 KB default, so opted in


@gemm_rung(
    name="mma-sync",
    parent="cp-async",
    title="mma.sync + ldmatrix, swizzled 4-stage cp.async, 64 x 64 warp tiles",
    dtypes=("float16",),
    needs=("cupy",),
    units="tensor",
    min_cc=(8, 0),
    cc_needs="cp.async and mma.sync m16n8k16",
    tiles=(BM, BN, BK),
)
def geometry(m: int, n: int, k: int, dtype: str) -> tuple:
    """``mma_sync_gemm`` on tile-multiple sizes: a 1-D grid, which the kernel maps to tiles of C
    16 block rows a group; the ring in SMEM_BYTES of dynamic shared memory."""
    return SOURCE.kernel("mma_sync_gemm"), ((m // BM) * (n // BN),), (THREADS,), SMEM_BYTES
