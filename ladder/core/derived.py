"""The figures derived from run records, for every renderer alike.

Run records are ``Measurement.to_dict()`` or a results file's ``runs``. From them this module
derives the groups (problem, dtype, shape), each row's % of a ceiling, speedup over the rung
below and ratio to the library, the best rung of each group, and whether a group is
memory-bound. ``report`` draws these figures as terminal tables, the README's Markdown and
matplotlib plots; it computes none of them itself, so every view of a results file agrees.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ladder.core import roofline
from ladder.core.rung import Problem, get_problem, rungs
from ladder.core.timing import Status, run_status


def passed(run: dict[str, Any]) -> bool:
    """True when the run's answer was right before and after timing."""
    return run_status(run) is Status.OK


def _registered(name: str) -> Problem | None:
    try:
        return get_problem(name)
    except KeyError:  # a results file may hold runs of a problem no longer registered
        return None


def number(run: dict[str, Any], numbers: dict[tuple[str, str], int] | None = None) -> int:
    """A run's rung number as the registry numbers it now (a rung's identity is its problem
    and name; its number is display order, which an inserted rung changes), or the number
    written with the run for a rung no longer registered. ``numbers``: ``_numbers()``, where
    a caller looks up many runs."""
    found = (numbers or _numbers()).get((run["problem"], run["rung"]))
    return found if found is not None else run.get("number", 99)


def _numbers() -> dict[tuple[str, str], int]:
    return {(r.problem, r.name): r.number for r in rungs()}


def is_memory(group: list[dict[str, Any]]) -> bool:
    """True when the group's problem is memory-bound (its figure is TB/s, against the copy
    bandwidth): the registered problem's ``bound``; for a problem no longer registered, a
    group that counts no FLOPs."""
    problem = _registered(group[0]["problem"])
    if problem is not None:
        return problem.bound == "memory"
    return not any(r.get("flops") for r in group)


def groups(runs: list[dict[str, Any]]) -> dict[tuple[str, str, tuple[int, ...]], list[dict]]:
    """Runs grouped by (problem, dtype, shape), each group in ladder order, references last."""
    found: dict[tuple[str, str, tuple[int, ...]], list[dict]] = {}
    for run in runs:
        found.setdefault((run["problem"], run["dtype"], tuple(run["shape"])), []).append(run)
    numbers = _numbers()
    for group in found.values():
        group.sort(key=lambda r: (r["reference"], number(r, numbers)))
    return found


