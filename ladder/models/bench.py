"""``ladder models``: the course's network and a GPT-2 block on the ladder's operators, against
PyTorch eager and ``torch.compile`` in the same run -> ``results/<gpu>-models.json``.

- **LeNet** (``lenet``) at batch ``LENET_BATCH``, float32 and float16: the forward's time, each
  layer's time as the course reports it (the layer alone, on the previous layer's output), and
  the classes each contender predicts against PyTorch eager's, and the probabilities' error
  against float64.
- **GPT-2 block** (``block``) at batch ``BLOCK_BATCH`` × sequence ``BLOCK_SEQUENCE``, width
  ``GPT2_SMALL``, float16 and bfloat16: the forward, and the forward + backward (a training
  step's work, the parameters' gradients), each output and gradient against a float32 copy of
  the block; and a ``torch.profiler`` breakdown of the forward + backward per operator, before
  (PyTorch eager) and after (the ladder's operators).

PyTorch eager runs at its best: cuDNN autotuned (``benchmark``), TF32 off (FP32 means FP32, as
for every rung). ``torch.compile`` compiles the PyTorch version of each model (Inductor,
``dynamic=False``) before timing. Times are the harness's (``timing.time_ms``): CUDA events
after warm-up, the L2 flushed, medians. The targets (``TARGETS``) are checked in the results
(``checks``), never in a test. In the simulator everything runs at tiny sizes, without
``torch.compile``, and the times mean nothing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

import ladder.ops
from ladder.core import device, report, timing, torch_views
from ladder.models.gpt import GPT2_SMALL, Block, Width
from ladder.models.lenet import IMAGE, LeNet

LENET_BATCH = 10000
BLOCK_BATCH, BLOCK_SEQUENCE = 8, 1024
# in the simulator: sizes that run in seconds there (every rung's thread is a Python thread)
SIMULATOR_LENET = {"batch": 2, "image": 22}
SIMULATOR_BLOCK = {"batch": 1, "sequence": 5, "width": Width(channels=32, heads=2)}
LENET_DTYPES = ("float32", "float16")
BLOCK_DTYPES = ("float16", "bfloat16")
PARTS = ("lenet", "block")
PROFILE_TOP = 12  # operators kept per profile, by GPU time
TARGETS = {
    "lenet forward, x PyTorch eager": 10.0,  # at least this much faster
    "block forward, x torch.compile": 1.0,
    "block forward + backward, x PyTorch eager": 1.0,
}


def default_path() -> Path:
    return Path("results") / f"{device.gpu_slug()}-models.json"


def _device() -> str:
    return "cpu" if device.simulator() else "cuda"


def _dtype(name: str) -> torch.dtype:
    return getattr(torch, name)


@contextlib.contextmanager
def library_at_its_best() -> Iterator[None]:
    """cuDNN autotuned and TF32 off while inside, PyTorch's flags restored after."""
    saved = torch.backends.cudnn.benchmark
    torch.backends.cudnn.benchmark = True
    torch_views.fp32_means_fp32()
    try:
        yield
    finally:
        torch.backends.cudnn.benchmark = saved


def _compile(model: torch.nn.Module) -> Callable[..., Any] | None:
    """``torch.compile`` of the model (Inductor, no dynamic shapes), or None in the
    simulator."""
    if device.simulator():
        return None
    return torch.compile(model, dynamic=False)


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
    with profiler(activities=activities) as prof:
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
        name: LeNet(ops=ops, dtype=dt, device=dev, image=sizes["image"])
        for name, ops in (("ladder", "ladder"), ("torch", "torch"))
    }
    wide = LeNet(ops="torch", dtype=torch.float64, device=dev, image=sizes["image"])
    expected = wide(x.double())
    found: dict[str, Any] = {"batch": sizes["batch"], "image": sizes["image"], "contenders": {}}
    calls = {name: model for name, model in models.items()}
    compiled = _compile(models["torch"])
    if compiled is not None:
        calls["torch.compile"] = compiled
    classes = models["torch"](x).argmax(-1)
    for name, call in calls.items():
        log(f"lenet {dtype}: {name}")
        with torch.no_grad():
            probabilities = call(x)
            entry = _stats(timing.time_ms(lambda call=call: call(x)))
            entry["rel_err_vs_float64"] = _error(probabilities, expected)
            entry["classes_differing_from_torch"] = int((probabilities.argmax(-1) != classes).sum())
            if name in models:
                entry["layers"] = _layer_times(models[name], x)
        found["contenders"][name] = entry
    with torch.no_grad():
        found["routes"] = _routes(lambda: models["ladder"](x))
    return found


