"""The convolution ladder layer by layer, as the course reports it: op time per layer and their
sum, against cuDNN in FP32, against the best library configuration, and against each layer's
floor.

Two library columns. "× cuDNN FP32" is the course's view: every row's sum against the ``cudnn``
row in float32 (NCHW, PyTorch's defaults) at the same batch. "× best library (same dtype)" is
against the fastest library row of the row's own dtype and batch: the smallest sum of the two
layers over every configuration measured in the same run (``references.py``: cuDNN NCHW or
channels_last, benchmark or not, FP16 data cast to FP32, ``torch.compile``, im2col + cuBLAS;
never a peer). Each library row is one configuration for both layers, as a network is usually
run; the line under the table names the best one of each dtype.

Works on run records (``Measurement.to_dict()`` or a results file's ``runs``), so the notebook
and the README draw the same figures from the same file.
"""

from __future__ import annotations

from typing import Any

from ladder.conv.layers import LAYERS
from ladder.core import derived
from ladder.core.rung import get_problem, get_rung


def layer_of(
    shape: list[int] | tuple[int, ...], layers: dict[str, tuple[int, ...]] | None = None
) -> str | None:
    """'conv1' or 'conv2' for a run at one of the layers' shapes (any batch), else None."""
    for name, size in (layers or LAYERS).items():
        if tuple(shape[1:]) == size[1:]:
            return name
    return None


def _units(run: dict[str, Any]) -> str | None:
    """What the run's rung computes on (its registered ``units``); None for a rung that is no
    longer registered (an old results file), whose floor is then not known."""
    try:
        found = get_rung(run["problem"], run["rung"])
    except KeyError:
        return None
    return found.units_for(run["dtype"])


def layer_table(
    runs: list[dict[str, Any]],
    ceilings: dict[str, Any] | None,
    layers: dict[str, tuple[int, ...]] | None = None,
) -> list[dict[str, Any]]:
    """One row per (rung, dtype) measured on both layers at the same batch: ms per layer, the
    sum, the speedup over cuDNN FP32 on the sum (``x_cudnn_fp32``) and over the best library of
    the row's dtype and batch (``x_best_library``; ``best_library`` names it), and each layer's
    time over its floor.
    ``layers`` maps 'conv1' and 'conv2' to other shapes (the simulator's small stand-ins)."""
    conv = get_problem("conv")
    found: dict[tuple[str, str, int], dict[str, Any]] = {}
    for run in runs:
        layer = layer_of(run["shape"], layers)
        if run["problem"] != "conv" or layer is None:
            continue
        key = (run["rung"], run["dtype"], run["shape"][0])
        row = found.setdefault(
            key,
            {
                "rung": run["rung"],
                "number": run["number"],
                "reference": run["reference"],
                "peer": bool(run.get("peer")),
                "dtype": run["dtype"],
                "batch": run["shape"][0],
            },
        )
        ms = run["median_ms"] if derived.passed(run) else None
        row[f"{layer}_ms"] = ms
        units = _units(run)
        shape = tuple(run["shape"])
        floor = (
            None
            if units is None
            else conv.floor_ms(shape, run["dtype"], ceilings or {}, units == "tensor")
        )
        row[f"{layer}_floor_ms"] = floor
        row[f"{layer}_x_floor"] = ms / floor if ms and floor else None
    rows = [r for r in found.values() if "conv1_ms" in r and "conv2_ms" in r]
    for row in rows:
        both = row["conv1_ms"] is not None and row["conv2_ms"] is not None
        row["sum_ms"] = row["conv1_ms"] + row["conv2_ms"] if both else None
    for row in rows:
        cudnn = next(
            (
                r
                for r in rows
                if r["rung"] == "cudnn" and r["dtype"] == "float32" and r["batch"] == row["batch"]
            ),
            None,
        )
        ok = cudnn and cudnn["sum_ms"] and row["sum_ms"]
        row["x_cudnn_fp32"] = cudnn["sum_ms"] / row["sum_ms"] if ok else None
        best = best_library(rows, row["dtype"], row["batch"])
        row["best_library"] = best["rung"] if best else None
        row["best_library_ms"] = best["sum_ms"] if best else None
        ok = best and row["sum_ms"]
        row["x_best_library"] = best["sum_ms"] / row["sum_ms"] if ok else None
    return sorted(rows, key=lambda r: (r["batch"], r["reference"], r["number"], r["dtype"]))


