"""Host time per call of rung launchers, against PyTorch and bare launches of empty kernels.

For each case (problem, rung, size, dtype) the inputs and the output are built on the GPU, as
PyTorch tensors, CuPy arrays and Numba device arrays in turn, and the rung's ``launch`` is
called ``--repeats`` times after ``--warmup`` calls. Three figures per row, measured by the
harness's own ``timing.time_calls``:

- host µs per call: ``time.perf_counter`` around the call alone, the GPU synchronized before
  each call (so no queue is full and no earlier work is waited for); the median is reported,
  and every sample is kept in the JSON;
- back-to-back µs per call: ``--back-to-back`` calls in a row, then one synchronize, wall time
  over the count: what a loop of launches costs when nothing waits in between (the larger of
  the host time and the GPU time of a call);
- graph µs per call: one call captured into a CUDA graph, then as many replays in a row.

Rows per case: the rung's ``launch`` (the registry's launcher), and for the rungs converted to
``ladder.core.fastcall`` the same ``launch`` with raw launches off (``dispatcher_launches()``:
Numba's dispatcher or CuPy's ``RawKernel``, same validation and plans) and, for GEMM rung 10,
its old launcher kept for the sweep (``launch_config``). ``torch.matmul`` (with ``out=``) and
``torch.softmax`` are measured at the same sizes. The bare launches: an empty kernel through
Numba's dispatcher, CuPy's ``RawKernel``, ``cuda.core.launch``, ``cuda.bindings``'
``cuLaunchKernel`` and ``fastcall.PackedLaunch`` (through cuda.bindings and through ctypes),
with no argument and with three pointers; and the cost of reading one array
(``fastcall.intake`` against Numba's ``cuda.as_cuda_array``).

``--dry-run`` runs in Numba's CUDA simulator without a GPU: it builds each Numba case's plans
at a small size, checks the answers, and prints each plan's mode; no time is measured.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import datetime
import functools
import gc
import json
import os
import subprocess
import sys
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

# (problem, rung, size, dtype): the rungs at sizes where one call runs long enough to
# check and short enough that back-to-back calls show the host's share
CONV2_SMALL = (1000, 4, 16, 40, 40, 7)  # conv2's layer at a tenth of its batch
CASES: list[tuple[str, str, tuple[int, ...], str]] = [
    ("gemm", "naive", (1024, 1024, 1024), "float32"),
    ("gemm", "coalesced", (1024, 1024, 1024), "float32"),
    ("gemm", "shared-tiling", (1024, 1024, 1024), "float32"),
    ("gemm", "thread-tiling-1d", (1024, 1024, 1024), "float32"),
    ("gemm", "register-blocked-2d", (1024, 1024, 1024), "float32"),
    ("gemm", "transposed-tiles", (1024, 1024, 1024), "float32"),
    ("gemm", "wide-loads", (1024, 1024, 1024), "float32"),
    ("gemm", "warp-tiling", (1024, 1024, 1024), "float32"),
    ("gemm", "double-buffered", (1024, 1024, 1024), "float32"),
    ("gemm", "tuned", (1024, 1024, 1024), "float32"),
    ("gemm", "fp16-staging", (1024, 1024, 1024), "float16"),
    ("gemm", "wmma", (1024, 1024, 1024), "float16"),
    ("gemm", "wmma-shared", (1024, 1024, 1024), "float16"),
    ("gemm", "cp-async", (1024, 1024, 1024), "float16"),
    ("gemm", "mma-sync", (1024, 1024, 1024), "float16"),
    ("gemm", "wgmma", (1024, 1024, 1024), "float16"),
    ("softmax", "rows-in-registers", (4096, 1024), "float32"),
    ("softmax", "rows-in-registers", (4096, 1024), "float16"),
    ("softmax", "three-kernels", (4096, 1024), "float32"),
    ("softmax", "block-per-row", (4096, 1024), "float32"),
    ("softmax", "warp-shuffle", (4096, 1024), "float32"),
    ("softmax", "online", (4096, 1024), "float32"),
    ("elementwise", "three-kernels", (4096, 1024), "float32"),
    ("elementwise", "fp16-casts", (4096, 1024), "float16"),
    ("elementwise", "fused", (4096, 1024), "float32"),
    ("layernorm", "two-pass", (4096, 1024), "float32"),
    ("layernorm", "welford", (4096, 1024), "float32"),
    ("gemm-epilogue", "gemm-then-epilogue", (1024, 1024, 1024), "float32"),
    ("gemm-epilogue", "fused-epilogue", (1024, 1024, 1024), "float32"),
    ("conv", "naive", CONV2_SMALL, "float16"),
    ("conv", "shared-tiles", CONV2_SMALL, "float16"),
    ("conv", "unroll-gemm", CONV2_SMALL, "float16"),
    ("conv", "implicit-gemm", CONV2_SMALL, "float16"),
    ("conv", "register-tiled", CONV2_SMALL, "float32"),
    ("conv", "tuned", CONV2_SMALL, "float32"),
    ("conv", "fp16-staging", CONV2_SMALL, "float16"),
    ("conv", "tensor-core", CONV2_SMALL, "float16"),
    ("conv", "wgmma", CONV2_SMALL, "float16"),
    ("conv", "wgmma-blocks", CONV2_SMALL, "float16"),
    ("conv", "wgmma-one-group", CONV2_SMALL, "float16"),
    ("conv", "wgmma-bulk", CONV2_SMALL, "float16"),
    ("conv", "filters-on-m", CONV2_SMALL, "float16"),
    ("attention", "tensor-core-flash", (1, 8, 8, 1024, 64), "float16"),
    ("attention", "naive", (1, 8, 8, 1024, 64), "float16"),
    ("attention", "row-in-shared", (1, 8, 8, 1024, 64), "float16"),
    ("attention", "flash", (1, 8, 8, 1024, 64), "float16"),
    ("attention", "flash-fp16", (1, 8, 8, 1024, 64), "float16"),
    ("attention", "gqa-packed", (1, 8, 2, 1024, 64), "float16"),
]
LIBRARIES = ("torch", "cupy", "numba")


@dataclass
class Row:
    """One measured (or failed) row of the report."""

    kind: str  # "rung", "library", "bare launch" or "intake"
    label: str
    inputs: str = ""  # "torch", "cupy", "numba" or ""
    path: str = ""  # "launch", "dispatcher", "old launcher", ...
    problem: str = ""
    rung: str = ""
    size: list[int] = field(default_factory=list)
    dtype: str = ""
    mode: str = ""  # the plan's launch path after the timed calls, where there is one
    host_us_median: float | None = None
    host_us_min: float | None = None
    host_us_samples: list[float] = field(default_factory=list)
    back_to_back_us: float | None = None
    graph_us: float | None = None
    graph_error: str | None = None
    rel_err: float | None = None
    ok: bool | None = None
    error: str | None = None


# --- timing -----------------------------------------------------------------------------------


_SYNC: list[Callable[[], Any]] = []


def _sync() -> None:
    """Wait for the whole device (PyTorch, CuPy and Numba all launch on this one GPU):
    ``torch.cuda.synchronize`` where PyTorch is installed, Numba's otherwise."""
    if not _SYNC:
        try:
            import torch

            _SYNC.append(torch.cuda.synchronize)
        except ImportError:
            from numba import cuda

            _SYNC.append(cuda.synchronize)
    _SYNC[0]()


