"""Pictures of the convolution ladder's implicit GEMM, drawn from the layer and rung constants.

- ``implicit_gemm``: how row (c, p, q) and column (b, oy, ox) of the unrolled matrix U index
  the input, for conv2's shape (``layers.CONV2``), with rung 4's (``r04_fused_implicit_gemm``)
  16 x 16 tile of U, and how the reduction axis is padded by rung 4 and by the tensor-core
  plan (``tc/plan.py``: P_BLOCK x Q_CHUNK windows per channel).
"""

from __future__ import annotations

from collections.abc import Sequence

from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from ladder.conv import layers
from ladder.conv import r04_fused_implicit_gemm as r04
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
