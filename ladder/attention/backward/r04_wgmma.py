"""wgmma: `tensor-core`'s two kernels with every product on Hopper's warpgroup multiply.

What changes: each product of `tensor-core` becomes wgmma (``r04_wgmma.cu``), as
`attention/wgmma-flash` did to `attention/tensor-core-flash`: Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ (key
kernel), S = Q·Kᵀ and dP = dO·Vᵀ (query kernel) are m64n64k16 with both operands read from shared
memory through descriptors; dV += Pᵀ·dO, dK += dSᵀ·Q and dQ += dS·K are m64nDk16 with Pᵀ, dSᵀ or dS
in registers (wgmma's register A fragment is mma.sync's, so `tensor-core`'s trick of computing the
transposes still hands them over without shared memory) and B transposed by the instruction. A
block is one warpgroup over 64 keys or 64 queries, whose accumulators are warp by warp
`tensor-core`'s fragments: the elementwise code and the masks are `tensor-core`'s. Tiles are stored
in the descriptor layout (64-half column blocks, 128-byte swizzle, 1 KB aligned;
``ladder/attention/wgmma_tiles.cuh``, shared with `attention/wgmma-flash`) and fenced for the
async proxy after cp.async; query tiles are 64 at d = 128 too (no ldmatrix fragments to hold,
the registers that pushed `tensor-core` to 32). Still no pipelining.
Why: in `tensor-core` every warp loads every B operand from shared memory with ldmatrix: per tile,
72 ldmatrix.x4 (36 KB) a warp of the key kernel against 128 mma.sync, and the four warps read
the same Q and dO tiles four times: 144 KB a tile, 1152 clocks at 128 bytes a clock per SM,
more than twice the tensor work's 512 at its dense peak (which mma.sync does not reach). A
wgmma reads its B operand once for the warpgroup's 64 rows: 48 KB a tile (each of K, V, Q
and dO once, Q and dO again for dK and dV), 384 clocks, a third of `tensor-core`'s reads.
Prediction: `attention/wgmma-flash` gained 1.23x to 1.33x over `attention/tensor-core-flash` with
the same change (lab notes on `attention/wgmma-flash`); here the products are four fifths of the
work instead of about half (no online softmax), so 1.3x to 1.6x `tensor-core`: 2.0 to 2.4 ms at d =
64, about 0.65x to 0.8x SDPA's cuDNN backward.
Measured: on an NVIDIA H100 80GB HBM3 (``ladder run``; `tensor-core` and the libraries in the same
run), float16, [4, 16, 16, 4096, 64] (B, H, HKV, N, d): 2.104 ms and 326.57 TFLOP/s credited
(`tensor-core`: 3.183 ms; SDPA pinned to cuDNN: 1.544 ms; FlashAttention-2: 2.585 ms); causal 1.146
ms (`tensor-core` 1.721, SDPA's default call, cuDNN: 0.950); d = 128: 3.892 ms (`tensor-core`
6.648, default call 2.588), causal 1.992 ms (`tensor-core` 3.558, default call 1.478)
(lab/attention/2026-11-27-backward/nvidia-h100-80gb-hbm3-attention-backward-4096-64-wgmma.json,
lab/attention/2026-11-27-backward/nvidia-h100-80gb-hbm3-attention-backward-causal-4096-64-wgmma.json,
lab/attention/2026-11-27-backward/nvidia-h100-80gb-hbm3-attention-backward-4096-128-wgmma.json,
lab/attention/2026-11-27-backward/nvidia-h100-80gb-hbm3-attention-backward-causal-4096-128-wgmma.json).
bfloat16, d = 64 (the same kernels built with .bf16 products): 2.082 ms against cuDNN's 1.538 ms,
0.74x
(lab/attention/2026-11-27-backward/nvidia-h100-80gb-hbm3-attention-backward-4096-64-bfloat16-wgmma.json).
Verdict: held at d = 64: 1.51x `tensor-core` (causal 1.50x), 0.73x the fastest library (causal
0.83x), past the 0.6x target, and 1.23x FlashAttention-2's backward. Exceeded at d = 128:
1.71x and 1.79x, 0.67x and 0.74x the fastest call, likely because `tensor-core` at d = 128 ran query
tiles of 32 (registers), which `wgmma` does not need. Still 0.67x to 0.83x cuDNN:
each batch of wgmma waits for its copies and the softmax-like elementwise code waits for the
wgmma; FlashAttention-3's pipelining (a producer warpgroup, TMA, two consumers) is the rest.

Lab notes: docs/notes/attention.md
"""

from typing import Any

from ladder.attention.backward import tensor_core
from ladder.attention.backward.problem import backward_rung
from ladder.attention.tensor_core import kernel_d, kernel_name
from ladder.core import cuda_cpp

SOURCE = cuda_cpp.source(__file__, "r04_wgmma.cu", archs=("sm_90a",), arch_specific=True)
THREADS = 128  # one warpgroup


def shared_bytes(kd: int) -> tuple[int, int]:
    """Dynamic shared memory of the key kernel (K, V, a Q and a dO tile, lse and D) and of the
    query kernel (Q, dO, a K and a V tile), 64 rows each, and 1 KB of alignment slack."""
    tiles = 4 * 64 * kd * 2 + 1024
    return tiles + 2 * 64 * 4, tiles


@backward_rung(
    name="wgmma",
    parent="tensor-core",
    title="Flash backward on wgmma: every product on Hopper's warpgroup multiply",
    dtypes=("float16", "bfloat16"),
    needs=("cupy",),
    units="tensor",
    sm90a="wgmma",
)
def geometry(q: Any, k: Any, v: Any, o: Any, do: Any, lse: Any, out: Any) -> Any:
    """The key and query kernels for this head dimension and dtype, run by ``tensor_core.plan``
    after D."""
    kd = kernel_d(q.shape[3], "rung 4")
    names = (kernel_name(f"wgmma_{part}", kd, q.dtype) for part in ("dkdv", "dq"))
    kernels = tuple(SOURCE.kernel(name) for name in names)
    ops = (q, k, v, o, do, lse, out)
    return tensor_core.plan(ops, kernels, shared_bytes(kd), THREADS, "rung 4")