def best_library(rows: list[dict[str, Any]], dtype: str, batch: int) -> dict[str, Any] | None:
    """The library row (a reference, not a peer) of ``dtype`` and ``batch`` with the smallest
    sum of both layers, both passed; None when there is none."""
    found = [
        r
        for r in rows
        if r["reference"]
        and not r.get("peer")
        and r["dtype"] == dtype
        and r["batch"] == batch
        and r.get("sum_ms")
    ]
    return min(found, key=lambda r: r["sum_ms"]) if found else None


def markdown(rows: list[dict[str, Any]]) -> str:
    """The layer table in Markdown."""

    def cell(value: float | None, spec: str) -> str:
        return "—" if value is None else format(value, spec)

    lines = [
        "| # | Rung | dtype | conv1 ms | conv2 ms | sum ms | × cuDNN FP32 "
        "| × best library (same dtype) | conv1 / floor | conv2 / floor |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {_number(r)} | {r['rung']} | {r['dtype']} | {cell(r['conv1_ms'], '.3f')} | "
            f"{cell(r['conv2_ms'], '.3f')} | {cell(r['sum_ms'], '.3f')} | "
            f"{cell(r['x_cudnn_fp32'], '.2f')} | {cell(r.get('x_best_library'), '.2f')} | "
            f"{cell(r['conv1_x_floor'], '.2f')} | {cell(r['conv2_x_floor'], '.2f')} |"
        )
    best = {
        (r["batch"], r["dtype"]): (r["best_library"], r["best_library_ms"])
        for r in rows
        if r.get("best_library")
    }
    if best:
        batches = len({batch for batch, _ in best}) > 1
        named = [
            f"{dtype}{f' (batch {batch})' if batches else ''}: {name}, {ms:.3f} ms"
            for (batch, dtype), (name, ms) in sorted(best.items())
        ]
        lines += ["", "Best library (smallest sum of both layers): " + "; ".join(named) + "."]
    return "\n".join(lines)


BEST_COLORS = ("tab:purple", "tab:orange")  # the best library of each dtype, in the plot


def _number(row: dict[str, Any]) -> str:
    if row.get("peer"):
        return "peer"
    return "ref" if row["reference"] else str(row["number"])


def plot(rows: list[dict[str, Any]], path: str | None = None, title: str = "") -> Any:
    """Horizontal bars: ms per layer for every rung (log scale), cuDNN FP32, the best library
    of each dtype and the floors marked. Returns the matplotlib figure."""
    import matplotlib.pyplot as plt

    rows = [r for r in rows if r["sum_ms"] is not None]
    fig, axes = plt.subplots(1, 2, figsize=(12, 0.4 * len(rows) + 1.6), sharey=True)
    labels = [f"{_number(r)} {r['rung']} ({r['dtype']})" for r in rows]
    for ax, layer in zip(axes, ("conv1", "conv2"), strict=True):
        values = [r[f"{layer}_ms"] for r in rows]
        colors = ["tab:gray" if r["reference"] else "tab:blue" for r in rows]
        ax.barh(range(len(rows)), values, color=colors)
        cudnn = next((r for r in rows if r["rung"] == "cudnn" and r["dtype"] == "float32"), None)
        if cudnn:
            ax.axvline(cudnn[f"{layer}_ms"], color="tab:red", ls="--", label="cuDNN FP32")
        dtypes = sorted({r["dtype"] for r in rows})
        for dtype, color in zip(dtypes, BEST_COLORS, strict=False):
            best = best_library(rows, dtype, rows[0]["batch"])
            if best:
                label = f"best library {dtype}: {best['rung']}"
                ax.axvline(best[f"{layer}_ms"], color=color, ls="-.", label=label)
        floors = [r[f"{layer}_floor_ms"] for r in rows if r[f"{layer}_floor_ms"]]
        if floors:
            ax.axvline(min(floors), color="tab:green", ls=":", label="floor (lowest)")
        ax.set_xscale("log")
        ax.set_xlabel("ms (log scale)")
        ax.set_title(layer)
        ax.legend(loc="lower right", fontsize=8)
    axes[0].set_yticks(range(len(rows)), labels)
    axes[0].invert_yaxis()
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=110)
    return fig