def measure(call: Callable[[], Any], repeats: int, warmup: int, back_to_back: int) -> dict:
    """Host µs per call (synchronized before each), back-to-back µs per call and graph replay
    µs per call: ``timing.time_calls``, the harness's own measurement, after ``warmup`` calls."""
    from ladder.core import timing

    for _ in range(warmup):
        call()
        _sync()
    gc.collect()
    costs = timing.time_calls(call, 0.0, host_calls=repeats, in_a_row=back_to_back)
    return {
        "host_us_median": costs.host_us,
        "host_us_min": min(costs.host_samples_us),
        "host_us_samples": [round(s, 3) for s in costs.host_samples_us],
        "back_to_back_us": costs.back_to_back_us,
        "graph_us": costs.graph_us,
        "graph_error": costs.graph_error,
    }


# --- arrays in each library --------------------------------------------------------------------


def to_library(x: np.ndarray, library: str) -> Any:
    if library == "torch":
        import torch

        return torch.from_numpy(np.ascontiguousarray(x)).cuda()
    if library == "cupy":
        import cupy

        return cupy.asarray(x)
    from numba import cuda

    return cuda.to_device(x)


def empty_in(library: str, shape: tuple[int, ...], dtype: str) -> Any:
    if library == "torch":
        import torch

        return torch.empty(shape, dtype=getattr(torch, dtype), device="cuda")
    if library == "cupy":
        import cupy

        return cupy.empty(shape, dtype=dtype)
    from numba import cuda

    return cuda.device_array(shape, dtype=dtype)


