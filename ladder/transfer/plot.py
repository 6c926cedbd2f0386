"""Figures of the data movement results: bandwidth against size, timelines, launch costs.

Each function draws from the JSON-ready dicts that ``bench`` writes (so a figure can be
redrawn from a results file) and saves a PNG. Matplotlib's ``Figure`` is used directly, so
drawing neither needs nor changes a pyplot backend.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ladder.core import device

KIND_COLORS = {"pageable": "#c44e52", "pinned": "#4c72b0", "mapped": "#55a868"}
DIRECTION_STYLES = {"h2d": "-", "d2h": "--"}
OP_COLORS = {
    "h2d": "#4c72b0",
    "kernel": "#dd8452",
    "d2h": "#55a868",
    "host in": "#8172b3",
    "host out": "#937860",
}
OP_NAMES = {
    "h2d": "copy in (H2D)",
    "kernel": "kernel",
    "d2h": "copy out (D2H)",
    "host in": "host copy into pinned staging",
    "host out": "host copy out of pinned staging",
}


def _size_label(size: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale and size % scale == 0:
            return f"{size // scale} {unit}"
    return f"{size} B"


def _save(fig: Any, path: str | Path, simulated: bool) -> Path:
    if simulated:
        fig.suptitle(device.SIMULATOR_NOTE, color="#c44e52", fontsize=9)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    return path


def bandwidth(transfers: dict[str, Any], path: str | Path, title: str = "") -> Path:
    """Bandwidth against transfer size, a line per host memory kind and direction, with the
    measured peak per direction (and the link's raw rate, when known)."""
    from matplotlib.figure import Figure

    records = transfers["records"]
    fig = Figure(figsize=(9, 5), layout="constrained")
    ax = fig.add_subplot()
    sizes = sorted({r["bytes"] for r in records})
    for kind in KIND_COLORS:
        for direction, style in DIRECTION_STYLES.items():
            points = sorted(
                (r["bytes"], r["gbps"])
                for r in records
                if r["kind"] == kind and r["direction"] == direction
            )
            if points:
                ax.plot(
                    *zip(*points, strict=True),
                    style,
                    marker="o",
                    markersize=3,
                    color=KIND_COLORS[kind],
                    label=f"{kind} {direction.upper()}",
                )
    for direction, best in (transfers.get("peak") or {}).items():
        ax.axhline(best["gbps"], color="gray", lw=0.8, ls=DIRECTION_STYLES[direction])
        ax.annotate(
            f"peak {direction.upper()} {best['gbps']:.1f} GB/s ({best['kind']}, "
            f"{_size_label(best['bytes'])})",
            (sizes[0], best["gbps"]),
            xytext=(2, 2 if direction == "h2d" else -10),
            textcoords="offset points",
            fontsize=8,
            color="gray",
        )
    link = transfers.get("link") or {}
    if link.get("raw_gbps_per_direction"):
        raw = link["raw_gbps_per_direction"]
        ax.axhline(raw, color="black", lw=0.8, ls=":")
        ax.annotate(
            f"PCIe Gen{link['pcie_gen_max']} x{link['pcie_width_max']} raw rate {raw:.1f} GB/s",
            (sizes[0], raw),
            xytext=(2, 2),
            textcoords="offset points",
            fontsize=8,
        )
    ax.set_xscale("log", base=2)
    ax.set_xticks(sizes)
    ax.set_xticklabels([_size_label(s) for s in sizes], rotation=45, fontsize=8)
    ax.set_xlabel("transfer size (bytes)")
    ax.set_ylabel("GB/s")
    ax.set_title(title or "host-device bandwidth", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, ncol=3)
    simulated = bool(records and records[0].get("simulated"))
    return _save(fig, path, simulated)


def _lanes(ops: list[dict[str, Any]]) -> list[str]:
    def order(lane: str) -> tuple[int, int, str]:
        number = lane.rsplit(" ", 1)[-1]
        return (lane.startswith("host"), int(number) if number.isdigit() else -1, lane)

    return sorted({op["lane"] for op in ops}, key=order)


def _run_title(run: dict[str, Any]) -> str:
    if run["mode"] == "sequential":
        head = f"sequential, {run['host_memory']} host memory"
    else:
        head = (
            f"pipelined, {run['host_memory']} host memory, {run['chunks']} chunks over "
            f"{run['streams']} streams"
        )
        if run.get("copy_threads"):
            head += f", {run['copy_threads']} host copy threads"
    host = run["stage_ms"].get("host copies")
    return (
        f"{head}: {run['wall_ms']:.2f} ms; largest GPU stage ({run['bottleneck']}) "
        f"{run['ideal_ms']:.2f} ms"
        + (f", host copies {host:.2f} ms" if host else "")
        + f"; overlap efficiency {run['efficiency']:.2f}"
    )


def timeline(runs: list[dict[str, Any]], path: str | Path, title: str = "") -> Path:
    """One panel per run, one lane per stream (and per host copy thread), a bar per copy
    and kernel, from the runs' CUDA events; the panels share the time axis."""
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    heights = [len(_lanes(run["ops"])) + 1.5 for run in runs]
    fig = Figure(figsize=(12, 0.35 * sum(heights) + 1.2 * len(runs) + 0.6), layout="constrained")
    axes = fig.subplots(
        len(runs), 1, sharex=True, squeeze=False, gridspec_kw={"height_ratios": heights}
    )[:, 0]
    seen: set[str] = set()
    for number, (ax, run) in enumerate(zip(axes, runs, strict=True)):
        lanes = _lanes(run["ops"])
        for row, lane in enumerate(lanes):
            for kind, color in OP_COLORS.items():
                bars = [
                    (op["start_ms"], op["end_ms"] - op["start_ms"])
                    for op in run["ops"]
                    if op["lane"] == lane and op["kind"] == kind
                ]
                if bars:
                    ax.broken_barh(bars, (row - 0.4, 0.8), facecolors=color, edgecolor="white")
                    seen.add(kind)
        ax.axvline(run["wall_ms"], color="black", lw=0.8, ls="--")
        ax.set_yticks(range(len(lanes)))
        ax.set_yticklabels(lanes, fontsize=8)
        ax.set_ylim(len(lanes) - 0.5, -0.5)
        head = title + "\n" if title and number == 0 else ""
        ax.set_title(head + _run_title(run), fontsize=9, loc="left")
        ax.grid(axis="x", alpha=0.3)
    axes[-1].set_xlabel("ms from the start (dashed line: the run's wall time, host to host)")
    handles = [Patch(color=OP_COLORS[k], label=OP_NAMES[k]) for k in OP_COLORS if k in seen]
    fig.legend(handles=handles, fontsize=8, loc="outside lower center", ncol=len(handles))
    return _save(fig, path, bool(runs and runs[0].get("simulated")))


def launch_costs(launch: dict[str, Any], path: str | Path, title: str = "") -> Path:
    """Host time per launch for each way of launching a small kernel (median of repeats)."""
    from matplotlib.figure import Figure

    costs = launch["costs"]
    fig = Figure(figsize=(9, 0.5 * len(costs) + 1.5), layout="constrained")
    ax = fig.add_subplot()
    labels = [c["title"] for c in costs]
    values = [c["median_us"] or 0.0 for c in costs]
    bars = ax.barh(labels, values, color="#4c72b0")
    for bar, cost in zip(bars, costs, strict=True):
        text = f"{cost['median_us']:.2f} µs" if cost["median_us"] else cost["error"]
        ax.annotate(
            text,
            (bar.get_width(), bar.get_y() + bar.get_height() / 2),
            xytext=(3, 0),
            textcoords="offset points",
            va="center",
            fontsize=8,
        )
    ax.invert_yaxis()
    ax.tick_params(axis="y", labelsize=8)
    ax.set_xlabel("µs per kernel launch (host clock, median of repeats)")
    ax.set_title(title or "launch overhead", fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    ax.set_xlim(0, max([*values, 1.0]) * 1.3)
    return _save(fig, path, bool(launch.get("simulated")))


def call_cost_rows(doc: dict[str, Any], inputs: str = "torch") -> list[dict[str, Any]]:
    """The rows of a host-time results file (``scripts/hosttime.py`` at commit 4b7e533; its
    H200 run is ``lab/harness/2026-11-25-hosttime/``) a reader compares: each rung's
    launcher (``launch`` path) with ``inputs`` arrays, and each library call, in file order."""
    rows = []
    for row in doc["rows"]:
        rung = row["kind"] == "rung" and row["path"] == "launch" and row["inputs"] == inputs
        if (rung or row["kind"] == "library") and row.get("host_us_median") is not None:
            rows.append(row)
    return rows


def call_costs(doc: dict[str, Any], path: str | Path, limit_us: float = 20.0) -> Path:
    """Host, back-to-back and graph replay µs per call of every rung's launcher and each library
    call of a host-time run (``call_cost_rows``), with the ``limit_us`` goal and the GPU named."""
    from matplotlib.figure import Figure

    rows = call_cost_rows(doc)
    labels = [f"{r['label']} {r['dtype']}" for r in rows]
    fig = Figure(figsize=(10, 0.28 * len(rows) + 1.8), layout="constrained")
    ax = fig.add_subplot()
    y = list(range(len(rows)))
    host = [r["host_us_median"] for r in rows]
    colors = ["#dd8452" if r["kind"] == "library" else "#4c72b0" for r in rows]
    ax.barh(y, host, color=colors, height=0.7, label="host µs/call (GPU idle before)")
    b2b = [(i, r["back_to_back_us"]) for i, r in zip(y, rows, strict=True) if r["back_to_back_us"]]
    graph = [(i, r["graph_us"]) for i, r in zip(y, rows, strict=True) if r.get("graph_us")]
    if b2b:
        ax.scatter([v for _, v in b2b], [i for i, _ in b2b], marker="|", s=120, color="black",
                   label="back-to-back µs/call", zorder=3)  # fmt: skip
    if graph:
        ax.scatter([v for _, v in graph], [i for i, _ in graph], marker="x", s=25,
                   color="#55a868", label="graph replay µs/call", zorder=3)  # fmt: skip
    ax.axvline(limit_us, color="#c44e52", linestyle="--", linewidth=1, label=f"{limit_us:g} µs")
    ax.set_yticks(y, labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("µs per call (log scale); orange: a library's call")
    gpu = doc.get("device", {}).get("name", "GPU")
    ax.set_title(f"What a call costs from Python, {gpu} ({doc.get('label', '')})", fontsize=10)
    ax.grid(axis="x", alpha=0.3, which="both")
    ax.legend(fontsize=7, loc="lower right")
    return _save(fig, path, False)
