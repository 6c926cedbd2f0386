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
Measured: on an NVIDIA H100 by ``ladder run``, `producer-flash` and SDPA (default call, cuDNN and
FlashAttention-2 pinned) in the same run, [B, H, HKV, N] = [4, 16, 16, 4096], float16: d = 64 0.571
ms (`producer-flash` 0.613 ms, fastest SDPA 0.596 ms,
lab/attention/2026-11-27-wide-keys-flash/nvidia-h100-80gb-hbm3-attention-64-wide-keys-flash.json);
d = 128 0.864 ms (`producer-flash` 1.020 ms, SDPA 0.877 ms,
lab/attention/2026-11-27-wide-keys-flash/nvidia-h100-80gb-hbm3-attention-128-wide-keys-flash.json);
causal d = 64 0.354 ms (SDPA 0.355 ms,
lab/attention/2026-11-27-wide-keys-flash/nvidia-h100-80gb-hbm3-attention-causal-64-wide-keys-flash.json);
causal d = 128 0.494 ms (SDPA 0.530 ms,
lab/attention/2026-11-27-wide-keys-flash/nvidia-h100-80gb-hbm3-attention-causal-128-wide-keys-flash.json;
bfloat16 and N = 16384 files beside them). Nsight at d = 128: tensor pipe busy 73.3% (53.8% at d =
64, before the idle warpgroups left), warp instructions 302 M and wgmma 8.4 M against
`producer-flash`'s 413 M and 12.6 M.
Verdict: 1.18x `producer-flash` at d = 128 (causal 1.18x, bfloat16 1.21x, N = 16384 1.20x),
1.06-1.10x at d = 64, where (likely) the fourth consumer is missed. Against the fastest SDPA call
in the same runs: at or above it in all 12 cases, by thin margins (float16: 1.04x at d = 64, 1.01x
at d = 128, 1.00x causal d = 64, 1.07x causal d = 128; bfloat16 1.05x, 1.01x, 1.01x, 1.07x; N =
16384 1.02-1.05x). Sending the idle warpgroups home gave causal d = 64 2.4% (a try timed beside
`wide-keys-flash` as it was:
lab/attention/2026-11-27-wide-keys-flash/nvidia-h100-80gb-hbm3-attention-tries-idle.json). Which
per-tile cost mattered most was not measured: the rung changed them all at once.

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
    min_cc=(9, 0),
    max_cc=(9, 0),
    cc_needs="wgmma and setmaxnreg, sm_90a-only instructions",
)
def geometry(q: Any, k: Any, v: Any, out: Any) -> Any:
    """The kernel for this head dimension and dtype on `producer-flash`'s launch, with 128-key
    tensor-map boxes."""
    kd = tensor_core.kernel_d(q.shape[3], "rung 11")
    kernel = SOURCE.kernel(tensor_core.kernel_name("wide_keys_flash", kd, q.dtype))
    return warp_specialized.plan(q, k, v, out, kernel, CONSUMERS[kd], BKV, "rung 11")