def to_numpy(arr: Any) -> np.ndarray:
    if hasattr(arr, "copy_to_host"):
        return arr.copy_to_host()
    if hasattr(arr, "get"):
        return arr.get()
    return arr.detach().cpu().numpy()


# --- rows --------------------------------------------------------------------------------------


def _fastcall() -> Any:
    try:
        from ladder.core import fastcall
    except ImportError:  # the base commit: the registry's launchers only
        return None
    return fastcall


def _plan_mode(module: Any, args: tuple[Any, ...], names: tuple[str, ...]) -> str:
    """The launch path of the plan the rung's module keeps for these arrays, if it keeps one."""
    fastcall = _fastcall()
    plans = getattr(module, "PLANS", None)
    launcher = getattr(module, "LAUNCHER", None)
    if fastcall is None or (plans is None and launcher is None):
        return ""
    ops = [fastcall.intake(a, n) for a, n in zip(args, names, strict=True)]
    if launcher is not None:  # a TiledLauncher: its plan is a closure over the kernel's launch
        plan = launcher.plans(*ops)
        padded = isinstance(plan, functools.partial)
        function = plan.args[0] if padded else plan
        cells = [c.cell_contents for c in getattr(function, "__closure__", None) or ()]
        if any(isinstance(c, fastcall.PackedLaunch) for c in cells):
            kind = "raw"
        else:
            kind = "cupy RawKernel" if cells else function.__name__
        return f"padded copies, {kind}" if padded else kind
    plan = plans(*ops)
    return getattr(plan, "mode", type(plan).__name__)


def variants(rung: Any) -> list[tuple[str, Callable[..., Any], Callable[[], Any]]]:
    """(path, launcher, context) for a rung: its launch, and the old paths kept in the tree."""
    fastcall = _fastcall()
    module = sys.modules[rung.launch.__module__]
    found: list[tuple[str, Callable[..., Any], Callable[[], Any]]] = [
        ("launch", rung.launch, contextlib.nullcontext)
    ]
    converted = hasattr(module, "PLANS") or hasattr(module, "LAUNCHER")
    if fastcall is not None and converted:
        found.append(("dispatcher", rung.launch, fastcall.dispatcher_launches))
    if rung.problem == "gemm" and hasattr(module, "launch_config") and hasattr(module, "TUNED"):

        def old(*args: Any) -> Any:
            return module.launch_config(module.TUNED, *args)

        found.append(("old launcher", old, contextlib.nullcontext))
    return found


def _names(problem: str, count: int) -> tuple[str, ...]:
    known = {
        "gemm": ("A", "B", "C"),
        "softmax": ("x", "out"),
        "conv": ("x", "w", "out"),
        "attention": ("q", "k", "v", "out"),
    }
    return known.get(problem, tuple(f"arg{i}" for i in range(count)))


