"""The ladder's best rungs as PyTorch operators, with gradients: from kernels to a model.

``import ladder.ops`` registers ``torch.ops.ladder.*`` (``torch.library`` custom operators)
and gives the functions below, which check their arguments, shape them for the operators and
call them. Each operator runs the best rung of its problem that takes the input here, else
PyTorch's own operator; ``with ladder.ops.routes() as ran:`` records which ran, and why
PyTorch did when it did. Every operator has a fake implementation (``torch.compile``,
meta tensors) and a backward. A call that nothing watches (no ``torch.compile``, tracer,
dispatch mode such as ``FakeTensorMode``, functorch transform or profiler: ``library.watched``)
skips ``torch.ops``' dispatch: the operator's body runs directly, or inside an
``autograd.Function`` with the same backward when an input needs a gradient. The operators:

=============== ================================ =========================================
function        forward                          backward
=============== ================================ =========================================
``matmul``      GEMM rungs                       two GEMMs: dA = dC·Bᵀ, dB = Aᵀ·dC
``linear``      GEMM (+ bias + GELU epilogue)    the GEMMs, GELU's own kernel, a column sum
``softmax``     softmax rungs                    a kernel: dx = y·(dy − Σ dy·y)
``layer_norm``  layer norm rungs                 two kernels: dx per row; dγ, dβ per column
``attention``   attention rungs (GQA, causal)    PyTorch's SDPA backward (for now)
``conv2d``      conv rungs (stride 1, no pad)    PyTorch's convolution backward
``relu_max_``   a kernel: ReLU and 2 x 2 max     a kernel: dy to each window's maximum
``pool2d``      pool in one pass (``ops.pool``)  where it is above 0
=============== ================================ =========================================

Needs PyTorch 2.4 or later: ``pip install 'numba-ladder[ops]'``. Nothing else in ladder does.
"""

from __future__ import annotations

from typing import Any

try:
    import torch
except ImportError as err:  # pragma: no cover - the message is the point
    raise ImportError(
        "ladder.ops needs PyTorch 2.4 or later: pip install 'numba-ladder[ops]'"
    ) from err

import torch.nn.functional as F

from ladder.fused.problem import LAYERNORM_EPS
from ladder.ops.library import (
    OPERATORS,
    eager_attention,
    eager_conv2d,
    eager_layer_norm,
    eager_linear_gelu,
    eager_matmul,
    eager_relu_max_pool2d,
    eager_softmax,
)
from ladder.ops.routes import SETTINGS, Route, routes

ACTIVATIONS = (None, "gelu")


def _tensor(value: Any, name: str) -> torch.Tensor:
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
    if not value.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got {value.dtype}")
    return value


def _alike(first: tuple[torch.Tensor, str], *others: tuple[torch.Tensor, str]) -> None:
    """Every tensor of ``others`` has the first's dtype and device, or a clear error."""
    lead, lead_name = first
    for tensor, name in others:
        if tensor.dtype != lead.dtype:
            raise TypeError(f"{name} must be {lead.dtype} like {lead_name}, got {tensor.dtype}")
        if tensor.device != lead.device:
            raise ValueError(f"{name} is on {tensor.device} but {lead_name} on {lead.device}")


