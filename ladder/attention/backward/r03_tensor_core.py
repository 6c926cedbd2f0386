"""Tensor cores: `flash`'s two kernels on mma.sync + ldmatrix in CUDA C++.

What changes: the seven products per tile (S, dP, dV, dK in the key kernel; S, dP, dQ in the query
kernel) move from FP32 FMAs to ``mma.m16n8k16``, with the fragments, ldmatrix addressing and
swizzle of `attention/tensor-core-flash` (``ladder/attention/swizzled_rows.cuh``, shared). One
new trick: the key kernel computes the transposes Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ, keys as the M
dimension, so that Pᵀ and dSᵀ come out in the accumulator layout that is exactly the A fragment of
the next products dV += Pᵀ·dO and dK += dSᵀ·Q, as P feeds P·V in the forward: nothing is stored to
shared memory but the four operand tiles. A block is 4 warps over 64 keys (key kernel) or 64
queries (query kernel), one m16 tile per warp; query tiles of 64 (32 at d = 128) and key tiles of
64, copied by cp.async and waited for, no pipelining. Other head dimensions are zero-padded to 64
or 128 and unaligned operands copied, as in `attention/tensor-core-flash` (the memory table shows
the workspaces). float16 only.
Why: `flash` runs every product on the FP32 lanes of the CUDA cores; `attention/tensor-core-flash`
showed what the tensor cores give the same products (26.70x its FP32 rung on an H200).
Prediction: 7 products per tile where 5 are counted, at the mma.sync forward's rate (about 300
TFLOP/s of counted work) less the two recomputed products and the unpipelined copies: 120 to
200 TFLOP/s counted, tens of times `flash`, and below the libraries' backward, which pipeline
(FlashAttention-2) or run on wgmma (cuDNN on Hopper).
Measured: on an NVIDIA H100 80GB HBM3 (``ladder run``; the libraries in the same run), float16,
[4, 16, 16, 4096, 64] (B, H, HKV, N, d): 3.167 ms and 216.95 TFLOP/s credited, 31.19x `flash`;
SDPA's default call (cuDNN) 1.572 ms, FlashAttention-2's 2.567 ms; causal 1.720 ms against
0.940; d = 128: 6.659 ms and 206.40 TFLOP/s against 2.627 ms; causal 3.537 against 1.502
(lab/attention/2026-11-27-backward/nvidia-h100-80gb-hbm3-attention-backward-4096-64.json,
lab/attention/2026-11-27-backward/nvidia-h100-80gb-hbm3-attention-backward-causal-4096-64.json,
lab/attention/2026-11-27-backward/nvidia-h100-80gb-hbm3-attention-backward-4096-128.json,
lab/attention/2026-11-27-backward/nvidia-h100-80gb-hbm3-attention-backward-causal-4096-128.json).
Verdict: the rate held with the mask (200 and 194 TFLOP/s) and beat the 120 to 200 predicted
without it (217 and 206), and 29x to 55x `flash`; against the fastest library 0.50x at d = 64
(causal 0.55x) and 0.39x at d = 128 (causal 0.42x), short of the 0.6x target; against
FlashAttention-2's backward 0.81x and 0.71x. What limits it, likely (not profiled): each tile
waits for its copies (no pipeline), the two recomputed products are 40% more tensor work, and
cuDNN runs wgmma, which `attention/wgmma-flash` showed worth 1.3x over mma.sync.

Lab notes: docs/notes/attention.md
"""

from typing import Any

from ladder.attention.backward import tensor_core
from ladder.attention.backward.problem import backward_rung
from ladder.attention.backward.tensor_core import BLOCK_ROWS
from ladder.attention.tensor_core import kernel_d
from ladder.core import cuda_cpp

SOURCE = cuda_cpp.source(__file__, "r03_tensor_core.cu", archs=("sm_80", "sm_90"))
THREADS = 128  # 4 warps
QUERY_TILE = {64: 64, 128: 32}  # queries per tile of the key kernel, per head dimension
KEY_TILE = 64  # keys per tile of the query kernel


def shared_bytes(kd: int) -> tuple[int, int]:
    """Dynamic shared memory of the key kernel (K, V, and a Q, dO, lse and D tile) and of the
    query kernel (Q, dO, and a K and V tile)."""
    bq = QUERY_TILE[kd]
    return 2 * (BLOCK_ROWS + bq) * kd * 2 + 2 * bq * 4, 2 * (BLOCK_ROWS + KEY_TILE) * kd * 2


@backward_rung(
    name="tensor-core",
    parent="flash",
    title="Flash backward on the tensor cores: mma.sync, ldmatrix, cp.async (CUDA C++)",
    dtypes=("float16",),
    needs=("cupy",),
    units="tensor",
    min_cc=(8, 0),
    cc_needs="cp.async and mma.sync m16n8k16",
)
def geometry(q: Any, k: Any, v: Any, o: Any, do: Any, lse: Any, out: Any) -> Any:
    """The key and query kernels for this head dimension, run by ``tensor_core.plan`` after D."""
    kd = kernel_d(q.shape[3], "rung 3")
    kernels = (SOURCE.kernel(f"backward_dkdv_d{kd}"), SOURCE.kernel(f"backward_dq_d{kd}"))
    ops = (q, k, v, o, do, lse, out)
    return tensor_core.plan(ops, kernels, shared_bytes(kd), THREADS, "rung 3")
