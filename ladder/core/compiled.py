"""The ``torch.compile`` rows: what Inductor makes of the expression a PyTorch user writes,
compiled once per signature of its tensors, before any timing, and run into the problem's output.

A row is a plain function of its inputs and the output, ``f(*inputs, out)``, whose body ends in
``out.copy_(expression)``; ``run(f, *arrays)`` takes PyTorch views of the arrays (no copy,
``torch_views.tensor``), finds or compiles ``f`` for their signature and calls it. The harness's
first call of a launcher is its correctness check, so compilation happens there, never inside
the timed repeats. Compiled with ``torch.compile(backend="inductor", dynamic=False,
fullgraph=True)``: sizes are constants of the generated kernels (as for a user who compiles a
model for one input shape), and a graph break would be an error, not a silent fallback to eager.

Writing into the given output: Inductor turns ``out.copy_(expr)`` on a graph input into a store
of the kernel that computes ``expr`` into ``out`` when Inductor generates that kernel (pointwise
and reduction kernels): no extra pass. Where the last op is a library call (a matmul, a
convolution, a fused attention kernel), the call writes a buffer of its own and one more kernel
copies it into ``out``: one pass over the output, which for a convolution run in channels_last
is the conversion back to NCHW that Inductor emits for a returned result as well.

What was checked, on CPU with PyTorch 2.13 (``torch._inductor.utils.run_and_get_code``, the
C++ backend, not Triton), for the rows' own functions: the elementwise chain (float32 and
float16), softmax and layer norm compile to one kernel each that stores into ``out``;
``gelu(A @ B + bias)`` to ``addmm`` into a buffer, then one GELU kernel into ``out``; attention
without the mask (GQA included) is matched by Inductor's attention patterns and replaced by a
fused SDPA call, then a copy; with the mask (``masked_fill`` of ``triu``) it stays matmul, one
mask + softmax kernel (the mask computed from indices, never stored), matmul, copy; a
convolution on NCHW data is converted to channels_last, run, and converted back into ``out``
(on CPU Inductor always does so; on CUDA its layout heuristic decides, by the convolutions'
channel counts). Not checked, for want of a GPU here: the Triton kernels Inductor generates on
CUDA, and whether the same patterns and layout choices apply there.

Signatures: the key is the function and, per tensor, its shape, strides, dtype, device and
whether its address is 16-byte aligned. Each key gets its own copy of the function's code
object before it is compiled, because Dynamo keeps compiled entries per code object and falls
back to eager, with only a warning, once ``recompile_limit`` (8) entries exist: the ninth shape
would otherwise run uncompiled. TF32 is off (``torch_views.fp32_means_fp32``) when a function is
compiled and at every call, so a float32 row is FP32 arithmetic like the float32 rungs.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

from ladder.core.torch_views import fp32_means_fp32, tensors

BACKEND: Any = "inductor"  # torch.compile's backend; the tests swap in "eager" or a counter
ALIGN = 16  # bytes: Inductor's kernels assume inputs aligned like fresh allocations

_COMPILED: dict[tuple[Any, ...], Callable[..., Any]] = {}


def signature(views: tuple[Any, ...] | list[Any]) -> tuple[Any, ...]:
    """What a compiled function is specialized on, per tensor: shape, strides, dtype, device and
    whether its address is ``ALIGN``-byte aligned."""
    return tuple(
        (tuple(t.shape), t.stride(), t.dtype, t.device, t.data_ptr() % ALIGN == 0) for t in views
    )


def compiled(fn: Callable[..., Any], *views: Any) -> Callable[..., Any]:
    """``fn`` compiled for the signature of ``views`` (PyTorch tensors): from the cache, or
    compiled now (the compilation itself happens at its first call)."""
    key = (fn, signature(views))
    found = _COMPILED.get(key)
    if found is None:
        found = _COMPILED[key] = _compile(fn)
    return found


def _compile(fn: Callable[..., Any]) -> Callable[..., Any]:
    import torch

    fp32_means_fp32()
    own = types.FunctionType(
        fn.__code__.replace(), fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__
    )
    return torch.compile(own, backend=BACKEND, dynamic=False, fullgraph=True)


def run(fn: Callable[..., Any], *arrays: Any) -> None:
    """Call ``fn(*arrays)`` compiled for their signature, on PyTorch views of them (the last is
    the output it writes); PyTorch's out-of-memory error is raised as ``MemoryError`` (the
    harness reports the size as unavailable)."""
    import torch

    fp32_means_fp32()
    views = tensors(*arrays)
    try:
        compiled(fn, *views)(*views)
    except torch.cuda.OutOfMemoryError as err:
        raise MemoryError(f"torch.compile ({fn.__name__}): {err}") from err


def cached() -> int:
    """How many compiled functions the cache holds (one per function and signature)."""
    return len(_COMPILED)


def clear() -> None:
    """Forget every compiled function (the next call of each compiles again)."""
    _COMPILED.clear()