def rung_rows(case: tuple[str, str, tuple[int, ...], str], args: argparse.Namespace) -> list[Row]:
    from ladder.core import timing
    from ladder.core.rung import get_problem, get_rung

    name, rung_name, size, dtype = case
    problem = get_problem(name)
    rung = get_rung(name, rung_name)
    base = Row("rung", f"{name}/{rung_name}", problem=name, rung=rung_name, size=list(size))
    base.dtype = dtype
    reason = rung.unavailable_reason()
    if reason is not None:
        return [_replace(base, error=f"unavailable: {reason}")]
    inputs = problem.make_inputs(size, dtype, seed=0)
    ref = problem.reference(inputs) if args.check else None
    module = sys.modules[rung.launch.__module__]
    rows = []
    for library in args.inputs:
        try:
            ins = [to_library(x, library) for x in inputs]
            out = empty_in(library, problem.output_shape(size), problem.output_dtype(dtype))
        except Exception as err:  # a library that is not installed
            rows.append(_replace(base, inputs=library, error=f"{type(err).__name__}: {err}"))
            continue
        for path, launcher, context in variants(rung):
            row = _replace(base, inputs=library, path=path)
            try:
                with context():
                    launcher(*ins, out)
                    _sync()
                    if ref is not None:
                        row.rel_err = timing.relative_error(to_numpy(out), ref)
                        row.ok = row.rel_err <= problem.tolerance(dtype)
                    timed = measure(
                        lambda launcher=launcher, ins=ins, out=out: launcher(*ins, out),
                        args.repeats,
                        args.warmup,
                        args.back_to_back,
                    )
                    if path != "old launcher":
                        row.mode = _plan_mode(module, (*ins, out), _names(name, len(ins) + 1))
                for key, value in timed.items():
                    setattr(row, key, value)
            except Exception as err:
                row.error = f"{type(err).__name__}: {err}"
                if args.verbose:
                    traceback.print_exc()
            rows.append(row)
    return rows


def library_rows(case: tuple[str, str, tuple[int, ...], str], args: argparse.Namespace) -> list:
    """torch.matmul (out=) at a GEMM case's size, torch.softmax at a softmax case's."""
    import torch

    name, _, size, dtype = case
    tdtype = getattr(torch, dtype)
    if name == "gemm":
        m, n, k = size
        a = torch.rand((m, k), dtype=tdtype, device="cuda")
        b = torch.rand((k, n), dtype=tdtype, device="cuda")
        c = torch.empty((m, n), dtype=tdtype, device="cuda")
        label = "torch.matmul(a, b, out=c)"

        def call() -> Any:
            return torch.matmul(a, b, out=c)

    elif name == "softmax":
        x = torch.rand(size, dtype=tdtype, device="cuda")
        label = "torch.softmax(x, 1)"

        def call() -> Any:
            return torch.softmax(x, 1)

    elif name == "conv":
        b, c, m, h, w, k = size
        x = torch.rand((b, c, h, w), dtype=tdtype, device="cuda")
        f = torch.rand((m, c, k, k), dtype=tdtype, device="cuda")
        label = "torch.nn.functional.conv2d(x, w) (cuDNN)"

        def call() -> Any:
            return torch.nn.functional.conv2d(x, f)

    elif name == "attention":
        b, h, hkv, n, d = size
        q = torch.rand((b, h, n, d), dtype=tdtype, device="cuda")
        kv = torch.rand((b, hkv, n, d), dtype=tdtype, device="cuda")
        label = "torch.nn.functional.scaled_dot_product_attention(q, k, v)"

        def call() -> Any:
            return torch.nn.functional.scaled_dot_product_attention(q, kv, kv, enable_gqa=hkv != h)

    elif name == "layernorm":
        x = torch.rand(size, dtype=tdtype, device="cuda")
        label = "torch.nn.functional.layer_norm(x, (cols,))"

        def call() -> Any:
            return torch.nn.functional.layer_norm(x, size[1:])

    else:
        return []
    row = Row("library", label, inputs="torch", problem=name, size=list(size), dtype=dtype)
    for key, value in measure(call, args.repeats, args.warmup, args.back_to_back).items():
        setattr(row, key, value)
    return [row]


