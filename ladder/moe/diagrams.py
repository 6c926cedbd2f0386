"""Pictures of the mixture-of-experts ladder, drawn from the rungs' own constants and kernels'
rules: the routing (top-k, counts, offsets, the permuted rows), and a grouped launch's tile
schedule (which block works for which expert, the partly empty last tiles, the spare blocks).
Every function returns a matplotlib Figure made without pyplot (``ladder.core.diagrams``).
"""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from ladder.core import diagrams as dg
from ladder.moe.common import TILE, max_tiles
from ladder.moe.problem import group_sizes, route_logits, route_numpy
from ladder.moe.r05_wgmma_grouped import BM

COLORS = [dg.BLUE, dg.ORANGE, dg.GREEN, dg.RED, dg.PURPLE, "#937860", "#da8bc3", "#8c8c8c"]


def _color(e: int) -> str:
    return COLORS[e % len(COLORS)]


def routing_example(tokens: int = 10, experts: int = 4, k: int = 2, seed: int = 1) -> dict:
    """The routing of a small example, as the kernels compute it: ids and gates (top_k_softmax),
    counts and offsets (count_experts, scan_offsets), and the rows in expert order (permute;
    within an expert the GPU's order varies, this draws tokens in order)."""
    logits = route_logits(tokens, experts, k, 0, np.random.default_rng(seed))
    ids, gates = route_numpy(logits, k)
    counts = np.bincount(ids.ravel(), minlength=experts)
    offsets = np.concatenate([[0], np.cumsum(counts)])
    order = np.argsort(ids.ravel(), kind="stable")  # row r holds pair order[r] = t * k + j
    return {"logits": logits, "ids": ids, "gates": gates, "counts": counts, "offsets": offsets,
            "perm_slot": order}  # fmt: skip


def routing(tokens: int = 10, experts: int = 4, k: int = 2, seed: int = 1) -> Figure:
    """Top-k per token, the counts and offsets, and the rows in expert order."""
    ex = routing_example(tokens, experts, k, seed)
    fig = dg.figure(4.2)
    left, mid, right = fig.subplots(1, 3, gridspec_kw={"width_ratios": [1.2, 1, 1.4]})
    for t in range(tokens):
        for e in range(experts):
            left.add_patch(Rectangle((e, t), 1, 1, fill=False, edgecolor=dg.GREY, lw=0.5))
        for j in range(k):
            e = ex["ids"][t, j]
            left.add_patch(Rectangle((e, t), 1, 1, color=_color(e), alpha=0.85))
            left.text(
                e + 0.5, t + 0.5, f"{ex['gates'][t, j]:.2f}", ha="center", va="center", fontsize=7
            )
    left.set_xlim(0, experts)
    left.set_ylim(tokens, 0)
    left.set_xticks(np.arange(experts) + 0.5, [f"e{e}" for e in range(experts)])
    left.set_yticks(np.arange(tokens) + 0.5, [f"t{t}" for t in range(tokens)], fontsize=7)
    left.set_title(f"1. top-{k} per token, softmax gates", fontsize=9)

    counts, offsets = ex["counts"], ex["offsets"]
    mid.bar(range(experts), counts, color=[_color(e) for e in range(experts)])
    for e in range(experts):
        mid.text(
            e, counts[e], f"{counts[e]}\nstarts {offsets[e]}", ha="center", va="bottom", fontsize=7
        )
    mid.set_xticks(range(experts), [f"e{e}" for e in range(experts)])
    mid.set_ylim(0, counts.max() * 1.5 + 1)
    mid.set_title("2. count per expert, scan → offsets", fontsize=9)

    rows = tokens * k
    for r, pair in enumerate(ex["perm_slot"]):
        t, j = divmod(int(pair), k)
        e = ex["ids"][t, j]
        right.add_patch(Rectangle((0, r), 1, 1, color=_color(e), alpha=0.85))
        right.text(
            0.5, r + 0.5, f"row {r}: t{t} (slot {j})", ha="center", va="center", fontsize=6.5
        )
    right.set_xlim(0, 1)
    right.set_ylim(rows, 0)
    right.axis("off")
    right.set_title("3. permute: each expert's rows contiguous", fontsize=9)
    fig.suptitle(f"Routing {tokens} tokens to {experts} experts, k = {k}", fontsize=10)
    return fig


def tile_schedule(
    rows: int = 1024, experts: int = 8, hot: int = 50, tile_rows: int = BM, seed: int = 0
) -> Figure:
    """A grouped launch's row tiles: expert e's rows cut into tiles of ``tile_rows`` (rung 5's
    BM by default, common.TILE for rungs 3 and 4), the last one of each partly empty, and the
    spare blocks the grid has because the host cannot know the counts (common.max_tiles)."""
    counts = group_sizes(rows, experts, hot, np.random.default_rng(seed))
    spare = max_tiles(rows, experts, tile_rows)
    fig = dg.figure(2.8)
    ax = fig.subplots()
    tile = 0
    for e, c in enumerate(counts):
        for i in range(-(-int(c) // tile_rows)):
            used = min(tile_rows, int(c) - i * tile_rows) / tile_rows
            ax.add_patch(Rectangle((tile, 0), used, 1, color=_color(e), alpha=0.85))
            if used < 1:
                ax.add_patch(
                    Rectangle(
                        (tile + used, 0), 1 - used, 1, fill=False, hatch="///", edgecolor=_color(e)
                    )
                )
            ax.add_patch(Rectangle((tile, 0), 1, 1, fill=False, edgecolor="black", lw=0.6))
            tile += 1
    for b in range(tile, spare):
        ax.add_patch(Rectangle((b, 0), 1, 1, color=dg.GREY, alpha=0.25))
    ax.set_xlim(0, spare)
    ax.set_ylim(0, 1.6)
    ax.set_yticks([])
    ax.set_xlabel("block row of the grid (one row tile each)")
    for e, c in enumerate(counts):
        ax.bar(0, 0, color=_color(e), label=f"e{e}: {c} rows")
    ax.legend(ncol=min(experts, 4), fontsize=7, loc="upper right")
    ax.set_title(
        f"{rows} rows to {experts} experts ({hot}% to e0), tiles of {tile_rows}: {tile} tiles "
        f"used (hatched: empty rows), {spare - tile} spare blocks of {spare} (grey)",
        fontsize=9,
    )
    return fig


TILE_ROWS = {"rungs 3-4 (CUDA cores)": TILE, "rung 5 (tensor cores)": BM}
