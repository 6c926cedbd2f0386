"""The libraries the attention ladder is measured against, registered as references.

All need PyTorch with CUDA (optional, never required). PyTorch reads the Numba arrays without a
copy (``torch.as_tensor`` on ``__cuda_array_interface__``), and TF32 is switched off so that
FP32 means FP32. Each configuration is measured in the same run; × library is against the
fastest of them, and the table names it.

- ``sdpa``: ``torch.nn.functional.scaled_dot_product_attention`` as a PyTorch user calls it.
  PyTorch picks the kernel (cuDNN's fused attention, FlashAttention-2, the memory-efficient
  kernel or the math fallback, by GPU, dtype and shape); the results record which one the call
  picked (``torch._fused_sdp_choice``, the function SDPA itself asks). Grouped-query inputs go
  in as they are (``enable_gqa=True``, PyTorch 2.5 and later) or with k and v repeated per query
  head on older versions. Its result is copied into our output: one extra pass over the
  output, a fraction of a percent of the time at the benchmark shapes.
- ``sdpa-cudnn``, ``sdpa-flash``, ``sdpa-efficient``, ``sdpa-math``: the same call with one
  backend pinned (``torch.nn.attention.sdpa_kernel([backend])``), so that each is measured
  whichever the default would pick. cuDNN and FlashAttention take float16 and bfloat16 here
  (no float32 kernels); the memory-efficient kernel and the math fallback (attention as matmul,
  softmax, matmul in FP32, with N x N scores in memory) take all three dtypes. Where the pinned
  backend refuses the input (a head dimension not a multiple of 8, grouped-query inputs it does
  not take, a shape cuDNN cannot build its graph for), the case is reported unavailable with
  PyTorch's reason, not failed; where the math fallback's scores do not fit, too.
- ``torch-materialized``: attention as three library calls, ``Q·Kᵀ`` (cuBLAS), ``softmax``,
  ``P·V`` (cuBLAS), with the N x N scores and probabilities in device memory in the input
  dtype, the way attention is written without a fused kernel. GQA broadcasts k and v over
  the query heads of their group (no copy). Its peak memory grows as N², like rung 1's.
- ``torch-compile``: the same expression as a PyTorch user writes it, ``softmax(Q·Kᵀ·scale)·V``
  with the causal mask as ``masked_fill`` of the upper triangle and k and v repeated over their
  groups for GQA, compiled by ``torch.compile`` (Inductor, one graph per shape,
  ``ladder.core.compiled``). Inductor may recognise the pattern and call a fused SDPA kernel
  instead (it does without the mask on CPU); otherwise the mask and softmax become one kernel
  between the two matmuls.

SDPA is the bar in float16 (0.599 ms at [4, 16, 16, 4096, 64] on an NVIDIA H200,
results/nvidia-h200.json, its default call picking cuDNN, against rung 5's 0.899 ms). In
float32 with grouped-query inputs it is not: 15.186 ms at [4, 16, 4, 4096, 64] against 7.907 ms
at [4, 16, 16, 4096, 64], the same FLOPs, and causal 19.616 ms, slower than rung 3's 14.955 ms.
The recorded configuration says why: there the default call picks the math backend, because
the memory-efficient kernel refuses grouped-query inputs (``sdpa-efficient`` is unavailable
at that shape, with PyTorch's reason in the results).
"""

from __future__ import annotations

import contextlib
import inspect
import warnings
from collections.abc import Iterator
from typing import Any

from ladder.attention.problem import attention_library, check_arrays
from ladder.core import compiled
from ladder.core.rung import NotApplicable, tensor_cores_below_fp32
from ladder.core.torch_views import fp32_means_fp32, tensors

# the backends by their SDPBackend names, in words (the results' config, the errors)
BACKEND_NAMES = {
    "CUDNN_ATTENTION": "cuDNN",
    "FLASH_ATTENTION": "FlashAttention",
    "EFFICIENT_ATTENTION": "memory-efficient",
    "MATH": "math",
    "OVERRIDEABLE": "overrideable",
    "ERROR": "none",
}
# what PyTorch says when no enabled backend takes the input: CUDA, and CPU builds
REFUSED = ("No available kernel", "No viable backend")
DTYPES = ("float32", "float16", "bfloat16")  # PyTorch's, and so the libraries' rows


