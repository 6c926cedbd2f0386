"""What a model calls: ``ladder.ops`` or the same operators in plain PyTorch.

A model of ``ladder.models`` takes its operators as an argument (``LADDER`` or ``TORCH``), so
one definition runs on the ladder's rungs, on PyTorch eager and under ``torch.compile``, with
the same weights: the comparison changes the kernels and nothing else.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import torch
import torch.nn.functional as F

import ladder.ops as ladder_ops
from ladder.fused.problem import LAYERNORM_EPS


def _linear(
    x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None = None, activation: Any = None
) -> torch.Tensor:
    y = x @ w if bias is None else torch.addmm(bias, x.reshape(-1, x.shape[-1]), w)
    y = y.reshape(*x.shape[:-1], w.shape[1])
    return F.gelu(y) if activation == "gelu" else y


def _attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False
) -> torch.Tensor:
    group = q.shape[1] // k.shape[1]
    if group > 1:
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)


def _layer_norm(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = LAYERNORM_EPS
) -> torch.Tensor:
    return F.layer_norm(x, x.shape[-1:], weight, bias, eps)


LADDER = SimpleNamespace(
    name="ladder",
    matmul=ladder_ops.matmul,
    linear=ladder_ops.linear,
    softmax=ladder_ops.softmax,
    layer_norm=ladder_ops.layer_norm,
    attention=ladder_ops.attention,
    conv2d=ladder_ops.conv2d,
)
TORCH = SimpleNamespace(
    name="torch",
    matmul=torch.matmul,
    linear=_linear,
    softmax=lambda x, dim=-1: torch.softmax(x, dim),
    layer_norm=_layer_norm,
    attention=_attention,
    conv2d=F.conv2d,
)
OPS = {"ladder": LADDER, "torch": TORCH}


def operators(name: str) -> SimpleNamespace:
    """The operators called ``name``: "ladder" or "torch"; ValueError naming the choices."""
    if name not in OPS:
        raise ValueError(f"ops must be one of {', '.join(OPS)}, got {name!r}")
    return OPS[name]
