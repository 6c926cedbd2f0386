"""Where a mixture-of-experts layer's time goes: rung 5's stages timed one at a time, and the
load per expert.

``split(problem, size)`` runs the tensor-core rung's layer on the GPU and times each of its
launches alone with the harness's ``timing.time_ms`` (CUDA events, L2 flushed, medians): routing
(top-k, count, scan, permute), the gather of x's rows, the first grouped GEMM (with SiLU), the
second (gate and scatter), and the combine; and the whole layer. Rung 6's gather (8-byte words)
is timed beside rung 5's, as "gather (rung 6)", outside the stacked stages. It reports the rows
each expert received (no token is dropped: every (token, expert) pair is computed).
``python -m ladder.moe.split --out FILE`` measures the benchmark sizes of both layers into a
results file; ``plot_split`` draws one.
"""

from __future__ import annotations

import argparse
import datetime
from pathlib import Path
from typing import Any

import numpy as np

from ladder.core import device, report, timing
from ladder.core.dtypes import to_device
from ladder.core.rung import get_problem, get_rung
from ladder.moe.common import ELEMENTWISE, gather_rows, grid_for
from ladder.moe.problem import stream_of
from ladder.moe.r04_fused_gather_scatter import combine_slots

STAGES = ("routing", "gather", "first GEMM", "second GEMM", "combine")  # rung 5's layer


def split(problem_name: str, size: tuple[int, ...], dtype: str = "float16") -> dict[str, Any]:
    """Rung 5's layer on ``size``, each stage timed alone, the whole layer, and the load per
    expert (a GPU with sm_90a only)."""
    from ladder.core.fastcall import intake, numba_array
    from ladder.moe import r05_wgmma_grouped as r05
    from ladder.moe import r06_wide_gather as r06

    problem = get_problem(problem_name)
    k = problem.k
    launch = get_rung(problem_name, "wgmma-grouped").launch  # its registration's launcher
    x, logits, w1, w2 = (to_device(a) for a in problem.make_inputs(size, dtype, seed=0))
    out = to_device(np.empty(problem.output_shape(size), np.float16))
    launch(x, logits, w1, w2, out)  # builds the plan
    xs, lg, w1s, w2s = (intake(a, n) for a, n in zip((x, logits, w1, w2), "xlab", strict=True))
    p = launch.plans(xs, w1s, w2s, k)
    tokens, d = xs.shape
    stream = stream_of(0)
    nx, nl, ny = numba_array(xs), numba_array(lg), numba_array(intake(out, "out"))
    a1, a2 = p.weights(w1s, w2s)

    def gather() -> None:
        gather_rows[grid_for(tokens * k, d), ELEMENTWISE, stream](
            nx, p.routing.perm_slot, k, p.rows
        )

    stages = {
        "routing": lambda: p.routing.run(nl, stream),
        "gather": gather,
        "gather (rung 6)": lambda: r06.gather_words(xs, p, k, stream),
        "first GEMM": lambda: p.first(r05._ptr(p.rows), a1, r05._ptr(p.h)),
        "second GEMM": lambda: p.second(r05._ptr(p.h), a2, r05._ptr(p.slots)),
        "combine": lambda: combine_slots[grid_for(tokens, d), ELEMENTWISE, stream](p.slots, k, ny),
    }
    medians = {name: float(np.median(timing.time_ms(run))) for name, run in stages.items()}
    whole = float(np.median(timing.time_ms(lambda: launch(x, logits, w1, w2, out))))
    counts = np.diff(p.routing.offsets.copy_to_host()).tolist()
    return {
        "problem": problem_name, "shape": list(size), "dtype": dtype, "rung": "wgmma-grouped",
        "stages_ms": medians, "layer_ms": whole, "rows_per_expert": counts,
        "flops": problem.flops(size),
    }  # fmt: skip


def plot_split(doc: dict[str, Any], path: str | Path | None = None) -> Any:
    """Stacked bars of the stages' shares per case, and the rows per expert of each case."""
    from ladder.core import diagrams as dg

    cases = doc["cases"]
    fig = dg.figure(4.4, 12)
    left, right = fig.subplots(1, 2)
    labels = [f"{c['problem']}\n{' × '.join(map(str, c['shape']))}" for c in cases]
    bottom = np.zeros(len(cases))
    for stage in STAGES:
        share = np.array([c["stages_ms"][stage] / c["layer_ms"] * 100 for c in cases])
        left.bar(labels, share, bottom=bottom, label=stage)
        bottom += share
    left.set_ylabel("% of the layer's time (each stage timed alone)")
    left.set_title("Rung 5's stages")
    left.legend(fontsize=8)
    left.tick_params(axis="x", labelsize=7)
    for label, c in zip(labels, cases, strict=True):
        counts = np.array(c["rows_per_expert"])
        share = counts / counts.sum() * 100
        right.plot(np.arange(counts.size), share, marker=".", label=label.replace("\n", " "))
    right.set_xlabel("expert")
    right.set_ylabel("% of the rows (token, expert pairs)")
    right.set_yscale("log")
    right.set_title("Load per expert (no token dropped)")
    right.legend(fontsize=7)
    fig.suptitle(f"Where a mixture-of-experts layer's time goes, on {doc['gpu']}")
    if path is not None:
        fig.savefig(path, dpi=120)
    return fig


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ladder.moe.split", description=__doc__)
    parser.add_argument("--out", required=True, help="the results file to write (JSON)")
    args = parser.parse_args(argv)
    if device.simulator():
        raise SystemExit("needs a GPU: rung 5 runs on Hopper tensor cores")
    cases = []
    for name in ("moe-top2", "moe-top8"):
        for size in get_problem(name).standard_sizes("float16"):
            print(f"{name} {size}", flush=True)
            cases.append(split(name, size))
    doc = {
        "gpu": device.facts().name,
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "what": __doc__.split("\n\n")[0],
        "timing": "each stage alone: timing.time_ms (CUDA events, L2 flushed, median)",
        "cases": cases,
    }
    path = report.write_results(doc, args.out)
    plot_split(doc, Path(path).with_suffix(".png"))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