def refused(backend: str, err: RuntimeError) -> bool:
    """Whether ``err`` from SDPA pinned to ``backend`` says the backend does not take the input:
    no enabled backend took it, or cuDNN could not build its graph for the shape (an error of
    cuDNN's own, not a failed CUDA call)."""
    text = str(err)
    if any(words in text for words in REFUSED):
        return True
    return backend == "CUDNN_ATTENTION" and "cudnn" in text.lower() and "CUDA error" not in text


def _tensors(*arrays: Any) -> list[Any]:
    fp32_means_fp32()
    return tensors(*arrays)


def _sdpa_takes_gqa() -> bool:
    import torch.nn.functional as F

    try:
        return "enable_gqa" in inspect.signature(F.scaled_dot_product_attention).parameters
    except (TypeError, ValueError):  # a builtin without a signature: try it
        return True


def sdpa_tensors(tq: Any, tk: Any, tv: Any, causal: bool, group: int, gqa: bool = True) -> Any:
    """SDPA on PyTorch tensors, grouped-query inputs as PyTorch takes them (``gqa``: pass
    ``enable_gqa=True`` where PyTorch has it, else repeat k and v per query head)."""
    import torch.nn.functional as F

    if group == 1:
        return F.scaled_dot_product_attention(tq, tk, tv, is_causal=causal)
    if gqa and _sdpa_takes_gqa():
        return F.scaled_dot_product_attention(tq, tk, tv, is_causal=causal, enable_gqa=True)
    tk, tv = (x.repeat_interleave(group, dim=1) for x in (tk, tv))
    return F.scaled_dot_product_attention(tq, tk, tv, is_causal=causal)


def backend_name(index: int) -> str:
    """The SDPA backend that ``torch._fused_sdp_choice``'s index (an ``SDPBackend`` value)
    means, in words; FlashAttention with its version where PyTorch reports one."""
    from torch.nn import attention

    found = next(
        (n for n, m in attention.SDPBackend.__members__.items() if int(m.value) == index), None
    )
    if found is None:
        return f"backend {index}"
    if found == "FLASH_ATTENTION":
        impl = getattr(attention, "current_flash_attention_impl", lambda: None)()
        return f"FlashAttention ({impl})" if impl else "FlashAttention-2"
    return BACKEND_NAMES.get(found, found.lower())


def _describe_default(args: tuple[Any, ...], out: Any, *, causal: bool) -> str:
    """Which backend the default call picks for these inputs (SDPA's own choice function)."""
    import torch

    choose = getattr(torch, "_fused_sdp_choice", None)
    if choose is None:
        return "default backend (this PyTorch does not say which)"
    q, k, v = _tensors(*args)
    group = q.shape[1] // k.shape[1]
    try:
        if group > 1 and _sdpa_takes_gqa():
            index = choose(q, k, v, is_causal=causal, enable_gqa=True)
        else:
            if group > 1:
                k, v = (x.repeat_interleave(group, dim=1) for x in (k, v))
            index = choose(q, k, v, is_causal=causal)
    except (RuntimeError, TypeError) as err:
        return f"default backend (not reported: {type(err).__name__})"
    return f"default picks {backend_name(int(index))}"


@attention_library(
    name="sdpa",
    dtypes=DTYPES,
    title="PyTorch scaled_dot_product_attention",
    needs=("torch",),
    reference=True,
    units=tensor_cores_below_fp32,
    describe=_describe_default,
)
def sdpa(q: Any, k: Any, v: Any, out: Any = None, causal: bool = False) -> Any:
    q, k, v, out, shape = check_arrays(q, k, v, out, DTYPES)
    if out.size:
        tq, tk, tv, to = _tensors(q, k, v, out)
        to.copy_(sdpa_tensors(tq, tk, tv, causal, shape.group))
    return out


@contextlib.contextmanager
def pinned_call(backend: str | None) -> Iterator[None]:
    """Run the SDPA calls inside with only ``backend`` (an ``SDPBackend`` name) enabled, or
    with PyTorch's choice when None: ``NotApplicable`` with PyTorch's reasons where the pinned
    backend refuses the input, ``MemoryError`` where its buffers do not fit."""
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    name = BACKEND_NAMES[backend] if backend else "default"
    pin = sdpa_kernel([getattr(SDPBackend, backend)]) if backend else contextlib.nullcontext()
    # PyTorch warns with each backend's reason before it refuses: kept for the message
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with pin:
                yield
        except torch.cuda.OutOfMemoryError as err:
            raise MemoryError(f"SDPA {name}: {err}") from err
        except RuntimeError as err:
            if backend is None or not refused(backend, err):
                raise
            reasons = " ".join(" ".join(str(w.message).split()) for w in caught)
            raise NotApplicable(f"SDPA {name} refuses this input: {reasons or err}") from err


