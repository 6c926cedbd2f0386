"""Tuning: time one rung's kernel at several configurations, each with the harness's recipe.

A tuned rung keeps its search space (the candidate configurations) and a launcher that takes a
configuration first, ``launch_config(config, *arrays)``; ``sweep`` measures every candidate
on one case with ``timing.measure`` (checked output, flushed L2, CUDA events, median of
repeats) as a copy of the registered rung, so it inherits the rung's problem, number, needs
and units. Times mean something only on a GPU; in the simulator a sweep only shows that every
candidate is right.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterable
from typing import Any

from ladder.core import timing
from ladder.core.rung import Rung


def as_record(config: Any) -> Any:
    """A configuration as JSON: a dataclass's fields (``Config(**record)`` rebuilds it), a
    tuple as a list, anything else as it is."""
    if dataclasses.is_dataclass(config):
        return dataclasses.asdict(config)
    if isinstance(config, tuple):
        return list(config)
    return config


def sweep(
    rung: Rung,
    case: timing.Case,
    configs: Iterable[Any],
    launch_config: Callable[..., Any],
) -> list[dict[str, Any]]:
    """Time ``launch_config(config, *inputs, out)`` for every config on ``case``; fastest first,
    failed candidates last.

    Each entry (JSON-ready): ``config`` (``as_record``), ``ok``, ``median_ms``, ``tflops`` and
    ``error``. Each candidate compiles on its first run, which is not timed.
    """
    results = []
    for i, config in enumerate(configs):
        candidate = dataclasses.replace(
            rung,
            name=f"{rung.name}-candidate-{i}",
            title=str(config),
            launch=functools.partial(launch_config, config),
        )
        measured = timing.measure(case, candidate)
        results.append(
            {
                "config": as_record(config),
                "ok": measured.ok,
                "median_ms": measured.median_ms,
                "tflops": measured.tflops,
                "error": measured.error,
            }
        )
    return sorted(results, key=lambda r: (not r["ok"], r["median_ms"] or float("inf")))