def _layer_times(model: LeNet, x: torch.Tensor) -> dict[str, float]:
    """Each layer's median ms alone, on the previous layer's output (as the course reports)."""
    times = {}
    for name, step in model.layers():
        times[name] = float(np.median(timing.time_ms(lambda step=step, x=x: step(x))))
        x = step(x)
    return times


def block(dtype: str, log: Callable[[str], None] = print) -> dict[str, Any]:
    """The GPT-2 block at BLOCK_BATCH x BLOCK_SEQUENCE (see the module docstring)."""
    sim = device.simulator()
    batch = SIMULATOR_BLOCK["batch"] if sim else BLOCK_BATCH
    sequence = SIMULATOR_BLOCK["sequence"] if sim else BLOCK_SEQUENCE
    width = SIMULATOR_BLOCK["width"] if sim else GPT2_SMALL
    dev, dt = _device(), _dtype(dtype)
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(batch, sequence, width.channels, generator=gen).to(dev, dt)
    grad = torch.randn(batch, sequence, width.channels, generator=gen).to(dev, dt)
    models = {
        name: Block(width, ops=ops, dtype=dt, device=dev)
        for name, ops in (("ladder", "ladder"), ("torch", "torch"))
    }
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
    calls: dict[str, Callable[..., Any]] = dict(models)
    compiled = _compile(models["torch"])
    if compiled is not None:
        calls["torch.compile"] = compiled
    for name, call in calls.items():
        log(f"block {dtype}: {name}")
        params = list((models["torch"] if name == "torch.compile" else models[name]).parameters())

        def step(call: Callable[..., Any] = call) -> None:
            call(x).backward(grad)

        def zero(params: list[torch.nn.Parameter] = params) -> None:
            for p in params:
                p.grad = None

        with torch.no_grad():
            out = call(x)
            forward = _stats(timing.time_ms(lambda call=call: call(x)))
        zero()
        step()
        errors = [_error(p.grad, w.grad) for p, w in zip(params, wide.parameters(), strict=True)]
        entry = {
            "forward": forward,
            "forward_backward": _stats(timing.time_ms(step, before=zero)),
            "rel_err_vs_float32": _error(out, expected),
            "grad_rel_err_vs_float32_max": max(errors),
        }
        found["contenders"][name] = entry
    found["routes"] = _routes(lambda: models["ladder"](x).backward(grad))
    found["profile"] = {
        name: profile(lambda m=models[name]: m(x).backward(grad)) for name in ("torch", "ladder")
    }
    return found


