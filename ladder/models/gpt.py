"""A GPT-2 transformer block (pre-norm): the layer a learner would put the ladder's kernels in.

    h = x + proj(attention(split_heads(qkv(layer_norm_1(x)))))      causal, heads of d = 64
    y = h + fc2(gelu(fc1(layer_norm_2(h))))                         fc1: C → 4C, fc2: 4C → C

``GPT2_SMALL`` is GPT-2 small's width (C = 768, 12 heads); the benchmark runs it at batch 8 ×
sequence 1024. Every matrix product, the layer norms, the attention and the GELU epilogue run
on the ladder's operators (``ops="ladder"``) or PyTorch's (``ops="torch"``), with the same
weights; the residual adds and the head split are PyTorch's either way. Weights are random,
seeded, in (in, out) layout (``ladder.ops.linear``'s).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import torch
from torch import nn

from ladder.models.common import operators


@dataclass(frozen=True)
class Width:
    channels: int
    heads: int


GPT2_SMALL = Width(channels=768, heads=12)


class Block(nn.Module):
    """One block of ``width`` in ``dtype`` on ``device``, calling ``ops`` ("ladder" or
    "torch"); weights drawn from ``seed`` (normal, standard deviation 0.02 as GPT-2's, biases
    and layer-norm shifts small and random so that a wrong broadcast shows)."""

    def __init__(
        self,
        width: Width = GPT2_SMALL,
        ops: str | SimpleNamespace = "ladder",
        dtype: torch.dtype = torch.float32,
        device: str | torch.device = "cpu",
        seed: int = 0,
    ) -> None:
        super().__init__()
        if width.channels % width.heads:
            raise ValueError(f"channels {width.channels} must be a multiple of heads {width.heads}")
        self.width = width
        self.ops = operators(ops)
        gen = torch.Generator().manual_seed(seed)
        c = width.channels

        def param(*shape: int, mean: float = 0.0, std: float = 0.02) -> nn.Parameter:
            p = mean + std * torch.randn(shape, generator=gen)
            return nn.Parameter(p.to(device=device, dtype=dtype))

        self.ln1_weight, self.ln1_bias = param(c, mean=1.0, std=0.1), param(c)
        self.qkv, self.qkv_bias = param(c, 3 * c), param(3 * c)
        self.proj, self.proj_bias = param(c, c), param(c)
        self.ln2_weight, self.ln2_bias = param(c, mean=1.0, std=0.1), param(c)
        self.fc1, self.fc1_bias = param(c, 4 * c), param(4 * c)
        self.fc2, self.fc2_bias = param(4 * c, c), param(c)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The block on ``x`` (batch, sequence, channels)."""
        ops, c, heads = self.ops, self.width.channels, self.width.heads
        if x.dim() != 3 or x.shape[-1] != c:
            raise ValueError(f"x must be (batch, sequence, {c}), got {tuple(x.shape)}")
        b, t, _ = x.shape
        qkv = ops.linear(ops.layer_norm(x, self.ln1_weight, self.ln1_bias), self.qkv, self.qkv_bias)
        q, k, v = (part.view(b, t, heads, -1).transpose(1, 2) for part in qkv.split(c, dim=-1))
        a = ops.attention(q, k, v, causal=True).transpose(1, 2).reshape(b, t, c)
        h = x + ops.linear(a, self.proj, self.proj_bias)
        m = ops.linear(
            ops.layer_norm(h, self.ln2_weight, self.ln2_bias), self.fc1, self.fc1_bias, "gelu"
        )
        return h + ops.linear(m, self.fc2, self.fc2_bias)
