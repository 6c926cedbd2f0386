"""``ladder models``: the course's network and a GPT-2 block on the ladder's operators, against
PyTorch eager and ``torch.compile`` in the same run (``ladder bench --problems models`` keeps it
in the GPU's canonical file).

- **LeNet** (``lenet``) at batch ``LENET_BATCH``, float32 and float16: the forward's time, each
  layer's time as the course reports it (the layer alone, on the previous layer's output), and
  the classes each contender predicts against PyTorch eager's (all, and beyond near-ties:
  images whose float64 top-two probabilities are within ``TIE_UNITS`` epsilons of the dtype,
  where rounding alone picks either), and the probabilities' error against float64.
- **GPT-2 block** (``block``) at batch ``BLOCK_BATCH`` × sequence ``BLOCK_SEQUENCE``, width
  ``GPT2_SMALL``, float16 and bfloat16: the forward, and the forward + backward (a training
  step's work, the parameters' gradients), each output and gradient against a float32 copy of
  the block; and a ``torch.profiler`` breakdown of the forward + backward per operator, before
  (PyTorch eager) and after (the ladder's operators).

PyTorch eager runs at its best: cuDNN autotuned (``benchmark``), TF32 off (FP32 means FP32, as
for every rung). So do the ladder's operators: each signature's route is the fastest rung
that takes it, timed at its first call (``ladder.ops.benchmark``), not the top one.
``torch.compile`` compiles the PyTorch version of each model (Inductor, ``dynamic=False``)
before timing. Each family also runs as CUDA graphs (``+graph``), which take
the host's time per launch away: the ladder's and PyTorch eager's model captured with
``torch.cuda.graph`` (``make_graphed_callables`` for the forward + backward), ``torch.compile``
with ``mode="reduce-overhead"``. A target compares the fastest of the ladder's two with the
fastest of the other family's two (``FAMILIES``) and names both. Times are the harness's
(``timing.time_ms``): CUDA events after warm-up, the L2 flushed, medians. The targets
(``TARGETS``) are checked in the results (``checks``), never in a test. In the simulator
everything runs at tiny sizes, without graphs or ``torch.compile``, and the times mean nothing.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

import ladder.ops
from ladder.core import conditions, device, report, timing, torch_views
from ladder.models import host as host_costs
from ladder.models.gpt import GPT2_SMALL, Block, Width
from ladder.models.lenet import IMAGE, LeNet

LENET_BATCH = 10000
BLOCK_BATCH, BLOCK_SEQUENCE = 8, 1024
# in the simulator: sizes that run in seconds there (every rung's thread is a Python thread)
SIMULATOR_LENET = {"batch": 2, "image": 22}
SIMULATOR_BLOCK = {"batch": 1, "sequence": 5, "width": Width(channels=32, heads=2)}
LENET_DTYPES = ("float32", "float16")
BLOCK_DTYPES = ("float16", "bfloat16")
HOST_DTYPES = ("float32", "float16")
SIMULATOR_HOST_DTYPES = ("float32",)  # the path: each call there runs a rung in Python
PARTS = ("lenet", "block", "host")
PROFILE_TOP = 12  # operators kept per profile, by GPU time
# an image whose float64 top-two probabilities are closer than this many of the dtype's
# epsilons is a near-tie: rounding alone may pick either class (float16: 0.0078)
TIE_UNITS = 8
TARGETS = {
    "lenet forward, x PyTorch eager": 10.0,  # at least this much faster
    "block forward, x torch.compile": 1.0,
    "block forward + backward, x PyTorch eager": 1.0,
}
# the run the notebook shows (an H100's; a lab file, since results/ holds only ladder bench's)
COMMITTED = "lab/models/2026-11-26-first-run/nvidia-h100-80gb-hbm3-models.json"


def _device() -> str:
    return "cpu" if device.simulator() else "cuda"


def _dtype(name: str) -> torch.dtype:
    return getattr(torch, name)


FLAGS = (  # what library_at_its_best sets, restored after
    (torch.backends.cudnn, "benchmark"),
    (torch.backends.cudnn, "allow_tf32"),
    (torch.backends.cuda.matmul, "allow_tf32"),
    (torch.backends.cuda.matmul, "allow_fp16_reduced_precision_reduction"),
    (torch.backends.cuda.matmul, "allow_bf16_reduced_precision_reduction"),
)


@contextlib.contextmanager
def library_at_its_best() -> Iterator[None]:
    """Both sides autotuned while inside: cuDNN (``benchmark``) and the ladder's operators
    (``ladder.ops.benchmark``: each signature's route the fastest rung that takes it; on a
    GPU only), TF32 off (``torch_views.fp32_means_fp32``); every setting restored after."""
    saved = [(owner, name, getattr(owner, name)) for owner, name in FLAGS]
    torch.backends.cudnn.benchmark = True
    torch_views.fp32_means_fp32()
    timed = ladder.ops.benchmark(not device.simulator())  # the simulator's times mean nothing
    try:
        yield
    finally:
        for owner, name, value in saved:
            setattr(owner, name, value)
        ladder.ops.benchmark(timed)


# each contender's family: a target compares the fastest of the ladder's with the fastest of
# another family, so that CUDA graphs (which cut the host's time per launch) count for both
FAMILIES = {
    "ladder": ("ladder", "ladder+graph"),
    "torch": ("torch", "torch+graph"),
    "torch.compile": ("torch.compile", "torch.compile+graph"),
}


def _compiled(model: torch.nn.Module) -> dict[str, Callable[..., Any]]:
    """``torch.compile`` of the model (Inductor, no dynamic shapes) by default and with
    ``mode="reduce-overhead"`` (its CUDA graphs), or nothing in the simulator."""
    if device.simulator():
        return {}
    graphed = torch.compile(model, dynamic=False, mode="reduce-overhead")

    def step(*args: Any) -> Any:
        # each call is a new step, as PyTorch advises where one compiled model is called both
        # for inference and for training (its graph outputs are then the next step's to reuse)
        torch.compiler.cudagraph_mark_step_begin()
        return graphed(*args)

    return {"torch.compile": torch.compile(model, dynamic=False), "torch.compile+graph": step}


def _graphed(run: Callable[[], Any]) -> Callable[[], Any]:
    """``run()`` captured into a CUDA graph, after three calls on a side stream (they choose the
    operators' routes and compile their kernels, which a capture must not do): each call then
    replays the graph and returns the graph's own output."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            run()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = run()

    def replay() -> Any:
        graph.replay()
        return out

    return replay


def _attempt(build: Callable[[], Any]) -> tuple[Any, str | None]:
    """``build()``, or None and the error (a contender that cannot be built is reported, not
    fatal: a capture that fails, a compile that does not fit)."""
    try:
        return build(), None
    except Exception as err:
        return None, f"{type(err).__name__}: {err}"[:300]


def _stats(samples: list[float]) -> dict[str, Any]:
    return {
        "median_ms": float(np.median(samples)),
        "min_ms": float(np.min(samples)),
        "max_ms": float(np.max(samples)),
        "samples_ms": [float(s) for s in samples],
    }


def _error(found: torch.Tensor, expected: torch.Tensor) -> float:
    found, expected = found.detach().double(), expected.detach().double()
    return float((found - expected).norm() / expected.norm().clamp_min(1e-300))


def _routes(run: Callable[[], Any]) -> list[str]:
    """The distinct routes the ladder's operators took in one ``run()``."""
    with ladder.ops.routes() as ran:
        run()
    return sorted({str(r) for r in ran})


def profile(run: Callable[[], Any], top: int = PROFILE_TOP) -> list[dict[str, Any]]:
    """``torch.profiler``'s table of one ``run()`` (after a warm-up call): per operator or
    kernel name, its calls and its self GPU time (µs; CPU time in the simulator), most first."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as profiler

    run()
    activities = [ProfilerActivity.CPU] + ([] if device.simulator() else [ProfilerActivity.CUDA])
    with profiler(activities=activities, acc_events=True) as prof:  # one cycle: no warning
        run()
        if not device.simulator():
            torch.cuda.synchronize()
    key = "self_cpu_time_total" if device.simulator() else "self_device_time_total"
    rows = [
        {"name": e.key, "calls": e.count, "self_us": float(getattr(e, key))}
        for e in prof.key_averages()
        if getattr(e, key) > 0
    ]
    rows.sort(key=lambda r: -r["self_us"])
    return rows[:top]


def lenet(dtype: str, log: Callable[[str], None] = print) -> dict[str, Any]:
    """The course's network at LENET_BATCH (see the module docstring)."""
    sizes = SIMULATOR_LENET if device.simulator() else {"batch": LENET_BATCH, "image": IMAGE}
    dev, dt = _device(), _dtype(dtype)
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(sizes["batch"], 1, sizes["image"], sizes["image"], generator=gen)
    x = x.to(dev, dt)
    models = {
        name: LeNet(ops=name, dtype=dt, device=dev, image=sizes["image"])
        for name in ("ladder", "torch")
    }
    wide = LeNet(ops="torch", dtype=torch.float64, device=dev, image=sizes["image"])
    found: dict[str, Any] = {"batch": sizes["batch"], "image": sizes["image"], "contenders": {}}
    with torch.no_grad():
        expected = wide(x.double())
        classes = models["torch"](x).argmax(-1)
        top = expected.topk(2, dim=-1).values
        ties = (top[:, 0] - top[:, 1]) < TIE_UNITS * torch.finfo(dt).eps
        builders: dict[str, Callable[[], Callable[[], Any]]] = {
            name: (lambda m=model: lambda: m(x)) for name, model in models.items()
        }
        if not device.simulator():
            for name, model in models.items():
                builders[f"{name}+graph"] = lambda m=model: _graphed(lambda: m(x))
        for name, compiled in _compiled(models["torch"]).items():
            builders[name] = lambda c=compiled: lambda: c(x)
        for name, build in builders.items():
            log(f"lenet {dtype}: {name}")
            call, error = _attempt(build)
            # the first call compiles (torch.compile) or captures: a failure there is reported too
            probabilities, error = _attempt(call) if call is not None else (None, error)
            if probabilities is None:
                found["contenders"][name] = {"error": error}
                continue
            probabilities = probabilities.clone()  # a graph's output is rewritten by each replay
            entry = _stats(timing.time_ms(call))
            entry["rel_err_vs_float64"] = _error(probabilities, expected)
            differing = probabilities.argmax(-1) != classes
            entry["classes_differing_from_torch"] = int(differing.sum())
            entry["classes_differing_beyond_ties"] = int((differing & ~ties).sum())
            if name in models:
                entry["layers"] = _layer_times(models[name], x)
            found["contenders"][name] = entry
        found["routes"] = _routes(lambda: models["ladder"](x))
    return found


def _layer_times(model: LeNet, x: torch.Tensor) -> dict[str, float]:
    """Each layer's median ms alone, on the previous layer's output (as the course reports)."""
    times = {}
    for name, step in model.layers():
        times[name] = float(np.median(timing.time_ms(lambda step=step, x=x: step(x))))
        x = step(x)
    return times


def _block_shape() -> tuple[int, int, Width]:
    """The block's batch, sequence and width: the benchmark's, or tiny in the simulator."""
    if device.simulator():
        return SIMULATOR_BLOCK["batch"], SIMULATOR_BLOCK["sequence"], SIMULATOR_BLOCK["width"]
    return BLOCK_BATCH, BLOCK_SEQUENCE, GPT2_SMALL


def block(dtype: str, log: Callable[[str], None] = print) -> dict[str, Any]:
    """The GPT-2 block at BLOCK_BATCH x BLOCK_SEQUENCE (see the module docstring)."""
    sim = device.simulator()
    batch, sequence, width = _block_shape()
    dev, dt = _device(), _dtype(dtype)
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(batch, sequence, width.channels, generator=gen).to(dev, dt)
    grad = torch.randn(batch, sequence, width.channels, generator=gen).to(dev, dt)
    models = {name: Block(width, ops=name, dtype=dt, device=dev) for name in ("ladder", "torch")}
    wide = Block(width, ops="torch", dtype=torch.float32, device=dev)
    expected = wide(x.float())
    expected.backward(grad.float())
    found: dict[str, Any] = {
        "batch": batch,
        "sequence": sequence,
        "channels": width.channels,
        "heads": width.heads,
        "contenders": {},
    }
    # name -> (the model whose parameters it trains, a builder of (forward, forward_backward))
    builders: dict[str, tuple[Block, Callable[[], tuple[Callable, Callable]]]] = {}
    for name, model in models.items():
        builders[name] = (model, lambda m=model: (lambda: m(x), lambda: m(x).backward(grad)))
        if not sim:  # a copy: make_graphed_callables replaces the module's forward for good
            twin = copy.deepcopy(model)
            builders[f"{name}+graph"] = (twin, lambda m=twin: _graph_both(m, x, grad))
    for name, compiled in _compiled(models["torch"]).items():
        builders[name] = (
            models["torch"],
            lambda c=compiled: (lambda: c(x), lambda: c(x).backward(grad)),
        )
    for name, (model, build) in builders.items():
        log(f"block {dtype}: {name}")
        params = list(model.parameters())

        def zero(params: list[torch.nn.Parameter] = params) -> None:
            for p in params:
                p.grad = None

        built, error = _attempt(build)
        if built is not None:  # the first calls compile (torch.compile): report a failure there
            forward, step = built
            with torch.no_grad():
                out, error = _attempt(lambda forward=forward: forward().clone())
            zero()
            error = error or _attempt(step)[1]
        if built is None or error is not None:
            found["contenders"][name] = {"error": error}
            continue
        # read the gradients before anything else runs: a CUDA graph's (torch.compile's
        # reduce-overhead) are rewritten by its next replay, the forward's timing below included
        errors = [_error(p.grad, w.grad) for p, w in zip(params, wide.parameters(), strict=True)]
        with torch.no_grad():
            forward_ms = _stats(timing.time_ms(forward))
        found["contenders"][name] = {
            "forward": forward_ms,
            "forward_backward": _stats(timing.time_ms(step, before=zero)),
            "rel_err_vs_float32": _error(out, expected),
            "grad_rel_err_vs_float32_max": max(errors),
        }
        zero()
    found["routes"] = _routes(lambda: models["ladder"](x).backward(grad))
    found["profile"] = {
        name: profile(lambda m=models[name]: m(x).backward(grad)) for name in ("torch", "ladder")
    }
    return found


def host(dtype: str, log: Callable[[str], None] = print) -> dict[str, Any]:
    """The host's µs per call of each operator the block calls, at the block's shapes
    (``models/host.py``)."""
    batch, sequence, width = _block_shape()
    log(f"host {dtype}: ladder.ops, the rungs and PyTorch, one call at a time")
    return host_costs.measure(
        dtype, batch * sequence, width.channels, width.heads, batch, _device()
    )


def _graph_both(model: Block, x: torch.Tensor, grad: torch.Tensor) -> tuple[Callable, Callable]:
    """The block's forward as one CUDA graph (under no_grad) and its forward + backward as
    two (``torch.cuda.make_graphed_callables``: the backward's graph replays when autograd
    reaches it)."""
    with torch.no_grad():
        forward = _graphed(lambda: model(x))
    graphed = torch.cuda.make_graphed_callables(model, (x,))
    return forward, lambda: graphed(x).backward(grad)


def checks(doc: dict[str, Any]) -> dict[str, Any]:
    """Each target with its figure and whether it is met (None in the simulator)."""
    timed = not doc.get("simulated")
    found: dict[str, Any] = {}

    def best(case: dict[str, Any], family: str, part: str | None) -> tuple[float, str] | None:
        """The fastest median of ``family``'s contenders in ``case`` and its name."""
        times = [
            ((entry[part] if part else entry)["median_ms"], name)
            for name, entry in case["contenders"].items()
            if name in FAMILIES[family] and "error" not in entry
        ]
        return min(times) if times else None

    specs = {
        "lenet forward, x PyTorch eager": ("lenet", "torch", None),
        "block forward, x torch.compile": ("block", "torch.compile", "forward"),
        "block forward + backward, x PyTorch eager": ("block", "torch", "forward_backward"),
    }
    for target, (part, against, which) in specs.items():
        for dtype, case in (doc.get(part) or {}).items():
            mine, theirs = best(case, "ladder", which), best(case, against, which)
            value = None if mine is None or theirs is None else theirs[0] / mine[0]
            met = None if not timed or value is None else value >= TARGETS[target]
            found[f"{target} ({dtype})"] = {
                "value": value,
                "target": TARGETS[target],
                "met": met,
                "contenders": None if value is None else [mine[1], theirs[1]],
            }
    for dtype, case in (doc.get("host") or {}).items():
        most = host_costs.worst(case)
        found[f"ladder.ops host µs per call, the most of {len(case)} operators ({dtype})"] = {
            "value": None if most is None else most[0],
            "target": host_costs.TARGET_US,
            "at_most": True,
            "met": None if not timed or most is None else most[0] <= host_costs.TARGET_US,
            "contenders": None if most is None else [most[1]],
        }
    for dtype, case in (doc.get("lenet") or {}).items():
        ours = case["contenders"]["ladder"]
        differing = ours.get("classes_differing_beyond_ties")
        found[f"lenet classes identical to PyTorch's but at near-ties ({dtype})"] = {
            "value": differing,
            "met": None if differing is None else differing == 0,
            "near_ties_differing": None
            if differing is None
            else ours["classes_differing_from_torch"] - differing,
        }
    return found


def run(
    parts: tuple[str, ...] = PARTS,
    dtypes: tuple[str, ...] | None = None,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Measure ``parts`` in ``dtypes`` (each part's own by default) and return the results
    document (see the module docstring)."""
    for part in parts:
        if part not in PARTS:
            raise ValueError(f"unknown part {part!r}; known: {', '.join(PARTS)}")
    found: dict[str, Any] = {}
    with library_at_its_best(), conditions.Sampler() as sampler:
        for part, measure, own in (
            ("lenet", lenet, LENET_DTYPES),
            ("block", block, BLOCK_DTYPES),
            ("host", host, SIMULATOR_HOST_DTYPES if device.simulator() else HOST_DTYPES),
        ):
            if part in parts:
                chosen = [d for d in own if dtypes is None or d in dtypes]
                found[part] = {d: measure(d, log) for d in chosen}
    doc = report.results_document([], None, sampler.summary())
    doc["kind"] = "models"
    doc["targets"] = dict(TARGETS)
    doc.update(found)
    doc["checks"] = checks(doc)
    return doc


def _cases(doc: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(model, dtype, case) of every model measured in ``doc``, LeNet first."""
    for model in ("lenet", "block"):
        for dtype, case in (doc.get(model) or {}).items():
            yield model, dtype, case


def table_rows(doc: dict[str, Any]) -> list[tuple[str, ...]]:
    """One row per model, dtype and contender: the figures ``ladder models`` prints (a
    contender that could not be built shows its error)."""
    rows = []
    for model, dtype, case in _cases(doc):
        if model == "lenet":
            label = f"lenet B={case['batch']}"
        else:
            label = f"block {case['batch']}x{case['sequence']}x{case['channels']}"
        for name, entry in case["contenders"].items():
            if "error" in entry:
                rows.append((label, dtype, name, entry["error"], "", "", ""))
            elif model == "lenet":
                rows.append(
                    (
                        label,
                        dtype,
                        name,
                        f"{entry['median_ms']:.3f}",
                        "",
                        f"{entry['rel_err_vs_float64']:.1e}",
                        f"{entry['classes_differing_from_torch']}"
                        f" ({entry['classes_differing_beyond_ties']} beyond ties)",
                    )
                )
            else:
                rows.append(
                    (
                        label,
                        dtype,
                        name,
                        f"{entry['forward']['median_ms']:.3f}",
                        f"{entry['forward_backward']['median_ms']:.3f}",
                        f"{entry['rel_err_vs_float32']:.1e}",
                        f"{entry['grad_rel_err_vs_float32_max']:.1e}",
                    )
                )
    return rows


def host_rows(doc: dict[str, Any]) -> list[tuple[str, ...]]:
    """One row per dtype and operator of the host part: its route, then the µs per call of
    each of ``host.CONTENDERS`` ("—" where no rung took it)."""
    rows = []
    for dtype, case in (doc.get("host") or {}).items():
        for name, entry in case.items():
            cells = [
                f"{entry[c]:.1f}" if entry[c] is not None else "—" for c in host_costs.CONTENDERS
            ]
            rows.append((name, dtype, entry["route"], *cells))
    return rows


HOST_HEADERS = ("operator", "dtype", "route", *(f"{c} µs" for c in host_costs.CONTENDERS))


HEADERS = (
    "model",
    "dtype",
    "operators",
    "forward ms",
    "fwd+bwd ms",
    "error",
    "classes ≠ / grad error",
)


README_START = "<!-- models:start -->"
README_END = "<!-- models:end -->"


def _verdict(check: dict[str, Any]) -> str:
    return {True: "met", False: "**missed**", None: "not judged (simulator)"}[check["met"]]


def markdown(doc: dict[str, Any], figures: list[str], source: str) -> str:
    """The README's block for a results document (read from ``source``): where and when it was
    measured, LeNet's forward and the block's forward and forward + backward per contender
    (ms, and PyTorch eager's time over each), each target's figure and verdict, the figures."""
    lines = [
        f"Measured on {doc['gpu'] or 'the CUDA simulator'}, {doc['date'][:10]}, by "
        f"`ladder models` (`{source}`): medians of CUDA-event times, the L2 flushed; the "
        "ladder's routes chosen by time, cuDNN autotuned, TF32 off.",
        "",
        "| model | dtype | operators | forward ms | × eager | fwd + bwd ms | × eager |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for model, dtype, case in _cases(doc):
        if model == "lenet":
            label = f"LeNet, batch {case['batch']}"
        else:
            label = f"GPT-2 block, {case['batch']} × {case['sequence']}"
        eager = case["contenders"].get("torch", {})
        for name, entry in case["contenders"].items():
            if "error" in entry:
                lines.append(f"| {label} | {dtype} | {name} | failed | | | |")
                continue
            parts = [None] if model == "lenet" else ["forward", "forward_backward"]
            cells = []
            for part in parts:
                ms = (entry[part] if part else entry)["median_ms"]
                base = (eager.get(part, {}) if part else eager).get("median_ms")
                cells += [f"{ms:.3f}", f"{base / ms:.2f}" if base else ""]
            cells += ["", ""] * (2 - len(parts))
            lines.append(f"| {label} | {dtype} | {name} | " + " | ".join(cells) + " |")
    hosted = host_rows(doc)
    if hosted:
        lines += [
            "",
            "Host time per call at the block's shapes (the GPU idle before each call, median):",
            "",
            "| " + " | ".join(HOST_HEADERS) + " |",
            "| --- | --- | --- | " + " | ".join("---:" for _ in host_costs.CONTENDERS) + " |",
        ]
        lines += ["| " + " | ".join(row) + " |" for row in hosted]
    lines += ["", "| target | measured | between | verdict |", "| --- | ---: | --- | --- |"]
    for name, check in doc["checks"].items():
        value = check["value"]
        shown = f"{value:.2f}" if isinstance(value, float) else str(value)
        if check.get("target") is not None:
            most = "at most " if check.get("at_most") else ""
            shown += f" (target {most}{check['target']:g})"
        between = " vs ".join(check.get("contenders") or [])
        lines.append(f"| {name} | {shown} | {between} | {_verdict(check)} |")
    lines.append("")
    lines += [f"![{Path(f).stem}]({f})" for f in figures]
    return "\n".join(lines) + "\n"


def _print(doc: dict[str, Any], console: Any) -> None:
    from rich.table import Table

    table = Table(title=f"ladder models on {doc['gpu'] or 'the CUDA simulator'}")
    for header in HEADERS:
        table.add_column(header)
    for row in table_rows(doc):
        table.add_row(*row)
    console.print(table)
    hosted = host_rows(doc)
    if hosted:
        costs = Table(title="host µs per call at the block's shapes")
        for header in HOST_HEADERS:
            costs.add_column(header)
        for row in hosted:
            costs.add_row(*row)
        console.print(costs)
    for name, check in doc["checks"].items():
        verdict = {True: "met", False: "MISSED", None: "not judged (simulator)"}[check["met"]]
        value = check["value"]
        shown = f"{value:.2f}" if isinstance(value, float) else str(value)
        between = check.get("contenders")
        console.print(
            f"{name}: {shown}" + (f" ({' vs '.join(between)})" if between else "") + f" - {verdict}"
        )
    if doc.get("simulated"):
        console.print(device.SIMULATOR_NOTE)


def run_args(args: Any) -> int:
    """``ladder models``: measure, print, write ``--out`` (on a GPU by default
    nothing unless ``--out`` is given: ``ladder bench --problems models`` writes the canonical
    file) and its figures;
    or, with ``--from-results``, read a results file and draw its figures again. ``--readme``
    writes the README's block from the figures and the file."""
    from rich.console import Console

    from ladder.models import plot

    console = Console(stderr=False)
    if args.from_results:
        out = Path(args.from_results)
        doc = report.read_results(out)
        _print(doc, console)
        drawn = plot.figures(doc, out.parent, out.stem)
        console.print(f"read {out}")
    else:
        doc = run(tuple(args.parts), tuple(args.dtypes) if args.dtypes else None, log=console.log)
        _print(doc, console)
        out = report.results_path(args.out, None)  # the canonical file: ladder bench
        drawn = []
        if out is not None:
            report.write_results(doc, out)
            drawn = plot.figures(doc, out.parent, out.stem)
        console.print(f"wrote {out}" if out else report.NOT_WRITTEN)
    for path in drawn:
        console.print(f"wrote {path}")
    if args.readme:
        source = out.as_posix() if out else "not written"
        body = markdown(doc, [p.as_posix() for p in drawn], source)
        report.replace_block(args.readme, README_START, README_END, body)
        console.print(f"updated the models block of {args.readme}")
    return 0 if all(c["met"] is not False for c in doc["checks"].values()) else 1


def committed() -> dict[str, Any] | None:
    """The committed ``ladder models`` results (``COMMITTED``, a lab file read through the lab's
    index), with their repository path under ``"path"``; None where the lab is not here (an
    installed package)."""
    from ladder.core import lab

    if not lab.LAB.is_dir():
        return None
    doc = report.read_results(lab.resolve(COMMITTED))
    doc["path"] = COMMITTED
    return doc