def _replace(row: Row, **changes: Any) -> Row:
    return Row(**{**asdict(row), **changes})


# --- bare launches --------------------------------------------------------------------------------

EMPTY_SOURCE = r"""
extern "C" __global__ void empty0() {}
extern "C" __global__ void empty3(const float* a, const float* b, float* c) {}
"""


def bare_rows(args: argparse.Namespace) -> list[Row]:
    """Empty kernels through each launch path, with no argument and with three arrays."""
    import cupy
    import torch
    from numba import cuda

    rows: list[Row] = []

    def add(label: str, call: Callable[[], Any], kind: str = "bare launch") -> None:
        row = Row(kind, label)
        try:
            call()
            _sync()
            for key, value in measure(call, args.repeats, args.warmup, args.back_to_back).items():
                setattr(row, key, value)
        except Exception as err:
            row.error = f"{type(err).__name__}: {err}"
            if args.verbose:
                traceback.print_exc()
        rows.append(row)

    @cuda.jit
    def empty0() -> None:
        pass

    @cuda.jit
    def empty3(a: Any, b: Any, c: Any) -> None:
        pass

    n = 1024
    nd = [cuda.device_array(n, np.float32) for _ in range(3)]
    td = [torch.empty(n, device="cuda") for _ in range(3)]
    cd = [cupy.empty(n, dtype=np.float32) for _ in range(3)]
    ptrs = [int(x.data.ptr) for x in cd]

    add("numba dispatcher: empty0[1, 32]()", lambda: empty0[1, 32]())
    configured = empty3[1, 32]
    add("numba dispatcher: empty3[1, 32](3 numba arrays)", lambda: configured(*nd))
    add("numba dispatcher: empty3[1, 32](3 torch tensors)", lambda: configured(*td))

    module = cupy.RawModule(code=EMPTY_SOURCE)
    k0, k3 = module.get_function("empty0"), module.get_function("empty3")
    add("cupy RawKernel: empty0((1,), (32,), ())", lambda: k0((1,), (32,), ()))
    add("cupy RawKernel: empty3(3 cupy arrays)", lambda: k3((1,), (32,), tuple(cd)))
    u64 = [np.uint64(p) for p in ptrs]
    add("cupy RawKernel: empty3(3 np.uint64 pointers)", lambda: k3((1,), (32,), tuple(u64)))

    try:
        from cuda.core import LaunchConfig, launch
        from numba.cuda.cudadrv.driver import _to_core_stream

        empty3[1, 32](*nd)
        overload = next(iter(empty3.overloads.values()))
        core_kernel = overload._codelibrary.get_cufunc().kernel
        overload0 = next(iter(empty0.overloads.values()))
        core_kernel0 = overload0._codelibrary.get_cufunc().kernel
        stream0 = _to_core_stream(0)
        config = LaunchConfig(grid=1, block=32)
        add("cuda.core launch: empty0", lambda: launch(stream0, config, core_kernel0))
        flat = [0, 0, n, 4, 0, n, 4]  # meminfo, parent, nitems, itemsize, data, shape, stride
        values = []
        for p in ptrs:
            flat[4] = p
            values += flat
        add(
            "cuda.core launch: empty3 (Numba's 21 values)",
            lambda: launch(stream0, config, core_kernel, *values),
        )
    except Exception as err:
        rows.append(Row("bare launch", "cuda.core launch", error=f"{type(err).__name__}: {err}"))

    holders = [ctypes.c_uint64(p) for p in ptrs]
    params = (ctypes.c_void_p * 3)(*[ctypes.addressof(h) for h in holders])
    try:
        from cuda.bindings import driver as cudrv

        f0 = cudrv.CUfunction(k0.kernel.ptr)
        f3 = cudrv.CUfunction(k3.kernel.ptr)
        address = ctypes.addressof(params)
        stream = cudrv.CUstream(0)
        add(
            "cuda.bindings cuLaunchKernel: empty0",
            lambda: cudrv.cuLaunchKernel(f0, 1, 1, 1, 32, 1, 1, 0, stream, 0, 0),
        )
        add(
            "cuda.bindings cuLaunchKernel: empty3 (kernelParams as an address)",
            lambda: cudrv.cuLaunchKernel(f3, 1, 1, 1, 32, 1, 1, 0, stream, address, 0),
        )
    except Exception as err:
        rows.append(Row("bare launch", "cuda.bindings", error=f"{type(err).__name__}: {err}"))

    fastcall = _fastcall()
    if fastcall is not None:
        for via in getattr(fastcall, "VIAS", ("ctypes",)):
            extra = {"via": via} if hasattr(fastcall, "VIAS") else {}
            p0 = fastcall.PackedLaunch(k0.kernel.ptr, 1, 32, 0, [], [], **extra)
            slots = [ctypes.c_uint64(0) for _ in range(3)]
            p3 = fastcall.PackedLaunch(k3.kernel.ptr, 1, 32, 0, slots, [0, 1, 2], **extra)
            add(f"fastcall.PackedLaunch ({via}): empty0", lambda p0=p0: p0())
            add(f"fastcall.PackedLaunch ({via}): empty3(3 pointers)", lambda p3=p3: p3(*ptrs))
        ops = [fastcall.intake(x, f"a{i}") for i, x in enumerate(nd)]
        raw = fastcall.NumbaLaunch(empty3, 1, 32)
        raw(*ops)  # the first call compiles and packs
        add("fastcall.NumbaLaunch: empty3(3 Operands)", lambda: raw(*ops))
        rows[-1].mode = raw.mode
        for label, arr in (("torch", td[0]), ("cupy", cd[0]), ("numba", nd[0])):
            add(f"fastcall.intake({label})", lambda arr=arr: fastcall.intake(arr, "x"), "intake")
    add("numba cuda.as_cuda_array(torch)", lambda: cuda.as_cuda_array(td[0], sync=False), "intake")
    add("numba cuda.as_cuda_array(cupy)", lambda: cuda.as_cuda_array(cd[0], sync=False), "intake")
    return rows


