"""What a call of ``ladder.ops`` costs the host, at the GPT-2 block's shapes (``ladder models
--parts host``, kept by ``ladder bench --problems models``).

For each operator the block calls (``OPERATORS``), three ways of asking for the same work,
each timed as the harness times a launcher's host cost (``timing.time_calls``: the GPU
synchronized before each call, the call alone on ``time.perf_counter``, the median):

- ``ladder.ops``: the public function, no gradient wanted (a forward under ``no_grad``);
- ``ladder.ops+grad``: the same with inputs that need a gradient (the forward of a training
  step: the autograd node and what it saves);
- ``rung``: the rung the operator's route chose, its launcher called directly on the
  operator's tensors (what the operator adds is the difference);
- ``torch``: PyTorch's eager operator for the same work.

The target (``TARGET_US``) is issue 55's: at most 20 µs a call for every operator. In the
simulator the calls run the rungs in Python and the times mean nothing; the path is the same.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

import ladder.ops
from ladder.core import device, timing
from ladder.core.rung import get_rung
from ladder.ops.routes import TORCH, views
from ladder.ops.routes import routes as recorded_routes

TARGET_US = 20.0  # at most, per call, for every operator
HOST_CALLS = 200  # calls timed one by one, the GPU idle before each
# each operator and the torch.ops name its route is recorded under
OPERATORS = {
    "matmul": "ladder::matmul",
    "linear": "ladder::linear_gelu",
    "layer_norm": "ladder::layer_norm",
    "softmax": "ladder::softmax",
    "attention": "ladder::attention",
}
CONTENDERS = ("ladder.ops", "ladder.ops+grad", "rung", "torch")


def _calls(
    name: str, rows: int, channels: int, heads: int, batch: int, dev: str, dt: torch.dtype
) -> tuple[Callable[..., Any], Callable[..., Any], list[torch.Tensor], tuple[int, ...]]:
    """(ladder.ops's call, PyTorch's, the inputs, the shape of the output the rung writes)
    for operator ``name`` at the block's shapes."""
    gen = torch.Generator().manual_seed(4)

    def rand(*shape: int) -> torch.Tensor:
        return (torch.randn(shape, generator=gen) * 0.5).to(dev, dt)

    if name == "matmul":
        return (
            ladder.ops.matmul,
            torch.matmul,
            [rand(rows, channels), rand(channels, channels)],
            (rows, channels),
        )
    if name == "linear":
        inputs = [rand(rows, channels), rand(channels, 4 * channels), rand(4 * channels)]
        return (
            lambda x, w, b: ladder.ops.linear(x, w, b, "gelu"),
            lambda x, w, b: F.gelu(torch.addmm(b, x, w)),
            inputs,
            (rows, 4 * channels),
        )
    if name == "layer_norm":
        inputs = [rand(rows, channels), rand(channels), rand(channels)]
        return (
            ladder.ops.layer_norm,
            lambda x, g, b: F.layer_norm(x, (channels,), g, b),
            inputs,
            (rows, channels),
        )
    if name == "softmax":
        return (
            ladder.ops.softmax,
            lambda x: torch.softmax(x, -1),
            [rand(rows, channels)],
            (rows, channels),
        )
    sequence, width = rows // batch, channels // heads
    qkv = [rand(batch, heads, sequence, width) for _ in range(3)]
    return (
        lambda q, k, v: ladder.ops.attention(q, k, v, causal=True),
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
        qkv,
        (batch, heads, sequence, width),
    )


def _host_us(call: Callable[[], Any]) -> float:
    if device.simulator():  # each call runs a rung in Python for seconds: the path, once
        return timing.time_calls(call, 0.0, graph=False, host_calls=1, in_a_row=1).host_us
    call()  # its first call chooses the route and compiles: not a steady-state call
    return timing.time_calls(call, 0.0, graph=False, host_calls=HOST_CALLS, in_a_row=1).host_us


def measure(
    dtype: str, rows: int, channels: int, heads: int, batch: int, dev: str
) -> dict[str, Any]:
    """Each operator's route and host µs per call of each contender (None: no rung took it)."""
    dt = getattr(torch, dtype)
    found: dict[str, Any] = {}
    for name in OPERATORS:
        ours, theirs, inputs, out_shape = _calls(name, rows, channels, heads, batch, dev, dt)
        with recorded_routes() as ran, torch.no_grad():
            ours(*inputs)
        # its own route (linear's fallback records the GEMM's route too, first)
        path = next((r.path for r in ran if r.op == OPERATORS[name]), TORCH)
        found[name] = {"route": path, **_costs(path, ours, theirs, inputs, out_shape)}
    return found


def _costs(
    path: str,
    ours: Callable[..., Any],
    theirs: Callable[..., Any],
    inputs: list[torch.Tensor],
    out_shape: tuple[int, ...],
) -> dict[str, float | None]:
    """The host µs per call of each of ``CONTENDERS`` for one operator whose route is ``path``."""
    needing = [t.detach().clone().requires_grad_() for t in inputs]
    found: dict[str, float | None] = {}
    with torch.no_grad():
        found["ladder.ops"] = _host_us(lambda: ours(*inputs))
        found["torch"] = _host_us(lambda: theirs(*inputs))
    found["ladder.ops+grad"] = _host_us(lambda: ours(*needing))
    found["rung"] = None
    if path != TORCH:
        rung = get_rung(*path.split("/", 1))
        out = inputs[0].new_empty(out_shape)
        arrays = views(*[t.contiguous() for t in inputs], out)
        found["rung"] = _host_us(lambda: rung.launch(*arrays))
    return found


def worst(case: dict[str, Any]) -> tuple[float, str] | None:
    """The largest ``ladder.ops`` host time over the operators of one dtype, and its operator."""
    times = [(entry["ladder.ops"], name) for name, entry in case.items()]
    return max(times) if times else None
