"""Wide keys: `producer-flash`'s kernel with 128 keys a tile instead of 64.

What changes: one constant, ``BKV`` (``r11_wide_keys_flash.cu``; ``diff`` against
``r09_producer_flash.cu`` is the lesson, `pingpong-flash`'s turn-taking left out), so the consumers
at d = 64, and three lines that send idle warpgroups home. Each K and V stage holds 128 keys (the
tensor maps' box with it), S = Q·Kᵀ is a m64n128 product and P·V eight k16 products a tile. S now
takes 64 registers a thread and P 32, so d = 64 runs 3 consumer warpgroups (192 query rows, 160
registers) where `producer-flash` ran 4 at 112; d = 128 keeps 2 at 240. 4096 is not a multiple of
192, so each head's last block has two warpgroups whose 64 rows all lie past N: they return at
once, and the "empty" barriers count only the warpgroups that stay.
Why: everything a tile does besides its products is paid per tile, not per key: O's rescale
(64 multiplies a thread at d = 128), the row maxima's shuffles and the statistics, two waits
on "full" and two releases of "empty", the wgmma fences and group waits. With 128 keys that is
paid half as often, and S's wgmma is twice as wide (half as many issued; P·V issues the same
number per key). `overlap-flash`'s try of 128 keys lost, but it kept the block barrier.
Prediction: no number was written before the try ran. A ceiling computed afterwards: Nsight Compute
saw `producer-flash`'s tensor pipe busy 57.8% of the cycles at d = 128, 48.0% at d = 64, so the
same products cannot run more than 1.73x (2.08x) faster
(lab/attention/2026-11-27-tensor-pipe/nvidia-h100-80gb-hbm3-profile-attention-tensor-pipe-128.json,
lab/attention/2026-11-27-tensor-pipe/nvidia-h100-80gb-hbm3-profile-attention-tensor-pipe-64.json).
Measured: on an NVIDIA H200 by ``ladder bench`` (results/nvidia-h200.json), [B, H, N, d] = [4, 16,
4096, 64] with 16 and 4 KV heads: float16 0.570 and 0.577 ms (482.45 and 476.24 TFLOP/s;
`producer-flash` 0.623 and 0.617 ms; the fastest SDPA call, cuDNN, 0.600 and 0.599 ms; with 16 KV
heads torch.compile, which calls SDPA, 0.595 ms), bfloat16 0.569 and 0.568 ms (`producer-flash`
0.625 and 0.615 ms; SDPA's default call 0.593 and 0.599 ms). In the lab's H200 runs with
`producer-flash` and SDPA, float16: causal d = 64, 16 KV heads, 0.356 ms (SDPA 0.356 ms,
lab/attention/2026-11-28-h200/nvidia-h200-bench-attention.json); d = 128 0.853 ms (`producer-flash`
1.027 ms, SDPA 0.859 ms, lab/attention/2026-11-28-h200/nvidia-h200-attention-128-wide-keys-
flash.json); causal d = 128 0.489 ms (0.589 ms, SDPA 0.514 ms, lab/attention/2026-11-28-h200/nvidia-
h200-attention-causal-128-wide-keys-flash.json); bfloat16 in the files beside them. Nsight Compute
on the H100 at d = 128: tensor pipe busy 73.3% (53.8% at d = 64, before the idle warpgroups left),
warp instructions 302 M and wgmma 8.4 M against `producer-flash`'s 413 M and 12.6 M.
Verdict: within the ceiling: 1.07-1.10x `producer-flash` at d = 64, where (likely) the fourth
consumer is missed, and 1.20x at d = 128 (bfloat16 1.23x, causal 1.21x). Against the fastest SDPA
call at d = 64: 1.05x and 1.04x in float16 (torch.compile 1.04x), 1.04x and 1.05x in bfloat16; thin,
but wider than the spread of the repeats (the rung's slowest repeat beats SDPA's fastest in each),
so a win in this run, as in the lab's earlier H200 bench. Elsewhere parity: causal d = 64 1.00-1.01x
and d = 128 1.01x and 1.00x, each within the spread; causal d = 128 1.05x in float16 (outside it)
and 1.04x in bfloat16 (within the rung's spread). Sending the idle warpgroups home gave causal d =
64 2.4% (H100, lab/attention/2026-11-27-wide-keys-flash/nvidia-h100-80gb-hbm3-attention-tries-
idle.json). Which per-tile cost mattered most was not measured: the rung changed them all at once.

Lab notes: docs/notes/attention.md
"""

from typing import Any

from ladder.attention import tensor_core, warp_specialized
from ladder.attention.problem import attention_rung
from ladder.core import cuda_cpp

SOURCE = cuda_cpp.source(__file__, "r11_wide_keys_flash.cu", archs=("sm_90a",), arch_specific=True)
BKV = 128  # keys a tile (rung 9: 64)
CONSUMERS = {64: 3, 128: 2}  # consumer warpgroups of 64 query rows, per head dimension


@attention_rung(
    name="wide-keys-flash",
    parent="producer-flash",
    title="wide keys: 128 keys a tile, each tile's fixed costs paid half as often",
    dtypes=("float16", "bfloat16"),
    needs=("cupy",),
    units="tensor",
    sm90a="wgmma and setmaxnreg",
)
def geometry(q: Any, k: Any, v: Any, out: Any) -> Any:
    """The kernel for this head dimension and dtype on `producer-flash`'s launch, with 128-key
    tensor-map boxes."""
    kd = tensor_core.kernel_d(q.shape[3], "rung 11")
    kernel = SOURCE.kernel(tensor_core.kernel_name("wide_keys_flash", kd, q.dtype))
    return warp_specialized.plan(q, k, v, out, kernel, CONSUMERS[kd], BKV, "rung 11")
