"""The conditions a benchmark ran under: clocks and throttle reasons sampled during the run.

A GPU that throttles (power, temperature, a clock cap) runs slower than its datasheet, and a
results file that does not say so passes its slow figures off as the kernel's. ``Sampler``
asks ``nvidia-smi`` for the SM and memory clocks and the active throttle ("clocks event")
reasons every ``INTERVAL_S`` seconds on a background thread while a run lasts; ``summary``
gives their minimum, median and maximum and every reason seen, for the results file. Without
``nvidia-smi`` (the simulator, a machine without NVIDIA's tools) the summary says why instead.
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import threading
from typing import Any

INTERVAL_S = 2.0
QUERY = "clocks.sm,clocks.mem,clocks_event_reasons.active,temperature.gpu,power.draw"
# the bits of clocks_event_reasons.active (NVML's nvmlClocksEventReasons), by name
REASONS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}


def reasons(mask: int) -> list[str]:
    """The names of the throttle reasons set in ``mask`` (unknown bits by their value)."""
    found = [name for bit, name in REASONS.items() if mask & bit]
    rest = mask & ~sum(REASONS)
    return found + ([f"0x{rest:x}"] if rest else [])


def _number(text: str) -> float | None:
    try:
        return float(text.strip().split()[0])
    except (ValueError, IndexError):
        return None


def parse(line: str) -> dict[str, Any] | None:
    """One ``nvidia-smi --query-gpu=QUERY --format=csv,noheader,nounits`` line, or None."""
    parts = [p.strip() for p in line.split(",")]
    if len(parts) != 5:
        return None
    try:
        mask = int(parts[2], 16) if parts[2].lower().startswith("0x") else int(parts[2])
    except ValueError:
        mask = 0
    return {
        "sm_mhz": _number(parts[0]),
        "mem_mhz": _number(parts[1]),
        "reasons": mask,
        "temperature_c": _number(parts[3]),
        "power_w": _number(parts[4]),
    }


def _spread(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def summary(samples: list[dict[str, Any]], note: str | None = None) -> dict[str, Any]:
    """What a results file records of the samples: the spread of each figure and the throttle
    reasons seen (``gpu_idle`` left out: between kernels an idle GPU is no throttle)."""
    seen = 0
    for s in samples:
        seen |= s["reasons"]
    found: dict[str, Any] = {"samples": len(samples)}
    for key in ("sm_mhz", "mem_mhz", "temperature_c", "power_w"):
        found[key] = _spread([s[key] for s in samples if s[key] is not None])
    found["throttle_reasons"] = [r for r in reasons(seen) if r != "gpu_idle"]
    if note:
        found["note"] = note
    return found


class Sampler:
    """``with Sampler() as sampler: ...`` then ``sampler.summary()``: the conditions during
    the block, sampled on a background thread."""

    def __init__(self, interval_s: float = INTERVAL_S, device_index: int = 0) -> None:
        self.interval_s = interval_s
        self.device_index = device_index
        self.samples: list[dict[str, Any]] = []
        self.note: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._smi = shutil.which("nvidia-smi")

    def sample(self) -> None:
        if self._smi is None:
            self.note = "nvidia-smi not found: no clocks or throttle reasons recorded"
            return
        try:
            text = subprocess.run(
                [self._smi, f"--id={self.device_index}", f"--query-gpu={QUERY}",
                 "--format=csv,noheader,nounits"],
                capture_output=True, text=True, timeout=10, check=True,
            ).stdout  # fmt: skip
        except (OSError, subprocess.SubprocessError) as err:
            self.note = f"nvidia-smi failed: {type(err).__name__}: {err}"[:200]
            return
        found = parse(text.strip().splitlines()[0]) if text.strip() else None
        if found is not None:
            self.samples.append(found)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample()

    def __enter__(self) -> Sampler:
        self.sample()
        self._thread = threading.Thread(target=self._run, name="conditions", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.sample()

    def summary(self) -> dict[str, Any]:
        return summary(self.samples, self.note)
