"""Results files, and the renderers of their figures: one code path for every problem.

A results file (``ladder bench`` writes ``results/<gpu>.json``) holds the GPU, driver, library
versions, date, measured ceilings and every run with all its repeats. Tables (terminal and
Markdown for the README) and plots are drawn from those runs only, so a figure shown anywhere
can be traced to a file written on a named GPU. The figures themselves (ratios, % of ceilings,
best rows, memory-bound or not) are derived in ``ladder.core.derived``; this module only lays
them out. It also lays out the tables that come from the registry and the compiler rather than
a results file: ``ladder check``'s report and which GPU generations each rung runs on.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ladder.core import derived, device
from ladder.core.rung import GENERATIONS, Rung
from ladder.core.timing import Status, run_status


def results_document(
    runs: Iterable[dict[str, Any]],
    ceilings: dict[str, Any] | None,
    conditions: dict[str, Any] | None = None,
) -> dict:
    """A results file's contents: the machine, the versions, the ceilings, the runs, and the
    ``conditions`` they ran under (``ladder.core.conditions``: clocks, throttle reasons)."""
    facts = device.facts()
    return {
        "gpu": facts.name,
        "driver": facts.driver,
        "cuda_runtime": facts.runtime,
        "device": facts.to_dict(),
        "simulated": facts.simulator,
        "versions": device.library_versions(),
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "ceilings": ceilings,
        "conditions": conditions,
        "runs": list(runs),
    }


NOT_WRITTEN = "nothing written: the simulator's results go to a file only with --out FILE"


def results_path(out: str | None, default: Path | None) -> Path | None:
    """Where a command writes its results: ``out`` when given, else ``default`` (the GPU's
    canonical file, for ``ladder bench``; None for the commands whose runs reach it only
    through ``ladder bench``), except in the simulator, whose runs are written only where
    ``--out`` asks (None: nowhere)."""
    if out:
        return Path(out)
    return None if device.simulator() else default


def write_results(doc: dict[str, Any], path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1, allow_nan=True) + "\n")
    return path


def read_results(path: str | Path) -> dict[str, Any]:
    """A results file; ValueError naming the file when it is not one."""
    try:
        doc = json.loads(Path(path).read_text())
    except json.JSONDecodeError as err:
        raise ValueError(f"{path} is not a ladder results file (not JSON: {err})") from None
    if not isinstance(doc, dict):
        raise ValueError(f"{path} is not a ladder results file (not a JSON object)")
    for key in ("gpu", "runs"):
        if key not in doc:
            raise ValueError(f"{path} is not a ladder results file (no {key!r})")
    return doc


def plain(text: str) -> str:
    """``text`` for a rich table or console, shown as written: square brackets, as in
    ``pip install 'numba-ladder[triton]'``, are not taken for style tags."""
    from rich.markup import escape

    return escape(text)


def _fmt(value: float | None, spec: str) -> str:
    """``value`` formatted, or a dash for a figure not measured (None, or NaN: a rung that did
    not run has no error)."""
    return "—" if value is None or value != value else format(value, spec)


def _time_cell(row: dict[str, Any]) -> str:
    if row.get("median_ms") is None:
        return "—"
    return f"{row['median_ms']:.3f} ({row['min_ms']:.3f}–{row['max_ms']:.3f})"


def _status(row: dict[str, Any]) -> str:
    status = run_status(row)
    return str(status) if status is Status.OK else plain(f"{status}: {row.get('error') or '—'}")


def rich_table(group: list[dict[str, Any]], ceilings: dict[str, Any] | None, title: str):
    """A terminal table for one (problem, dtype, shape) group.

    Compute-bound groups show TFLOP/s and % of the FP32 peak (FP32 only); memory-bound groups
    show the bytes each rung moves, its achieved TB/s (bytes moved over time), its effective
    TB/s (the problem's fewest bytes over time) and that as % of the measured copy bandwidth.
    """
    from rich.table import Table

    if derived.simulated(group):
        return _simulator_table(group, title)
    memory = derived.is_memory(group)
    table = Table(title=title, title_justify="left")
    if memory:
        middle = ("GB moved", "TB/s moved", "TB/s eff.", "% of copy")
    else:
        middle = ("TFLOP/s", "TB/s", "% FP32 peak")
    # what a call costs a program (timing.time_calls): host, back-to-back, graph replay
    calls = ("host µs/call", "b2b µs/call", "graph µs/call")
    for col in ("#", "rung", "median ms (min–max)", *calls, *middle, "× below", "× library"):
        table.add_column(col, justify="left" if col == "rung" else "right")
    table.add_column("rel err", justify="right")
    table.add_column("status", justify="left")
    for row in derived.rows(group, ceilings):
        if memory:
            cells = (
                _fmt(derived.moved_gb(row), ".3f"),
                _fmt(row.get("tbps_moved"), ".3f"),
                _fmt(row.get("tbps"), ".3f"),
                _fmt(row.get("pct_peak"), ".1f"),
            )
        else:
            cells = (
                _fmt(row.get("tflops"), ".2f"),
                _fmt(row.get("tbps"), ".3f"),
                _fmt(row.get("pct_peak"), ".1f"),
            )
        table.add_row(
            _kind(row),
            row["rung"] + (f" ({row['config']})" if row.get("config") else ""),
            _time_cell(row),
            _fmt(row.get("host_us"), ".1f"),
            _fmt(row.get("back_to_back_us"), ".1f"),
            _fmt(row.get("graph_us"), ".1f"),
            *cells,
            _fmt(row.get("speedup"), ".2f"),
            _fmt(row.get("vs_reference"), ".3f"),
            _fmt(row.get("rel_err"), ".1e"),
            _status(row),
        )
    return table


def _simulator_table(group: list[dict[str, Any]], title: str):
    """A group run in the CUDA simulator: only what means something there, whether each answer
    is right, its error against float64, and the CPU time of one launch, named as such (no
    throughput, % of a ceiling or ratio: times of the simulator say nothing of a GPU)."""
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    for col in ("#", "rung", "rel err", "tolerance", "CPU ms (simulator)", "status"):
        table.add_column(col, justify="left" if col in ("rung", "status") else "right")
    for row in group:
        table.add_row(
            _kind(row),
            row["rung"],
            _fmt(row.get("rel_err"), ".1e"),
            _fmt(row.get("tolerance"), ".0e"),
            _fmt(row.get("median_ms"), ".1f"),
            _status(row),
        )
    return table


def check_table(reports: list[Any]):
    """A terminal table of ``ladder check``'s kernel reports (objects or their dicts)."""
    from rich.table import Table

    table = Table(title="compiler report (ptxas)", title_justify="left")
    for col in ("rung", "kernel", "dtype", "arch", "regs", "smem B", "local B", "spill st/ld B"):
        table.add_column(col, justify="left" if col in ("rung", "kernel", "dtype") else "right")
    table.add_column("status", justify="left")
    for r in reports:
        r = r if isinstance(r, dict) else r.to_dict()
        spills = "—" if r["spill_stores"] is None else f"{r['spill_stores']}/{r['spill_loads']}"
        table.add_row(
            f"{r['number']} {r['rung']}",
            r["kernel"],
            r["dtype"],
            r["arch"],
            _fmt(r["registers"], "d"),
            _fmt(r["smem_bytes"], "d"),
            _fmt(r["stack_bytes"], "d"),
            spills,
            plain(r["error"] or r.get("skipped") or "ok"),
        )
    return table


def generation_cells(rung: Rung) -> list[str]:
    """A yes or no for each GPU generation of ``GENERATIONS``, then why not (empty where it
    runs on all of them): the cells of ``ladder list --gpus`` and of the README's table."""
    reasons = [rung.reason_for_cc(g.cc) for g in GENERATIONS]
    why = next((r for r in reasons if r), "")
    return [*("no" if r else "yes" for r in reasons), why]


def generations_note() -> str:
    """What each generation's column stands for, in one line."""
    return "; ".join(f"{g.name} is {g.arch} ({g.gpus})" for g in GENERATIONS) + "."


def generations_markdown(found: list[Rung]) -> str:
    """The README's table of which rungs run on which GPU generation: one row per rung that a
    generation cannot run, saying why, then one row for every other rung."""
    heads = [f"{g.name} ({g.arch})" for g in GENERATIONS]
    lines = [
        "| problem | rung | " + " | ".join(heads) + " | why not |",
        "|" + " --- |" * (len(heads) + 3),
    ]
    for r in found:
        cells = generation_cells(r)
        if cells[-1]:
            lines.append(f"| {r.problem} | {r.number} {r.name} | " + " | ".join(cells) + " |")
    every = " | ".join("yes" for _ in GENERATIONS)
    lines.append(f"| all problems | every other rung | {every} | |")
    return "\n".join(lines) + f"\n\n{generations_note()}\n"


def profile_table(profiles: list[Any], gpu: str):
    """A terminal table of ``ladder profile`` results (objects or their dicts)."""
    from rich.table import Table

    from ladder.core.tools import NCU_METRICS

    rows = [p if isinstance(p, dict) else p.to_dict() for p in profiles]
    table = Table(title=f"Nsight Compute, one launch each, on {gpu}", title_justify="left")
    columns = ("rung", "dtype", "shape", "kernels", "µs", "DRAM %", "SM %", "occupancy %")
    extra = list(  # the metrics asked for with --metrics, in their order
        dict.fromkeys(
            name
            for row in rows
            for kernel in row["kernels"]
            for name in kernel["values"]
            if name not in NCU_METRICS
        )
    )
    for col in (*columns, "L2 hit %", "bank conflicts ld/st", *extra, "× below"):
        table.add_column(col, justify="left" if col in ("rung", "dtype", "kernels") else "right")
    table.add_column("status")
    below = None
    for row in rows:
        kernels = row["kernels"]
        timed = [k for k in kernels if k["values"].get("duration_us")]
        main = max(timed, key=lambda k: k["values"]["duration_us"])["values"] if timed else {}
        us = row.get("duration_us")
        ld, st = main.get("bank_conflicts_ld"), main.get("bank_conflicts_st")
        table.add_row(
            f"{row['number']} {row['rung']}",
            row["dtype"],
            "x".join(map(str, row["shape"])),
            str(len(kernels)),
            _fmt(us, ".1f"),
            _fmt(main.get("dram_pct"), ".1f"),
            _fmt(main.get("sm_pct"), ".1f"),
            _fmt(main.get("occupancy_pct"), ".1f"),
            _fmt(main.get("l2_hit_pct"), ".1f"),
            "—" if ld is None else f"{ld:.0f}/{st or 0:.0f}",
            *(_fmt(main.get(name), ".4g") for name in extra),
            _fmt(below / us if (below and us) else None, ".2f"),
            plain(row.get("error") or "ok"),
        )
        below = us or below
    return table


def sanitize_table(results: list[Any], gpu: str):
    """A terminal table of ``ladder sanitize`` results: one row per rung and dtype."""
    from rich.table import Table

    rows = [r if isinstance(r, dict) else r.to_dict() for r in results]
    tools = sorted({r["tool"] for r in rows})
    table = Table(title=f"compute-sanitizer on {gpu}", title_justify="left")
    table.add_column("rung")
    table.add_column("dtype")
    for tool in tools:
        table.add_column(f"{tool} errors", justify="right")
    table.add_column("answers")
    table.add_column("first report")
    keyed: dict[tuple, dict[str, dict]] = {}
    for r in rows:
        keyed.setdefault((r["number"], r["rung"], r["dtype"]), {})[r["tool"]] = r
    for (number, name, dtype), by_tool in keyed.items():
        cells = [str(by_tool[t]["errors"]) if t in by_tool else "—" for t in tools]
        checked = all(r["checked"] for r in by_tool.values())
        first = next((r["messages"][0] for r in by_tool.values() if r["messages"]), "")
        answers = "ok" if checked else "WRONG"
        table.add_row(f"{number} {name}", dtype, *cells, answers, plain(first))
    return table


def group_table(group: list[dict[str, Any]], ceilings: dict[str, Any] | None) -> list[str]:
    problem, dtype, shape = group[0]["problem"], group[0]["dtype"], tuple(group[0]["shape"])
    memory = derived.is_memory(group)
    head = "| # | rung | median ms | host µs/call | b2b µs/call | graph µs/call |"
    if memory:
        head += " GB moved | TB/s moved | TB/s eff. | % of copy |"
    else:
        head += " TFLOP/s | % FP32 peak |"
    lines = [
        f"**{problem}** {dtype} {' × '.join(map(str, shape))}",
        "",
        head + " × rung below | × library |",
        "|---:|---|---:|---:|---:|---:|---:|---:|"
        + ("---:|---:|" if memory else "")
        + "---:|---:|",
    ]
    for row in derived.rows(group, ceilings):
        if memory:
            figures = (
                f"{_fmt(derived.moved_gb(row), '.3f')} | {_fmt(row.get('tbps_moved'), '.3f')} | "
                f"{_fmt(row.get('tbps'), '.3f')} | {_fmt(row.get('pct_peak'), '.1f')}"
            )
        else:
            figures = f"{_fmt(row.get('tflops'), '.2f')} | {_fmt(row.get('pct_peak'), '.1f')}"
        name = row["rung"] + (f" ({row['config']})" if row.get("config") else "")
        lines.append(
            f"| {_kind(row)} | {name} | "
            f"{_fmt(row.get('median_ms'), '.3f')} | {_fmt(row.get('host_us'), '.1f')} | "
            f"{_fmt(row.get('back_to_back_us'), '.1f')} | {_fmt(row.get('graph_us'), '.1f')} | "
            f"{figures} | "
            f"{_fmt(row.get('speedup'), '.2f')} | {_fmt(row.get('vs_reference'), '.3f')} |"
        )
    return [*lines, ""]


def losses(doc: dict[str, Any], notes: str | None = None) -> list[str]:
    """Markdown lines: each case whose best rung is slower than a library configuration or a
    peer measured in the same run, with both times; nothing when the rungs win everywhere.
    ``notes``: a link to the lab notes that say what limits the rungs."""
    lost = []
    for (problem, dtype, shape), group in derived.groups(doc["runs"]).items():
        found = derived.contenders(group)
        rung = next((c for c in found if c["kind"] == "rung"), None)
        if rung is None or found[0] is rung:
            continue
        first = found[0]
        lost.append(
            f"- {problem} {dtype} {' × '.join(map(str, shape))}: {rung['label']} "
            f"{rung['median_ms']:.3f} ms; fastest {first['kind']}: {first['label']} "
            f"{first['median_ms']:.3f} ms (the rung at {1 / rung['x_best']:.2f}× its speed)"
        )
    if not lost:
        return []
    where = f" (what limits each: [the lab notes]({notes}))" if notes else ""
    return [f"Where the best rung loses{where}:", "", *lost, ""]


def _kind(row: dict[str, Any]) -> str:
    """A table's first cell: the rung's number, 'peer' for a peer, 'ref' for a library."""
    if row.get("peer"):
        return "peer"
    return "ref" if row["reference"] else str(derived.number(row))


def replace_block(readme: str | Path, start: str, end: str, body: str) -> None:
    """Replace what lies between the ``start`` and ``end`` marker lines of a README."""
    readme = Path(readme)
    text = readme.read_text()
    if start not in text or end not in text:
        raise ValueError(f"{readme} has no {start} ... {end} block")
    pattern = re.escape(start) + ".*?" + re.escape(end)
    readme.write_text(re.sub(pattern, lambda _: f"{start}\n{body}{end}", text, flags=re.S))


def _save(fig: Any, path: str | Path, doc: dict[str, Any]) -> Path:
    """Write a figure as PNG (marked as simulated when the results are) and close it."""
    import matplotlib.pyplot as plt

    if doc.get("simulated"):
        fig.suptitle(device.SIMULATOR_NOTE, color="#c44e52")
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_overview(doc: dict[str, Any], path: str | Path) -> Path:
    """One bar per (problem, dtype, shape): the best rung's speed as a multiple of the library
    in the same run (log scale; 1 = as fast as the library). Where no library ran (the
    simulator runs none), the panels of ``plot`` instead."""
    import matplotlib.pyplot as plt

    found = [r for r in derived.best_rows(doc) if r["vs_library"]]
    if not found:
        return plot(doc, path)
    fig, ax = plt.subplots(figsize=(10, 0.3 * len(found) + 1.4))
    labels = [
        f"{r['problem']} {r['dtype']} {'×'.join(map(str, r['shape']))}: {r['rung']}" for r in found
    ]
    values = [r["vs_library"] for r in found]
    colors = ["#4c72b0" if v >= 1 else "#dd8452" for v in values]
    ax.barh(range(len(found)), values, color=colors)
    for i, value in enumerate(values):
        ax.annotate(
            f"{value:.2f}×",
            (value, i),
            xytext=(3, 0),
            textcoords="offset points",
            va="center",
            fontsize=7,
        )
    ax.axvline(1.0, color="gray", ls="--", lw=1)
    ax.set_xscale("log")
    ax.set_xlim(min(0.5, min(values) / 1.5), max(2.0, max(values) * 2.5))  # room for labels
    ax.set_yticks(range(len(found)), labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("best rung's speed / library's speed, same run (log scale)")
    ax.set_title(f"each ladder's best rung against its library — {doc['gpu']}", fontsize=10)
    return _save(fig, path, doc)


def _cases(
    doc: dict[str, Any], problems: Iterable[str] | None, dtypes: Iterable[str] | None
) -> list[tuple[tuple[str, str, tuple[int, ...]], list[dict[str, Any]]]]:
    """(problem, dtype, shape) and the contenders of each case of ``problems`` and ``dtypes``
    (every one where None) that has any."""
    problems, dtypes = set(problems or ()), set(dtypes or ())
    found = []
    for key, group in derived.groups(doc["runs"]).items():
        if (problems and key[0] not in problems) or (dtypes and key[1] not in dtypes):
            continue
        contenders = derived.contenders(group)
        if contenders:
            found.append((key, contenders))
    return found


def contenders_markdown(
    doc: dict[str, Any],
    problems: Iterable[str] | None = None,
    dtypes: Iterable[str] | None = None,
) -> str:
    """Per case: the best rung, every library configuration and every peer, fastest first,
    with each one's time as a multiple of the fastest (``derived.contenders``)."""
    lines = []
    for (problem, dtype, shape), found in _cases(doc, problems, dtypes):
        lines += [
            f"**{problem}** {dtype} {' × '.join(map(str, shape))}",
            "",
            "| | what | kind | median ms | × the fastest's time |",
            "|---:|---|---|---:|---:|",
        ]
        for i, c in enumerate(found, 1):
            lines.append(
                f"| {i} | {c['label']} | {c['kind']} | {c['median_ms']:.3f} | {c['x_best']:.2f} |"
            )
        lines.append("")
    return "\n".join(lines)


KIND_COLORS = {"rung": "#4c72b0", "library": "#c44e52", "peer": "#55a868"}


def plot_contenders(
    doc: dict[str, Any],
    path: str | Path | None = None,
    problems: Iterable[str] | None = None,
    dtypes: Iterable[str] | None = None,
) -> Any:
    """One panel per case: the best rung, each library configuration and each peer, as bars of
    their time over the fastest's (1 = the fastest), coloured by kind. Returns the figure; with
    ``path``, writes it as PNG and closes it."""
    import matplotlib.pyplot as plt

    panels = _cases(doc, problems, dtypes)
    if not panels:
        raise ValueError("no measured runs with a library or a peer to plot")
    heights = [0.28 * len(c) + 0.9 for _, c in panels]
    fig, axes = plt.subplots(
        len(panels), 1, figsize=(9, sum(heights)), squeeze=False,
        gridspec_kw={"height_ratios": heights},
    )  # fmt: skip
    for ax, ((problem, dtype, shape), found) in zip(axes[:, 0], panels, strict=True):
        values = [c["x_best"] for c in found]
        ax.barh(range(len(found)), values, color=[KIND_COLORS[c["kind"]] for c in found])
        for i, c in enumerate(found):
            ax.annotate(
                f"{c['median_ms']:.3f} ms", (values[i], i), xytext=(3, 0),
                textcoords="offset points", va="center", fontsize=7,
            )  # fmt: skip
        ax.set_yticks(range(len(found)), [c["label"] for c in found], fontsize=7)
        ax.invert_yaxis()
        ax.set_xscale("log")
        ax.set_xlim(0.9, max(values) * 3)
        ax.set_title(f"{problem} {dtype} {'×'.join(map(str, shape))}", fontsize=9, loc="left")
    axes[-1, 0].set_xlabel("time / the fastest's time (log scale; 1 = the fastest)")
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in KIND_COLORS.values()]
    fig.legend(handles, ["best rung", "library configuration", "peer (Triton)"], loc="upper right")
    fig.suptitle(f"the best rung, each library configuration and each peer — {doc['gpu']}")
    if path is None:
        fig.tight_layout()
        return fig
    _save(fig, path, doc)
    return fig


def plot(doc: dict[str, Any], path: str | Path, problems: Iterable[str] | None = None) -> Path:
    """Bar chart of every rung against the library reference and the ceilings, one panel per
    (problem, dtype, shape)."""
    import matplotlib.pyplot as plt

    wanted = set(problems) if problems else None
    found = derived.groups(doc["runs"]).items()
    panels = [(k, g) for k, g in found if not wanted or k[0] in wanted]
    if not panels:
        raise ValueError("no runs to plot")
    from ladder.core.canonical import ceilings_for

    fig, axes = plt.subplots(len(panels), 1, figsize=(10, 3.6 * len(panels)), squeeze=False)
    for ax, ((problem, dtype, shape), group) in zip(axes[:, 0], panels, strict=True):
        key, unit = ("tbps", "TB/s") if derived.is_memory(group) else ("tflops", "TFLOP/s")
        names = [r["rung"] for r in group]
        values = [(r.get(key) or 0.0) if derived.passed(r) else 0.0 for r in group]
        colors = ["#c44e52" if r["reference"] else "#4c72b0" for r in group]
        bars = ax.bar(names, values, color=colors)
        for bar, run in zip(bars, group, strict=True):
            label = f"{bar.get_height():.1f}" if derived.passed(run) else str(run_status(run))
            ax.annotate(
                label,
                (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                ha="center",
                va="bottom",
                fontsize=8,
            )
        name, ceiling = derived.ceiling(group, ceilings_for(doc, problem))
        if ceiling:
            ax.axhline(ceiling, color="gray", ls="--", lw=1)
            ax.annotate(
                f"{name} {ceiling:.1f}",
                (0, ceiling),
                xytext=(2, 2),
                textcoords="offset points",
                fontsize=8,
                color="gray",
            )
        ax.set_ylabel(unit)
        ax.set_title(f"{problem} {dtype} {' × '.join(map(str, shape))} — {doc['gpu']}", fontsize=10)
        ax.tick_params(axis="x", rotation=30, labelsize=8)
        for label in ax.get_xticklabels():
            label.set_horizontalalignment("right")
    return _save(fig, path, doc)
