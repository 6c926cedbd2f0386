"""The libraries the backward ladder is measured against: PyTorch's SDPA backward, registered as
references.

- ``sdpa``: ``torch.autograd.grad`` of ``scaled_dot_product_attention``'s output, the call a
  training step makes, with the kernel PyTorch picks (recorded, as in the forward).
- ``sdpa-cudnn``, ``sdpa-flash``, ``sdpa-efficient``, ``sdpa-math``: the same with one backend
  pinned for the forward (``sdpa_kernel``); its backward kernel is the same backend's. Where
  the backend refuses the input the case is unavailable with PyTorch's reason.

A library's backward starts from its own forward: PyTorch's autograd keeps the output and the
log-sum-exp its forward saved, so the given o and lse are not read. The forward runs once, at
the first call (outside the time: the harness's check call), and every timed call is
``torch.autograd.grad(out, (q, k, v), dO, retain_graph=True)``, which allocates the three
gradients as a training step does; ``read_back`` copies them into the problem's output (see
``ladder.core.rung.Prepared``). Grouped-query inputs go in with ``enable_gqa=True``, so dK and
dV arrive summed over each group.
"""

from __future__ import annotations

from typing import Any

from ladder.attention.backward.problem import BACKWARD, backward_library, operands, split
from ladder.attention.references import (
    BACKEND_NAMES,
    PINNED,
    _describe_default,
    pinned_call,
    sdpa_tensors,
)
from ladder.core.fastcall import numba_array
from ladder.core.rung import Holder, Prepared, tensor_cores_below_fp32
from ladder.core.torch_views import fp32_means_fp32, tensors


class Forward:
    """SDPA's forward on leaf tensors that require gradients, run once at the first backward
    call (``backend``: an ``SDPBackend`` name to pin, or None for PyTorch's choice)."""

    def __init__(self, arrays: tuple[Any, ...], backend: str | None) -> None:
        q, k, v, _, do, _ = arrays
        fp32_means_fp32()
        self.q, self.k, self.v, self.do = tensors(q, k, v, do)
        self.backend = backend
        self.graph: tuple[Any, tuple[Any, ...]] | None = None

    def _run(self, causal: bool) -> tuple[Any, tuple[Any, ...]]:
        import torch

        leaves = tuple(x.detach().requires_grad_(True) for x in (self.q, self.k, self.v))
        group = leaves[0].shape[1] // leaves[1].shape[1]
        with pinned_call(self.backend):
            y = sdpa_tensors(*leaves, causal, group)
            torch.autograd.grad(y, leaves, self.do, retain_graph=True)  # a refusal shows here
        return y, leaves

    def grads(self, causal: bool) -> tuple[Any, Any, Any]:
        """dQ, dK, dV from SDPA's backward (its forward run first, once)."""
        import torch

        if self.graph is None:
            self.graph = self._run(causal)
        y, leaves = self.graph
        return torch.autograd.grad(y, leaves, self.do, retain_graph=True)


def _copy(grads: tuple[Any, Any, Any], out: Any, heads: int) -> None:
    for view, grad in zip(split(tensors(out)[0], heads), grads, strict=True):
        view.copy_(grad)


def _prepare(backend: str | None) -> Any:
    def prepare(args: tuple[Any, ...], out: Any) -> Prepared:
        held, forward = Holder(), Forward(args, backend)
        heads = forward.q.shape[1]

        def read_back() -> None:
            if held.value is not None:
                _copy(held.value, out, heads)

        return Prepared((forward, None, None, None, None, None), held, read_back)

    return prepare


def sdpa_backward(backend: str | None, dtypes: tuple[str, ...]) -> Any:
    """A launcher of SDPA's backward, ``backend`` pinned (an ``SDPBackend`` name) or not."""

    def launch(
        q: Any, k: Any, v: Any, o: Any, do: Any, lse: Any, out: Any = None, causal: bool = False
    ) -> Any:
        if type(out) is Holder:  # the prepared form (``_prepare``): the forward is held in q
            out.value = q.grads(causal)
            return out
        found = operands(q, k, v, o, do, lse, out, dtypes)
        grads, shape = found[6], found[7]
        if grads.size:
            arrays = tuple(numba_array(x) for x in found[:6])
            _copy(Forward(arrays, backend).grads(causal), numba_array(grads), shape.heads)
        return grads.obj

    name = BACKEND_NAMES[backend].split("-")[0].lower() if backend else "default"
    launch.__name__ = launch.__qualname__ = f"sdpa_backward_{name}"
    return launch


def _describe(args: tuple[Any, ...], out: Any, *, causal: bool) -> str:
    """Which backend the default call picks (its forward's choice, which sets the backward)."""
    forward = args[0]
    if isinstance(forward, Forward):
        args = (forward.q, forward.k, forward.v)
    return _describe_default(args[:3], out, causal=causal)


backward_library(
    name="sdpa",
    title="PyTorch SDPA backward (autograd of scaled_dot_product_attention)",
    dtypes=BACKWARD.dtypes,
    needs=("torch",),
    reference=True,
    units=tensor_cores_below_fp32,
    prepare=_prepare(None),
    describe=_describe,
)(sdpa_backward(None, BACKWARD.dtypes))

for _name, _backend, _forward_dtypes in PINNED:
    _dtypes = tuple(x for x in _forward_dtypes if x in BACKWARD.dtypes)
    backward_library(
        name=_name,
        title=f"PyTorch SDPA backward pinned to {BACKEND_NAMES[_backend]} (sdpa_kernel)",
        dtypes=_dtypes,
        needs=("torch",),
        reference=True,
        units=tensor_cores_below_fp32,
        prepare=_prepare(_backend),
    )(sdpa_backward(_backend, _dtypes))
