"""Rung 4, wgmma: rung 3's two kernels with every product on Hopper's warpgroup multiply.

What changes: each product of rung 3 becomes wgmma (``r04_wgmma.cu``), as forward rung 7 did
to rung 5: Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ (key kernel), S = Q·Kᵀ and dP = dO·Vᵀ (query kernel) are
m64n64k16 with both operands read from shared memory through descriptors; dV += Pᵀ·dO,
dK += dSᵀ·Q and dQ += dS·K are m64nDk16 with Pᵀ, dSᵀ or dS in registers (wgmma's register A
fragment is mma.sync's, so rung 3's trick of computing the transposes still hands them over
without shared memory) and B transposed by the instruction. A block is one warpgroup over 64
keys or 64 queries, whose accumulators are warp by warp rung 3's fragments: the elementwise
code and the masks are rung 3's. Tiles are stored in the descriptor layout (64-half column
blocks, 128-byte swizzle, 1 KB aligned; ``ladder/attention/wgmma.cuh``, shared with forward
rung 7) and fenced for the async proxy after cp.async; query tiles are 64 at d = 128 too (no
ldmatrix fragments to hold, the registers that pushed rung 3 to 32). Still no pipelining.
Why: in rung 3 every warp loads every B operand from shared memory with ldmatrix: per tile,
72 ldmatrix.x4 (36 KB) a warp of the key kernel against 128 mma.sync, and the four warps read
the same Q and dO tiles four times: 144 KB a tile, 1152 clocks at 128 bytes a clock per SM,
more than twice the tensor work's 512 at its dense peak (which mma.sync does not reach). A
wgmma reads its B operand once for the warpgroup's 64 rows: 48 KB a tile (each of K, V, Q
and dO once, Q and dO again for dK and dV), 384 clocks, a third of rung 3's reads.
Prediction: forward rung 7 gained 1.23x to 1.33x over rung 5 with the same change (lab
notes, rung 7); here the
products are four fifths of the work instead of about half (no online softmax), so 1.3x to
1.6x rung 3: 2.0 to 2.4 ms at d = 64, about 0.65x to 0.8x SDPA's cuDNN backward.
Measured: on an NVIDIA H100 80GB HBM3 (``ladder run``; rung 3 and the libraries in the same
run), float16, [4, 16, 16, 4096, 64] (B, H, HKV, N, d): 2.104 ms and 326.57 TFLOP/s credited
(rung 3: 3.183 ms; SDPA pinned to cuDNN: 1.544 ms; FlashAttention-2: 2.585 ms); causal
1.146 ms (rung 3 1.721, SDPA's default call, cuDNN: 0.950); d = 128: 3.892 ms (rung 3 6.648,
default call 2.588), causal 1.992 ms (rung 3 3.558, default call 1.478)
(lab/attention/2026-11-27-backward/nvidia-h100-80gb-hbm3-attention-backward-4096-64-wgmma.json,
lab/attention/2026-11-27-backward/nvidia-h100-80gb-hbm3-attention-backward-causal-4096-64-
wgmma.json, lab/attention/2026-11-27-backward/nvidia-h100-80gb-hbm3-attention-backward-4096-128-
wgmma.json, lab/attention/2026-11-27-backward/nvidia-h100-80gb-hbm3-attention-backward-causal-4096-
128-wgmma.json). bfloat16, d = 64 (the same kernels built with .bf16 products): 2.082 ms against
cuDNN's 1.538 ms, 0.74x (lab/attention/2026-11-27-backward/nvidia-h100-80gb-hbm3-attention-backward-
4096-64-bfloat16-wgmma.json).
Verdict: held at d = 64: 1.51x rung 3 (causal 1.50x), 0.73x the fastest library (causal
0.83x), past the 0.6x target, and 1.23x FlashAttention-2's backward. Exceeded at d = 128:
1.71x and 1.79x, 0.67x and 0.74x the fastest call, likely because rung 3 at d = 128 ran query
tiles of 32 (registers), which rung 4 does not need. Still 0.67x to 0.83x cuDNN:
each batch of wgmma waits for its copies and the softmax-like elementwise code waits for the
wgmma; FlashAttention-3's pipelining (a producer warpgroup, TMA, two consumers) is the rest.

Lab notes: docs/notes/attention.md
"""

from __future__ import annotations

from typing import Any

from ladder.attention.backward import tensor_core
from ladder.attention.backward.problem import backward_rung, operands
from ladder.attention.problem import Masks
from ladder.attention.tensor_core import kernel_d, kernel_name
from ladder.core import cuda_cpp
from ladder.core.fastcall import Operand, PlanCache

SOURCE = cuda_cpp.source(__file__, "r04_wgmma.cu", archs=("sm_90a",), arch_specific=True)
THREADS = 128  # one warpgroup


def shared_bytes(kd: int) -> tuple[int, int]:
    """Dynamic shared memory of the key kernel (K, V, a Q and a dO tile, lse and D) and of the
    query kernel (Q, dO, a K and a V tile), 64 rows each, and 1 KB of alignment slack."""
    tiles = 4 * 64 * kd * 2 + 1024
    return tiles + 2 * 64 * 4, tiles


def plan(*ops: Operand) -> Masks:
    """The key and query kernels for this head dimension on (q, k, v, o, do, lse, out), run by
    ``tensor_core.plan`` after D: built once per signature (``PLANS``)."""
    kd = kernel_d(ops[0].shape[3], "rung 4")
    dtype = ops[0].dtype
    kernels = tuple(
        SOURCE.kernel(kernel_name(f"wgmma_{part}", kd, dtype)) for part in ("dkdv", "dq")
    )
    return tensor_core.plan(ops, kernels, shared_bytes(kd), THREADS, "rung 4")


PLANS = PlanCache(plan)


@backward_rung(
    name="wgmma",
    parent="tensor-core",
    title="Flash backward on wgmma: every product on Hopper's warpgroup multiply",
    dtypes=("float16", "bfloat16"),
    needs=("cupy",),
    units="tensor",
    min_cc=(9, 0),
    max_cc=(9, 0),
    cc_needs="wgmma, an sm_90a-only instruction",
)
def launch(
    q: Any, k: Any, v: Any, o: Any, do: Any, lse: Any, out: Any = None, causal: bool = False
) -> Any:
    q, k, v, o, do, lse, out, _ = operands(q, k, v, o, do, lse, out, ("float16", "bfloat16"))
    if 0 not in out.shape:
        PLANS(q, k, v, o, do, lse, out)[bool(causal)](q, k, v, o, do, lse, out)
    return out.obj
