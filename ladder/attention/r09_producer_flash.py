"""Producer: `overlap-flash`'s kernel, warp-specialized, with K and V brought by TMA.

What changes: who copies and who waits (``r09_producer_flash.cu``; ``diff`` against
``r08_overlap_flash.cu`` is the lesson). `overlap-flash`'s 256 threads copy K and V themselves
(cp.async, 16 bytes a thread at a time) and meet at a block barrier every key tile. Here one more
warpgroup, the producer, has one thread issue one bulk tensor copy (TMA) per 64-column block
of each K and V tile, and gives its registers to the consumers (``setmaxnreg``). The block
barrier becomes mbarriers per stage: "full", which the copy's bytes complete, and "empty",
which every consumer thread arrives at when its products have read the stage. A warpgroup
waits for its data, and for the others only through the stages (a stage is refilled once all
have read it, so none runs more than about a tile ahead). The host makes two tensor maps per
pair of K and V addresses (K and V as B·HKV layers of N x d: a box never crosses a head, keys
past N arrive as zeros). With the registers freed, one block an SM holds 4 consumers (256
query rows, 112 registers) at d = 64 and 2 (128 rows, 240 registers) at d = 128.
Why: in `overlap-flash` the consumers issue every copy (8 cp.async a thread a tile at d = 128,
4 at d = 64, with their address arithmetic) and stop at a barrier each tile until the slowest
warpgroup arrives; TMA moves a 64 x 64 box with one instruction from one thread.
Prediction: FlashAttention-3's ablation credits warp specialization with 1.16x at d = 128
(661 against 570 TFLOP/s, with the softmax overlap on); `overlap-flash` keeps its overlap, so
about 1.05-1.15x, more at d = 128 (one block an SM, where a barrier stall idles the SM).
Measured: on an NVIDIA H100 by ``ladder run``, rungs `wgmma-flash` and `overlap-flash` and SDPA
(default call, cuDNN and FlashAttention-2 pinned) in the same run, [B, H, HKV, N] = [4, 16, 16,
4096], float16: d = 64, 0.626 ms (`overlap-flash` 0.689 ms, fastest SDPA 0.621 ms,
lab/attention/2026-11-27-producer-flash/nvidia-h100-80gb-hbm3-attention-64-producer-flash.json);
d = 128, 1.041 ms (`overlap-flash` 1.261 ms, SDPA 0.887 ms, lab/attention/2026-11-27-producer-
flash/nvidia-h100-80gb-hbm3-attention-128-producer-flash.json); causal d = 64 0.391 ms (SDPA
0.425 ms, lab/attention/2026-11-27-producer-flash/nvidia-h100-80gb-hbm3-attention-causal-64-
producer-flash.json), causal d = 128 0.580 ms (SDPA 0.531 ms, lab/attention/2026-11-27-producer-
flash/nvidia-h100-80gb-hbm3-attention-causal-128-producer-flash.json); bfloat16 d = 128 1.021 ms
(SDPA 1.020 ms, lab/attention/2026-11-27-producer-flash/nvidia-h100-80gb-hbm3-attention-128-
bfloat16-producer-flash.json; the other dtype and N = 16384 files beside it). Three consumers at
d = 64 (192 rows, 160 registers): 0.690 ms (lab/attention/2026-11-27-producer-flash/nvidia-h100-
80gb-hbm3-attention-producer-consumers-try.json). Nsight Compute at [4, 16, 4, 4096, 64]: 607.0
us against `overlap-flash`'s 675.5 us (lab/attention/2026-11-27-producer-flash/nvidia-h100-80gb-
hbm3-profile-attention-producer-flash.json).
Verdict: above the prediction at d = 128: 1.21x `overlap-flash` (causal 1.21x, N = 16384 1.19x);
a hypothesis: its one block an SM idled at each barrier there. 1.10x at d = 64 once the freed
registers held a fourth consumer (with three, 0.98x `overlap-flash` in the try's own run);
causal d = 64 only 1.02x (likely: 256-row blocks compute more masked tiles). Against the
fastest SDPA call: d = 64 near parity (0.99x; N = 16384 1.00x), d = 128 0.85x (causal 0.92x,
N = 16384 0.86x); bfloat16 d = 128 1.00x here and 0.87x in `pingpong-flash`'s run: SDPA's
samples spread 0.851-1.165 ms. Next, FlashAttention-3's ping-pong: `pingpong-flash`, which
gained nothing.

Lab notes: docs/notes/attention.md
"""

from typing import Any

from ladder.attention import tensor_core, warp_specialized
from ladder.attention.problem import attention_rung
from ladder.core import cuda_cpp

SOURCE = cuda_cpp.source(__file__, "r09_producer_flash.cu", archs=("sm_90a",), arch_specific=True)
BKV, STAGES = 64, warp_specialized.STAGES  # keys a tile, stages each of K and V
CONSUMERS = {64: 4, 128: 2}  # consumer warpgroups of 64 query rows, per head dimension


@attention_rung(
    name="producer-flash",
    parent="overlap-flash",
    title="producer: K and V by TMA from a producer warpgroup, mbarriers for the block barrier",
    dtypes=("float16", "bfloat16"),
    needs=("cupy",),
    units="tensor",
    min_cc=(9, 0),
    max_cc=(9, 0),
    cc_needs="wgmma and setmaxnreg, sm_90a-only instructions",
)
def geometry(q: Any, k: Any, v: Any, out: Any) -> Any:
    """The kernel for this head dimension and dtype, CONSUMERS warpgroups and a producer a
    block; the tensor maps of K and V made once per pair of their addresses."""
    kd = tensor_core.kernel_d(q.shape[3], "rung 9")
    kernel = SOURCE.kernel(tensor_core.kernel_name("producer_flash", kd, q.dtype))
    return warp_specialized.plan(q, k, v, out, kernel, CONSUMERS[kd], BKV, "rung 9")
