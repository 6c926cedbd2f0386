"""Pictures of the convolution ladder's implicit GEMM, drawn from the layer and rung constants.

- ``implicit_gemm``: how row (c, p, q) and column (b, oy, ox) of the unrolled matrix U index
  the input, for conv2's shape (``layers.CONV2``), with rung 4's (``r04_fused_implicit_gemm``)
  16 x 16 tile of U, and how the reduction axis is padded by rung 4 and by the tensor-core
  plan (``tc/plan.py``: P_BLOCK x Q_CHUNK windows per channel).
- ``draw_quads``: rung 8's pair words, quads and diagonals: the input window of one (tile,
  channel), one lane's pair words in it, the quads of its column and which (tile, k16 step)
  each quad feeds.
- ``draw_jobs``: how rung 8's warps take jobs, round after round, over a band's columns, and
  the windows one job walks.
- ``draw_filters_on_m``: rung 13's operands: A's 64 rows of (filter, dy, dx), and B's rows in
  shared memory ordered by parity, with the bytes each k16 step's one descriptor covers.

The layout arithmetic the kernels do in C++ (which rows a quad holds, which job a warp takes,
where rung 13's rewrite puts a row) is written once in Python in ``tc/plan.py``;
``tests/test_diagrams.py`` holds it to the .cu files.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from ladder.conv import layers
from ladder.conv import r04_fused_implicit_gemm as r04
from ladder.conv import r08_tensor_core as r08
from ladder.conv import r13_filters_on_m as r13
from ladder.conv.tc import plan
from ladder.core import diagrams as dg


def unrolled_shape(layer: Sequence[int] = layers.CONV2) -> tuple[int, int]:
    """(rows, columns) of U for a layer (B, C, M, H, W, K): C·K² by B·Ho·Wo."""
    b, c, _, h, w, k = layer
    return c * k * k, b * (h - k + 1) * (w - k + 1)


def unrolled_entry(layer: Sequence[int], row: int, col: int) -> tuple[int, int, int, int]:
    """The input element U[row, col] stands for, (b, c, y, x): row = (c, p, q) and
    col = (b, oy, ox) give x[b, c, oy + p, ox + q] (rung 4's decode, without U)."""
    _, _, _, h, w, k = layer
    ho, wo = h - k + 1, w - k + 1
    c, p, q = row // (k * k), row // k % k, row % k
    b, pix = divmod(col, ho * wo)
    oy, ox = divmod(pix, wo)
    return b, c, oy + p, ox + q


def implicit_gemm(
    layer: Sequence[int] = layers.CONV2,
    pixel: tuple[int, int] = (5, 9),
    channel_row: tuple[int, int, int] = (1, 2, 3),
) -> Figure:
    """The implicit GEMM Y = W · U for ``layer`` (conv2 by default): top left, image b = 0's C
    channels with the K x K windows that make column (0, oy, ox) of U (``pixel``) and the
    element (c, p, q) (``channel_row``) marked; top right, U for that image (C·K² rows by
    Ho·Wo columns, one of B images), its row, its column and rung 4's TILE x TILE tile of U;
    bottom, the reduction axis (c, p, q) as rung 4 pads it to whole tiles and as the
    tensor-core plan pads each channel's K x K window to P_BLOCK x Q_CHUNK."""
    b_count, c_count, m_count, h, w, k = layer
    ho, wo = h - k + 1, w - k + 1
    rows, cols = unrolled_shape(layer)
    oy, ox = pixel
    c_sel, p_sel, q_sel = channel_row
    row = c_sel * k * k + p_sel * k + q_sel
    col = oy * wo + ox
    tile = r04.TILE

    fig = dg.figure(9.0)
    left, right, ax = fig.subplots(3, 1, height_ratios=(1.3, 1.3, 0.8))
    gap = 4
    for c in range(c_count):
        x0 = c * (w + gap)
        left.add_patch(Rectangle((x0, 0), w, h, fc="#eeeeee", ec=dg.GREY, gid="channel"))
        left.add_patch(
            Rectangle(
                (x0 + ox, oy), k, k, fc=dg.ORANGE, alpha=0.6, ec="black", lw=0.6, gid="window"
            )
        )
        if c == c_sel:
            left.add_patch(
                Rectangle((x0 + ox + q_sel, oy + p_sel), 1, 1, fc=dg.RED, ec="black", lw=0.6)
            )
        left.text(x0 + w / 2, h + 2, f"c = {c}", ha="center", va="top", fontsize=8)
    left.set_xlim(-1, c_count * (w + gap) - gap + 1)
    left.set_ylim(h + 6, -1)
    left.set_aspect("equal")
    left.set_xticks([])
    left.set_yticks([0, oy, h])
    left.tick_params(labelsize=7)
    left.set_ylabel("input row y", fontsize=8)
    left.set_title(
        f"x[b = 0]: C = {c_count} channels of H × W = {h} × {w}; orange: the {k} × {k} "
        f"windows at (oy, ox) = ({oy}, {ox}) that make column ({0}, {oy}, {ox}) of U; "
        f"red: (c, p, q) = ({c_sel}, {p_sel}, {q_sel})",
        fontsize=8,
    )

    right.add_patch(Rectangle((0, 0), ho * wo, rows, fc="#eeeeee", ec=dg.GREY))
    right.add_patch(Rectangle((col, 0), 1, rows, fc=dg.ORANGE, ec=dg.ORANGE, lw=1.2, gid="column"))
    right.add_patch(Rectangle((0, row), ho * wo, 1, fc=dg.BLUE, ec=dg.BLUE, lw=1.2, gid="row"))
    right.add_patch(
        Rectangle(
            (col // tile * tile, row // tile * tile),
            tile,
            tile,
            fill=False,
            ec="black",
            lw=1.2,
            gid="tile",
        )
    )
    right.set_xlim(0, ho * wo)
    right.set_ylim(rows, 0)
    right.set_xticks([0, col, ho * wo])
    right.set_yticks([0, row, rows])
    right.tick_params(labelsize=7)
    right.set_xlabel(f"column (b, oy, ox) = b·{ho * wo} + oy·{wo} + ox (b = 0 shown)", fontsize=8)
    right.set_ylabel(f"row (c, p, q) = c·{k * k} + p·{k} + q", fontsize=8)
    gigabytes = rows * cols * 4 / 1e9
    right.set_title(
        f"U, image b = 0's {ho * wo} of {cols:,} columns (B = {b_count:,} images): {rows} × "
        f"{cols:,} = {gigabytes:.1f} GB in float32, never stored.\nBlue: row {row}; orange: column "
        f"{col}; U[{row}, {col}] = x[0, {c_sel}, {oy + p_sel}, {ox + q_sel}]; black: rung 4's "
        f"{tile} × {tile} tile of U",
        fontsize=8,
    )

    padded_r04 = -(-rows // tile) * tile
    window = plan.P_BLOCK * plan.Q_CHUNK  # the tensor-core rungs' per-channel window
    spans = [
        (1.6, f"rung 4: {rows} padded to {padded_r04} (tiles of TILE = {tile})", tile, rows),
        (
            0.4,
            f"tensor-core plan: each channel's {k} × {k} padded to P_BLOCK × Q_CHUNK = "
            f"{plan.P_BLOCK} × {plan.Q_CHUNK}: {c_count * window}",
            window,
            None,
        ),
    ]
    for y, label, step, real in spans:
        total = padded_r04 if real else c_count * window
        for start in range(0, total, step):
            used = min(step, max(0, real - start)) if real else k * k
            ax.add_patch(Rectangle((start, y), used, 0.6, fc=dg.BLUE, ec="white", lw=0.5))
            ax.add_patch(
                Rectangle((start + used, y), step - used, 0.6, fc=dg.RED, alpha=0.5, ec="white")
            )
        ax.text(1, y + 0.7, label, fontsize=8, va="bottom")
    ax.set_xlim(0, max(padded_r04, c_count * window) + 1)
    ax.set_ylim(0, 3)
    ax.set_yticks([])
    ax.set_xlabel("position on the reduction axis (blue: real (c, p, q); red: zero padding)")
    ax.set_title(
        f"the reduction axis of Y = W · U, W being M × C·K² = {m_count} × {rows}", fontsize=9
    )
    fig.suptitle(
        f"Implicit GEMM (rung 4, r04_fused_implicit_gemm) for B, C, M, H, W, K = {tuple(layer)} "
        f"(layers.CONV2 by default), Ho × Wo = {ho} × {wo}:\n"
        "y[b, m, oy, ox] = Σ over (c, p, q) of W[m, (c, p, q)] · U[(c, p, q), (b, oy, ox)], "
        "U[(c, p, q), (b, oy, ox)] = x[b, c, oy + p, ox + q]",
        fontsize=9,
    )
    return fig


# ---- rung 8: pair words, quads, diagonals ----


def _ticks(ax: Axes, axis: str, at: Sequence[int], labels: Sequence[str] | None = None) -> None:
    """Ticks at the centres of the cells ``at`` (each once), labelled with the index or
    ``labels``."""
    places = sorted(set(at))
    texts = [str(a) for a in places] if labels is None else list(labels)
    setter = ax.set_xticks if axis == "x" else ax.set_yticks
    setter(np.array(places) + 0.5, texts)


def draw_quads(
    layer: Sequence[int] = layers.CONV2,
    k: int = 3,
    lane: tuple[int, int] = (0, 1),
    tile: int = 1,
    path: str | Path | None = None,
) -> Figure:
    """Rung 8's A operand for ``layer``'s kernel (conv2's ``conv_tc_t6_n2`` by default), for
    one channel and the first window (filter rows 0 to 7, filter columns 0 to 7) of a job:
    (a) the input it reads, with the window of m16 tile ``tile`` (its 2 output rows x 8 output
    columns, plus 8 filter rows and columns) and the pair words of ``lane`` = (g, t), those of
    quad ``k`` in red; (b) that lane's column of quads, each the four pair words (a0 .. a3) one
    16-byte load fills; (c) which quad each (tile i, k16 step j) multiplies, k = i + j, the
    diagonal of quad ``k`` in red."""
    found = r08.plan(tuple(layer))
    tiles = found.tiles
    quads = tiles + plan.PAIRS - 1  # QUADS of r08's window for 8 filter rows
    rows = 2 * (quads - 1) + 3  # input rows 0 .. 2 (QUADS - 1) + 2
    g, t = lane
    x0 = plan.pair_word_column(found, g, t)
    last_column = plan.pair_word_column(found, 7, plan.Q_CHUNK // 2 - 1) + 1
    columns = last_column + 1
    served = plan.diagonal(k, tiles)
    quad_rows = plan.quad_words(k)

    fig = dg.figure(5.0)
    window, column, table = fig.subplots(1, 3, width_ratios=(1.15, 1.0, 0.85))
    # (a) the input: one cell per half, tile's window shaded, the lane's pair words outlined
    window.add_patch(Rectangle((0, 0), columns, rows, fc="#eeeeee", ec="none"))
    for x in range(1, columns):
        window.plot([x, x], [0, rows], color="white", lw=0.5)
    for y in range(1, rows):
        window.plot([0, columns], [y, y], color="white", lw=0.5)
    top = 2 * tile  # tile i's output rows 2i, 2i + 1 meet filter rows 0 .. 7
    window.add_patch(
        Rectangle(
            (0, top),
            columns,
            2 * plan.PAIRS + 1,
            fc=dg.ORANGE,
            alpha=0.35,
            ec=dg.ORANGE,
            lw=1.2,
            gid="tile-window",
        )
    )
    for r in range(rows):
        in_quad = r in quad_rows
        window.add_patch(
            Rectangle(
                (x0, r),
                2,
                1,
                fc=dg.RED if in_quad else "white",
                alpha=0.9,
                ec=dg.BLUE,
                lw=0.8,
                gid="quad-word" if in_quad else "pair-word",
            )
        )
        window.text(x0 + 1, r + 0.5, f"F({r})", ha="center", va="center", fontsize=5.5)
    window.set_xlim(0, columns)
    window.set_ylim(rows, 0)
    window.set_aspect("equal")
    _ticks(window, "x", [0, x0, x0 + 1, last_column])
    _ticks(window, "y", [0, top, top + 2 * plan.PAIRS, rows - 1])
    window.tick_params(labelsize=6, length=0)
    window.set_xlabel("input column (one half each)", fontsize=7)
    window.set_ylabel("input row (from the sub-band's first)", fontsize=7)
    window.set_title(
        f"(a) one channel's input; orange: tile i = {tile}'s window\n(2 output rows + "
        f"P_BLOCK = {plan.P_BLOCK} filter rows); boxes: lane\n(g, t) = ({g}, {t})'s pair words "
        f"F(r), columns g + 2t, + 1",
        fontsize=7,
    )

    # (b) the lane's column of quads: quad q holds rows quad_words(q), one 16-byte load
    labels = [[str(r) for r in plan.quad_words(q)] for q in range(quads)]
    colors = [[dg.RED if q == k else "#dbe4f0" for _ in range(4)] for q in range(quads)]
    dg.cell_grid(column, labels, colors, fontsize=6.5, gid="quad")
    dg.cell_axes(column, [f"a{r}" for r in range(4)], [f"quad {q}" for q in range(quads)])
    column.set_xlabel("register (the input row it holds)", fontsize=7)
    column.set_title(
        f"(b) its quad column: quad k =\n(F(2k), F(2k + 1), F(2k + 1), F(2k + 2)),\n"
        f"QUAD_BYTES = {plan.QUAD_BYTES}: one load each",
        fontsize=7,
    )

    # (c) tile i at k16 step j multiplies quad i + j
    labels = [[str(i + j) for j in range(plan.PAIRS)] for i in range(tiles)]
    colors = [
        [dg.RED if i + j == k else "#dbe4f0" for j in range(plan.PAIRS)] for i in range(tiles)
    ]
    dg.cell_grid(table, labels, colors, fontsize=7, gid="tile-step")
    dg.cell_axes(table, [f"j{j}" for j in range(plan.PAIRS)], [f"tile {i}" for i in range(tiles)])
    table.set_aspect("equal")
    table.set_xlabel("k16 step (filter rows 2j, 2j + 1)", fontsize=7)
    table.set_title(
        f"(c) quad k = i + j: T = {tiles} tiles ×\nPAIRS = {plan.PAIRS} steps = "
        f"{tiles * plan.PAIRS} mma\nfrom T + PAIRS - 1 = {quads} loads",
        fontsize=7,
    )
    served_text = ", ".join(f"({i}, {j})" for i, j in served)
    fig.suptitle(
        f"rung 8 (r08_tensor_core), {found.kernel_name} for {tuple(layer)}: a pair word is two "
        f"neighbouring input columns of one row (32 bits); quad {k} = F({quad_rows[0]}), "
        f"F({quad_rows[1]}), F({quad_rows[2]}), F({quad_rows[3]})\nis the A fragment "
        f"(a0 .. a3) of (tile, step) = {served_text}: one 16-byte load feeds {len(served)} mma",
        fontsize=8,
    )
    return dg.saved(fig, path)


# ---- rung 8: jobs and rounds ----


def _runs(cells: Sequence[tuple[int, int]]) -> list[tuple[int, int, int]]:
    """(row, first, length) of each run of consecutive (row, column) cells."""
    runs: list[tuple[int, int, int]] = []
    for row, col in cells:
        if runs and runs[-1][0] == row and runs[-1][1] + runs[-1][2] == col:
            runs[-1] = (row, runs[-1][1], runs[-1][2] + 1)
        else:
            runs.append((row, col, 1))
    return runs


def draw_jobs(layer: Sequence[int] = layers.CONV2, path: str | Path | None = None) -> Figure:
    """How rung 8's warps share a band of ``layer`` (conv2 by default): (a) the band's output
    plane, cut into sub-bands of 2T rows whose columns are numbered one sub-band after the
    other, each job's 8 columns coloured by the warp that takes it and labelled with its round
    (``plan.job_walk``; filter group 0: with NFG > 1 the other groups repeat the columns);
    (b) the windows one job walks (channel c, filter-column chunk qc, filter-row block pb) and
    where lane (col 0, t 0)'s quads of each start in shared memory (``plan.window_quad``)."""
    found = r08.plan(tuple(layer))
    walk = [job for job in plan.job_walk(found) if job["fg"] == 0]
    ho, wn, k = found.Ho, found.Wn, found.size[5]
    rows = found.tile_rows * found.tiles  # output rows of a sub-band: 2T
    sub_bands = plan.ceil_div(min(found.band_rows, ho), rows)
    rounds = found.rounds
    warp_colors = colormaps["tab10"]

    fig = dg.figure(5.6)
    plane, windows = fig.subplots(1, 2, width_ratios=(2.3, 1))
    for job in walk:
        color = warp_colors(job["slot"] % 10)
        pieces = _runs(job["columns"])
        for sb, first, length in pieces:
            plane.add_patch(
                Rectangle(
                    (first, sb * rows),
                    length,
                    rows,
                    fc=color,
                    alpha=0.85 - 0.4 * job["round"] / max(rounds - 1, 1),
                    ec="white",
                    lw=1.5,
                    gid="job",
                )
            )
        sb, first, length = max(pieces, key=lambda piece: piece[2])
        if length >= 3:  # a label fits
            plane.text(
                first + length / 2,
                sb * rows + rows / 2,
                f"job {job['job']}\nwarp {job['slot']}\nround {job['round']}",
                ha="center",
                va="center",
                fontsize=6.5,
            )
    if sub_bands * rows > ho:  # the last sub-band's rows past the image: computed, not stored
        plane.add_patch(
            Rectangle(
                (0, ho),
                wn,
                sub_bands * rows - ho,
                fc="white",
                alpha=0.6,
                hatch="///",
                ec=dg.GREY,
                lw=0,
                gid="past-the-image",
            )
        )
    for sb in range(1, sub_bands):
        plane.plot([0, wn], [sb * rows, sb * rows], color="black", lw=1.2)
    plane.set_xlim(0, wn)
    plane.set_ylim(sub_bands * rows, 0)
    plane.set_aspect("equal")
    plane.set_xticks([0, 8, wn], ["0", "8", str(wn)])
    plane.set_yticks([sb * rows for sb in range(sub_bands + 1)] + [ho])
    plane.tick_params(labelsize=7)
    what = "column pair" if found.packed else "output column"
    plane.set_xlabel(f"{what} w (Wn = {wn}); job columns n = sub_band · Wn + w", fontsize=7)
    plane.set_ylabel(f"output row (sub-bands of 2T = {rows}; hatched: past Ho = {ho})", fontsize=7)
    plane.set_title(
        f"(a) {len(walk)} jobs; colour: the warp, paler: a later round;\nround = job // NWARPS, "
        f"warp = job % NWARPS (NWARPS = {plan.NWARPS}): {rounds} rounds",
        fontsize=7,
    )

    # (b) one job's windows, in the order its loop takes them
    shown = 6
    order = [
        (c, qc, pb)
        for c in range(found.size[1])
        for qc in range(found.QC)
        for pb in range(found.PB)
    ]
    for y, (c, qc, pb) in enumerate(order[:shown]):
        taps = min(plan.P_BLOCK, k - pb * plan.P_BLOCK)
        used = taps // 2 + taps % 2  # k16 steps, plus a k8 step on an odd last row
        loads = found.tiles + used - 1
        mma = found.tiles * used * found.n_tiles
        first = plan.window_quad(found, 0, 0, 0, c, qc, pb)
        windows.add_patch(
            Rectangle((0, y + 0.08), 1, 0.84, fc=dg.BLUE, alpha=0.25, ec=dg.BLUE, gid="window")
        )
        windows.text(
            0.5,
            y + 0.5,
            f"window c = {c}, qc = {qc}, pb = {pb}: {taps} filter rows\n{loads} quad "
            f"loads from quad {first}, {mma} mma",
            ha="center",
            va="center",
            fontsize=6.5,
        )
    windows.set_xlim(0, 1)
    windows.set_ylim(max(min(len(order), shown), 4), 0)
    windows.axis("off")
    more = f", the first {shown}" if len(order) > shown else ""
    windows.set_title(
        f"(b) inside a job: C × QC × PB = {len(order)} windows{more}\n(lane col 0, t 0's quads, "
        f"counted from quads_at;\na quad column is quad_stride = {found.quad_stride} long)",
        fontsize=7,
    )
    columns = "8 column pairs (16 output columns)" if found.packed else "8 output columns"
    per_tile = plan.PACK_FILTERS if found.packed else 8
    fig.suptitle(
        f"rung 8 (r08_tensor_core), {found.kernel_name} for {tuple(layer)}: a job is one warp's "
        f"{columns} × 2T = {rows} rows × {per_tile}·NT = {per_tile * found.n_tiles} filters,\n"
        f"a round one job per warp; the band ({min(found.band_rows, ho)} rows) takes "
        f"{found.rounds} rounds (Layout.rounds); a group of 8 may wrap into the next sub-band",
        fontsize=8,
    )
    return dg.saved(fig, path)


# ---- rung 13: filters on M, pixels on N ----

SHIFT_COLORS = {(0, 0): dg.BLUE, (0, 1): dg.ORANGE, (1, 0): dg.GREEN, (1, 1): dg.PURPLE}


def fm_step_chunks(found: r13.Plan, c: int, j: int) -> list[dict[str, Any]]:
    """Every chunk k16 step (c, j) of rung 13 reads, job by job, through its one descriptor
    (``plan.fm_step``): the job, the block g, the k8 half (0: filter row 2j, 1: 2j + 1) and
    the chunk, the descriptor's start + half LBO + g (SBO: 8 blocks a 128-byte core matrix,
    16 bytes a block within it). Blocks g >= G are padding."""
    out = []
    for job in range(found.tiles):
        step = plan.fm_step(c, j, job, found.R, found.NP, r13.NT)
        for local in range(r13.NT):
            g = job * r13.NT + local
            for half in range(2):
                offset = half * step["lbo"] + local // 8 * step["sbo"] + local % 8 * r13.CHUNK
                chunk = step["start"] + offset // r13.CHUNK
                out.append({"job": job, "g": g, "half": half, "chunk": chunk})
    return out


def draw_filters_on_m(
    layer: Sequence[int] = layers.CONV2, channel: int = 0, path: str | Path | None = None
) -> Figure:
    """Rung 13's two operands for ``layer`` (conv2 by default): (a) A's ROWS = 64 rows, a
    (filter, dy, dx) each, as the 4 warps of the warpgroup hold them (``plan.fm_row``); (b) the
    8 x 8 window of one filter's four rows, the K x K taps each shift places
    (``plan.fm_tap``); (c) B in shared memory: channel ``channel``'s R rewritten input rows of
    NP 16-byte chunks, even rows first (``plan.parity_row``), and, for each of the channel's
    four k16 steps, the chunks its one descriptor covers (``plan.fm_step``): job 0 solid, later
    jobs hatched, padding blocks grey."""
    found = r13.plan(tuple(layer))
    if found is None:
        raise ValueError(f"rung 13 does not apply to {tuple(layer)} (rung 12 runs instead)")
    k, rows, blocks = found.size[5], found.R, found.NP
    fig = dg.figure(9.2)
    grid = fig.add_gridspec(2, 4, height_ratios=(1, 1.25))
    rows_ax = fig.add_subplot(grid[0, 0])
    taps_ax = fig.add_subplot(grid[0, 1:])

    # (a) A's rows: warp wq holds 16 wq .. 16 wq + 15
    warps = r13.ROWS // 16
    labels = [[f"f{plan.fm_row(16 * w + r)[0]}" for w in range(warps)] for r in range(16)]
    colors = [[SHIFT_COLORS[plan.fm_row(16 * w + r)[1:]] for w in range(warps)] for r in range(16)]
    dg.cell_grid(rows_ax, labels, colors, fontsize=6, gid="a-row")
    dg.cell_axes(
        rows_ax,
        [f"warp {w}" for w in range(warps)],
        [f"i {r % 8}: dy {r % 8 // 4}, dx {r // 8}" for r in range(16)],
        labelsize=5.5,
    )
    rows_ax.set_title(
        f"(a) A's {r13.ROWS} rows, 16 filters × SHIFTS = {r13.SHIFTS}:\nrow 16·warp + 8·dx + i "
        "has f = 4 (i mod 4) + warp,\ndy = i // 4 (lane (i, t) holds i, i + 8)",
        fontsize=7,
    )

    # (b) one filter's four rows over the 8 x 8 window of a channel
    window = 2 * plan.PAIRS
    filt = 6
    for shift, (dy, dx) in enumerate(SHIFT_COLORS):
        m = next(m for m in range(r13.ROWS) if plan.fm_row(m) == (filt, dy, dx))
        x0 = shift * (window + 1)
        for p in range(window):
            for q in range(window):
                live = plan.fm_tap(m, p, q, k) is not None
                taps_ax.add_patch(
                    Rectangle(
                        (x0 + q, p),
                        1,
                        1,
                        fc=SHIFT_COLORS[(dy, dx)] if live else "white",
                        alpha=0.8,
                        ec=dg.GREY,
                        lw=0.3,
                        gid="tap" if live else "zero",
                    )
                )
        taps_ax.text(
            x0 + window / 2,
            -0.4,
            f"row {m} = (f {filt}, dy {dy}, dx {dx})",
            ha="center",
            va="bottom",
            fontsize=6,
        )
    taps_ax.set_xlim(-0.2, 4 * (window + 1) - 0.8)
    taps_ax.set_ylim(window, -1.6)
    taps_ax.set_aspect("equal")
    taps_ax.set_xticks([])
    _ticks(taps_ax, "y", range(window), [f"p {p} (j {p // 2})" for p in range(window)])
    taps_ax.tick_params(labelsize=6, length=0)
    taps_ax.set_frame_on(False)
    taps_ax.set_xlabel(
        "window column q = 0 .. 7 of each row; coloured: w[f][c][p - dy][q - dx], "
        f"{k * k} of {window * window} taps; white: zero",
        fontsize=7,
    )
    taps_ax.set_title(
        "(b) a row's k: (c, p, q) over an 8 × 8 window per channel, four k16 steps j (filter "
        "rows 2j, 2j + 1);\nthe weights never change: 4·C steps × 4 registers, loaded once",
        fontsize=7,
    )

    # (c) B: the channel's rewritten rows, and what each step's descriptor covers
    chunk0 = channel * rows * blocks
    for j in range(plan.PAIRS):
        ax = fig.add_subplot(grid[1, j])
        ax.add_patch(Rectangle((0, 0), blocks, rows, fc="#eeeeee", ec="none"))
        cells: dict[tuple[int, int], list[tuple[int, int]]] = {}
        for read in fm_step_chunks(found, channel, j):
            s, n = divmod(read["chunk"] - chunk0, blocks)
            if 0 <= s < rows:  # padding blocks of the last job may read past the channel
                kind = (-1, -1) if read["g"] >= found.G else (min(read["job"], 1), read["half"])
                cells.setdefault(kind, []).append((s, n))
        for (job, half), places in sorted(cells.items()):
            if job < 0:
                style = {"fc": "#bbbbbb", "ec": "white", "gid": "padding"}
            else:
                style = {
                    "fc": (dg.BLUE, dg.ORANGE)[half],
                    "alpha": 0.9 - 0.45 * job,
                    "ec": "white",
                    "gid": f"job{job}-half{half}",
                }
            for s, first, length in _runs(sorted(places)):
                ax.add_patch(Rectangle((first, s), length, 1, lw=0.3, **style))
        ax.plot([0, blocks], [rows / 2, rows / 2], color="black", lw=1)
        step = plan.fm_step(channel, j, 0, rows, blocks, r13.NT)
        ax.set_xlim(0, blocks)
        ax.set_ylim(rows, 0)
        ax.set_xticks([0.5, blocks - 0.5], ["0", str(blocks - 1)])
        quarter = rows // 4
        ax.set_yticks(
            [s + 0.5 for s in range(0, rows, quarter)],
            [
                f"r {2 * s if s < rows // 2 else 2 * (s - rows // 2) + 1}"
                for s in range(0, rows, quarter)
            ],
        )
        ax.tick_params(labelsize=6, length=0)
        ax.set_xlabel("chunk n: x[c][r][2n .. 2n + 7]", fontsize=6)
        if j == 0:
            ax.set_ylabel(f"R = {rows} rewritten rows: even r, then odd", fontsize=7)
        span = r13.NT * r13.CHUNK  # one half of one job: NT blocks of 16 bytes, contiguous
        even, odd = r13.CHUNK * step["start"], r13.CHUNK * step["start"] + step["lbo"]
        ax.set_title(
            f"step j = {j}, job 0: start chunk {step['start']};\nbytes {even}–{even + span - 1}"
            f" and {odd}–{odd + span - 1}",
            fontsize=7,
        )
    lbo = plan.fm_step(channel, 0, 0, rows, blocks, r13.NT)["lbo"]
    fig.suptitle(
        f"rung 13 (r13_filters_on_m), conv_fm_c{found.size[1]} for {tuple(layer)}: filters on "
        f"wgmma's M, pixels (2 × 2 output blocks g = Y·NP + n) on N = NT = {r13.NT} per job.\n"
        f"Below, B of channel {channel} (bytes from rep_at): input row r is stored at row "
        f"s = (r mod 2)·R/2 + r // 2, so one descriptor per k16 step covers all {r13.NT} blocks: "
        f"blue,\nfilter row 2j (start + g); orange, 2j + 1 (LBO = R/2·NP·16 = {lbo} B later); "
        f"SBO = 128 B per 8 blocks; solid: job 0, pale: job 1 (start + {r13.NT} chunks); grey: "
        f"padding g ≥ G = {found.G}",
        fontsize=8,
    )
    return dg.saved(fig, path)
