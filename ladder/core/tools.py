"""Nsight Compute and compute-sanitizer around the rungs: ``ladder profile``, ``ladder sanitize``.

Both run the rung in a child process (``python -m ladder _child ...``) under the NVIDIA tool:

- ``profile``: ``ncu --clock-control none --profile-from-start off``; the child compiles and
  warms the rung up, then brackets one launch with ``cudaProfilerStart``/``Stop``, so only that
  launch's kernels are profiled (as the GPU's clocks are, not locked to base). The table holds
  the figures that say why a rung is fast or slow: duration, DRAM and SM throughput (% of
  peak), achieved occupancy, L2 hit rate and shared-memory bank conflicts, and the speedup over
  the rung below, profiled the same way.
- ``sanitize``: ``compute-sanitizer`` memcheck (out-of-bounds and misaligned accesses) and
  racecheck (shared-memory hazards) over every rung at small odd sizes, one child per tool; the
  child prints a marker before each rung, so every report is charged to the rung that ran.
  Each child ends with two planted bugs (a write one element past the end of an array, and a
  shared-memory race); the command fails unless the tool reports them, so "zero errors" is
  never the silence of a tool that was not looking.
"""

from __future__ import annotations

import csv
import io
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ladder.core.rung import Rung, get_problem, get_rung, rungs

NCU_METRICS = {
    "duration_us": "gpu__time_duration.sum",
    "dram_pct": "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "sm_pct": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "occupancy_pct": "sm__warps_active.avg.pct_of_peak_sustained_active",
    "l2_hit_pct": "lts__t_sector_hit_rate.pct",
    "bank_conflicts_ld": "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "bank_conflicts_st": "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
    # how busy the schedulers are, and what share of the warp instructions are mma.sync (HMMA):
    # a tensor-core kernel whose HMMA share is small is bound by its other instructions
    "issue_pct": "sm__inst_issued.avg.pct_of_peak_sustained_active",
    "warp_instructions": "sm__inst_executed.sum",
    "hmma_instructions": "sm__inst_executed_pipe_tensor_op_hmma.sum",
}
MARK = "@@ladder"
PLANTED = {
    "planted-oob": "memcheck",
    "planted-race": "racecheck",
}  # bug -> the tool that must see it


def _tool_dirs() -> list[Path]:
    """Where the NVIDIA tools live when they are not on PATH."""
    bases = [os.environ.get("CUDA_PATH"), os.environ.get("CUDA_HOME"), "/usr/local/cuda"]
    dirs = [Path(b) / "bin" for b in bases if b]
    return dirs + sorted(Path("/opt/nvidia").glob("nsight-compute/*"), reverse=True)


def find_tool(name: str) -> str:
    """The path of an NVIDIA command-line tool, or a clear error saying how to get it."""
    found = shutil.which(name)
    for folder in _tool_dirs():
        if found is None and (folder / name).is_file():
            found = str(folder / name)
    if found is None:
        package = "Nsight Compute" if name == "ncu" else "the CUDA toolkit"
        raise FileNotFoundError(
            f"{name} was not found on PATH or in $CUDA_PATH/bin or /usr/local/cuda/bin: it comes "
            f"with {package} (https://developer.nvidia.com/cuda-toolkit); install it or add its "
            f"folder to PATH"
        )
    return found


def _child_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "ladder", "_child", *args]


# ---- profile -------------------------------------------------------------------------------


@dataclass
class KernelProfile:
    kernel: str
    values: dict[str, float | None] = field(default_factory=dict)


@dataclass
class RungProfile:
    problem: str
    rung: str
    number: int
    dtype: str
    shape: list[int]
    kernels: list[KernelProfile]
    error: str | None = None

    @property
    def duration_us(self) -> float | None:
        times = [k.values.get("duration_us") for k in self.kernels]
        return sum(t for t in times if t) if times and all(times) else None

    def main_kernel(self) -> KernelProfile | None:
        """The longest kernel of the launch (the one the figures are about)."""
        timed = [k for k in self.kernels if k.values.get("duration_us")]
        return max(timed, key=lambda k: k.values["duration_us"]) if timed else None

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["duration_us"] = self.duration_us
        return out


