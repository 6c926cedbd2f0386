"""Bring your own kernel: a launcher in a file of your own, run as a rung of a problem.

``ladder run gemm --rung-file my_gemm.py`` (or ``load("my_gemm.py", "gemm")`` from Python)
imports the file from its path (no package needed) and makes a ``Rung`` of its launcher, which
the harness then checks against the float64 reference and times beside the problem's own rungs,
in the same table. The file defines

- ``launch(*inputs, out=None)``: the problem's inputs in its order (gemm: ``A, B``; conv:
  ``x, w``; softmax: ``x``; attention: ``q, k, v``), then the output, which the harness
  allocates and passes as the last positional argument; fill it in place (returning it is
  fine);
- optionally decorated with ``@rung(name=..., title=...)`` from ``ladder.core.rung``, for a
  name, a title, its dtypes and its ``needs``; a plain ``launch`` is named after the file and
  offered every dtype of the problem.

The rung is numbered 80 and up (after the ladder's rungs, before the library references) and
is not added to the registry, so it is measured only where it is passed.
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import sys
from pathlib import Path
from typing import Any

import numpy as np

from ladder.core.rung import Launcher, Problem, Rung, capture_rungs, get_problem, rungs

FIRST_NUMBER = 80  # user rungs are numbered 80, 81, ... in the order they are given


def load(path: str | Path, problem: str, number: int = FIRST_NUMBER) -> Rung:
    """The rung that the file at ``path`` defines for ``problem``; ValueError (or
    FileNotFoundError) naming the file when it has no usable ``launch``."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"rung file {path}: no such file")
    found = get_problem(problem)
    module, captured = _import(path)
    chosen = [c for c in captured if c[1] in (None, problem)]
    if chosen:
        launch, _, options = chosen[0]
    else:
        launch = getattr(module, "launch", None)
        if launch is None or not callable(launch):
            raise ValueError(
                f"rung file {path}: defines no function `launch` (and none decorated with "
                f"@rung); write `def launch({_params(found)}):`"
            )
        options = {"name": path.stem, "title": f"your kernel ({path.name})"}
        options["dtypes"] = found.dtypes
    _check_signature(path, launch, found)
    units = options.get("units")
    if units is None:
        units = "memory" if found.bound == "memory" else "fp32"
    return Rung(
        problem=problem,
        number=number,
        name=options["name"],
        title=options["title"],
        dtypes=tuple(options["dtypes"]),
        launch=_checked(path, launch, found),
        needs=frozenset(options.get("needs", ("numba",))),
        min_cc=options.get("min_cc"),
        max_cc=options.get("max_cc"),
        cc_needs=options.get("cc_needs", ""),
        doc=module.__doc__ or f"Your kernel, from {path}.",
        units=units,
        bytes_moved=options.get("bytes_moved"),
    )


def _import(path: Path) -> tuple[Any, list[tuple[Launcher, str | None, dict[str, Any]]]]:
    """Run the file as a module of its own (under a name unique to its path)."""
    digest = hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:10]
    name = f"ladder_user_rung_{path.stem}_{digest}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ValueError(f"rung file {path}: cannot be imported as Python (a .py file?)")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # the decorator and dataclasses look the module up by name
    try:
        with capture_rungs() as captured:
            spec.loader.exec_module(module)
    except Exception as err:
        del sys.modules[name]
        raise ValueError(
            f"rung file {path}: importing it raised {type(err).__name__}: {err}"
        ) from err
    return module, captured


def _input_count(problem: Problem) -> int:
    dtype = problem.dtypes[0]
    return len(problem.make_inputs(problem.simulator_sizes(dtype)[0], dtype, 0))


def _params(problem: Problem) -> str:
    """How the problem's rungs are called, from its first rung: ``A, B, C=None`` for gemm."""
    count = _input_count(problem) + 1
    for r in rungs(problem.name):
        try:
            names = list(inspect.signature(r.launch).parameters)[:count]
        except (TypeError, ValueError):
            continue
        if len(names) == count:
            return ", ".join([*names[:-1], f"{names[-1]}=None"])
    return ", ".join([*(f"in{i}" for i in range(count - 1)), "out=None"])


def _check_signature(path: Path, launch: Launcher, problem: Problem) -> None:
    """The harness calls ``launch(*inputs, out)``: refuse a launcher that cannot take it."""
    count = _input_count(problem) + 1
    try:
        signature = inspect.signature(launch)
    except (TypeError, ValueError):
        return  # a builtin or extension callable: nothing to inspect
    try:
        signature.bind(*range(count))
    except TypeError as err:
        raise ValueError(
            f"rung file {path}: launch{signature} cannot be called as the harness calls "
            f"{problem.name}'s rungs, launch({_params(problem)}) with the output last "
            f"({count} positional arguments): {err}"
        ) from None


def _checked(path: Path, launch: Launcher, problem: Problem) -> Launcher:
    """``launch``, with what it returns checked against the output the harness passed."""

    def run(*args: Any) -> Any:
        out = args[-1]
        result = launch(*args)
        if result is None or result is out:
            return out
        shape, dtype = tuple(getattr(result, "shape", ())), getattr(result, "dtype", None)
        if shape != tuple(out.shape) or np.dtype(dtype) != np.dtype(out.dtype):
            raise ValueError(
                f"{path.name}: launch returned shape {shape}, dtype {dtype}; {problem.name} "
                f"needs shape {tuple(out.shape)}, dtype {np.dtype(out.dtype)} (fill `out`)"
            )
        if _address(result) != _address(out):
            raise ValueError(
                f"{path.name}: launch returned a new array instead of filling `out`, the last "
                "argument the harness passes (the harness checks and times `out`)"
            )
        return out

    run.__name__ = run.__qualname__ = f"launch ({path.name})"
    run.__module__ = getattr(launch, "__module__", __name__)
    return run


def _address(array: Any) -> int | None:
    """Where an array's data starts (device or host), to tell `out` from a new array."""
    for key in ("__cuda_array_interface__", "__array_interface__"):
        found = getattr(array, key, None)
        if found is not None:
            return found["data"][0]
    return None
