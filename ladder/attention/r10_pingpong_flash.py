"""Ping-pong: `producer-flash`'s consumer warpgroups take turns at the tensor cores.

What changes: the order in which the consumers issue their products (``r10_pingpong_flash.cu``;
``diff`` against ``r09_producer_flash.cu`` is the lesson). In `producer-flash` every consumer
issues its products as soon as its data is there, and the warpgroups may drift into step (they wait
on the same "full" barriers): all multiply at once, then all exponentiate at once. Here a token
passes round the consumers through named barriers (``bar.sync`` to wait for it, ``bar.arrive`` to
pass it without waiting): a warpgroup issues S_j and P_{j-1}·V_{j-1} only after the warpgroup
before it has issued its own, then passes the token and does its softmax while the next warpgroup's
products run (FlashAttention-3's ping-pong, round 2 warpgroups at d = 128 and 4 at d = 64).
Why: a tile's products and its softmax take comparable time (the exponentials alone are about a
tile's multiply at d = 64, half of it at d = 128: `overlap-flash`'s docstring), so warpgroups out
of step can keep the tensor cores busy while each does its softmax.
Prediction: FlashAttention-3's paper credits ping-pong with about 570 to 620-640 TFLOP/s at
d = 128 (its section 3.1, as recalled here, not re-read): 1.09-1.12x. With `overlap-flash`'s overlap
already in place, about 1.05-1.10x `producer-flash` at d = 128, less at d = 64 (four warpgroups).
Measured: on an NVIDIA H200 by ``ladder bench`` (results/nvidia-h200.json), [B, H, N, d] = [4, 16,
4096, 64] with 16 and 4 KV heads: float16 0.629 and 0.626 ms (`producer-flash` 0.623 and 0.617 ms;
the fastest SDPA call, cuDNN, 0.600 and 0.599 ms), bfloat16 0.630 and 0.623 ms (`producer-flash`
0.625 and 0.615 ms; SDPA's default call 0.593 and 0.599 ms). Causal, float16, 16 KV heads, in the
lab's H200 bench (lab/attention/2026-11-28-h200/nvidia-h200-bench-attention.json): 0.398 ms
(`producer-flash` 0.394 ms). On an NVIDIA H100 by ``ladder run``, float16, d = 128: 1.034 ms
(`producer-flash` 1.028 ms, SDPA 0.952 ms, lab/attention/2026-11-27-pingpong-flash/nvidia-h100-80gb-
hbm3-attention-128-pingpong-flash.json); causal 0.591 ms (0.588 ms, lab/attention/2026-11-27-
pingpong-flash/nvidia-h100-80gb-hbm3-attention-causal-128-pingpong-flash.json); N = 16384 16.848 ms
(16.726 ms, lab/attention/2026-11-27-pingpong-flash/nvidia-h100-80gb-hbm3-attention-16384-128-
pingpong-flash.json); the d = 64, causal d = 64, bfloat16 and other N = 16384 files beside them:
0.98-1.00x `producer-flash` in each of the 12 cases. compute-sanitizer (synccheck for the barriers
among its four tools) found nothing at two small sizes (lab/tools/2026-11-27-sanitize/nvidia-h100-
80gb-hbm3-sanitize-attention-pingpong-flash.json).
Verdict: missed: no faster than `producer-flash` anywhere. On the H200 0.99x in both dtypes and
KV-head settings, each within the spread of the repeats: parity; causal 0.99x; on the H100
0.98-1.00x. Against the fastest SDPA call at d = 64: 0.94-0.96x. Nsight Compute then saw the tensor
pipe busy 57.5% of the cycles here against `producer-flash`'s 57.8% at d = 128 (47.4% against 48.0%
at d = 64; lab/attention/2026-11-27-tensor-pipe/nvidia-h100-80gb-hbm3-profile-attention-tensor-pipe-
128.json): the turns did not fill the idle 42% (52% at d = 64). A hypothesis: `overlap-flash`'s
overlap already keeps one product in flight through most of each softmax, and `producer-flash`'s
warpgroups already run out of step; what idles the pipe is per-tile work every warpgroup does, not
when it does it. `wide-keys-flash` pays that work half as often (128 keys a tile): 1.07-1.10x
`producer-flash` at d = 64 on the H200.

Lab notes: docs/notes/attention.md
"""

from typing import Any

from ladder.attention import r09_producer_flash as r09
from ladder.attention import tensor_core, warp_specialized
from ladder.attention.problem import attention_rung
from ladder.core import cuda_cpp

SOURCE = cuda_cpp.source(__file__, "r10_pingpong_flash.cu", archs=("sm_90a",), arch_specific=True)
BKV, CONSUMERS = r09.BKV, r09.CONSUMERS  # rung 9's tiles and warpgroups


@attention_rung(
    name="pingpong-flash",
    parent="producer-flash",
    title="ping-pong: the consumer warpgroups take turns at the tensor cores",
    dtypes=("float16", "bfloat16"),
    needs=("cupy",),
    units="tensor",
    sm90a="wgmma and setmaxnreg",
)
def geometry(q: Any, k: Any, v: Any, out: Any) -> Any:
    """The kernel for this head dimension and dtype on `producer-flash`'s launch."""
    kd = tensor_core.kernel_d(q.shape[3], "rung 10")
    kernel = SOURCE.kernel(tensor_core.kernel_name("pingpong_flash", kd, q.dtype))
    return warp_specialized.plan(q, k, v, out, kernel, CONSUMERS[kd], BKV, "rung 10")