def _number(text: str) -> float | None:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def parse_ncu_csv(text: str, extra: Sequence[str] = ()) -> list[KernelProfile]:
    """Kernels and metrics from ``ncu --csv --page raw`` output (units row skipped): the
    ``NCU_METRICS`` under their short keys, each of ``extra`` under its own name."""
    lines = [line for line in text.splitlines() if line.startswith('"')]
    if not lines:
        return []
    rows = list(csv.reader(io.StringIO("\n".join(lines))))
    header, body = rows[0], rows[1:]
    if body and body[0] and body[0][0] == "":  # the units row
        units, body = body[0], body[1:]
    else:
        units = [""] * len(header)
    kernels = []
    for row in body:
        record = dict(zip(header, row, strict=False))
        values: dict[str, float | None] = {}
        for key, metric in (NCU_METRICS | {name: name for name in extra}).items():
            value = _number(record.get(metric, ""))
            unit = units[header.index(metric)] if metric in header else ""
            if key == "duration_us" and value is not None:
                per_us = {"ns": 1e3, "nsecond": 1e3, "us": 1.0, "usecond": 1.0, "ms": 1e-3}
                value = value / per_us.get(unit, 1e3)
            values[key] = value
        kernels.append(KernelProfile(record.get("Kernel Name", "?"), values))
    return kernels


def profile_rung(
    rung: Rung, size: tuple[int, ...], dtype: str, extra: Sequence[str] = ()
) -> RungProfile:
    """One launch of ``rung`` under Nsight Compute, with the metrics ``extra`` (full ncu
    names, as ``ncu --query-metrics`` lists them with a suffix such as ``.sum``) besides
    ``NCU_METRICS``."""
    ncu = find_tool("ncu")
    shape = "x".join(map(str, size))
    command = [
        ncu, "--clock-control", "none", "--profile-from-start", "off", "--csv", "--page", "raw",
        "--metrics", ",".join([*NCU_METRICS.values(), *extra]),
        *_child_command("profile", rung.problem, rung.name, shape, dtype),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True)
    result = RungProfile(rung.problem, rung.name, rung.number, dtype, list(size), [])
    result.kernels = parse_ncu_csv(done.stdout, extra)
    if done.returncode != 0 or not result.kernels:
        tail = (done.stderr or done.stdout).strip().splitlines()[-5:]
        result.error = f"ncu exited {done.returncode}: " + " | ".join(tail)
    return result


def rung_below(rung: Rung, dtype: str) -> Rung | None:
    """The previous rung of the same problem that runs on the GPU and takes ``dtype``."""
    lower = [
        r
        for r in rungs(rung.problem, references=False)
        if r.number < rung.number and dtype in r.dtypes and not r.on_cpu
    ]
    return lower[-1] if lower else None


# ---- sanitize ------------------------------------------------------------------------------


@dataclass
class SanitizeResult:
    problem: str
    rung: str
    number: int
    dtype: str
    tool: str
    errors: int
    checked: bool  # the rung ran to the end and its answers were right
    messages: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# a report line: memcheck "Invalid __global__ write ...", racecheck "Error: Race reported ..."
# or "ERROR: Potential WAW hazard detected ..."; the final summaries are not reports
_REPORT = re.compile(r"^========= (?!.*SUMMARY)(Invalid|Error|ERROR|Race|Warning|WARN|.*hazard)")


def parse_sanitizer(text: str, tool: str) -> list[SanitizeResult]:
    """Charge each sanitizer report to the rung whose marker precedes it."""
    results: list[SanitizeResult] = []
    current: SanitizeResult | None = None
    for line in text.splitlines():
        if line.startswith(MARK + " start "):
            problem, name, number, dtype = line.split()[2:6]
            current = SanitizeResult(problem, name, int(number), dtype, tool, 0, False)
            results.append(current)
        elif line.startswith(MARK + " ok") and current is not None:
            current.checked = True
        elif current is not None and _REPORT.match(line):
            current.errors += 1
            if len(current.messages) < 5:
                current.messages.append(line.removeprefix("========= ").strip())
    return results


