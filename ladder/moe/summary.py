"""The README's mixture-of-experts block, written from the results files and never by hand.

``python -m ladder.moe.summary --readme README.md`` replaces what lies between ``START`` and
``END`` with ``markdown()``: from the benchmark file, the layer's tensor-core rungs against
PyTorch's loop and ``torch._grouped_mm`` (with the targets), and the grouped GEMM alone against
``torch._grouped_mm``; from the wide-gather files, rung 6 against rung 5 in one run; from the
split file, the GEMMs' and the gather's shares of the layer. Every ratio is within one run.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ladder.core import lab
from ladder.core.report import read_results, replace_block

START, END = "<!-- moe:start -->", "<!-- moe:end -->"
# lab files, read through the lab's index
BENCH = "lab/moe/2026-11-26-bench/nvidia-h100-80gb-hbm3-moe.json"
SPLIT = "lab/moe/2026-11-26-split/nvidia-h100-80gb-hbm3-moe-split.json"
WIDE = tuple(
    f"lab/moe/2026-11-26-wide-gather/nvidia-h100-80gb-hbm3-moe-wide-gather-{k}.json"
    for k in ("top2", "top8")
)
TARGETS = {"moe-top2": 1.5, "moe-top8": 3.0}  # the layer over PyTorch's loop (issue 31)
GROUPED_TARGET = 0.9  # the grouped GEMM over torch._grouped_mm


def _medians(doc: dict[str, Any]) -> dict[tuple[str, str, tuple[int, ...], str], float]:
    return {
        (r["problem"], r["dtype"], tuple(r["shape"]), r["rung"]): r["median_ms"]
        for r in doc["runs"]
        if r.get("median_ms")
    }


def _shape(shape: tuple[int, ...]) -> str:
    return " × ".join(map(str, shape))


def markdown() -> str:
    import json

    bench = read_results(lab.resolve(BENCH))
    ms = _medians(bench)
    lines = [
        f"Measured on **{bench['gpu']}** ({bench['date'][:10]}) by `ladder bench --problems "
        "moe-top2 moe-top8` (float16; rung 6 came later), `ladder bench --problems moe-top2 "
        "moe-top8 --dtypes bfloat16 --merge`, and `ladder bench --problems grouped-gemm --dtypes "
        f"float16 bfloat16 --merge` (`{BENCH}`). Sizes are T × d × f × E × hot (hot: "
        "the percent of tokens sent to expert 0, for grouped-gemm of rows; 0 routes uniformly). "
        "The layer, the tensor-core rungs against PyTorch in the same run (the ratios are the "
        "faster rung's):",
        "",
        "| problem | dtype | size | rung 5 ms | rung 6 ms | PyTorch loop ms | × loop (target) | "
        "torch._grouped_mm ms | × grouped_mm |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for (problem, dtype, shape, rung), t in ms.items():
        if rung != "wgmma-grouped" or problem not in TARGETS:
            continue
        wide = ms.get((problem, dtype, shape, "wide-gather"))
        best = min(t, wide or t)
        loop = ms[(problem, dtype, shape, "torch-loop")]
        grouped = ms[(problem, dtype, shape, "torch-grouped-mm")]
        target = TARGETS[problem]
        verdict = "met" if loop / best >= target else "missed"
        lines.append(
            f"| {problem} | {dtype} | {_shape(shape)} | {t:.3f} | "
            f"{f'{wide:.3f}' if wide else '—'} | {loop:.3f} | {loop / best:.2f} "
            f"({target}: {verdict}) | {grouped:.3f} | {grouped / best:.2f} |"
        )
    lines += [
        "",
        "The expert GEMM alone (`grouped-gemm`, M × K × N × E × hot, the first GEMM of each "
        "layer), rung 5's kernel against `torch._grouped_mm`, same run:",
        "",
        "| dtype | size | rung 5 ms | torch._grouped_mm ms | × grouped_mm (target "
        f"{GROUPED_TARGET}) |",
        "|---|---|---:|---:|---:|",
    ]
    for (problem, dtype, shape, rung), t in ms.items():
        if problem != "grouped-gemm" or rung != "wgmma-grouped":
            continue
        grouped = ms.get((problem, dtype, shape, "torch-grouped-mm"))
        if grouped:
            verdict = "met" if grouped / t >= GROUPED_TARGET else "missed"
            lines.append(
                f"| {dtype} | {_shape(shape)} | {t:.3f} | {grouped:.3f} | "
                f"{grouped / t:.2f} ({verdict}) |"
            )
    failed = [
        f"{r['dtype']} {_shape(r['shape'])}"
        for r in bench["runs"]
        if r["problem"] == "grouped-gemm" and r["rung"] == "wgmma-grouped" and not r["ok"]
    ]
    if failed:
        lines += ["", f"Not measured (the run failed its check): {', '.join(failed)}."]
    lines += [
        "",
        "Rung 6 (the gather in 8-byte words) against rung 5, measured together (`ladder run`, "
        + ", ".join(f"`{w}`" for w in WIDE)
        + "):",
        "",
        "| problem | size | rung 5 ms | rung 6 ms | rung 6 × rung 5 | PyTorch loop ms | "
        "rung 6 × loop |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for name in WIDE:
        wide = _medians(read_results(lab.resolve(name)))
        for (problem, dtype, shape, rung), t in wide.items():
            if rung != "wide-gather":
                continue
            five = wide[(problem, dtype, shape, "wgmma-grouped")]
            loop = wide[(problem, dtype, shape, "torch-loop")]
            lines.append(
                f"| {problem} | {_shape(shape)} | {five:.3f} | {t:.3f} | {five / t:.2f} | "
                f"{loop:.3f} | {loop / t:.2f} |"
            )
    split = json.loads(lab.resolve(SPLIT).read_text())
    lines += ["", f"Where rung 5's time goes (`{SPLIT}`, each stage timed alone):", ""]
    for c in split["cases"]:
        s = c["stages_ms"]
        gemms = (s["first GEMM"] + s["second GEMM"]) / c["layer_ms"]
        lines.append(
            f"- {c['problem']} {_shape(tuple(c['shape']))}: layer {c['layer_ms']:.3f} ms; the "
            f"two GEMMs {gemms:.0%}, the gather {s['gather'] / c['layer_ms']:.0%} (rung 6's "
            f"gather {s['gather (rung 6)']:.3f} ms against {s['gather']:.3f}), routing "
            f"{s['routing']:.3f} ms, combine {s['combine']:.3f} ms; rows per expert "
            f"{min(c['rows_per_expert'])} to {max(c['rows_per_expert'])}."
        )
    return "\n".join(lines) + "\n"


def write_readme(path: str | Path) -> None:
    """Replace the block between START and END of the README at ``path``."""
    replace_block(path, START, END, markdown())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ladder.moe.summary", description=__doc__)
    parser.add_argument("--readme", required=True, help="the README to update")
    write_readme(parser.parse_args(argv).readme)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
