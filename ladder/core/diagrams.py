"""Drawing helpers every problem's diagrams share, and the roofline of a results file.

The problem packages draw their kernels' geometry (``ladder/gemm/diagrams.py`` ...) from their
rungs' own constants; what is not about one problem lives here: shared-memory banks, wgmma's
shared-memory descriptor and the 128-byte swizzle (the conv and GEMM rungs both use them), grids
of labelled cells, labels spread so they do not overlap, and the roofline, which places every
measured rung of a problem under the ceilings of the results file it comes from. Nothing here
imports a problem package. Every drawing function returns a ``matplotlib.figure.Figure`` made
without pyplot, so drawing never touches a notebook's or a test's global figure state.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from ladder.core import derived
from ladder.core.report import read_results

BANKS = 32  # shared-memory banks
BANK_BYTES = 4  # bytes a bank serves per cycle
CHUNK_BYTES = 16  # one 16-byte access (float4, ldmatrix row, cp.async) spans 4 banks
BANK_GROUPS = BANKS * BANK_BYTES // CHUNK_BYTES  # 8 groups of 4 banks: a 128-byte line
WARP = 32
FIG_WIDTH = 10.0  # inches: a notebook's width

# Colours shared by the diagrams: one per role, readable in grey too.
BLUE, ORANGE, GREEN, RED, PURPLE, GREY = (
    "#4c72b0",
    "#dd8452",
    "#55a868",
    "#c44e52",
    "#8172b3",
    "#8c8c8c",
)


def figure(height: float, width: float = FIG_WIDTH) -> Figure:
    """A figure at notebook width with constrained layout, outside pyplot, on an Agg canvas
    (so it can be measured and saved without a display)."""
    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def saved(fig: Figure, path: str | Path | None) -> Figure:
    """``fig``, written to ``path`` first when one is given (PNG, SVG ... by its suffix)."""
    if path is not None:
        fig.savefig(path, dpi=150)
    return fig


def wavefronts(byte_addresses: Iterable[int]) -> list[list[int]]:
    """The 4-byte words of one warp-wide access, grouped into the passes (wavefronts) the
    hardware needs: lanes reading the same word share it (broadcast), different words in one
    bank go to different passes. Returns, per bank, the distinct words it serves."""
    per_bank: list[list[int]] = [[] for _ in range(BANKS)]
    for address in byte_addresses:
        word = address // BANK_BYTES
        if word not in per_bank[word % BANKS]:
            per_bank[word % BANKS].append(word)
    return per_bank


def conflict_degree(byte_addresses: Iterable[int]) -> int:
    """Passes a warp-wide 4-byte access needs: 1 is conflict-free, n an n-way conflict."""
    return max(len(words) for words in wavefronts(byte_addresses))


def draw_bank_map(ax: Axes, byte_addresses: Sequence[int], title: str) -> int:
    """One warp-wide 4-byte access drawn as banks (x) by passes (y): each cell is one word,
    labelled with the lanes that read or write it. Returns the conflict degree it draws."""
    per_bank = wavefronts(byte_addresses)
    degree = max(len(words) for words in per_bank)
    lanes_of: dict[int, list[int]] = {}
    for lane, address in enumerate(byte_addresses):
        lanes_of.setdefault(address // BANK_BYTES, []).append(lane)
    for bank, words in enumerate(per_bank):
        for wave, word in enumerate(words):
            lanes = lanes_of[word]
            color = BLUE if degree == 1 else (RED if wave else ORANGE)
            ax.add_patch(
                Rectangle((bank, wave), 1, 1, fc=color, ec="white", alpha=0.85, gid="bank-cell")
            )
            label = "\n".join(str(lane) for lane in lanes[:2]) + ("+" if len(lanes) > 2 else "")
            ax.text(bank + 0.5, wave + 0.5, label, ha="center", va="center", fontsize=5.5)
    ax.set_xlim(0, BANKS)
    ax.set_ylim(max(degree, 1), 0)
    ax.set_xticks(np.arange(BANKS) + 0.5, [str(b) if b % 4 == 0 else "" for b in range(BANKS)])
    ax.set_yticks(np.arange(degree) + 0.5, [str(w + 1) for w in range(degree)])
    ax.tick_params(length=0, labelsize=7)
    ax.set_xlabel("bank (4-byte word address mod 32)", fontsize=8)
    ax.set_ylabel("pass", fontsize=8)
    verdict = "conflict-free" if degree == 1 else f"{degree}-way conflict"
    ax.set_title(f"{title}: {verdict}, {degree} pass{'es' if degree > 1 else ''}", fontsize=9)
    return degree


# ---- wgmma's shared-memory matrix descriptor (PTX ISA, "Matrix Descriptor Format") ----

# (field, first bit, bits): addresses and offsets are kept in 16-byte units (bytes >> 4)
DESCRIPTOR_FIELDS = (
    ("start_address", 0, 14),
    ("lbo", 16, 14),
    ("sbo", 32, 14),
    ("base_offset", 49, 3),
    ("swizzle", 62, 2),
)
SWIZZLE_BYTES = {0: 0, 1: 128, 2: 64, 3: 32}  # the swizzle mode's code -> its width (0: none)
SWIZZLE_ROW = 128  # bytes of a row of the 128-byte swizzle; 8 rows make its 1024-byte atom


def descriptor(address: int, lbo: int, sbo: int, swizzle: int = 0) -> int:
    """The 64-bit descriptor of a shared-memory operand: ``address``, ``lbo`` and ``sbo`` in
    bytes (stored >> 4 in 14 bits; the address keeps its low 18 bits, as the kernels mask it),
    ``swizzle`` in bytes (0, 32, 64 or 128)."""
    mode = {width: code for code, width in SWIZZLE_BYTES.items()}[swizzle]
    values = {"start_address": address & 0x3FFFF, "lbo": lbo & 0x3FFFF, "sbo": sbo & 0x3FFFF}
    out = mode << 62
    for name, first, _ in DESCRIPTOR_FIELDS[:3]:
        out |= (values[name] >> 4) << first
    return out


def descriptor_fields(desc: int) -> dict[str, int]:
    """A descriptor decoded: ``start_address``, ``lbo`` and ``sbo`` in bytes (the fields times
    16), ``base_offset`` as stored, ``swizzle`` in bytes (0 for none)."""
    raw = {name: (desc >> first) & ((1 << bits) - 1) for name, first, bits in DESCRIPTOR_FIELDS}
    return {
        "start_address": raw["start_address"] << 4,
        "lbo": raw["lbo"] << 4,
        "sbo": raw["sbo"] << 4,
        "base_offset": raw["base_offset"],
        "swizzle": SWIZZLE_BYTES[raw["swizzle"]],
    }


def swizzle_128(offset: int) -> int:
    """Where the 128-byte swizzle (TMA's ``SWIZZLE_128B``, wgmma's mode 1) puts byte ``offset``
    of a 1024-byte-aligned tile: the 16-byte chunk within each 128-byte row XORed with the row's
    index mod 8 (address bits 4-6 with bits 7-9), so the 8 rows of a column of chunks lie in 8
    different groups of 4 banks."""
    return offset ^ (((offset >> 7) & 7) << 4)


def cell_grid(
    ax: Axes,
    labels: Sequence[Sequence[str]],
    colors: Sequence[Sequence[Any]],
    origin: tuple[float, float] = (0.0, 0.0),
    fontsize: float = 6.0,
    gid: str = "cell",
) -> None:
    """A rows x cols grid of filled, labelled unit cells, row 0 on top (use an inverted y)."""
    x0, y0 = origin
    for r, row in enumerate(labels):
        for c, label in enumerate(row):
            ax.add_patch(
                Rectangle((x0 + c, y0 + r), 1, 1, fc=colors[r][c], ec="white", lw=0.5, gid=gid)
            )
            if label:
                ax.text(
                    x0 + c + 0.5, y0 + r + 0.5, label, ha="center", va="center", fontsize=fontsize
                )


def cell_axes(
    ax: Axes, columns: Sequence[str], rows: Sequence[str], labelsize: float = 6.0
) -> None:
    """Axes over a grid of unit cells (``cell_grid``'s), ``len(columns)`` wide and
    ``len(rows)`` tall, row 0 on top: each column and row labelled at its centre, no tick
    marks."""
    ax.set_xlim(0, len(columns))
    ax.set_ylim(len(rows), 0)
    ax.set_xticks(np.arange(len(columns)) + 0.5, columns)
    ax.set_yticks(np.arange(len(rows)) + 0.5, rows)
    ax.tick_params(labelsize=labelsize, length=0)


def spread(targets: Sequence[float], gap: float) -> list[float]:
    """Positions as close to ``targets`` as possible (least squares) with at least ``gap``
    between any two, keeping their order: labels beside a column of points."""
    order = sorted(range(len(targets)), key=lambda i: targets[i])
    blocks: list[list[int]] = []  # runs of labels packed ``gap`` apart, centred on their targets

    def centre(block: list[int]) -> float:
        return sum(targets[i] for i in block) / len(block)

    for i in order:
        blocks.append([i])
        while len(blocks) > 1:
            low, high = blocks[-2], blocks[-1]
            if (
                centre(low) + (len(low) - 1) * gap / 2 + gap
                <= centre(high) - (len(high) - 1) * gap / 2
            ):
                break
            blocks[-2:] = [low + high]
    out = [0.0] * len(targets)
    for block in blocks:
        first = centre(block) - (len(block) - 1) * gap / 2
        for k, i in enumerate(block):
            out[i] = first + k * gap
    return out


# ---- the roofline ----

CEILINGS = (  # the flat roofs: key in a results file's "ceilings", label
    ("fp32_peak_tflops", "FP32 peak (from the clock)"),
    ("cublas_fp32_tflops", "cuBLAS FP32 at 8192³"),
    ("cublas_fp16_tflops", "cuBLAS FP16 at 8192³"),
)
DTYPE_MARKERS = {"float32": "o", "float16": "s", "bfloat16": "D"}


def roofline_points(
    doc: Mapping[str, Any], problem: str, shape: Sequence[int] | None = None
) -> tuple[tuple[int, ...], list[dict[str, Any]]]:
    """The runs a roofline of ``problem`` draws: every run that passed at ``shape`` (by default
    the shape with the most rungs measured), rungs and library references alike, each with
    ``intensity`` (FLOP per byte of the problem's fewest bytes) and ``tflops``."""
    runs = [r for r in doc["runs"] if r["problem"] == problem and derived.passed(r)]
    runs = [r for r in runs if r.get("flops") and r.get("min_bytes") and r.get("median_ms")]
    if not runs:
        raise ValueError(f"no measured runs of {problem!r} with FLOPs and bytes")
    if shape is None:
        counts: dict[tuple[int, ...], set[int]] = {}
        for r in runs:
            counts.setdefault(tuple(r["shape"]), set()).add(r["number"])
        shape = max(counts, key=lambda s: (len(counts[s]), s))
    chosen = [dict(r) for r in runs if tuple(r["shape"]) == tuple(shape)]
    if not chosen:
        raise ValueError(f"no measured runs of {problem!r} at shape {tuple(shape)}")
    for r in chosen:
        r["intensity"] = r["flops"] / r["min_bytes"]
        r["tflops"] = r["flops"] / (r["median_ms"] * 1e-3) / 1e12
    chosen.sort(key=lambda r: (r["reference"], r["number"], r["dtype"]))
    return tuple(shape), chosen


def roofline(
    results: Mapping[str, Any] | str | Path,
    problem: str,
    shape: Sequence[int] | None = None,
) -> Figure:
    """Every measured rung of ``problem`` on one roofline: x is FLOP per byte of the problem's
    fewest bytes (``min_bytes``), y is TFLOP/s from the median time; the ceilings are those
    measured in the same results file (the copy bandwidth as the slanted roof, the FP32 peak
    and the cuBLAS throughputs as flat ones). Each point is labelled with its rung number and
    keyed in the legend; library references are stars. ``results`` is a results document or
    the path of one (``results/nvidia-h200.json``)."""
    doc = read_results(results) if isinstance(results, (str, Path)) else results
    shape, points = roofline_points(doc, problem, shape)
    ceilings = doc.get("ceilings") or {}
    gpu = doc.get("gpu", "unknown GPU") + (" (simulator)" if doc.get("simulated") else "")

    fig = figure(6.2)
    ax = fig.add_subplot()
    ax.set_xscale("log")
    ax.set_yscale("log")
    xs = [p["intensity"] for p in points]
    ys = [p["tflops"] for p in points]
    tops = [ceilings.get(key) for key, _ in CEILINGS if ceilings.get(key)]
    x_lo, x_hi = min(xs) / 8, max(xs) * 8
    y_lo = min(ys) / 3
    y_hi = max([*ys, *tops]) * 3
    copy = ceilings.get("copy_tbps")
    if copy:
        x_lo = min(x_lo, y_lo / copy * 2)
    ax.set_xlim(x_lo, x_hi)
    ax.set_ylim(y_lo, y_hi)

    lines = []
    if copy:
        line_x = np.array([x_lo, x_hi])
        lines += ax.plot(line_x, copy * line_x, color=GREY, lw=1.2, ls="--")
        lines[-1].set_label(f"device copy {copy:.2f} TB/s (slope)")
    for (key, label), style in zip(CEILINGS, (":", "-.", "-"), strict=True):
        top = ceilings.get(key)
        if top:
            start = top / copy if copy else x_lo
            lines += ax.plot([start, x_hi], [top, top], color=GREY, lw=1.2, ls=style)
            lines[-1].set_label(f"{label} {top:.1f} TFLOP/s")

    numbers = sorted({p["number"] for p in points if not p["reference"]})
    colors = _rung_colors(numbers)
    handles: dict[str, Any] = {}
    for p in points:
        if p["reference"]:
            style = {"marker": "*", "ms": 12, "color": RED, "gid": "reference-point"}
            name = f"{p['rung']} (library)"
        else:
            marker = DTYPE_MARKERS.get(p["dtype"], "^")
            style = {"marker": marker, "ms": 7, "color": colors[p["number"]], "gid": "rung-point"}
            name = f"{p['number']:>2} {p['rung']}"
        (h,) = ax.plot(p["intensity"], p["tflops"], ls="none", mec="black", mew=0.5, **style)
        handles.setdefault(name, h)
    dtypes = sorted({p["dtype"] for p in points if not p["reference"]})
    for d in dtypes:
        (h,) = ax.plot([], [], DTYPE_MARKERS.get(d, "^"), color="white", mec="black", ls="none")
        handles[d] = h

    fig.legend(
        list(handles.values()),
        list(handles.keys()),
        loc="outside right upper",
        fontsize=7,
        title="rung (number beside each point), dtype",
        title_fontsize=7,
        frameon=False,
    )
    if lines:
        ax.legend(
            handles=lines,
            loc="upper left",
            fontsize=7,
            title="ceilings, same file",
            title_fontsize=7,
            framealpha=0.9,
        )
    ax.set_xlabel("arithmetic intensity: FLOP per byte of the fewest bytes (min_bytes)")
    ax.set_ylabel("TFLOP/s (FLOPs / median time)")
    ax.set_title(
        f"{problem} at {' × '.join(map(str, shape))}: every rung on the roofline, measured on "
        f"{gpu}",
        fontsize=10,
    )
    ax.grid(True, which="major", lw=0.3, alpha=0.5)
    fig.canvas.draw()  # fixes the layout, so data -> display below is final
    _label_points(ax, fig, [p for p in points if not p["reference"]])
    return fig


def _rung_colors(numbers: Sequence[int]) -> dict[int, Any]:
    from matplotlib import colormaps

    cmap = colormaps["viridis"]
    span = max(len(numbers) - 1, 1)
    return {n: cmap(0.9 * i / span) for i, n in enumerate(numbers)}


def _label_points(ax: Axes, fig: Figure, points: list[dict[str, Any]]) -> None:
    """Rung numbers beside their points: points at one intensity share a column of labels to
    their right, spread in y (display space) so that no two overlap, with a thin leader."""
    columns: dict[float, list[dict[str, Any]]] = {}
    for p in points:
        columns.setdefault(round(math.log10(p["intensity"]), 3), []).append(p)
    gap = 9.0 * fig.dpi / 72  # a 7-point label's height and a little air, in pixels
    for column in columns.values():
        px = [ax.transData.transform((p["intensity"], p["tflops"])) for p in column]
        ys = spread([y for _, y in px], gap)
        box = ax.get_window_extent()  # a long column stays inside the axes, under the title
        over = max(ys) - (box.y1 - gap / 2)
        under = (box.y0 + gap / 2) - (min(ys) - max(over, 0.0))
        ys = [y - max(over, 0.0) + max(under, 0.0) for y in ys]
        for p, (_, y), y_label in zip(column, px, ys, strict=True):
            ax.annotate(
                str(p["number"]),
                (p["intensity"], p["tflops"]),
                xytext=(14, (y_label - y) * 72 / fig.dpi),
                textcoords="offset points",
                fontsize=7,
                va="center",
                ha="left",
                arrowprops={"arrowstyle": "-", "lw": 0.4, "color": GREY, "shrinkA": 0},
                gid="rung-label",
            ).set_in_layout(False)
