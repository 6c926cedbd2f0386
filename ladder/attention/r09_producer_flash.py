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
Measured: on an NVIDIA H200 by ``ladder bench`` (results/nvidia-h200.json), [B, H, N, d] = [4, 16,
4096, 64] with 16 and 4 KV heads: float16 0.623 and 0.617 ms (`overlap-flash` 0.685 and 0.681 ms;
the fastest SDPA call, cuDNN, 0.600 and 0.599 ms), bfloat16 0.625 and 0.615 ms (`overlap-flash`
0.682 and 0.679 ms; SDPA's default call 0.593 and 0.599 ms). Causal, float16, 16 KV heads, in the
lab's H200 bench (lab/attention/2026-11-28-h200/nvidia-h200-bench-attention.json): 0.394 ms
(`overlap-flash` 0.404 ms, SDPA 0.356 ms). At d = 128 on an NVIDIA H100 by ``ladder run``, float16:
1.041 ms (`overlap-flash` 1.261 ms, fastest SDPA 0.887 ms, lab/attention/2026-11-27-producer-
flash/nvidia-h100-80gb-hbm3-attention-128-producer-flash.json); causal 0.580 ms (0.703 ms, SDPA
0.531 ms, lab/attention/2026-11-27-producer-flash/nvidia-h100-80gb-hbm3-attention-causal-128-
producer-flash.json; the bfloat16 and N = 16384 files beside them). Three consumers at d = 64 (192
rows, 160 registers) on the H100: 0.690 ms (lab/attention/2026-11-27-producer-flash/nvidia-h100-
80gb-hbm3-attention-producer-consumers-try.json). Nsight Compute at [4, 16, 4, 4096, 64] (H100):
607.0 us against `overlap-flash`'s 675.5 us (lab/attention/2026-11-27-producer-flash/nvidia-h100-
80gb-hbm3-profile-attention-producer-flash.json).
Verdict: above the prediction at d = 128: 1.21x `overlap-flash` (causal 1.21x, N = 16384 1.19x;
H100); a hypothesis: its one block an SM idled at each barrier there. At d = 64 on the H200
1.09-1.10x in both dtypes and KV-head settings, once the freed registers held a fourth consumer
(with three, 0.98x `overlap-flash` in the try's own run); causal only 1.02x (likely: 256-row blocks
compute more masked tiles). Against the fastest SDPA call: behind at d = 64, 0.96x and 0.97x in
float16, 0.95x and 0.97x in bfloat16, not parity (the rung's fastest repeat is slower than SDPA's
slowest in each); 0.90x causal; 0.85x at d = 128 (causal 0.92x, N = 16384 0.86x). Next,
FlashAttention-3's ping-pong: `pingpong-flash`, which gained nothing.

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
    sm90a="wgmma and setmaxnreg",
)
def geometry(q: Any, k: Any, v: Any, out: Any) -> Any:
    """The kernel for this head dimension and dtype, CONSUMERS warpgroups and a producer a
    block; the tensor maps of K and V made once per pair of their addresses."""
    kd = tensor_core.kernel_d(q.shape[3], "rung 9")
    kernel = SOURCE.kernel(tensor_core.kernel_name("producer_flash", kd, q.dtype))
    return warp_specialized.plan(q, k, v, out, kernel, CONSUMERS[kd], BKV, "rung 9")