def sanitize(
    problem: str, tools: list[str], names: list[str] | None = None
) -> list[SanitizeResult]:
    """Every GPU rung of ``problem`` (or the rungs ``names``) at small odd sizes under each
    compute-sanitizer tool."""
    exe = find_tool("compute-sanitizer")
    results = []
    for tool in tools:
        # --report-api-errors no: the libraries probe the driver with calls that may fail
        # (cuGetProcAddress for entry points this driver lacks); those are not rung errors
        command = [
            exe, "--tool", tool, "--print-limit", "1000", "--error-exitcode", "0",
            "--report-api-errors", "no", *_child_command("sanitize", problem, *(names or [])),
        ]  # fmt: skip
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        done = subprocess.run(command, capture_output=True, text=True, env=env)
        found = parse_sanitizer(done.stdout + "\n" + done.stderr, tool)
        if not found:
            raise RuntimeError(f"compute-sanitizer {tool} ran no rung: {done.stderr[-2000:]}")
        results += found
    return results


# ---- the child process ---------------------------------------------------------------------


def _run_planted_bugs() -> None:
    """Two kernels with known bugs, which the sanitizer must report (see the module doc)."""
    import numpy as np
    from numba import cuda, float32

    @cuda.jit
    def planted_oob(out):
        out[cuda.threadIdx.x] = 1.0  # 32 threads, 31 elements: the last write is out of bounds

    @cuda.jit
    def planted_race(out):
        cells = cuda.shared.array(64, float32)
        t = cuda.threadIdx.x
        cells[t] = float32(t)
        out[t] = cells[63 - t]  # no barrier: reads what another warp may not have written yet

    for name, kernel, threads, size in (
        ("planted-race", planted_race, 64, 64),
        ("planted-oob", planted_oob, 32, 31),  # last: under memcheck it ends the context
    ):
        print(f"{MARK} start planted {name} 0 float32", flush=True)
        kernel[1, threads](cuda.to_device(np.zeros(size, np.float32)))
        cuda.synchronize()
        print(f"{MARK} ok", flush=True)


def child(argv: list[str]) -> int:
    """What ``python -m ladder _child`` runs under ncu or compute-sanitizer."""
    from numba import cuda

    from ladder.core import timing

    what = argv[0]
    if what == "profile":
        problem_name, name, shape, dtype = argv[1:5]
        rung = get_rung(problem_name, name)
        case = timing.prepare(get_problem(problem_name), tuple(map(int, shape.split("x"))), dtype)
        args = case.device_inputs()
        out = timing.new_output(case, rung)  # the problem's output dtype (FP8 GEMM: bfloat16)
        rung.launch(*args, out)  # compiles and warms up, outside the profiled region
        cuda.synchronize()
        cuda.profile_start()
        with timing.nvtx_range(f"{problem_name}/{name}"):
            rung.launch(*args, out)
        cuda.synchronize()
        cuda.profile_stop()
        return 0
    if what == "sanitize":
        problem = get_problem(argv[1])
        chosen = [get_rung(problem.name, name) for name in argv[2:]]
        for rung in chosen or rungs(problem.name, references=False):
            if rung.on_cpu or rung.unavailable_reason() is not None:
                continue
            for dtype in rung.dtypes:
                print(f"{MARK} start {problem.name} {rung.name} {rung.number} {dtype}", flush=True)
                ok = True
                for i, size in enumerate(problem.sanitize_sizes()):
                    case = timing.prepare(problem, size, dtype, seed=i)
                    result = timing.measure(case, rung, repeats=1, warmup=0)
                    ok = ok and result.ok
                    if not result.ok:
                        print(f"{MARK} failed {result.error}", flush=True)
                cuda.synchronize()
                print(f"{MARK} {'ok' if ok else 'wrong'}", flush=True)
        _run_planted_bugs()  # last: under memcheck the out-of-bounds write ends the context
        return 0
    raise ValueError(f"unknown child task {what!r}")