def pinned(backend: str, dtypes: tuple[str, ...]) -> Any:
    """A launcher of SDPA with only ``backend`` (an ``SDPBackend`` name) enabled, for
    ``dtypes``: ``NotApplicable`` with PyTorch's reasons where the backend refuses the input,
    ``MemoryError`` where its buffers do not fit."""
    name = BACKEND_NAMES[backend]

    def launch(q: Any, k: Any, v: Any, out: Any = None, causal: bool = False) -> Any:
        q, k, v, out, shape = check_arrays(q, k, v, out, dtypes)
        if not out.size:
            return out
        tq, tk, tv, to = _tensors(q, k, v, out)
        with pinned_call(backend):
            result = sdpa_tensors(tq, tk, tv, causal, shape.group)
        to.copy_(result)
        return out

    launch.__name__ = launch.__qualname__ = f"sdpa_{name.split('-')[0].lower()}"
    return launch


# the rows of SDPA with one backend pinned (forward and backward): name, SDPBackend, dtypes
PINNED = (
    ("sdpa-cudnn", "CUDNN_ATTENTION", ("float16", "bfloat16")),
    ("sdpa-flash", "FLASH_ATTENTION", ("float16", "bfloat16")),
    ("sdpa-efficient", "EFFICIENT_ATTENTION", DTYPES),
    ("sdpa-math", "MATH", DTYPES),
)

for _name, _backend, _dtypes in PINNED:
    attention_library(
        name=_name,
        title=f"PyTorch SDPA pinned to {BACKEND_NAMES[_backend]} (sdpa_kernel)",
        dtypes=_dtypes,
        needs=("torch",),
        reference=True,
        units=tensor_cores_below_fp32,
    )(pinned(_backend, _dtypes))


@attention_library(
    name="torch-materialized",
    dtypes=DTYPES,
    title="PyTorch matmul, softmax, matmul (N x N materialized)",
    needs=("torch",),
    reference=True,
    units=tensor_cores_below_fp32,
)
def materialized(q: Any, k: Any, v: Any, out: Any = None, causal: bool = False) -> Any:
    import torch

    q, k, v, out, shape = check_arrays(q, k, v, out, DTYPES)
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


def _repeat_kv(x: Any, group: int) -> Any:
    """k or v repeated for each query head of its group, as PyTorch models write it."""
    batch, kv_heads, n, d = x.shape
    if group == 1:
        return x
    return x[:, :, None].expand(batch, kv_heads, group, n, d).reshape(batch, -1, n, d)


def _attention(q: Any, k: Any, v: Any, out: Any) -> None:
    import torch

    group = q.shape[1] // k.shape[1]
    k, v = _repeat_kv(k, group), _repeat_kv(v, group)
    scores = (q @ k.transpose(-2, -1)) * q.shape[-1] ** -0.5
    out.copy_(torch.softmax(scores, dim=-1) @ v)


def _attention_causal(q: Any, k: Any, v: Any, out: Any) -> None:
    import torch

    group, n = q.shape[1] // k.shape[1], q.shape[2]
    k, v = _repeat_kv(k, group), _repeat_kv(v, group)
    scores = (q @ k.transpose(-2, -1)) * q.shape[-1] ** -0.5
    above = torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1)
    scores = scores.masked_fill(above, float("-inf"))
    out.copy_(torch.softmax(scores, dim=-1) @ v)


@attention_library(
    name="torch-compile",
    dtypes=DTYPES,
    title="torch.compile (Inductor) of softmax(QKᵀ·scale)·V",
    needs=("torch", "triton"),
    reference=True,
    units=tensor_cores_below_fp32,
)
def torch_compile(q: Any, k: Any, v: Any, out: Any = None, causal: bool = False) -> Any:
    q, k, v, out, _ = check_arrays(q, k, v, out, DTYPES)
    if out.size:
        compiled.run(_attention_causal if causal else _attention, q, k, v, out)
    return out
