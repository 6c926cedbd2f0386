"""The libraries the mixture-of-experts rungs are measured against, all PyTorch:

- ``torch-loop``: the layer as Hugging Face's Mixtral block writes it (softmax, top-k,
  renormalize, then for each expert ``torch.where`` over a one-hot mask, index, two matmuls,
  ``index_add_``): what a PyTorch user runs.
- ``torch-grouped-mm``: the same layer with the experts on ``torch._grouped_mm`` (PyTorch's
  grouped GEMM, CUTLASS on Hopper), the routing in PyTorch ops (sort, count, cumulative sum).
- ``grouped-gemm``'s ``torch-grouped-mm`` (the expert GEMM alone) and ``torch-loop`` (a matmul per
  group over the offsets, read on the host).

Each returns a new tensor, as PyTorch does; the prepared form keeps it (``Holder``) and the
check copies it out, so no copy a PyTorch user would not make is timed.
"""

from __future__ import annotations

from typing import Any

from ladder.core.rung import Holder, NotApplicable, Prepared, rung, tensor_cores_below_fp32
from ladder.core.torch_views import fp32_means_fp32, read_back, tensors
from ladder.moe.problem import grouped_operands, moe_library, operands

DTYPES = ("float32", "float16", "bfloat16")


def _refused(err: RuntimeError) -> NotApplicable:
    return NotApplicable(f"torch._grouped_mm does not take this input: {str(err).splitlines()[0]}")


def moe_torch_loop(x: Any, logits: Any, w1: Any, w2: Any, k: int) -> Any:
    """Hugging Face's MixtralSparseMoeBlock routing and expert loop, experts silu(x W1) W2."""
    import torch
    import torch.nn.functional as F

    weights = F.softmax(logits, dim=1, dtype=torch.float)
    weights, chosen = torch.topk(weights, k, dim=-1)
    weights /= weights.sum(dim=-1, keepdim=True)
    weights = weights.to(x.dtype)
    y = torch.zeros_like(x)
    mask = F.one_hot(chosen, num_classes=w1.shape[0]).permute(2, 1, 0)
    for e in range(w1.shape[0]):
        slot, token = torch.where(mask[e])
        out = F.silu(x[token] @ w1[e]) @ w2[e] * weights[token, slot, None]
        y.index_add_(0, token, out.to(x.dtype))
    return y


def moe_grouped_mm(x: Any, logits: Any, w1: Any, w2: Any, k: int) -> Any:
    """The same layer with each GEMM one ``torch._grouped_mm`` over the experts' sorted rows."""
    import torch
    import torch.nn.functional as F

    top, chosen = torch.topk(logits.float(), k, dim=-1)
    gates = torch.softmax(top, dim=-1)
    flat = chosen.flatten()
    order = torch.argsort(flat, stable=True)
    offs = torch.cumsum(torch.bincount(flat, minlength=w1.shape[0]), 0, dtype=torch.int32)
    token = order // k
    try:
        h = F.silu(torch._grouped_mm(x[token], w1, offs=offs))
        out = torch._grouped_mm(h, w2, offs=offs)
    except RuntimeError as err:
        raise _refused(err) from err
    y = torch.zeros_like(x)
    y.index_add_(0, token, (out * gates.flatten()[order, None]).to(x.dtype))
    return y


def _prepare(args: tuple[Any, ...], out: Any) -> Prepared:
    held = Holder()
    return Prepared(tuple(tensors(*args)), held, read_back(held, out))


def _moe_reference(name: str, title: str, layer: Any, dtypes: tuple[str, ...]) -> None:
    def launch(x: Any, logits: Any, w1: Any, w2: Any, out: Any = None, k: int = 2) -> Any:
        if type(out) is Holder:  # the prepared form: tensors already
            out.value = layer(x, logits, w1, w2, k)
            return out
        xs, lg, a1, a2, y, _ = operands(x, logits, w1, w2, out, k, dtypes)
        if 0 not in y.shape:
            fp32_means_fp32()
            tx, tl, t1, t2, ty = tensors(xs.obj, lg.obj, a1.obj, a2.obj, y.obj)
            ty.copy_(layer(tx, tl, t1, t2, k))
        return y.obj

    launch.__name__ = launch.__qualname__ = name.replace("-", "_")
    moe_library(
        name=name, title=title, dtypes=dtypes, needs=("torch",), reference=True,
        units=tensor_cores_below_fp32,
    )(launch)  # fmt: skip


_moe_reference(
    "torch-loop", "PyTorch: a loop over experts (Mixtral's block)", moe_torch_loop, DTYPES
)
_moe_reference(
    "torch-grouped-mm", "PyTorch: torch._grouped_mm per GEMM", moe_grouped_mm, DTYPES[1:]
)


@rung(
    problem="grouped-gemm",
    name="torch-grouped-mm",
    title="PyTorch torch._grouped_mm",
    dtypes=DTYPES[1:],
    needs=("torch",),
    reference=True,
    units="tensor",
    prepare=_prepare,
)
def grouped_mm(a: Any, w: Any, offsets: Any, out: Any = None) -> Any:
    import torch

    if type(out) is Holder:
        try:
            out.value = torch._grouped_mm(a, w, offs=offsets[1:])
        except RuntimeError as err:
            raise _refused(err) from err
        return out
    a, w, offs, c = grouped_operands(a, w, offsets, out, DTYPES[1:])
    if 0 not in c.shape:
        ta, tw, to, tc = tensors(a.obj, w.obj, offs.obj, c.obj)
        try:
            tc.copy_(torch._grouped_mm(ta, tw, offs=to[1:]))
        except RuntimeError as err:
            raise _refused(err) from err
    return c.obj


@rung(
    problem="grouped-gemm",
    name="torch-loop",
    title="PyTorch: a matmul per group (offsets read on the host)",
    dtypes=DTYPES,
    needs=("torch",),
    reference=True,
    units=tensor_cores_below_fp32,
)
def matmul_loop(a: Any, w: Any, offsets: Any, out: Any = None) -> Any:
    import torch

    a, w, offs, c = grouped_operands(a, w, offsets, out, DTYPES)
    if 0 not in c.shape:
        fp32_means_fp32()
        ta, tw, to, tc = tensors(a.obj, w.obj, offs.obj, c.obj)
        bounds = to.tolist()  # the host waits for the GPU here
        for e in range(tw.shape[0]):
            lo, hi = bounds[e], bounds[e + 1]
            torch.matmul(ta[lo:hi], tw[e], out=tc[lo:hi])
    return c.obj