def library(group: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The library run a group's rungs are compared with: the fastest of its references that
    passed (each library in its best configuration measured in the same run), or None. Peers
    (Triton kernels written here) are not libraries: see ``peer``."""
    timed = [
        r
        for r in group
        if r["reference"] and not r.get("peer") and passed(r) and r.get("median_ms")
    ]
    return min(timed, key=lambda r: r["median_ms"]) if timed else None


def peer(group: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The fastest peer (a Triton kernel) of a group that passed, or None."""
    timed = [r for r in group if r.get("peer") and passed(r) and r.get("median_ms")]
    return min(timed, key=lambda r: r["median_ms"]) if timed else None


def label(run: dict[str, Any]) -> str:
    """A library or peer row's name with the configuration it ran in, where it recorded one:
    'cudnn-channels-last (cuDNN fp16 channels_last)'."""
    return run["rung"] + (f" ({run['config']})" if run.get("config") else "")


def contenders(group: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Everything a user could run for one case, fastest first: the best rung, every library
    configuration and every peer that passed, each as {label, kind ('rung', 'library' or
    'peer'), rung, config, median_ms, x_best} where x_best is the fastest one's speed over this
    one's (1 for the fastest). Empty when no row passed or the group was simulated."""
    if simulated(group):
        return []
    timed = [r for r in group if passed(r) and r.get("median_ms")]
    climbed = [r for r in timed if not r["reference"]]
    picked = [min(climbed, key=lambda r: r["median_ms"])] if climbed else []
    picked += [r for r in timed if r["reference"]]
    if not picked:
        return []
    fastest = min(r["median_ms"] for r in picked)
    out = []
    for r in sorted(picked, key=lambda r: r["median_ms"]):
        kind = "peer" if r.get("peer") else "library" if r["reference"] else "rung"
        out.append(
            {
                "label": f"rung {number(r)} {r['rung']}" if kind == "rung" else label(r),
                "kind": kind,
                "rung": r["rung"],
                "config": r.get("config"),
                "median_ms": r["median_ms"],
                "x_best": r["median_ms"] / fastest,
            }
        )
    return out


def ceiling(group: list[dict[str, Any]], ceilings: dict[str, Any] | None) -> tuple[str, Any]:
    """The ceiling a group is drawn against, (its name, its value or None): the copy bandwidth
    for memory-bound groups, else the FP32 peak for float32 and cuBLAS HGEMM for the
    tensor-core dtypes."""
    ceilings = ceilings or {}
    if is_memory(group):
        return "device copy", ceilings.get("copy_tbps")
    if group[0]["dtype"] == "float32":
        return "FP32 peak (clock)", ceilings.get("fp32_peak_tflops")
    return "cuBLAS FP16 at 8192³", ceilings.get("cublas_fp16_tflops")


def simulated(group: list[dict[str, Any]]) -> bool:
    """True when the group's GPU rungs ran in the CUDA simulator: their times are CPU times, so
    no figure made from a time (throughput, % of a ceiling, ratios) means anything."""
    return any(r.get("simulated") for r in group)


def rows(group: list[dict[str, Any]], ceilings: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Derived columns for one group: % of peak, speedup over the rung below, x library (all
    None for a simulated group)."""
    if simulated(group):
        return [dict(run, pct_peak=None, speedup=None, vs_reference=None) for run in group]
    reference = library(group)
    memory = is_memory(group)
    # % of the FP32 peak only means something for FP32 arithmetic; the tensor-core dtypes are
    # placed by their ratio to the library instead
    fp32 = all(r["dtype"] == "float32" for r in group)
    peak = ceiling(group, ceilings)[1] if (memory or fp32) else None
    out = []
    below = None
    for run in group:
        ms = run.get("median_ms") if passed(run) else None
        row = dict(run)
        figure = run.get("tbps") if memory else run.get("tflops")
        row["pct_peak"] = roofline.percent_of(figure, peak) if ms else None
        row["speedup"] = below / ms if (ms and below and not run["reference"]) else None
        row["vs_reference"] = reference["median_ms"] / ms if (ms and reference) else None
        if ms and not run["reference"]:
            below = ms
        out.append(row)
    return out


def moved_gb(row: dict[str, Any]) -> float | None:
    """The GB a run reads and writes (its declared bytes moved, else the problem's fewest)."""
    moved = row.get("bytes_moved") or row.get("min_bytes")
    return moved / 1e9 if moved else None


def best_rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per (problem, dtype, shape): the fastest rung that passed, and the library it is
    compared with in the same run (the group's fastest reference that passed), and the fastest
    peer (a Triton kernel) where one ran."""
    found = []
    for (problem, dtype, shape), group in groups(doc["runs"]).items():
        climbed = [r for r in group if passed(r) and r.get("median_ms") and not r["reference"]]
        lib, fellow = library(group), peer(group)
        if not climbed:
            continue
        best = min(climbed, key=lambda r: r["median_ms"])
        found.append(
            {
                "problem": problem,
                "dtype": dtype,
                "shape": shape,
                "rung": best["rung"],
                "number": number(best),
                "median_ms": best["median_ms"],
                "library": label(lib) if lib else None,
                "library_ms": lib["median_ms"] if lib else None,
                "vs_library": lib["median_ms"] / best["median_ms"] if lib else None,
                "peer": fellow["rung"] if fellow else None,
                "peer_ms": fellow["median_ms"] if fellow else None,
                "vs_peer": fellow["median_ms"] / best["median_ms"] if fellow else None,
            }
        )
    return found


def problem_summary(problem: str, runs: list[dict[str, Any]], ceilings: dict[str, Any]) -> str:
    """A problem's own summary of its runs (``Problem.readme_summary``); empty for a problem no
    longer registered."""
    found = _registered(problem)
    return found.readme_summary(runs, ceilings) if found is not None else ""


def verdict(rung: dict[str, Any], library: dict[str, Any]) -> str:
    """ "ahead", "behind" or "parity" of two runs measured together: ahead only if the rung's
    90th-percentile time beat the library's 10th-percentile time, behind only the reverse; a
    lone slow repeat (a clock step, a context switch) widens neither band (with fewer than 10
    samples: min and max)."""
    lo, hi = _band(rung)
    lib_lo, lib_hi = _band(library)
    if hi < lib_lo:
        return "ahead"
    if lo > lib_hi:
        return "behind"
    return "parity"


def _band(run: dict[str, Any]) -> tuple[float, float]:
    samples = run.get("samples_ms") or []
    if len(samples) >= 10:
        lo, hi = np.percentile(samples, [10, 90])
        return float(lo), float(hi)
    return run.get("min_ms") or run["median_ms"], run.get("max_ms") or run["median_ms"]