# --- the dry run (simulator) -------------------------------------------------------------------


def dry_run(cases: list[tuple[str, str, tuple[int, ...], str]]) -> list[Row]:
    """Each Numba case at a simulator size, twice: answers checked, plans and modes printed."""
    from ladder.core import timing
    from ladder.core.dtypes import to_device, to_host
    from ladder.core.rung import get_problem, get_rung

    rows = []
    for name, rung_name, _, dtype in cases:
        problem = get_problem(name)
        rung = get_rung(name, rung_name)
        size = problem.simulator_sizes(dtype)[0]
        row = Row("rung", f"{name}/{rung_name}", "numba", "launch", name, rung_name, list(size))
        row.dtype = dtype
        reason = rung.unavailable_reason()
        if reason is not None:
            row.error = f"unavailable: {reason}"
            rows.append(row)
            continue
        inputs = problem.make_inputs(size, dtype, seed=0)
        ins = [to_device(x) for x in inputs]
        out = to_device(np.full(problem.output_shape(size), np.nan, inputs[0].dtype))
        for _ in range(2):
            rung.launch(*ins, out)
        row.rel_err = timing.relative_error(to_host(out), problem.reference(inputs))
        row.ok = row.rel_err <= problem.tolerance(dtype)
        module = sys.modules[rung.launch.__module__]
        row.mode = _plan_mode(module, (*ins, out), _names(name, len(ins) + 1))
        plans = getattr(module, "PLANS", None)
        if plans is not None:
            row.mode += f" ({len(plans)} plan(s), {plans.misses} built)"
        rows.append(row)
    return rows


# --- main --------------------------------------------------------------------------------------


def parse_case(text: str) -> tuple[str, str, tuple[int, ...], str]:
    """``problem/rung:AxBxC:dtype``, e.g. ``gemm/tuned:1024x1024x1024:float32``."""
    try:
        where, size, dtype = text.split(":")
        problem, rung = where.split("/")
        return problem, rung, tuple(int(v) for v in size.split("x")), dtype
    except ValueError as err:
        raise argparse.ArgumentTypeError(
            f"--case takes problem/rung:AxBxC:dtype, got {text!r}"
        ) from err


