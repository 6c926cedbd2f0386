"""Pictures of the flash-attention rungs, drawn from the rungs' own tile sizes.

- ``flash_tiles``: the score matrix cut into query x key tiles, as rung 3 (``r03_flash``) and
  rung 5 (``r05_tensor_core_flash``) cut it, one query tile sweeping the K/V tiles.
- ``online_softmax``: the running max and sum rescaling that lets the keys arrive in tiles,
  on a small numeric example computed with NumPy and checked against the direct softmax.
- ``backward_tiles``: the two kernels of the backward's flash rungs over the same N x N pairs,
  as rung 3 (``backward/r03_tensor_core``) cuts them: the key kernel's block down a column of
  key tiles, the query kernel's block along a row, the causal triangle neither computes.
- ``overlap_timeline``: one warpgroup's key tiles on the tensor cores and on the exponential
  unit, rung 7 (each product waited for) against rung 8 (the softmax under P·V), in clocks of
  an H100 SM from rung 8's tile sizes (``tile_clocks``).
- ``producer_pipeline``: who waits for whom in rung 9 (``r09_producer_flash``): the producer's
  copies of K_j and V_j into stage j % STAGES, the consumers' waits on "full" and their
  releases on "empty", which the producer waits for before it refills a stage
  (``producer_waits`` lists them from rung 9's constants).
- ``register_budget``: a consumer thread's registers for O, S and P against what setmaxnreg
  gives it, for rung 9 (64 keys) and rung 11 (``r11_wide_keys_flash``, 128 keys) at d = 64
  and 128, and for 128 keys with rung 9's four consumers at d = 64, which does not fit
  (``consumer_arrays`` works the counts out from the rungs' constants).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch, Polygon, Rectangle

from ladder.attention import r03_flash as r03
from ladder.attention import r05_tensor_core_flash as r05
from ladder.attention import r08_overlap_flash as r08
from ladder.attention import r09_producer_flash as r09
from ladder.attention import r11_wide_keys_flash as r11
from ladder.attention import warp_specialized
from ladder.attention.backward import r03_tensor_core as backward_r03
from ladder.core import diagrams as dg

MMA_M = 16  # rows of one m16 tile: rung 5's query tile is 16 x (m16 tiles per warp) x warps


def flash_tile_sizes(d: int = 64) -> dict[str, tuple[int, int]]:
    """(queries, keys) per tile of rungs 3 and 5 at head dimension ``d``: rung 3's
    ``tile_shape`` gives 16·TM queries and 16·TN keys; rung 5's tuned (warps, m16 tiles per
    warp) gives 16 · tiles · warps queries against BKV keys."""
    tm, tn = r03.tile_shape(d)
    warps, mi = r05.TUNED[r05.kernel_d(d, "diagram")]
    return {
        "r03_flash": (r03.SIDE * tm, r03.SIDE * tn),
        "r05_tensor_core_flash": (MMA_M * mi * warps, r05.BKV),
    }


def _score_axes(ax: Axes, n: int, bq: int, bk: int) -> None:
    """The N x N plane of S, queries down and keys across, ticked at tile edges (every
    ``bq`` queries and ``bk`` keys, or every N / 8 where tiles are smaller)."""
    ax.set_xlim(0, n)
    ax.set_ylim(n, 0)
    ax.set_aspect("equal")
    ax.set_xticks(range(0, n + 1, max(bk, n // 8)))
    ax.set_yticks(range(0, n + 1, max(bq, n // 8)))
    ax.tick_params(labelsize=7)


def flash_tiles(n: int = 512, d: int = 64, query_tile: int = 1) -> Figure:
    """The N x N score matrix S = Q Kᵀ (never stored) cut into tiles as rungs 3 and 5 cut it at
    head dimension ``d``: one block owns a query tile (a row of tiles, highlighted) and sweeps
    the K/V tiles left to right, in the numbered order, keeping only a running max, a running
    sum and its output rows between tiles."""
    sizes = flash_tile_sizes(d)
    fig = dg.figure(5.6)
    axes = fig.subplots(1, 2)
    for ax, (name, (bq, bkv)) in zip(axes, sizes.items(), strict=True):
        rows, cols = -(-n // bq), -(-n // bkv)
        q = min(query_tile, rows - 1)
        for r in range(rows):
            for c in range(cols):
                ax.add_patch(Rectangle((c * bkv, r * bq), bkv, bq, fill=False, ec=dg.GREY, lw=0.5))
        for c in range(cols):
            ax.add_patch(
                Rectangle(
                    (c * bkv, q * bq),
                    bkv,
                    bq,
                    fc=dg.ORANGE,
                    alpha=0.3 + 0.5 * c / cols,
                    ec="black",
                    lw=0.6,
                    gid="swept-tile",
                )
            )
            ax.text(
                c * bkv + bkv / 2,
                q * bq + bq / 2,
                str(c + 1),
                ha="center",
                va="center",
                fontsize=7,
            )
        ax.add_patch(
            FancyArrowPatch(
                (0, (q + 1) * bq + bq * 0.6),
                (n, (q + 1) * bq + bq * 0.6),
                arrowstyle="-|>",
                mutation_scale=12,
                color="black",
                lw=1,
            )
        )
        ax.text(
            n / 2,
            (q + 1) * bq + bq * 0.75,
            f"K/V tiles of {bkv} keys, one after another",
            ha="center",
            va="top",
            fontsize=8,
        )
        _score_axes(ax, n, bq, bkv)
        ax.set_xlabel("key index j (a column of S, a row of K and V)")
        ax.set_ylabel("query index i (a row of S and of the output)")
        ax.set_title(
            f"{name}: a block owns {bq} queries,\nsweeps {cols} tiles of {bkv} keys (d = {d})",
            fontsize=9,
        )
    fig.suptitle(
        f"Flash attention tiles over S = Q Kᵀ for N = {n}: S is never stored; a block holds one "
        "query × key tile of it on chip at a time",
        fontsize=10,
    )
    return fig


def online_softmax_steps(
    scores: Sequence[float], values: Sequence[float], tile: int
) -> list[dict[str, Any]]:
    """The online softmax over ``scores`` in tiles of ``tile``, one record per tile: the max
    before and after (m, m'), the rescale α = exp(m - m'), the tile's Σ exp(s - m') and
    Σ exp(s - m') v, and the running l and O after it (O / l is the output so far)."""
    s, v = np.asarray(scores, float), np.asarray(values, float)
    m, l_sum, o = -np.inf, 0.0, 0.0
    steps = []
    for start in range(0, len(s), tile):
        st, vt = s[start : start + tile], v[start : start + tile]
        m_new = max(m, float(st.max()))
        alpha = float(np.exp(m - m_new))  # exp(-inf) = 0 on the first tile
        p = np.exp(st - m_new)
        l_sum = alpha * l_sum + float(p.sum())
        o = alpha * o + float(p @ vt)
        steps.append(
            {
                "keys": (start, start + len(st)),
                "m": m,
                "m_new": m_new,
                "alpha": alpha,
                "tile_sum": float(p.sum()),
                "tile_pv": float(p @ vt),
                "l": l_sum,
                "o": o,
                "out": o / l_sum,
            }
        )
        m = m_new
    return steps


EXAMPLE_SCORES = (1.0, 3.0, 2.0, 0.5, 4.0, 1.5, 2.5, 3.5)  # two tiles of four, the max moves
EXAMPLE_VALUES = (1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0)  # one column of V


def online_softmax(
    scores: Sequence[float] = EXAMPLE_SCORES,
    values: Sequence[float] = EXAMPLE_VALUES,
    tile: int = 4,
) -> Figure:
    """One query's scores arriving in tiles (``tile`` keys each; the rungs use r03's 16·TN or
    r05's BKV): left, the scores and the running max; right, each tile's update of the running
    max m, the rescale α = exp(m - m'), the running sum l and output O, and the final O / l
    beside the softmax computed directly over all the scores at once."""
    s, v = np.asarray(scores, float), np.asarray(values, float)
    steps = online_softmax_steps(s, v, tile)
    weights = np.exp(s - s.max())
    direct = float(weights @ v / weights.sum())
    fig = dg.figure(4.6)
    left, right = fig.subplots(1, 2, width_ratios=(1, 1.5))
    palette = [dg.BLUE, dg.ORANGE, dg.GREEN, dg.PURPLE]
    for k, step in enumerate(steps):
        a, b = step["keys"]
        color = palette[k % len(palette)]
        left.bar(range(a, b), s[a:b], color=color, alpha=0.8, label=f"tile {k + 1}", gid="score")
        left.hlines(step["m_new"], a - 0.4, b - 0.6, color=dg.RED, lw=2)
        left.annotate(
            f"m = {step['m_new']:g}",
            (a - 0.4, step["m_new"]),
            xytext=(0, 3),
            textcoords="offset points",
            fontsize=7,
            color=dg.RED,
        )
    left.set_xticks(range(len(s)), [f"{j}\nv={v[j]:g}" for j in range(len(s))], fontsize=7)
    left.set_xlabel("key j, and its value v_j")
    left.set_ylabel("score s_j")
    left.set_ylim(0, s.max() * 1.25)
    left.legend(fontsize=7, loc="upper left")
    left.set_title("scores in tiles; red: running max after each tile", fontsize=9)

    header = ["tile", "m → m'", "α = e^(m−m')", "Σ e^(s−m')", "l = αl + Σ", "O = αO + Σ e^(s−m')v"]
    cells = [
        [
            f"{k + 1} (keys {st['keys'][0]}–{st['keys'][1] - 1})",
            f"{'−∞' if st['m'] == -np.inf else format(st['m'], 'g')} → {st['m_new']:g}",
            f"{st['alpha']:.4f}",
            f"{st['tile_sum']:.4f}",
            f"{st['l']:.4f}",
            f"{st['o']:.4f}",
        ]
        for k, st in enumerate(steps)
    ]
    right.axis("off")
    table = right.table(cellText=cells, colLabels=header, loc="upper center", cellLoc="center")
    table.auto_set_font_size(False)
    table.set_fontsize(7.5)
    table.scale(1, 1.6)
    table.auto_set_column_width(list(range(len(header))))
    final = steps[-1]
    right.text(
        0.5,
        0.45,
        f"online: O / l = {final['o']:.4f} / {final['l']:.4f} = {final['out']:.6f}\n"
        f"direct: Σ softmax(s)_j v_j = {direct:.6f}",
        ha="center",
        va="center",
        fontsize=9,
        transform=right.transAxes,
        gid="result",
    )
    right.set_title("each tile rescales what came before by α when the max rises", fontsize=9)
    fig.suptitle(
        f"Online softmax, as in rung 3 (r03_flash, tiles of {r03.SIDE}·TN keys) and rung 5 "
        f"(r05_tensor_core_flash, BKV = {r05.BKV}): {len(steps)} tiles of {tile} scores",
        fontsize=10,
    )
    return fig


def backward_tile_sizes(d: int = 64) -> dict[str, tuple[int, int]]:
    """(queries, keys) per tile of the backward's rung 3 at head dimension ``d``: the key
    kernel's block owns BLOCK_ROWS keys and takes QUERY_TILE queries at a time, the query
    kernel's block owns BLOCK_ROWS queries and takes KEY_TILE keys at a time."""
    kd = backward_r03.kernel_d(d, "diagram")
    rows = backward_r03.BLOCK_ROWS
    return {
        "key kernel": (backward_r03.QUERY_TILE[kd], rows),
        "query kernel": (rows, backward_r03.KEY_TILE),
    }


def backward_tiles(n: int = 512, d: int = 64, causal: bool = True, block: int = 2) -> Figure:
    """The N x N (query, key) pairs as the backward's rung 3 walks them at head dimension
    ``d``: the key kernel's block ``block`` owns a column of keys and sweeps its query tiles
    top to bottom, keeping dK and dV; the query kernel's block ``block`` owns a row of queries
    and sweeps its key tiles left to right, keeping dQ. Causal: pairs above the diagonal are
    masked, and neither kernel visits a tile that lies wholly there."""
    sizes = backward_tile_sizes(d)
    fig = dg.figure(5.6)
    axes = fig.subplots(1, 2)
    for ax, (name, (bq, bk)) in zip(axes, sizes.items(), strict=True):
        if causal:
            ax.add_patch(
                Polygon([(0, 0), (n, 0), (n, n)], closed=True, fc=dg.GREY, alpha=0.25, lw=0)
            )
        by_keys = name == "key kernel"
        owned = (block * bk, 0, bk, n) if by_keys else (0, block * bq, n, bq)
        ax.add_patch(Rectangle(owned[:2], owned[2], owned[3], fill=False, ec="black", lw=1.2))
        steps = range(-(-n // bq)) if by_keys else range(-(-n // bk))
        visited = 0
        for t in steps:
            q0, k0 = (t * bq, block * bk) if by_keys else (block * bq, t * bk)
            if causal and k0 > min(q0 + bq, n) - 1:  # every key of the tile after every query
                continue
            visited += 1
            ax.add_patch(
                Rectangle((k0, q0), bk, bq, fc=dg.BLUE if by_keys else dg.ORANGE, alpha=0.55,
                          ec="black", lw=0.5, gid="visited-tile")
            )  # fmt: skip
            ax.text(k0 + bk / 2, q0 + bq / 2, str(visited), ha="center", va="center", fontsize=7)
        _score_axes(ax, n, bq, bk)
        ax.set_xlabel("key index j")
        ax.set_ylabel("query index i")
        if by_keys:
            what = (
                f"{bk} keys and their dK, dV;\n{visited} tiles of {bq} queries: Sᵀ, dPᵀ, "
                "then dV, dK +="
            )
        else:
            what = (
                f"{bq} queries and their dQ;\n{visited} tiles of {bk} keys: S, dP again, then dQ +="
            )
        ax.set_title(f"{name}: a block owns {what}", fontsize=9)
    fig.suptitle(
        f"Backward rung 3 over the N x N pairs, N = {n}, d = {d}"
        + (" (causal: grey is masked)" if causal else ""),
        fontsize=10,
    )
    return fig


# An H100 SXM SM each clock: dense half-precision tensor FLOP (989 TFLOP/s over 132 SMs at
# 1.83 GHz) and exponentials on the multi-function unit (3.9 T a second, the same way)
TENSOR_FLOP_PER_CLOCK = 4096
EXP_PER_CLOCK = 16


def tile_clocks(d: int = 64, keys: int = r08.BKV, rows: int = 64) -> dict[str, float]:
    """Clocks of one warpgroup's key tile (``rows`` queries, ``keys`` keys) with an H100 SM to
    itself: S = Q·Kᵀ and O += P·V at TENSOR_FLOP_PER_CLOCK, and its rows x keys exponentials at
    EXP_PER_CLOCK (the max, the sums and the rescale left out: the exponentials are the
    floor)."""
    product = 2.0 * rows * keys * d / TENSOR_FLOP_PER_CLOCK
    return {"S": product, "PV": product, "exp": rows * keys / EXP_PER_CLOCK}


def overlap_schedule(d: int = 64, tiles: int = 3) -> dict[str, list[tuple[str, str, float, float]]]:
    """(unit, label, start, end) of each step, per rung, for ``tiles`` key tiles of one
    warpgroup. Rung 7: S_j, then its exponentials, then P_j·V_j, each waited for. Rung 8: S_0
    and its exponentials first; then per tile S_j and P_{j-1}·V_{j-1} back to back on the
    tensor cores, S_j's exponentials as soon as S_j is done; the next tile's products wait for
    both (the rescale needs P·V done); the last P·V after the loop."""
    c = tile_clocks(d)
    serial, t = [], 0.0
    for j in range(tiles):
        for unit, label, clocks in (("tensor", f"S{j}", c["S"]), ("exp", f"exp {j}", c["exp"]),
                                    ("tensor", f"PV{j}", c["PV"])):  # fmt: skip
            serial.append((unit, label, t, t + clocks))
            t += clocks
    overlap = [("tensor", "S0", 0.0, c["S"]), ("exp", "exp 0", c["S"], c["S"] + c["exp"])]
    t = c["S"] + c["exp"]
    for j in range(1, tiles):
        s_end = t + c["S"]
        overlap.append(("tensor", f"S{j}", t, s_end))
        overlap.append(("tensor", f"PV{j - 1}", s_end, s_end + c["PV"]))
        overlap.append(("exp", f"exp {j}", s_end, s_end + c["exp"]))
        t = s_end + max(c["PV"], c["exp"])
    overlap.append(("tensor", f"PV{tiles - 1}", t, t + c["PV"]))
    return {"rung 7": serial, "rung 8": overlap}


def overlap_timeline(d: int = 64, tiles: int = 3) -> Figure:
    """``overlap_schedule`` drawn: per rung, the tensor cores' row and the exponential unit's,
    one box per step, the total clocks in the row's label."""
    schedule = overlap_schedule(d, tiles)
    fig = dg.figure(3.2)
    ax = fig.subplots()
    colors = {"S": dg.BLUE, "PV": dg.ORANGE, "exp": dg.GREY}
    names = []
    for i, (rung, steps) in enumerate(schedule.items()):
        for unit, label, start, end in steps:
            y = 3 * i + (1 if unit == "tensor" else 0)
            kind = "exp" if unit == "exp" else label.rstrip("0123456789")
            ax.add_patch(Rectangle((start, y), end - start, 0.8, fc=colors[kind], ec="black",
                                   lw=0.5, alpha=0.7, gid=f"{rung}-{unit}"))  # fmt: skip
            ax.text((start + end) / 2, y + 0.4, label, ha="center", va="center", fontsize=7)
        total = max(end for *_, end in steps)
        names += [f"{rung}: exponentials", f"{rung}: tensor cores ({total:.0f} clocks)"]
    ax.set_yticks([0.4, 1.4, 3.4, 4.4], names, fontsize=8)
    ax.set_xlim(0, max(end for steps in schedule.values() for *_, end in steps) * 1.02)
    ax.set_ylim(-0.2, 5.0)
    ax.set_xlabel("clocks of one SM, one warpgroup alone on it")
    ax.set_title(
        f"{tiles} key tiles of {r08.BKV} keys, 64 query rows, d = {d}, on an H100 SM: each S and "
        f"P·V {tile_clocks(d)['S']:.0f} clocks at {TENSOR_FLOP_PER_CLOCK} FLOP a clock,\n"
        f"a tile's exponentials {tile_clocks(d)['exp']:.0f} at {EXP_PER_CLOCK} a clock",
        fontsize=9,
    )
    return fig


def producer_waits(tiles: int = 5) -> list[dict[str, Any]]:
    """Rung 9's copies in the order its producer issues them (K_j, then V_j, per key tile j),
    each with the stage it fills (j % STAGES), the "empty" release it waits for first (the
    consumers' last use of that stage, tile j - STAGES, or None while the stages are new) and
    the consumer step that waits on its "full" barrier: S_j reads K_j in tile j, P_j·V_j reads
    V_j in tile j + 1 (rung 8's order)."""
    waits = []
    for j in range(tiles):
        for operand, reader in (("K", f"S{j} in tile {j}"), ("V", f"P{j}·V{j} in tile {j + 1}")):
            earlier = j - r09.STAGES
            waits.append({
                "copy": f"{operand}{j}",
                "stage": j % r09.STAGES,
                "waits_for": f"{operand}{earlier} released" if earlier >= 0 else None,
                "read_by": reader,
            })  # fmt: skip
    return waits


def producer_pipeline(tiles: int = 5, d: int = 128) -> Figure:
    """``producer_waits`` drawn: a row for the producer's copies (K_j, then V_j beside it,
    coloured by stage), a row per consumer warpgroup with its tiles, arrows for "full" (a
    copy to the product that waits for it) and for "empty" (a stage's last read to the copy
    that refills it). Time runs left to right in tiles; the consumers' tiles are drawn in
    step, though in the kernel each runs at its own pace."""
    consumers = r09.CONSUMERS[d]
    fig = dg.figure(1.2 + 0.55 * (consumers + 2))
    ax = fig.subplots()
    stage_colors = [dg.BLUE, dg.ORANGE, dg.GREY, dg.GREEN][: r09.STAGES]
    copy_x = {}  # copy -> (x, y) of its box's centre
    for w in producer_waits(tiles):
        operand, j = w["copy"][0], int(w["copy"][1:])
        x, y = j + (0.0 if operand == "K" else 0.45), consumers + 0.6
        ax.add_patch(Rectangle((x, y), 0.4, 0.6, fc=stage_colors[w["stage"]], ec="black",
                               lw=0.5, alpha=0.7, gid=f"copy-{w['copy']}"))  # fmt: skip
        ax.text(x + 0.2, y + 0.3, f"{operand}{j}", ha="center", va="center", fontsize=7)
        copy_x[w["copy"]] = (x + 0.2, y)
    for c in range(consumers):
        y = consumers - 1 - c
        for j in range(tiles + 1):
            label = f"S{j}" if j == 0 else (f"S{j} P{j - 1}V" if j < tiles else f"P{j - 1}V")
            ax.add_patch(Rectangle((j + 0.5, y), 0.85, 0.6, fc="white", ec="black", lw=0.5,
                                   gid=f"consumer-{c}-tile-{j}"))  # fmt: skip
            ax.text(j + 0.925, y + 0.3, label, ha="center", va="center", fontsize=6)
    top = consumers - 1 + 0.6  # the first consumer's row, where the arrows land
    for w in producer_waits(tiles):
        operand, j = w["copy"][0], int(w["copy"][1:])
        reader = j if operand == "K" else j + 1
        if reader <= tiles:
            arrow = {"arrowstyle": "-|>", "mutation_scale": 7, "lw": 0.6}
            full = FancyArrowPatch(copy_x[w["copy"]], (reader + 0.7, top), color=dg.BLUE, **arrow)
            ax.add_patch(full).set_gid("full")
        if w["waits_for"]:  # the stage's last read (by every consumer) before this copy
            earlier = j - r09.STAGES
            last_read = earlier if operand == "K" else earlier + 1
            start = (last_read + 1.3, top)
            empty = FancyArrowPatch(start, copy_x[w["copy"]], color=dg.RED, ls="--", **arrow)
            ax.add_patch(empty).set_gid("empty")
    ax.set_xlim(-0.2, tiles + 1.5)
    ax.set_ylim(-0.3, consumers + 1.4)
    rows = [consumers - 1 - c + 0.3 for c in range(consumers)] + [consumers + 0.9]
    names = [f"consumer {c}" for c in range(consumers)] + ["producer (TMA)"]
    ax.set_yticks(rows, names, fontsize=8)
    ax.set_xticks([])
    ax.set_xlabel("key tiles, in order (each consumer at its own pace)")
    ax.set_title(
        f"Rung 9 at d = {d}: {consumers} consumer warpgroups, {r09.STAGES} stages each of K and V "
        f"({r09.BKV} keys); blue: 'full' (the copy's bytes arrived),\nred dashed: 'empty' "
        "(every consumer has read the stage; the producer may refill it). Colour: the stage.",
        fontsize=8,
    )
    return fig


def consumer_arrays(d: int, keys: int, consumers: int) -> dict[str, int]:
    """A consumer thread's accumulator registers in rungs 9 and 11: O (64 rows x d float32 over
    the warpgroup's 128 threads), S (64 x ``keys`` float32), P (S as 16-bit pairs), and the
    ``budget`` setmaxnreg raises it to with ``consumers`` consumer warpgroups."""
    o, s = 64 * d // 128, 64 * keys // 128
    return {"O": o, "S": s, "P": s // 2, "budget": warp_specialized.consumer_registers(consumers)}


def register_budget() -> Figure:
    """``consumer_arrays`` drawn: a bar per kernel, O, S and P stacked (all three are live at
    once: S_j is computed while P_{j-1} feeds P·V into O, rung 8's overlap), a mark at its
    budget. What is left between the arrays and the mark holds addresses, row statistics,
    loop counters and the compiler's temporaries."""
    cases = [
        (f"rung 9, d = 64, {r09.BKV} keys, {r09.CONSUMERS[64]} consumers", 64, r09.BKV,
         r09.CONSUMERS[64]),
        (f"{r11.BKV} keys with {r09.CONSUMERS[64]} consumers, d = 64 (not built)", 64, r11.BKV,
         r09.CONSUMERS[64]),
        (f"rung 11, d = 64, {r11.BKV} keys, {r11.CONSUMERS[64]} consumers", 64, r11.BKV,
         r11.CONSUMERS[64]),
        (f"rung 9, d = 128, {r09.BKV} keys, {r09.CONSUMERS[128]} consumers", 128, r09.BKV,
         r09.CONSUMERS[128]),
        (f"rung 11, d = 128, {r11.BKV} keys, {r11.CONSUMERS[128]} consumers", 128, r11.BKV,
         r11.CONSUMERS[128]),
    ]  # fmt: skip
    fig = dg.figure(0.6 + 0.5 * len(cases))
    ax = fig.subplots()
    colors = {"O": dg.BLUE, "S": dg.ORANGE, "P": dg.GREEN}
    for row, (label, d, keys, consumers) in enumerate(cases):
        y = len(cases) - 1 - row
        arrays = consumer_arrays(d, keys, consumers)
        left = 0
        for name, color in colors.items():
            ax.barh(y, arrays[name], left=left, color=color, height=0.6, gid=f"{label}:{name}",
                    label=name if row == 0 else None)  # fmt: skip
            ax.text(left + arrays[name] / 2, y, f"{name} {arrays[name]}", ha="center",
                    va="center", fontsize=7)  # fmt: skip
            left += arrays[name]
        ax.plot(
            [arrays["budget"]] * 2, [y - 0.4, y + 0.4], color="black", lw=2, gid=f"{label}:budget"
        )
        note = max(arrays["budget"], left) + 3
        ax.text(note, y, f"budget {arrays['budget']}", va="center", fontsize=7)
    ax.set_yticks(range(len(cases)), [c[0] for c in reversed(cases)], fontsize=8)
    ax.set_xlim(0, 280)
    ax.set_xlabel("32-bit registers a consumer thread (setmaxnreg's budget: black)")
    ax.set_title(
        "Accumulators a consumer thread holds against its budget: 128 keys double S and P, so at "
        "d = 64 four consumers\nno longer fit and rung 11 runs three",
        fontsize=9,
    )
    ax.legend(loc="upper right", fontsize=7)
    return fig
