"""The PyTorch operators (``torch.ops.ladder.*``): each runs its problem's best rung that takes
the input (``routes``), else PyTorch's own, and has a fake implementation (for
``torch.compile`` and meta tensors) and a backward.

No ``from __future__ import annotations`` here: ``torch.library.custom_op`` reads the schema
from the annotations themselves.
"""

import functools
import math
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from ladder.attention.references import sdpa_tensors
from ladder.fused.problem import LAYERNORM_EPS
from ladder.ops import backward, pool
from ladder.ops.routes import Operator, run_entry, run_kernel, torch_route, unsupported

GEMM = Operator("ladder::matmul", "gemm")
LINEAR_GELU = Operator("ladder::linear_gelu", "gemm-epilogue")
SOFTMAX = Operator("ladder::softmax", "softmax")
LAYER_NORM = Operator("ladder::layer_norm", "layernorm")


def _no_groups(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> str | None:
    """Rung 6 packs the query heads that share a K/V head; with one query head per K/V head
    there is nothing to pack, and rung 5 is the faster of the two there (float16 with 16 K/V
    heads in results/nvidia-h200.json)."""
    return "one query head per K/V head: nothing to pack" if q.shape[1] == k.shape[1] else None


def _rung_9_is_as_fast(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> str:
    """Rung 10 (ping-pong) ran 0.98x to 1.00x rung 9 in each of the twelve cases measured (the
    files of lab/attention/2026-11-27-pingpong-flash/, an H100): rung 9 is the route wherever
    both run."""
    return "rung 9 is as fast (rung 10 measured 0.98-1.00x it on an H100)"


ATTENTION_SKIP = {"gqa-packed": _no_groups, "pingpong-flash": _rung_9_is_as_fast}
ATTENTION = Operator("ladder::attention", "attention", skip=ATTENTION_SKIP)
ATTENTION_CAUSAL = Operator("ladder::attention", "attention-causal", skip=ATTENTION_SKIP)
CONV2D = Operator("ladder::conv2d", "conv")
OPERATORS = (GEMM, LINEAR_GELU, SOFTMAX, LAYER_NORM, ATTENTION, ATTENTION_CAUSAL, CONV2D)


# --- the eager path: a call nothing watches skips torch.ops' dispatch --------------------

_BODIES: dict[Any, tuple[str, Callable[..., Any]]] = {}  # operator -> its name, its function


def _operator(name: str) -> Callable[[Callable[..., Any]], Any]:
    """``torch.library.custom_op(name)``, the function kept as the operator's body."""

    def make(body: Callable[..., Any]) -> Any:
        op = torch.library.custom_op(name, body, mutates_args=())
        _BODIES[op] = (name, body)
        return op

    return make


def _probe(module: Any, name: str) -> Callable[[], bool]:
    """``module.name()`` (or its value, for a flag) as a predicate; True where this PyTorch
    lacks it, so that a call on an unknown version takes the dispatched path."""
    found = getattr(module, name, None)
    if found is None:
        return lambda: True
    return found if callable(found) else lambda: bool(getattr(module, name))


_WATCHERS = (  # each says whether something watches or transforms the calls made now
    torch.compiler.is_compiling,  # Dynamo tracing
    _probe(torch._C, "_get_tracing_state"),  # torch.jit.trace
    _probe(torch._C, "_are_functorch_transforms_active"),  # vmap, grad
    _probe(torch._C, "_len_torch_dispatch_stack"),  # FakeTensorMode, make_fx, FlopCounterMode
    _probe(torch.autograd.profiler, "_is_profiler_enabled"),  # torch.profiler
)


# tensors with storage and no behaviour of their own: a model's weights are Parameters
_PLAIN = (torch.Tensor, torch.nn.Parameter)


def watched(args: tuple[Any, ...]) -> bool:
    """Whether a call must go through ``torch.ops``: something above watches it, or a tensor
    argument is not a plain tensor (or Parameter) with storage (a fake, meta or subclass
    tensor)."""
    for watcher in _WATCHERS:  # a loop, not any() over a generator: this runs every call
        if watcher():
            return True
    for a in args:
        if isinstance(a, torch.Tensor) and (type(a) not in _PLAIN or a.is_meta):
            return True
    return False


def eager(op: Any, setup: Callable[..., None], backward_fn: Callable[..., Any]) -> Any:
    """Give ``op`` its gradient (``setup`` saves what ``backward_fn`` needs) and return it as
    a caller of ``ladder.ops`` gets it: where nothing watches (``watched``), its body called
    directly when no argument needs a gradient, else through an ``autograd.Function`` with
    the same ``setup`` and backward; otherwise ``op`` itself, so that ``torch.compile``,
    tracers, dispatch modes and the profiler see ``torch.ops.ladder.*``. The same kernels and
    routes either way, without the custom operator's dispatch, which costs host time on every
    call (``ladder models --parts host`` measures what a call costs)."""
    op.register_autograd(backward_fn, setup_context=setup)
    name, body = _BODIES[op]
    short = name.split("::")[-1]

    def forward(ctx: Any, *args: Any) -> Any:
        out = body(*args)
        setup(ctx, args, out)
        return out

    # forward(ctx, ...) rather than a separate setup_context, whose path in PyTorch costs
    # more host time a call (on this project's 2-core CPU, more than the dispatch it saves)
    function = type(
        "".join(part.title() for part in short.split("_")),
        (torch.autograd.Function,),
        {"forward": staticmethod(forward), "backward": staticmethod(backward_fn)},
    )

    def call(*args: Any) -> Any:
        if watched(args):
            return op(*args)
        if torch.is_grad_enabled() and any(
            isinstance(a, torch.Tensor) and a.requires_grad for a in args
        ):
            return function.apply(*args)
        return body(*args)

    call.__name__ = call.__qualname__ = f"eager_{short}"
    call.__doc__ = f"``{name}`` on the eager path (``eager``)."
    return call


def _key(*tensors: torch.Tensor, **options: Any) -> tuple:
    """A call's signature: what a route depends on (never the data or the pointers, which a
    launcher's own plans key on)."""
    signature = tuple([(t.shape, t.dtype, t.device) for t in tensors])
    return (signature, tuple(sorted(options.items())) if options else ())


def _like(x: torch.Tensor) -> torch.Tensor:
    """A new contiguous tensor of ``x``'s shape, dtype and device: what every operator returns,
    whatever the strides of its input (a fake implementation must say the same)."""
    return x.new_empty(x.shape)


def _t(x: torch.Tensor) -> torch.Tensor:
    """``x`` transposed and contiguous: what the GEMM rungs take (row-major operands only)."""
    return x.t().contiguous()


# --- matmul: C = A @ B --------------------------------------------------------------------


@_operator("ladder::matmul")
def matmul_op(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    a, b = a.contiguous(), b.contiguous()
    return GEMM.compute(
        _key(a, b), (a, b), lambda: a.new_empty((a.shape[0], b.shape[1])), lambda: a @ b
    )


@matmul_op.register_fake
def _(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a.new_empty((a.shape[0], b.shape[1]))


def _matmul_setup(ctx: Any, inputs: tuple, output: torch.Tensor) -> None:
    ctx.save_for_backward(*inputs)


@functools.cache
def _transposed_rungs(dtype: str) -> list[Any]:
    """The GEMM rungs for ``dtype`` that offer ``Rung.transposed`` and are available here,
    highest first (looked up once per dtype: every backward call asks)."""
    return [
        r
        for r in GEMM.candidates(dtype)
        if r.transposed is not None and r.unavailable_reason() is None
    ]


def _in_place(layout: str, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor | None:
    """Aᵀ·B (``layout="tn"``, ``x`` = A) or A·Bᵀ (``"nt"``, ``y`` = B), the transposed
    operand read where it lies, by the highest GEMM rung that offers it (``Rung.transposed``:
    `wgmma` on Hopper), is available here and takes these sizes; else None, and the caller
    copies the operand."""
    if unsupported(x) or unsupported(y):
        return None
    m = x.shape[1] if layout == "tn" else x.shape[0]
    n = y.shape[1] if layout == "tn" else y.shape[0]
    why = ("Aᵀ" if layout == "tn" else "Bᵀ") + " read in place"
    for rung in _transposed_rungs(str(x.dtype).removeprefix("torch.")):
        out = x.new_empty((m, n))
        try:
            run_entry(GEMM.op, rung, rung.transposed, (x, y, out), why, layout=layout)
        except ValueError:  # sizes off the tiles, a misaligned view: the next, or a copy
            continue
        return out
    return None


def _gemm_grads(
    a: torch.Tensor, b: torch.Tensor, grad: torch.Tensor, needs: tuple[bool, ...]
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """dA = dC·Bᵀ and dB = Aᵀ·dC for C = A·B (each where ``needs`` says): the transposed
    operand read in place where `gemm/wgmma` takes it, else copied and multiplied by the
    operator (``ladder::matmul``: its own route)."""
    grad_a = grad_b = None
    if needs[0]:
        grad_a = _in_place("nt", grad, b)
        grad_a = eager_matmul(grad, _t(b)) if grad_a is None else grad_a
    if needs[1]:
        grad_b = _in_place("tn", a, grad)
        grad_b = eager_matmul(_t(a), grad) if grad_b is None else grad_b
    return grad_a, grad_b


def _matmul_backward(ctx: Any, grad: torch.Tensor) -> tuple:
    a, b = ctx.saved_tensors
    return _gemm_grads(a, b, grad.contiguous(), ctx.needs_input_grad)


eager_matmul = eager(matmul_op, _matmul_setup, _matmul_backward)


# --- gelu(A @ W + bias), the GEMM with the bias + GELU epilogue ----------------------------


@_operator("ladder::linear_gelu")
def linear_gelu_op(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    x, w, bias = x.contiguous(), w.contiguous(), bias.contiguous()
    return LINEAR_GELU.compute(
        _key(x, w, bias),
        (x, w, bias),
        lambda: x.new_empty((x.shape[0], w.shape[1])),
        lambda: F.gelu(eager_matmul(x, w) + bias),  # the GEMM's own route, then add and GELU
    )


@linear_gelu_op.register_fake
def _(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    return x.new_empty((x.shape[0], w.shape[1]))


@torch.library.custom_op("ladder::gelu_backward", mutates_args=())
def gelu_backward_op(pre: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
    pre, grad = pre.contiguous(), grad.contiguous()
    out = _like(pre)

    def in_torch() -> None:
        cdf = 0.5 * (1.0 + torch.erf(pre.float() * (1.0 / math.sqrt(2.0))))
        pdf = torch.exp(-0.5 * pre.float() ** 2) / math.sqrt(2.0 * math.pi)
        out.copy_(grad.float() * (cdf + pre.float() * pdf))

    flat = (pre.view(-1), grad.view(-1), out.view(-1))
    run_kernel("ladder::gelu_backward", "gelu-backward", flat, backward.gelu_backward, in_torch)
    return out


@gelu_backward_op.register_fake
def _(pre: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
    return _like(pre)


def _linear_gelu_setup(ctx: Any, inputs: tuple, output: torch.Tensor) -> None:
    ctx.save_for_backward(*inputs)


def _linear_gelu_backward(ctx: Any, grad: torch.Tensor) -> tuple:
    x, w, bias = ctx.saved_tensors
    # recomputed: one more GEMM, instead of keeping an M x N pre-activation per layer until
    # the backward reaches it
    pre = eager_matmul(x, w) + bias
    dpre = gelu_backward_op(pre, grad.contiguous())
    grad_x, grad_w = _gemm_grads(x, w, dpre, ctx.needs_input_grad)
    grad_bias = dpre.sum(0) if ctx.needs_input_grad[2] else None
    return grad_x, grad_w, grad_bias


eager_linear_gelu = eager(linear_gelu_op, _linear_gelu_setup, _linear_gelu_backward)


# --- softmax over the rows of a 2-D tensor ------------------------------------------------


@_operator("ladder::softmax")
def softmax_op(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    return SOFTMAX.compute(_key(x), (x,), lambda: _like(x), lambda: torch.softmax(x, dim=-1))


@softmax_op.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    return _like(x)


@torch.library.custom_op("ladder::softmax_backward", mutates_args=())
def softmax_backward_op(y: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
    y, grad = y.contiguous(), grad.contiguous()
    out = _like(y)

    def in_torch() -> None:
        y32, g32 = y.float(), grad.float()
        out.copy_(y32 * (g32 - (g32 * y32).sum(-1, keepdim=True)))

    run_kernel(
        "ladder::softmax_backward",
        "softmax-backward",
        (y, grad, out),
        backward.softmax_backward,
        in_torch,
    )
    return out


@softmax_backward_op.register_fake
def _(y: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
    return _like(y)


def _softmax_setup(ctx: Any, inputs: tuple, output: torch.Tensor) -> None:
    ctx.save_for_backward(output)


def _softmax_backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
    (y,) = ctx.saved_tensors
    return softmax_backward_op(y, grad)


eager_softmax = eager(softmax_op, _softmax_setup, _softmax_backward)


# --- layer norm over the rows of a 2-D tensor ---------------------------------------------


@_operator("ladder::layer_norm")
def layer_norm_op(
    x: torch.Tensor, gamma: torch.Tensor, beta: torch.Tensor, eps: float
) -> torch.Tensor:
    x, gamma, beta = x.contiguous(), gamma.contiguous(), beta.contiguous()
    if eps != LAYERNORM_EPS:  # the rungs' epsilon is a constant of their kernels
        torch_route(LAYER_NORM.op, f"eps={eps}: the layer norm rungs use {LAYERNORM_EPS}")
        return F.layer_norm(x, x.shape[-1:], gamma, beta, eps)
    return LAYER_NORM.compute(
        _key(x, gamma, beta),
        (x, gamma, beta),
        lambda: _like(x),
        lambda: F.layer_norm(x, x.shape[-1:], gamma, beta, eps),
    )


@layer_norm_op.register_fake
def _(x: torch.Tensor, gamma: torch.Tensor, beta: torch.Tensor, eps: float) -> torch.Tensor:
    return _like(x)


@torch.library.custom_op("ladder::layer_norm_backward", mutates_args=())
def layer_norm_backward_op(
    x: torch.Tensor, gamma: torch.Tensor, grad: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    x, gamma, grad = x.contiguous(), gamma.contiguous(), grad.contiguous()
    dx = _like(x)
    dgamma = x.new_zeros(gamma.shape, dtype=torch.float32)
    dbeta = x.new_zeros(gamma.shape, dtype=torch.float32)
    stats = x.new_empty((x.shape[0], 2), dtype=torch.float32)

    def in_torch() -> None:
        x32 = x.float()
        mean = x32.mean(-1, keepdim=True)
        rstd = torch.rsqrt(x32.var(-1, unbiased=False, keepdim=True) + eps)
        xhat = (x32 - mean) * rstd
        g = grad.float() * gamma.float()
        dx.copy_(rstd * (g - g.mean(-1, keepdim=True) - xhat * (g * xhat).mean(-1, keepdim=True)))
        dgamma.copy_((grad.float() * xhat).sum(0))
        dbeta.copy_(grad.float().sum(0))

    def launch(x: Any, gamma: Any, grad: Any, dx: Any, dgamma: Any, dbeta: Any, stats: Any) -> None:
        backward.layer_norm_backward(x, gamma, grad, dx, dgamma, dbeta, stats, eps)

    tensors = (x, gamma, grad, dx, dgamma, dbeta, stats)
    run_kernel("ladder::layer_norm_backward", "layer-norm-backward", tensors, launch, in_torch)
    return dx, dgamma.to(gamma.dtype), dbeta.to(gamma.dtype)


@layer_norm_backward_op.register_fake
def _(
    x: torch.Tensor, gamma: torch.Tensor, grad: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return _like(x), _like(gamma), _like(gamma)


def _layer_norm_setup(ctx: Any, inputs: tuple, output: torch.Tensor) -> None:
    x, gamma, _, eps = inputs
    ctx.save_for_backward(x, gamma)
    ctx.eps = eps


def _layer_norm_backward(ctx: Any, grad: torch.Tensor) -> tuple:
    x, gamma = ctx.saved_tensors
    dx, dgamma, dbeta = layer_norm_backward_op(x, gamma, grad, ctx.eps)
    return dx, dgamma, dbeta, None


eager_layer_norm = eager(layer_norm_op, _layer_norm_setup, _layer_norm_backward)


# --- attention: softmax(Q Kᵀ / √d) V, GQA/MQA, causal or not -----------------------------


def _sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
    """PyTorch's attention on the same inputs, K/V heads shared by q.shape[1] // k.shape[1]
    query heads each (as the attention ladder's library row calls it)."""
    return sdpa_tensors(q, k, v, causal, q.shape[1] // k.shape[1])


@_operator("ladder::attention")
def attention_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    operator = ATTENTION_CAUSAL if causal else ATTENTION  # a problem each, their own launchers
    return operator.compute(
        _key(q, k, v),
        (q, k, v),
        lambda: _like(q),
        lambda: _sdpa(q, k, v, causal).contiguous(),  # SDPA's output may be a transposed view
    )


@attention_op.register_fake
def _(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
    return _like(q)


def _attention_setup(ctx: Any, inputs: tuple, output: torch.Tensor) -> None:
    q, k, v, causal = inputs
    ctx.save_for_backward(q, k, v)
    ctx.causal = causal


def _attention_backward(ctx: Any, grad: torch.Tensor) -> tuple:
    """PyTorch's attention backward until the attention ladder has a backward of its own: SDPA's
    forward again on the saved inputs (the forward ran on a rung, so autograd has no SDPA graph
    to reuse), then its backward."""
    q, k, v = (t.detach().requires_grad_() for t in ctx.saved_tensors)
    with torch.enable_grad():
        out = _sdpa(q, k, v, ctx.causal)
    grads = torch.autograd.grad(out, (q, k, v), grad)
    return *grads, None


eager_attention = eager(attention_op, _attention_setup, _attention_backward)


# --- conv2d: NCHW, stride 1, no padding (the course's layers) -----------------------------


@_operator("ladder::conv2d")
def conv2d_op(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    x, w = x.contiguous(), w.contiguous()
    b, _, h, wd = x.shape
    m, _, k, _ = w.shape
    return CONV2D.compute(
        _key(x, w),
        (x, w),
        lambda: x.new_empty((b, m, h - k + 1, wd - k + 1)),
        lambda: F.conv2d(x, w),
    )


@conv2d_op.register_fake
def _(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    b, _, h, wd = x.shape
    m, _, k, _ = w.shape
    return x.new_empty((b, m, h - k + 1, wd - k + 1))


def _conv2d_setup(ctx: Any, inputs: tuple, output: torch.Tensor) -> None:
    ctx.save_for_backward(*inputs)


def _conv2d_backward(ctx: Any, grad: torch.Tensor) -> tuple:
    """PyTorch's (cuDNN's) convolution gradients: the conv ladder is a forward ladder."""
    x, w = ctx.saved_tensors
    grad_x = torch.nn.grad.conv2d_input(x.shape, w, grad) if ctx.needs_input_grad[0] else None
    grad_w = torch.nn.grad.conv2d_weight(x, w.shape, grad) if ctx.needs_input_grad[1] else None
    return grad_x, grad_w


eager_conv2d = eager(conv2d_op, _conv2d_setup, _conv2d_backward)


# --- ReLU + 2 x 2 max pool (the course's network's other layer) -------------------------


def _pool_launch(launch: Any, height: int, width: int) -> Any:
    """``launch`` with the input's height and width given: the pool kernels take the planes
    flattened into 1-D arrays (views of the contiguous tensors)."""
    return lambda *arrays: launch(*arrays, height, width)


@_operator("ladder::relu_max_pool2d")
def relu_max_pool2d_op(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    out = x.new_empty((*x.shape[:2], x.shape[2] // 2, x.shape[3] // 2))

    def in_torch() -> None:
        out.copy_(F.max_pool2d(F.relu(x), 2))

    launch = _pool_launch(pool.relu_max_pool, x.shape[2], x.shape[3])
    tensors = (x.view(-1), out.view(-1))
    run_kernel("ladder::relu_max_pool2d", "relu-max-pool", tensors, launch, in_torch)
    return out


@relu_max_pool2d_op.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    return x.new_empty((*x.shape[:2], x.shape[2] // 2, x.shape[3] // 2))


@torch.library.custom_op("ladder::relu_max_pool2d_backward", mutates_args=())
def relu_max_pool2d_backward_op(x: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
    x, grad = x.contiguous(), grad.contiguous()
    odd = x.shape[2] % 2 or x.shape[3] % 2  # a row or column no window covers: its gradient 0
    out = x.new_zeros(x.shape) if odd else _like(x)

    def in_torch() -> None:  # the gradient to each window's (first) maximum, where above 0
        y, where = F.max_pool2d(F.relu(x), 2, return_indices=True)
        flat = out.zero_().view(out.shape[0] * out.shape[1], -1)
        g = torch.where(y > 0, grad, torch.zeros_like(grad))
        flat.scatter_(1, where.view(flat.shape[0], -1), g.reshape(flat.shape[0], -1))

    launch = _pool_launch(pool.relu_max_pool_backward, x.shape[2], x.shape[3])
    tensors = (x.view(-1), grad.view(-1), out.view(-1))
    run_kernel(
        "ladder::relu_max_pool2d_backward", "relu-max-pool-backward", tensors, launch, in_torch
    )
    return out


@relu_max_pool2d_backward_op.register_fake
def _(x: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
    return _like(x)


def _relu_max_pool2d_setup(ctx: Any, inputs: tuple, output: torch.Tensor) -> None:
    ctx.save_for_backward(inputs[0])


def _relu_max_pool2d_backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
    (x,) = ctx.saved_tensors
    return relu_max_pool2d_backward_op(x, grad)


eager_relu_max_pool2d = eager(relu_max_pool2d_op, _relu_max_pool2d_setup, _relu_max_pool2d_backward)
