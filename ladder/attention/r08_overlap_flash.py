"""Rung 8, overlap: rung 7's kernel with each key tile's softmax run under the tensor cores'
P·V product of the tile before (FlashAttention-3's pipelining within a warpgroup).

What changes: the order of one key tile's work (``r08_overlap_flash.cu``; ``diff`` against
``r07_wgmma_flash.cu`` is the lesson). Rung 7 issues a product and waits for it, so a
warpgroup's tensor-core time and its softmax add. Here each tile j issues S_j = Q·K_jᵀ and then
O += P_{j-1}·V_{j-1}, waits only for S_j (``wgmma.wait_group 1``), masks and exponentiates S_j
while P·V runs, then waits for P·V and rescales O by tile j's alpha. Two tiles are in flight
per warpgroup: S_j in floats and P_{j-1} in packed pairs live together (118 registers at
d = 64, rung 7's 101; 168 at d = 128, rung 7's 149; no spills). V_j is now first read a tile later
(by P·V in tile j + 1), so one cp.async group a tile brings K_{j+1} and V_j together.
Why: an H100 SM multiplies 4096 half FLOP a clock but exponentiates 16 floats (989 against
3.9 TFLOP/s). One score costs 4d FLOP (2d in S, 2d in P·V): 256 at d = 64, one exponential's
time, so serialized the exponentials alone double a tile's time at d = 64 and add half at
d = 128 (the notebook's overlap_timeline draws it).
Prediction: FlashAttention-3 (d = 128, N = 8K) gained 1.14x from it on top of warp
specialization (661 against 582 TFLOP/s); rung 7's 2 blocks an SM at d = 64 already overlap
each other's softmax, so about 1.05-1.15x rung 7 here, most at d = 128 (1 block an SM).
Measured: on an NVIDIA H100 by ``ladder run``, rung 7 and SDPA (default call, cuDNN and
FlashAttention-2 pinned) in the same run, [B, H, HKV, N] = [4, 16, 16, 4096], float16: d = 64,
0.687 ms (rung 7 0.701 ms, fastest SDPA 0.694 ms,
results/nvidia-h100-80gb-hbm3-attention-64-overlap-flash.json); d = 128, 1.297 ms (rung 7
1.421 ms, SDPA 0.874 ms, results/nvidia-h100-80gb-hbm3-attention-128-overlap-flash.json);
causal d = 64, 0.394 ms (rung 7 0.407 ms, SDPA 0.382 ms,
results/nvidia-h100-80gb-hbm3-attention-causal-64-overlap-flash.json); causal d = 128,
0.720 ms (rung 7 0.795 ms, SDPA 0.550 ms,
results/nvidia-h100-80gb-hbm3-attention-causal-128-overlap-flash.json). bfloat16 in the
files named -bfloat16- beside them: 1.03x to 1.10x rung 7, the same pattern. N = 16384:
d = 64, 10.477 ms (rung 7 10.617 ms, results/nvidia-h100-80gb-hbm3-attention-16384-64-overlap-
flash.json); d = 128, 19.921 ms (rung 7 21.611 ms,
results/nvidia-h100-80gb-hbm3-attention-16384-128-overlap-flash.json).
Nsight Compute at [4, 16, 4, 4096, 64]: 677.4 us, 57.5% issue, 356 M warp instructions
against rung 7's 703.5 us, 59.4%, 381 M
(results/nvidia-h100-80gb-hbm3-profile-attention-overlap-flash.json).
Verdict: the overlap did not happen. In the SASS (cuobjdump; nvcc 13.0, NVRTC 13.5) ptxas
puts wait_group 0 right after wait_group 1, before the 34 exponentials (at d = 64 they write
the registers the P·V in flight reads). So the 1.02-1.10x over rung 7 (1.10x at d = 128) is
the rest of the change: one barrier and one copy group a tile, the products back to back.
Against the fastest SDPA call: 1.01x at d = 64 (0.97x causal), 0.67x at d = 128 (0.76x
causal), and at N = 16384 0.88x and 0.73x (causal 0.95x and 0.69x); SDPA's own repeats
spread widely at N = 4096 (0.522-0.949 ms causal at d = 128). Pinning registers did not
move the wait; a shared-memory store of the row sums before it did, in the SASS, not yet
timed (lab notes). A wider key tile ran 0.88x (lab notes, "Tries after rung 8").

Lab notes: docs/notes/attention.md
"""

from __future__ import annotations

from typing import Any

from ladder.attention import r07_wgmma_flash, tensor_core
from ladder.attention.problem import Masks, attention_rung, operands
from ladder.core import cuda_cpp
from ladder.core.fastcall import Operand, PlanCache

SOURCE = cuda_cpp.source(__file__, "r08_overlap_flash.cu", archs=("sm_90a",), arch_specific=True)
BQ, BKV, THREADS = r07_wgmma_flash.BQ, r07_wgmma_flash.BKV, r07_wgmma_flash.THREADS


def plan(q: Operand, k: Operand, v: Operand, out: Operand) -> Masks:
    """The kernel for this head dimension and its launch without and with the causal mask:
    built once per signature of q, k, v and out (``PLANS``). Rung 7's shared memory."""
    kd = tensor_core.kernel_d(q.shape[3], "rung 8")
    kernel = SOURCE.kernel(tensor_core.kernel_name("overlap_flash", kd, q.dtype))
    smem = r07_wgmma_flash.shared_bytes(kd)
    return tensor_core.plan(q, k, v, out, kernel, smem, BQ, THREADS, False, "rung 8")


PLANS = PlanCache(plan)


@attention_rung(
    name="overlap-flash",
    title="overlap: the softmax under the tensor cores' P·V within a warpgroup",
    dtypes=("float16", "bfloat16"),
    needs=("cupy",),
    units="tensor",
    min_cc=(9, 0),
    max_cc=(9, 0),
    cc_needs="wgmma, an sm_90a-only instruction",
)
def launch(q: Any, k: Any, v: Any, out: Any = None, causal: bool = False) -> Any:
    q, k, v, out, _ = operands(q, k, v, out, ("float16", "bfloat16"))
    if 0 not in out.shape:
        PLANS(q, k, v, out)[bool(causal)](q, k, v, out)
    return out.obj
