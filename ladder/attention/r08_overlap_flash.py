"""Overlap: `wgmma-flash`'s kernel with each key tile's softmax run under the tensor cores'
P·V product of the tile before (FlashAttention-3's pipelining within a warpgroup).

What changes: the order of one key tile's work (``r08_overlap_flash.cu``; ``diff`` against
``r07_wgmma_flash.cu`` is the lesson). `wgmma-flash` issues a product and waits for it, so a
warpgroup's tensor-core time and its softmax add. Here each tile j issues S_j = Q·K_jᵀ and then
O += P_{j-1}·V_{j-1}, waits only for S_j (``wgmma.wait_group 1``), masks and exponentiates S_j
while P·V runs, then waits for P·V and rescales O by tile j's alpha. Two tiles are in flight
per warpgroup: S_j in floats and P_{j-1} in packed pairs live together (118-119 registers at
d = 64, against 101; 168 at d = 128, against 149; no spills). V_j is now first read a tile
later (by P·V in tile j + 1), so one cp.async group a tile brings K_{j+1} and V_j together.
Why: an H100 SM multiplies 4096 half FLOP a clock but exponentiates 16 floats (989 against
3.9 TFLOP/s). One score costs 4d FLOP (2d in S, 2d in P·V): 256 at d = 64, one exponential's
time, so serialized the exponentials alone double a tile's time at d = 64 and add half at
d = 128 (the notebook's overlap_timeline draws it).
Prediction: FlashAttention-3 (d = 128, N = 8K) gained 1.14x from it on top of warp
specialization (661 against 582 TFLOP/s); `wgmma-flash`'s 2 blocks an SM at d = 64 already
overlap each other's softmax, so about 1.05-1.15x here, most at d = 128 (1 block an SM).
The compiler: ptxas moves a wgmma wait up past arithmetic that nothing ties to it, so without
help it put wait_group 0 right after wait_group 1, before the 34 exponentials (cuobjdump).
One st.shared of the row sums (which need every exponential) just before the wait keeps them
between the two waits (``store_before_wait``, wgmma_tiles.cuh: one word a thread, never read).
Measured: on an NVIDIA H200 by ``ladder bench`` (results/nvidia-h200.json), [B, H, N, d] = [4, 16,
4096, 64] with 16 and 4 KV heads: float16 0.685 and 0.681 ms (`wgmma-flash` 0.707 and 0.704 ms; the
fastest SDPA call, cuDNN, 0.600 and 0.599 ms), bfloat16 0.682 and 0.679 ms (`wgmma-flash` 0.706 and
0.707 ms; SDPA's default call 0.593 and 0.599 ms). Causal, float16, 16 KV heads, in the lab's H200
bench (lab/attention/2026-11-28-h200/nvidia-h200-bench-attention.json): 0.404 ms (`wgmma-flash`
0.413 ms). At d = 128 on an NVIDIA H100 by ``ladder run``, float16: 1.261 ms (`wgmma-flash` 1.431
ms, fastest SDPA 0.887 ms, lab/attention/2026-11-27-producer-flash/nvidia-h100-80gb-hbm3-attention-
128-producer-flash.json); causal 0.703 ms (0.790 ms, lab/attention/2026-11-27-producer-flash/nvidia-
h100-80gb-hbm3-attention-causal-128-producer-flash.json); bfloat16 in the -bfloat16- files beside
them, 1.13x at d = 128. Without the store (lab/attention/2026-11-27-overlap-flash/nvidia-h100-80gb-
hbm3-attention-128-overlap-flash.json, an earlier run): 1.297 ms at d = 128, 1.10x `wgmma-flash`.
Nsight Compute at [4, 16, 4, 4096, 64] without the store: 6.6% fewer warp instructions than
`wgmma-flash` (lab/attention/2026-11-27-overlap-flash/nvidia-h100-80gb-hbm3-profile-attention-
overlap-flash.json).
Verdict: held at d = 128 (1.13x `wgmma-flash`, 1.12x causal, H100); below the range at d = 64, where
two blocks an SM already hid one block's exponentials under the other's products: 1.03x in float16
and 1.04x in bfloat16 on the H200 (both KV-head settings, every repeat faster than every repeat of
`wgmma-flash`), causal 1.02x (within the spread of the repeats). The store (the overlap itself) took
d = 128 from 1.10x to 1.13x (two runs); the rest is one barrier and one copy group a tile and the
products back to back. Against the fastest SDPA call: 0.87-0.88x at d = 64, 0.70x at d = 128. Left:
every warpgroup still issues copies and waits at a block barrier each tile (`producer-flash`).

Lab notes: docs/notes/attention.md
"""

from typing import Any

from ladder.attention import r07_wgmma_flash, tensor_core
from ladder.attention.problem import attention_rung
from ladder.core import cuda_cpp

SOURCE = cuda_cpp.source(__file__, "r08_overlap_flash.cu", archs=("sm_90a",), arch_specific=True)
BQ, BKV, THREADS = r07_wgmma_flash.BQ, r07_wgmma_flash.BKV, r07_wgmma_flash.THREADS


@attention_rung(
    name="overlap-flash",
    parent="wgmma-flash",
    title="overlap: the softmax under the tensor cores' P·V within a warpgroup",
    dtypes=("float16", "bfloat16"),
    needs=("cupy",),
    units="tensor",
    sm90a="wgmma",
)
def geometry(q: Any, k: Any, v: Any, out: Any) -> Any:
    """The kernel for this head dimension and dtype, `wgmma-flash`'s grid and shared memory and
    one word a thread (the row sums' store)."""
    kd = tensor_core.kernel_d(q.shape[3], "rung 8")
    kernel = SOURCE.kernel(tensor_core.kernel_name("overlap_flash", kd, q.dtype))
    smem = r07_wgmma_flash.shared_bytes(kd) + THREADS * 4
    return tensor_core.plan(q, k, v, out, kernel, smem, BQ, THREADS, False, "rung 8")
