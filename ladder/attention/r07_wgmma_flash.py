"""wgmma flash: `tensor-core-flash`'s kernel with both products on Hopper's warpgroup multiply.

What changes: the instructions of the two products (``r07_wgmma_flash.cu``). `gqa-packed` packed
GQA heads, a side step; this starts again from `tensor-core-flash` (below, "the mma.sync rung").
Its block is 128 query rows in 8 warps of one m16 tile, two warpgroups of 64 rows, the row layout
of ``wgmma``: a m64nN wgmma's accumulator holds, warp by warp, exactly the mma.sync rung's m16n8
fragments, so the masking, the online softmax and the epilogue are its lines. (Its tuned blocks
differ: 4 warps of two m16 tiles at d = 64, 4 warps of one, 64 rows, at d = 128; the ratios below
include that.)
- ``S = Q·Kᵀ``: D / 16 ``wgmma.m64n64k16`` per key tile, Q and K read from shared memory through
  descriptors (both K-major); no ldmatrix, and Q's fragments no longer sit in registers.
- ``O += P·V``: 4 ``wgmma.m64nDk16`` per key tile with P in registers (wgmma's register A
  fragment is mma.sync's, so the mma.sync rung's conversion of S to half2 is unchanged), V
  through a descriptor, transposed by the instruction.
- shared tiles in the layout a descriptor reads: rows of 64 halves, 128 bytes, chunk c of row r
  at c ^ (r & 7) (the mma.sync rung's swizzle at d = 64; a d = 128 tile is two such column
  blocks), 1 KB aligned; each thread fences (``fence.proxy.async``) between its cp.async copies
  landing and the block barrier, since wgmma reads shared memory through the async proxy. Each
  product is waited for at once (``wgmma.wait_group 0``); K and V still come by cp.async.
Why: at d = 64, 64 query rows take the mma.sync rung two warps of 128 mma.sync and 32 ldmatrix.x4
each per key tile; a warpgroup takes 8 wgmma that read their shared operands through descriptors.
The GEMM ladder's same step gained 1.49x (`gemm/wgmma-descriptors` against `gemm/tma`).
Prediction: less than the GEMM's 1.49x: the exponentials (64 per row and key tile, 32 per lane
here) and the rescaling do not change, and nothing yet overlaps them with the products within a
warpgroup (only across warpgroups and blocks). About 1.1-1.3x `tensor-core-flash`.
Measured: on an NVIDIA H200 by ``ladder bench`` (results/nvidia-h200.json), [B, H, N, d] = [4, 16,
4096, 64] with 16 and 4 KV heads: float16 0.707 and 0.704 ms (388.89 and 390.19 TFLOP/s; the
mma.sync rung 0.903 and 0.897 ms; the fastest SDPA call, cuDNN, 0.600 and 0.599 ms), bfloat16 0.706
and 0.707 ms (SDPA's default call 0.593 and 0.599 ms; the mma.sync rungs take no bfloat16). Causal,
float16, 16 KV heads, in the lab's H200 bench (lab/attention/2026-11-28-h200/nvidia-h200-bench-
attention.json): 0.413 ms (mma.sync 0.517 ms, SDPA 0.356 ms). At d = 128 on an NVIDIA H100 by
``ladder run``, float16: 1.421 ms (mma.sync 1.844 ms, cuDNN 1.034 ms, lab/attention/2026-11-27-
wgmma-flash/nvidia-h100-80gb-hbm3-attention-128-wgmma-flash.json); causal 0.801 ms (0.989 ms, cuDNN
0.667 ms, lab/attention/2026-11-27-wgmma-flash/nvidia-h100-80gb-hbm3-attention-causal-128-wgmma-
flash.json). ptxas: 101 registers at d = 64, 149 at d = 128, no spills. Nsight Compute (H100, GQA
shape): 57.4% SM busy against 46.4% for `gqa-packed` (lab/attention/2026-11-27-wgmma-flash/nvidia-
h100-80gb-hbm3-profile-attention-wgmma-flash.json).
Verdict: held: 1.28x and 1.27x the mma.sync rung at d = 64 on the H200 (causal 1.25x), 1.30x at d =
128 on the H100 (causal 1.23x). Against the fastest SDPA call: 0.85x in float16, 0.84x and 0.85x in
bfloat16, 0.86x causal; 0.73x at d = 128 (causal 0.83x). What is left is FlashAttention-3's: copies
by TMA and a producer warpgroup, and the softmax of one warpgroup under the other's products.

Lab notes: docs/notes/attention.md
"""

from typing import Any

from ladder.attention import tensor_core
from ladder.attention.problem import attention_rung
from ladder.core import cuda_cpp

SOURCE = cuda_cpp.source(__file__, "r07_wgmma_flash.cu", archs=("sm_90a",), arch_specific=True)
BQ, BKV, THREADS = 128, 64, 256  # query rows a block (two warpgroups), keys a tile


def shared_bytes(d: int) -> int:
    """Dynamic shared memory: the q tile, two stages each of k and v, 1 KB of alignment slack."""
    return (BQ + 4 * BKV) * d * 2 + 1024


@attention_rung(
    name="wgmma-flash",
    parent="tensor-core-flash",
    title="wgmma flash attention: both products on Hopper's warpgroup multiply",
    dtypes=("float16", "bfloat16"),
    needs=("cupy",),
    units="tensor",
    sm90a="wgmma",
)
def geometry(q: Any, k: Any, v: Any, out: Any) -> Any:
    """The kernel for this head dimension and dtype, a block of THREADS per BQ query rows and
    head."""
    kd = tensor_core.kernel_d(q.shape[3], "rung 7")
    kernel = SOURCE.kernel(tensor_core.kernel_name("wgmma_flash", kd, q.dtype))
    return tensor_core.plan(q, k, v, out, kernel, shared_bytes(kd), BQ, THREADS, False, "rung 7")