def _ndim(tensor: torch.Tensor, name: str, ndim: int, what: str) -> None:
    if tensor.dim() != ndim:
        raise ValueError(f"{name} must be {ndim}-D {what}, got shape {tuple(tensor.shape)}")


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a @ b`` for 2-D ``a`` (M x K) and ``b`` (K x N) of one dtype."""
    _tensor(a, "a"), _tensor(b, "b")
    _ndim(a, "a", 2, "(M, K)")
    _ndim(b, "b", 2, "(K, N)")
    _alike((a, "a"), (b, "b"))
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"inner dimensions differ: a is {tuple(a.shape)}, b is {tuple(b.shape)}")
    return eager_matmul(a, b)


def linear(
    x: torch.Tensor,
    w: torch.Tensor,
    bias: torch.Tensor | None = None,
    activation: str | None = None,
) -> torch.Tensor:
    """``activation(x @ w + bias)`` over the last dimension of ``x`` (..., K), with ``w`` (K, N)
    (note: not ``nn.Linear``'s (N, K) weight), ``bias`` (N) or None, ``activation`` None or
    "gelu" (the erf form). With both a bias and GELU, one operator (the GEMM with the fused
    epilogue where a rung takes the dtype); otherwise the GEMM and PyTorch's add and GELU."""
    _tensor(x, "x"), _tensor(w, "w")
    _ndim(w, "w", 2, "(K, N)")
    if x.dim() < 1 or x.shape[-1] != w.shape[0]:
        raise ValueError(f"x's last dimension must be w's K={w.shape[0]}, got {tuple(x.shape)}")
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {ACTIVATIONS}, got {activation!r}")
    pairs = [(x, "x"), (w, "w")]
    if bias is not None:
        _tensor(bias, "bias")
        if tuple(bias.shape) != (w.shape[1],):
            raise ValueError(f"bias must have shape ({w.shape[1]},), got {tuple(bias.shape)}")
        pairs.append((bias, "bias"))
    _alike(*pairs)
    rows = x.reshape(-1, x.shape[-1])
    if bias is not None and activation == "gelu":
        y = eager_linear_gelu(rows, w, bias)
    else:
        y = eager_matmul(rows, w)
        if bias is not None:
            y = y + bias
        if activation == "gelu":
            y = F.gelu(y)
    return y.reshape(*x.shape[:-1], w.shape[1])


def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Softmax along the last dimension of ``x`` (``dim`` must name it)."""
    _tensor(x, "x")
    if x.dim() < 1 or dim not in (-1, x.dim() - 1):
        raise ValueError(f"dim must be the last dimension (-1), got {dim} for {x.dim()}-D x")
    return eager_softmax(x.reshape(-1, x.shape[-1])).reshape(x.shape)


def layer_norm(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = LAYERNORM_EPS
) -> torch.Tensor:
    """Layer norm over the last dimension of ``x``, scaled by ``weight`` and shifted by ``bias``
    (both of that length), biased variance plus ``eps``."""
    _tensor(x, "x"), _tensor(weight, "weight"), _tensor(bias, "bias")
    cols = x.shape[-1] if x.dim() else 0
    for tensor, name in ((weight, "weight"), (bias, "bias")):
        if tuple(tensor.shape) != (cols,):
            raise ValueError(f"{name} must have shape ({cols},), got {tuple(tensor.shape)}")
    _alike((x, "x"), (weight, "weight"), (bias, "bias"))
    if x.dim() == 2:  # the rows already: no reshape either way
        return eager_layer_norm(x, weight, bias, float(eps))
    return eager_layer_norm(x.reshape(-1, cols), weight, bias, float(eps)).reshape(x.shape)


def attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False
) -> torch.Tensor:
    """``softmax(q kᵀ / √d) v`` per head: ``q`` (B, H, N, d), ``k`` and ``v`` (B, HKV, N, d)
    with H a multiple of HKV (GQA; HKV = 1 is MQA); ``causal`` masks keys after the query."""
    for tensor, name in ((q, "q"), (k, "k"), (v, "v")):
        _tensor(tensor, name)
        _ndim(tensor, name, 4, "(batch, heads, N, d)")
    _alike((q, "q"), (k, "k"), (v, "v"))
    if k.shape != v.shape:
        raise ValueError(f"k and v must have one shape, got {tuple(k.shape)} and {tuple(v.shape)}")
    b, h, n, d = q.shape
    if (k.shape[0], k.shape[2], k.shape[3]) != (b, n, d):
        raise ValueError(f"k and v must have q's batch, N and d: q {tuple(q.shape)}, k {k.shape}")
    if k.shape[1] < 1 or h % k.shape[1]:
        raise ValueError(f"q's {h} heads must be a multiple of k's {k.shape[1]}")
    return eager_attention(q, k, v, bool(causal))


def conv2d(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """The convolution of ``x`` (B, C, H, W) with ``w`` (M, C, K, K): stride 1, no padding, no
    bias (``F.conv2d(x, w)``), as the course's layers are."""
    _tensor(x, "x"), _tensor(w, "w")
    _ndim(x, "x", 4, "(B, C, H, W)")
    _ndim(w, "w", 4, "(M, C, K, K)")
    _alike((x, "x"), (w, "w"))
    if w.shape[1] != x.shape[1]:
        raise ValueError(f"w has {w.shape[1]} input channels but x has {x.shape[1]}")
    if w.shape[2] != w.shape[3]:
        raise ValueError(f"filters must be square (M, C, K, K), got {tuple(w.shape)}")
    if not 1 <= w.shape[2] <= min(x.shape[2], x.shape[3]):
        raise ValueError(f"a {w.shape[2]}x{w.shape[2]} filter does not fit {tuple(x.shape)}")
    return eager_conv2d(x, w)


def relu_max_pool2d(x: torch.Tensor) -> torch.Tensor:
    """``F.max_pool2d(F.relu(x), 2)`` for ``x`` (B, C, H, W) in one pass (the last row or
    column dropped where H or W is odd), as the course's network pools each convolution."""
    _tensor(x, "x")
    _ndim(x, "x", 4, "(B, C, H, W)")
    if x.shape[2] < 2 or x.shape[3] < 2:
        raise ValueError(f"x must be at least 2 x 2 to pool, got {tuple(x.shape)}")
    return eager_relu_max_pool2d(x)


def forget_routes() -> None:
    """Choose every operator's route again at its next call (after the GPU, the registry or
    the environment changed)."""
    for operator in OPERATORS:
        operator.forget()


def benchmark(enabled: bool = True) -> bool:
    """Choose each signature's route by time (``enabled``) or top-down (the default), and
    forget the routes chosen so far; returns the previous setting. By time, the first call of
    a signature runs and times every rung that takes it and keeps the fastest (the route's
    ``why`` gives the times), as ``torch.backends.cudnn.benchmark`` does for cuDNN: worth it
    where a model calls a few shapes many times, and the top rung is not the fastest at every
    shape (a GEMM rung's large tiles leave most SMs idle on a small output)."""
    previous = SETTINGS.benchmark
    SETTINGS.benchmark = bool(enabled)
    forget_routes()
    return previous


__all__ = [
    "Route",
    "attention",
    "benchmark",
    "conv2d",
    "forget_routes",
    "layer_norm",
    "linear",
    "matmul",
    "relu_max_pool2d",
    "routes",
    "softmax",
]
