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
from ladder.attention.references import sdpa_tensors
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
    return sdpa_tensors(q, k, v, causal, q.shape[1] // k.shape[1])


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
    relu_max_pool2d=ladder_ops.relu_max_pool2d,
)
TORCH = SimpleNamespace(
    name="torch",
    matmul=torch.matmul,
    linear=_linear,
    softmax=lambda x, dim=-1: torch.softmax(x, dim),
    layer_norm=_layer_norm,
    attention=_attention,
    conv2d=F.conv2d,
    relu_max_pool2d=lambda x: F.max_pool2d(F.relu(x), 2),
)
OPS = {"ladder": LADDER, "torch": TORCH}


def operators(ops: str | SimpleNamespace) -> SimpleNamespace:
    """The operators ``ops`` names, "ladder" or "torch", or ``ops`` itself when it is a set of
    one's own (``SimpleNamespace(**vars(TORCH), linear=LADDER.linear)`` replaces one kind of
    operator only); ValueError naming the choices otherwise."""
    if isinstance(ops, SimpleNamespace):
        missing = [n for n in vars(TORCH) if not hasattr(ops, n)]
        if missing:
            raise ValueError(f"ops lacks {', '.join(missing)}: start from vars(TORCH)")
        return ops
    if ops not in OPS:
        raise ValueError(f"ops must be one of {', '.join(OPS)}, got {ops!r}")
    return OPS[ops]