def checks(doc: dict[str, Any]) -> dict[str, Any]:
    """Each target with its figure and whether it is met (None in the simulator)."""
    timed = not doc.get("simulated")
    found: dict[str, Any] = {}

    def ratio(case: dict[str, Any], of: str, against: str, part: str | None) -> float | None:
        contenders = case["contenders"]
        if of not in contenders or against not in contenders:
            return None
        mine = contenders[of][part] if part else contenders[of]
        theirs = contenders[against][part] if part else contenders[against]
        return theirs["median_ms"] / mine["median_ms"]

    specs = {
        "lenet forward, x PyTorch eager": ("lenet", "torch", None),
        "block forward, x torch.compile": ("block", "torch.compile", "forward"),
        "block forward + backward, x PyTorch eager": ("block", "torch", "forward_backward"),
    }
    for target, (part, against, which) in specs.items():
        for dtype, case in (doc.get(part) or {}).items():
            value = ratio(case, "ladder", against, which)
            met = None if not timed or value is None else value >= TARGETS[target]
            found[f"{target} ({dtype})"] = {"value": value, "target": TARGETS[target], "met": met}
    for dtype, case in (doc.get("lenet") or {}).items():
        differing = case["contenders"]["ladder"]["classes_differing_from_torch"]
        found[f"lenet classes identical to PyTorch's ({dtype})"] = {
            "value": differing,
            "met": differing == 0,
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
    doc = report.results_document([], None)
    doc["kind"] = "models"
    doc["targets"] = dict(TARGETS)
    with library_at_its_best():
        for part, measure, own in (("lenet", lenet, LENET_DTYPES), ("block", block, BLOCK_DTYPES)):
            if part in parts:
                chosen = [d for d in own if dtypes is None or d in dtypes]
                doc[part] = {d: measure(d, log) for d in chosen}
    doc["checks"] = checks(doc)
    return doc


def table_rows(doc: dict[str, Any]) -> list[tuple[str, ...]]:
    """One row per model, dtype and contender: the figures ``ladder models`` prints."""
    rows = []
    for dtype, case in (doc.get("lenet") or {}).items():
        for name, entry in case["contenders"].items():
            rows.append(
                (
                    f"lenet B={case['batch']}",
                    dtype,
                    name,
                    f"{entry['median_ms']:.3f}",
                    "",
                    f"{entry['rel_err_vs_float64']:.1e}",
                    str(entry["classes_differing_from_torch"]),
                )
            )
    for dtype, case in (doc.get("block") or {}).items():
        for name, entry in case["contenders"].items():
            rows.append(
                (
                    f"block {case['batch']}x{case['sequence']}x{case['channels']}",
                    dtype,
                    name,
                    f"{entry['forward']['median_ms']:.3f}",
                    f"{entry['forward_backward']['median_ms']:.3f}",
                    f"{entry['rel_err_vs_float32']:.1e}",
                    f"{entry['grad_rel_err_vs_float32_max']:.1e}",
                )
            )
    return rows


HEADERS = (
    "model",
    "dtype",
    "operators",
    "forward ms",
    "fwd+bwd ms",
    "error",
    "classes ≠ / grad error",
)


def run_args(args: Any) -> int:
    """``ladder models``: measure, print, write ``--out`` (on a GPU by default
    ``results/<gpu>-models.json``; in the simulator only an ``--out`` given)."""
    from rich.console import Console
    from rich.table import Table

    console = Console(stderr=False)
    doc = run(tuple(args.parts), tuple(args.dtypes) if args.dtypes else None, log=console.log)
    table = Table(title=f"ladder models on {doc['gpu'] or 'the CUDA simulator'}")
    for header in HEADERS:
        table.add_column(header)
    for row in table_rows(doc):
        table.add_row(*row)
    console.print(table)
    for name, check in doc["checks"].items():
        verdict = {True: "met", False: "MISSED", None: "not judged (simulator)"}[check["met"]]
        value = check["value"]
        shown = f"{value:.2f}" if isinstance(value, float) else str(value)
        console.print(f"{name}: {shown} - {verdict}")
    if doc.get("simulated"):
        console.print(device.SIMULATOR_NOTE)
    out = report.results_path(args.out, default_path())
    if out is not None:
        from ladder.models import plot

        report.write_results(doc, out)
        for path in plot.figures(doc, out.parent, out.stem):
            console.print(f"wrote {path}")
    console.print(f"wrote {out}" if out else report.NOT_WRITTEN)
    return 0 if all(c["met"] is not False for c in doc["checks"].values()) else 1


def committed() -> dict[str, Any] | None:
    """The committed ``ladder models`` results (``results/*-models.json`` of the repository,
    found from a notebook's folder or the repository's; the first by name), or None."""
    folders = (
        Path("results"),
        Path("..") / "results",
        Path(__file__).resolve().parents[2] / "results",
    )
    for folder in folders:
        found = sorted(folder.glob("*-models.json"))
        if found:
            doc = report.read_results(found[0])
            doc["path"] = str(found[0])
            return doc
    return None