README_START, README_END = "<!-- calls:start -->", "<!-- calls:end -->"


def readme_block(doc: dict[str, Any], figure: str) -> str:
    """The README's call-cost section from a results file: the figure, then a table of every
    rung's launcher (host µs per call with each library's arrays, back-to-back and graph replay
    µs with PyTorch's, and the same launcher through Numba's dispatcher) and the libraries."""
    rows = doc["rows"]

    def find(label: str, dtype: str, size: list[int], inputs: str, path: str) -> dict | None:
        for r in rows:
            if (r["label"], r["dtype"], r["size"], r["inputs"], r["path"]) == (
                label, dtype, size, inputs, path
            ):  # fmt: skip
                return r
        return None

    def us(row: dict | None, key: str = "host_us_median") -> str:
        if row is None:
            return "–"
        if row.get("error"):
            return "failed" if "unavailable" not in row["error"] else "n/a"
        value = row.get(key)
        return f"{value:.1f}" if value is not None else "–"

    gpu, settings = doc["device"]["name"], doc["settings"]
    lines = [
        f"Measured on an {gpu} by `scripts/hosttime.py` (`results/{Path(figure).stem}.json`, "
        f"label `{doc['label']}`, commit {str(doc.get('commit'))[:12]}): host µs per call (the "
        f"GPU idle before each call, median of {settings['repeats']}), back-to-back µs per call "
        f"({settings['back_to_back']} calls in a row) and graph replay µs per call, the output "
        "given. Compare within this run: the host's speed varies from run to run.",
        "",
        f"![call costs]({figure})",
        "",
        "| rung | dtype | size | host µs: torch | cupy | numba | b2b µs | graph µs "
        "| host µs, Numba's dispatcher |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    seen = set()
    for r in rows:
        if r["kind"] not in ("rung", "library"):
            continue
        key = (r["label"], r["dtype"], tuple(r["size"]))
        if key in seen:
            continue
        seen.add(key)
        label, dtype, size = r["label"], r["dtype"], r["size"]
        size_text = "×".join(map(str, size))
        if r["kind"] == "library":
            lines.append(
                f"| {label} | {dtype} | {size_text} | {us(r)} | | | "
                f"{us(r, 'back_to_back_us')} | {us(r, 'graph_us')} | |"
            )
            continue
        torch_row = find(label, dtype, size, "torch", "launch")
        cells = [us(find(label, dtype, size, lib, "launch")) for lib in ("torch", "cupy", "numba")]
        lines.append(
            f"| {label} | {dtype} | {size_text} | {' | '.join(cells)} | "
            f"{us(torch_row, 'back_to_back_us')} | {us(torch_row, 'graph_us')} | "
            f"{us(find(label, dtype, size, 'torch', 'dispatcher'))} |"
        )
    bare = [r for r in rows if r["kind"] in ("bare launch", "intake")]
    if bare:
        lines += ["", "| bare launch or array read | host µs |", "|---|---:|"]
        lines += [f"| {r['label']} | {us(r)} |" for r in bare]
    return "\n".join(lines) + "\n"


def write_readme(doc: dict[str, Any], results: Path, readme: Path) -> None:
    """The call-cost figure beside ``results`` and the README's calls block from ``doc``."""
    import ladder  # noqa: F401 (before numba.cuda)
    from ladder.core.report import replace_block
    from ladder.transfer import plot

    figure = plot.call_costs(doc, results.with_suffix(".png"))
    replace_block(readme, README_START, README_END, readme_block(doc, figure.as_posix()))
    print(f"wrote {figure} and the {README_START} block of {readme}")


def print_rows(rows: list[Row]) -> None:
    def fmt(value: float | None) -> str:
        return f"{value:9.1f}" if value is not None else "        -"

    head = f"{'what':64s} {'inputs':6s} {'path':12s} {'host µs':>9s} {'b2b µs':>9s}"
    print(f"{head} {'graph µs':>9s}  mode / error")
    for row in rows:
        what = row.label if not row.dtype else f"{row.label} {row.dtype} {row.size}"
        tail = row.error or row.mode
        if row.ok is False:
            tail = f"WRONG (rel err {row.rel_err:.2e}) {tail}"
        print(
            f"{what[:64]:64s} {row.inputs:6s} {row.path:12s} {fmt(row.host_us_median)} "
            f"{fmt(row.back_to_back_us)} {fmt(row.graph_us)}  {tail}"
        )


def _git_commit() -> str | None:
    """HEAD, with ``+changes`` when the tree differs from it (a copy of a working tree whose
    ``.git`` is older than its files, as on the GPU machine, says so instead of passing for
    that commit)."""
    try:
        run = functools.partial(subprocess.run, capture_output=True, text=True, check=True)
        head = run(["git", "rev-parse", "HEAD"]).stdout.strip()
        changed = run(["git", "status", "--porcelain", "--untracked-files=no"]).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return f"{head}+changes" if changed else head


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="write the rows as JSON here")
    parser.add_argument("--label", default="", help="a name for this run in the JSON")
    parser.add_argument(
        "--commit", default="", help="the commit the tree is (default: git rev-parse HEAD here)"
    )
    parser.add_argument("--case", type=parse_case, action="append", help="problem/rung:AxB:dtype")
    parser.add_argument("--inputs", default=",".join(LIBRARIES), help="torch,cupy,numba")
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--back-to-back", type=int, default=200)
    parser.add_argument("--no-check", dest="check", action="store_false")
    parser.add_argument("--no-bare", dest="bare", action="store_false", help="skip empty kernels")
    parser.add_argument("--no-library", dest="library", action="store_false")
    parser.add_argument("--dry-run", action="store_true", help="simulator: plans, no timing")
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument(
        "--readme",
        type=Path,
        help="write the README's calls block and the figure from --from (no measuring)",
    )
    parser.add_argument("--from", dest="source", type=Path, help="a results file, for --readme")
    args = parser.parse_args(argv)
    if args.readme:
        if not args.source:
            parser.error("--readme needs --from RESULTS (a results file this script wrote)")
        write_readme(json.loads(args.source.read_text()), args.source, args.readme)
        return 0
    args.inputs = [s for s in args.inputs.split(",") if s]
    if args.repeats < 30:
        parser.error("--repeats must be at least 30")
    cases = args.case or CASES

    if args.dry_run:
        os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")
    import ladder  # first: chooses the GPU or the simulator before numba.cuda loads
    from ladder.core import device

    rows: list[Row] = []
    if args.dry_run:
        rows = dry_run([c for c in cases if c[0] in ("gemm", "softmax") and c[1] != "wgmma"])
    else:
        if not device.gpu_available():
            parser.error("no CUDA GPU here: run on the GPU machine, or use --dry-run")
        seen = set()
        for case in cases:
            rows += rung_rows(case, args)
            key = (case[0], case[2], case[3])
            if args.library and key not in seen:
                seen.add(key)
                rows += library_rows(case, args)
        if args.bare:
            rows += bare_rows(args)
    print(f"ladder from {Path(ladder.__file__).parent}; device: {device.facts().name}")
    print_rows(rows)
    if args.out:
        report = {
            "label": args.label,
            "ladder": str(Path(ladder.__file__).parent),
            "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "commit": args.commit or _git_commit(),
            "fastcall": _fastcall() is not None,
            "dry_run": args.dry_run,
            "device": device.facts().to_dict(),
            "versions": device.library_versions(),
            "settings": {
                "repeats": args.repeats,
                "warmup": args.warmup,
                "back_to_back": args.back_to_back,
                "inputs": args.inputs,
            },
            "rows": [asdict(r) for r in rows],
        }
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=1) + "\n")
        print(f"wrote {args.out}")
    failed = [r for r in rows if r.ok is False]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
