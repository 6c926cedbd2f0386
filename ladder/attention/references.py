"""The libraries the attention ladder is measured against, registered as references.

Both need PyTorch with CUDA (optional, never required). PyTorch reads the Numba arrays without a
copy (``torch.as_tensor`` on ``__cuda_array_interface__``), and TF32 is switched off so that
FP32 means FP32.

- ``sdpa``: ``torch.nn.functional.scaled_dot_product_attention``, what a PyTorch user calls.
  PyTorch picks the kernel (FlashAttention-2, cuDNN's fused attention or its memory-efficient
  kernel, by GPU, dtype and shape); grouped-query inputs go in as they are
  (``enable_gqa=True``, PyTorch 2.5 and later) or with k and v repeated per query head on
  older versions. Its result is copied into our output: one extra pass over the output, a
  fraction of a percent of the time at the benchmark shapes.
- ``torch-materialized``: attention as three library calls, ``Q·Kᵀ`` (cuBLAS), ``softmax``,
  ``P·V`` (cuBLAS), with the N x N scores and probabilities in device memory in the input
  dtype, the way attention is written without a fused kernel. GQA broadcasts k and v over
  the query heads of their group (no copy). Its peak memory grows as N², like rung 1's.

SDPA is the bar in float16 (0.596 ms at [4, 16, 16, 4096, 64] on an NVIDIA H200,
results/nvidia-h200.json, against rung 5's 0.902 ms). In float32 with grouped-query inputs it is
not: 15.198 ms at [4, 16, 4, 4096, 64] against 7.850 ms at [4, 16, 16, 4096, 64], the same
FLOPs, and causal 19.578 ms, slower than rung 3's 14.998 ms. Which kernel PyTorch picks there
is not yet measured (no profile of the references is in results/).
"""

from __future__ import annotations

import inspect
from typing import Any

from ladder.attention.problem import attention_rung, check_arrays
from ladder.core.rung import tensor_cores_below_fp32
from ladder.core.torch_views import fp32_means_fp32, tensors


def _tensors(*arrays: Any) -> list[Any]:
    fp32_means_fp32()
    return tensors(*arrays)


def _sdpa_takes_gqa() -> bool:
    import torch.nn.functional as F

    try:
        return "enable_gqa" in inspect.signature(F.scaled_dot_product_attention).parameters
    except (TypeError, ValueError):  # a builtin without a signature: try it
        return True


@attention_rung(
    name="sdpa",
    title="PyTorch scaled_dot_product_attention",
    needs=("torch",),
    reference=True,
    units=tensor_cores_below_fp32,
)
def sdpa(q: Any, k: Any, v: Any, out: Any = None, causal: bool = False) -> Any:
    import torch.nn.functional as F

    q, k, v, out, shape = check_arrays(q, k, v, out, ("float32", "float16"))
    if out.size:
        tq, tk, tv, to = _tensors(q, k, v, out)
        if shape.group == 1:
            result = F.scaled_dot_product_attention(tq, tk, tv, is_causal=causal)
        elif _sdpa_takes_gqa():
            result = F.scaled_dot_product_attention(tq, tk, tv, is_causal=causal, enable_gqa=True)
        else:
            tk, tv = (x.repeat_interleave(shape.group, dim=1) for x in (tk, tv))
            result = F.scaled_dot_product_attention(tq, tk, tv, is_causal=causal)
        to.copy_(result)
    return out


@attention_rung(
    name="torch-materialized",
    title="PyTorch matmul, softmax, matmul (N x N materialized)",
    needs=("torch",),
    reference=True,
    units=tensor_cores_below_fp32,
)
def materialized(q: Any, k: Any, v: Any, out: Any = None, causal: bool = False) -> Any:
    import torch

    q, k, v, out, shape = check_arrays(q, k, v, out, ("float32", "float16"))
    if out.size:
        batch, _, kv_heads, n, d = shape
        tq, tk, tv, to = _tensors(q, k, v, out)
        grouped = (batch, kv_heads, shape.group, n, d)  # query heads beside their K/V head
        tq, to = tq.view(grouped), to.view(grouped)
        tk, tv = tk.unsqueeze(2), tv.unsqueeze(2)  # broadcast over the group, no copy
        scores = torch.matmul(tq, tk.transpose(-2, -1)).mul_(shape.scale)
        if causal:
            above = torch.ones(n, n, dtype=torch.bool, device=scores.device).triu_(1)
            scores.masked_fill_(above, float("-inf"))
        torch.matmul(torch.softmax(scores, dim=-1), tv, out=to)
    return out
