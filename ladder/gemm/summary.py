"""The README's Hopper GEMM block, written from the results files and never by hand.

``python -m ladder.gemm.summary --readme README.md`` replaces what lies between ``START`` and
``END`` with ``markdown()``: from one ``ladder bench --problems gemm gemm-fp8 --dtypes float16
bfloat16 float8_e4m3fn float8_e5m2`` per GPU, each Hopper rung (16 to 20) against the rung
below and the best one against the fastest library row, then FP8 rung 21 against cuBLASLt's
two rows. Every ratio is within one run; the issue's targets (1.00x cuBLAS for FP16 and BF16,
0.9x cuBLASLt for FP8 at 8192³) are named beside them.
"""

from __future__ import annotations

import argparse
import itertools
from pathlib import Path
from typing import Any

from ladder.core import lab
from ladder.core.report import read_results, replace_block

START, END = "<!-- hopper-gemm:start -->", "<!-- hopper-gemm:end -->"
BENCHES = (  # lab files, read through the lab's index
    "lab/gemm/2026-11-27-bench-h100/nvidia-h100-80gb-hbm3-bench-gemm.json",
    "lab/gemm/2026-11-28-bench-h200/nvidia-h200-bench-gemm.json",
)
HOPPER = ("mma-sync", "tma", "wgmma-descriptors", "wgmma", "smem-epilogue", "persistent")
TARGET, FP8_TARGET = 1.0, 0.9  # the best rung over the fastest library (issue 32)


def _rows(doc: dict[str, Any], problem: str) -> dict[tuple[str, int], dict[str, dict]]:
    """{(dtype, size): {rung name: run}} of one problem's measured runs."""
    found: dict[tuple[str, int], dict[str, dict]] = {}
    for r in doc["runs"]:
        if r["problem"] == problem and r.get("median_ms"):
            found.setdefault((r["dtype"], r["shape"][0]), {})[r["rung"]] = r
    return found


def _fastest(rows: dict[str, dict]) -> dict[str, Any] | None:
    libraries = [r for r in rows.values() if r["reference"]]
    return min(libraries, key=lambda r: r["median_ms"]) if libraries else None


def markdown() -> str:
    docs = [read_results(lab.resolve(path)) for path in BENCHES]
    lines = [
        "Measured by `ladder bench --problems gemm gemm-fp8 --dtypes float16 bfloat16 "
        "float8_e4m3fn float8_e5m2`, once per GPU: "
        + "; ".join(
            f"**{doc['gpu']}** ({doc['date'][:10]}, `{path}`)"
            for doc, path in zip(docs, BENCHES, strict=True)
        )
        + ". Sizes are M = N = K. Each Hopper rung against the rung below, then the top rung "
        "against the fastest library row of the same run (the issue's target: "
        f"{TARGET:.2f}x):",
        "",
        "| GPU | dtype | size | " + " | ".join(HOPPER[1:]) + " | library ms | "
        "rung 20 ms | × library |",
        "|---|---|---|" + "---:|" * (len(HOPPER) + 2),
    ]
    for doc in docs:
        gpu = doc["gpu"].removeprefix("NVIDIA ")
        for (dtype, size), rows in sorted(_rows(doc, "gemm").items()):
            steps = []
            for below, name in itertools.pairwise(HOPPER):
                if name in rows and below in rows:
                    steps.append(f"{rows[below]['median_ms'] / rows[name]['median_ms']:.2f}x")
                else:
                    steps.append("—")
            library, top = _fastest(rows), rows["persistent"]
            lines.append(
                f"| {gpu} | {dtype} | {size}³ | " + " | ".join(steps) + f" | "
                f"{library['rung']} {library['median_ms']:.3f} | {top['median_ms']:.3f} | "
                f"{library['median_ms'] / top['median_ms']:.3f} |"
            )
    lines += [
        "",
        "(A step is the rung below's median over the rung's; mma-sync runs float16 only.) "
        "FP8, rung 21 against cuBLASLt (`torch._scaled_mm`, as PyTorch calls it and with "
        f"`use_fast_accum=True`; the target: {FP8_TARGET}x at 8192³); cuBLASLt does not "
        "multiply e5m2 by e5m2:",
        "",
        "| GPU | dtype | size | rung 21 ms | TFLOP/s | cuBLASLt ms | fast accum ms | × library |",
        "|---|---|---|---:|---:|---:|---:|---:|",
    ]
    for doc in docs:
        gpu = doc["gpu"].removeprefix("NVIDIA ")
        for (dtype, size), rows in sorted(_rows(doc, "gemm-fp8").items()):
            top, library = rows["fp8"], _fastest(rows)
            plain, fast = rows.get("torch-scaled-mm"), rows.get("torch-scaled-mm-fast")
            cells = [f"{r['median_ms']:.3f}" if r else "—" for r in (plain, fast)]
            ratio = f"{library['median_ms'] / top['median_ms']:.3f}" if library else "—"
            lines.append(
                f"| {gpu} | {dtype} | {size}³ | {top['median_ms']:.3f} | {top['tflops']:.0f} | "
                + " | ".join(cells)
                + f" | {ratio} |"
            )
    return "\n".join(lines) + "\n"


def write_readme(path: str | Path) -> None:
    """Replace the block between START and END of the README at ``path``."""
    replace_block(path, START, END, markdown())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ladder.gemm.summary", description=__doc__)
    parser.add_argument("--readme", help="write the block into this README")
    args = parser.parse_args(argv)
    if args.readme:
        write_readme(args.readme)
    else:
        print(markdown(), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
