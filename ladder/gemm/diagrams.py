"""Pictures of the GEMM rungs' geometry, drawn from the rungs' own constants.

Each function imports the rung it draws and takes every size from it, so a changed tile size
changes the picture. The access patterns (which address a lane touches) are the rungs' index
expressions, written once more here in NumPy; ``tests/test_diagrams.py`` checks them against
the constants and the conflict counts the rungs' docstrings state.

- ``warp_tiling``: `warp-tiling`'s block tile split into warp tiles, sub-tiles and thread tiles.
- ``bank_conflicts``: which of the 32 banks a warp's accesses hit, `register-blocked-2d`'s
  against `transposed-tiles`' (A's store) and `interleaved-columns`' (B's read).
- ``swizzle``: `swizzle`'s tiles, plain rows against `mma-sync`'s padded rows against the XOR
  swizzle.
- ``mma_fragments``: which lane holds which elements of mma.sync m16n8k16's A, B and C/D.
- ``wgmma_ring``: `wgmma`'s producer/consumer ring of shared-memory stages and its barriers.
- ``epilogue_stores``: `wgmma`'s stores straight from registers against `smem-epilogue`'s
  staging.
- ``persistent_timeline``: one SM over two tiles of C, `smem-epilogue`'s block per tile against
  `persistent`'s block that stays, its copies running under the epilogue.
- ``draw_wgmma_descriptor``: `wgmma-descriptors`' shared-memory descriptors of A and B decoded
  into their bit fields, and the 8 x 16-byte core matrices of A they address under the 128-byte
  swizzle.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch, Rectangle

from ladder.core import diagrams as dg
from ladder.gemm import r05_register_blocked_2d as r05
from ladder.gemm import r07_transposed_tiles as r07
from ladder.gemm import r08_interleaved_columns as r08
from ladder.gemm import r10_warp_tiling as r10
from ladder.gemm import r17_mma_sync as r17
from ladder.gemm import r18_swizzle as r18
from ladder.gemm import r21_wgmma_descriptors as r21
from ladder.gemm import r22_wgmma as r22
from ladder.gemm import r23_smem_epilogue as r23
from ladder.gemm import r24_persistent as r24

# The shape of mma.sync.aligned.m16n8k16 (PTX ISA, "Matrix Fragments for mma.m16n8k16"): fixed
# by the instruction, named in `mma-sync` but not a Python constant there.
MMA_M, MMA_N, MMA_K = 16, 8, 16
HALF_BYTES = 2
FLOAT_BYTES = 4
WARPGROUP_THREADS = 128  # 4 warps: the unit that issues one wgmma


# ---- 1. warp-tiling: block -> warp -> thread tiles ----


def warp_tiling(config: r10.Config | None = None) -> Figure:
    """`warp-tiling`'s tiling of C (``r10.DEFAULT`` unless ``config`` is given, e.g. `tuned`'s
    one): left, the BM x BN block tile split into (BM/WM) x (BN/WN) warp tiles, with the
    outputs of lane 0 of every warp marked; right, warp 0's tile split into WNITER sub-tiles
    (WMITER along M), each an 8 x 4 grid of lanes owning TM x TN outputs."""
    c = config or r10.DEFAULT
    wsubm, wsubn = c.wm // c.wmiter, c.wn // c.wniter
    lanes_m, lanes_n = wsubm // c.tm, wsubn // c.tn
    warps_m, warps_n = c.bm // c.wm, c.bn // c.wn
    fig = dg.figure(5.6)
    left, right = fig.subplots(1, 2, width_ratios=(c.bn, c.wn * 1.35))
    warp_colors = [dg.BLUE, dg.ORANGE, dg.GREEN, dg.PURPLE, dg.RED, dg.GREY]

    for w in range(warps_m * warps_n):
        wy, wx = divmod(w, warps_n)
        color = warp_colors[w % len(warp_colors)]
        left.add_patch(
            Rectangle(
                (wx * c.wn, wy * c.wm),
                c.wn,
                c.wm,
                fc=color,
                alpha=0.25,
                ec=color,
                lw=2,
                gid="warp-tile",
            )
        )
        left.text(
            wx * c.wn + c.wn / 2,
            wy * c.wm + c.wm / 2,
            f"warp {w}\n{c.wm} × {c.wn}",
            ha="center",
            va="center",
            fontsize=9,
        )
        for i_sub in range(c.wmiter):  # lane 0's outputs: one TM x TN block per sub-tile
            for j_sub in range(c.wniter):
                left.add_patch(
                    Rectangle(
                        (wx * c.wn + j_sub * wsubn, wy * c.wm + i_sub * wsubm),
                        c.tn,
                        c.tm,
                        fc=color,
                        ec="black",
                        lw=0.6,
                        gid="lane0-outputs",
                    )
                )
    left.set_xlim(0, c.bn)
    left.set_ylim(c.bm, 0)
    left.set_aspect("equal")
    left.set_xticks(range(0, c.bn + 1, c.wn))
    left.set_yticks(range(0, c.bm + 1, c.wm))
    left.set_xlabel("column of the block tile (n)")
    left.set_ylabel("row of the block tile (m)")
    left.set_title(
        f"block tile BM × BN = {c.bm} × {c.bn}: {warps_m} × {warps_n} warp tiles\n"
        f"(dark: lane 0's {c.wmiter * c.tm} × {c.wniter * c.tn} outputs in each warp)",
        fontsize=9,
    )

    for i_sub in range(c.wmiter):
        for j_sub in range(c.wniter):
            x0, y0 = j_sub * wsubn, i_sub * wsubm
            right.add_patch(
                Rectangle((x0, y0), wsubn, wsubm, fill=False, ec="black", lw=1.5, gid="sub-tile")
            )
            for lane in range(dg.WARP):
                ly, lx = divmod(lane, lanes_n)  # place(): lane // lanes_n rows, lane % lanes_n
                right.add_patch(
                    Rectangle(
                        (x0 + lx * c.tn, y0 + ly * c.tm),
                        c.tn,
                        c.tm,
                        fc=dg.BLUE if lane else dg.ORANGE,
                        alpha=0.15 + 0.5 * (lane == 0),
                        ec="white",
                        lw=0.5,
                        gid="thread-tile",
                    )
                )
                right.text(
                    x0 + lx * c.tn + c.tn / 2,
                    y0 + ly * c.tm + c.tm / 2,
                    str(lane),
                    ha="center",
                    va="center",
                    fontsize=5.5,
                )
    right.set_xlim(0, c.wn)
    right.set_ylim(c.wm, 0)
    right.set_aspect("equal")
    right.set_xticks(range(0, c.wn + 1, wsubn))
    right.set_yticks(range(0, c.wm + 1, c.tm))
    right.tick_params(labelsize=7)
    right.set_xlabel(f"column of warp 0's tile (WNITER = {c.wniter} sub-tiles of {wsubn})")
    right.set_ylabel("row of warp 0's tile")
    right.set_title(
        f"warp tile WM × WN = {c.wm} × {c.wn}: {c.wmiter} × {c.wniter} sub-tiles\n"
        f"of {wsubm} × {wsubn}, each {lanes_m} × {lanes_n} lanes of TM × TN = {c.tm} × {c.tn}\n"
        "(the number is the lane)",
        fontsize=9,
    )
    fig.suptitle(
        f"warp-tiling (r10_warp_tiling): {c.threads} threads = {warps_m * warps_n} warps; a thread "
        f"holds {c.wmiter * c.tm} × {c.wniter * c.tn} = "
        f"{c.wmiter * c.tm * c.wniter * c.tn} accumulators",
        fontsize=10,
    )
    return fig


# ---- 2a. register-blocked-2d to interleaved-columns: shared-memory banks ----


def b_read_adjacent(d: int = 0, j: int = 0) -> list[int]:
    """Byte addresses of `register-blocked-2d`'s inner-loop read ``Bs[d, out_col + j]`` by lanes
    0..31 (`unsigned-indices`' and `transposed-tiles`' too): ``out_col = tid % (BN / TN) * TN``,
    Bs is BK x BN floats."""
    return [
        (d * r05.BN + lane % (r05.BN // r05.TN) * r05.TN + j) * FLOAT_BYTES for lane in range(32)
    ]


def b_read_interleaved(d: int = 0, j: int = 0) -> list[int]:
    """`interleaved-columns`' read ``Bs[d, tcol + j * 16]``: ``tcol = tid % (BN / TN)``, columns
    interleaved BN / TN apart instead of TN adjacent ones."""
    cols = r08.BN // r08.TN
    return [(d * r08.BN + lane % cols + j * cols) * FLOAT_BYTES for lane in range(32)]


def a_store_transposed(row_floats: int, off: int = 0) -> list[int]:
    """`transposed-tiles`' store of A's tile, transposed: ``As[a_col, a_row + off]`` with
    ``a_row, a_col = tid // BK, tid % BK``, rows of ``row_floats`` (AS_ROW = BM + PAD)."""
    return [(lane % r07.BK * row_floats + lane // r07.BK + off) * FLOAT_BYTES for lane in range(32)]


def bank_conflicts() -> Figure:
    """Which of the 32 banks each lane of warp 0 hits, per pass, for two accesses the steps from
    `register-blocked-2d` change: the inner loop's read of B's tile (8 adjacent columns per
    thread against `interleaved-columns`' columns 16 apart), and `transposed-tiles`' transposed
    store of A's tile (rows of BM floats against its rows of AS_ROW = BM + PAD)."""
    fig = dg.figure(8.4)
    axes = fig.subplots(4, 1, height_ratios=(4, 1, 8, 1))
    panels = [
        (
            b_read_adjacent(),
            f"register-blocked-2d, read Bs[d, out_col + j], {r05.TN} adjacent columns per thread",
        ),
        (
            b_read_interleaved(),
            f"interleaved-columns, read Bs[d, tcol + {r08.BN // r08.TN} j], columns interleaved",
        ),
        (a_store_transposed(r07.BM), f"A's tile stored transposed, rows of BM = {r07.BM} floats"),
        (
            a_store_transposed(r07.AS_ROW),
            f"transposed-tiles, the same store, rows of AS_ROW = BM + PAD = {r07.AS_ROW} floats",
        ),
    ]
    for ax, (addresses, title) in zip(axes, panels, strict=True):
        dg.draw_bank_map(ax, addresses, title)
    fig.suptitle(
        f"Shared-memory banks (BM × BN × BK = {r08.BM} × {r08.BN} × {r08.BK}, "
        f"TM × TN = {r08.TM} × {r08.TN}, PAD = {r08.PAD}): warp 0, first pass d = 0, j = 0;\n"
        "a cell is one 4-byte word, labelled with the lanes that access it (a word read by "
        "several lanes is one access: broadcast)",
        fontsize=9,
    )
    return fig


# ---- 2b. swizzle: padding against swizzle ----


def swizzle_rule(row_bytes: int) -> Callable[[int, int], int]:
    """`swizzle`'s XOR swizzle for shared rows of ``row_bytes``, derived from the rule it
    follows: within each 128-byte line (8 chunks, one per bank group), the chunk index is
    XORed with the line's index mod the chunks it spans. For A (rows of BK halves = 64 bytes,
    two rows a line) that is ``chunk ^ ((row >> 1) & 3)``; for B (rows of BN halves) it is
    ``chunk ^ (row & 7)``, as in ``r18_swizzle.cu`` and ``r19_warp_tile_64.cu``."""
    line = dg.BANK_GROUPS * dg.CHUNK_BYTES
    rows_per_line = max(1, line // row_bytes)
    span = min(dg.BANK_GROUPS, row_bytes // dg.CHUNK_BYTES)
    return lambda row, chunk: chunk ^ (row // rows_per_line % span)


def ldmatrix_groups(row_bytes: int, layout: str, chunk: int = 0, pad_bytes: int = 0) -> list[int]:
    """Bank groups (0..7) of the 8 rows of one ldmatrix 8 x 8 matrix: rows 0..7 of a tile at
    16-byte ``chunk``, laid out ``"plain"``, ``"padded"`` (rows of ``row_bytes + pad_bytes``)
    or ``"swizzled"`` (`swizzle`)."""
    swz = swizzle_rule(row_bytes)
    out = []
    for row in range(8):
        if layout == "swizzled":
            address = row * row_bytes + swz(row, chunk) * dg.CHUNK_BYTES
        else:
            stride = row_bytes + (pad_bytes if layout == "padded" else 0)
            address = row * stride + chunk * dg.CHUNK_BYTES
        out.append(address // dg.CHUNK_BYTES % dg.BANK_GROUPS)
    return out


def swizzle() -> Figure:
    """`swizzle`'s A (BM x BK) and B (BK x BN) half tiles: where the 8 rows of one ldmatrix
    8 x 8 matrix (one 16-byte chunk per row) land among the 8 bank groups of 4 banks, with
    plain rows, with rows padded by `mma-sync`'s PAD halves, and with `swizzle`'s XOR; and the
    bytes each layout costs per stage."""
    a_row, b_row = r18.BK * HALF_BYTES, r18.BN * HALF_BYTES
    pad = r17.PAD * HALF_BYTES
    stage = (r18.BM * r18.BK + r18.BK * r18.BN) * HALF_BYTES
    extra = {"plain": 0, "padded": (r18.BM + r18.BK) * pad, "swizzled": 0}
    fig = dg.figure(5.8)
    axes = fig.subplots(2, 3)
    for r, (name, row_bytes, rows) in enumerate(
        (("A", a_row, f"{r18.BM} × {r18.BK}"), ("B", b_row, f"{r18.BK} × {r18.BN}"))
    ):
        for c, layout in enumerate(("plain", "padded", "swizzled")):
            ax = axes[r, c]
            groups = ldmatrix_groups(row_bytes, layout, pad_bytes=pad)
            depth = max(groups.count(g) for g in range(dg.BANK_GROUPS))
            for row, g in enumerate(groups):
                ax.add_patch(
                    Rectangle(
                        (g, row),
                        1,
                        1,
                        fc=dg.BLUE if depth == 1 else dg.RED,
                        ec="white",
                        alpha=0.8,
                        gid="chunk",
                    )
                )
                ax.text(g + 0.5, row + 0.5, f"row {row}", ha="center", va="center", fontsize=6)
            ax.set_xlim(0, dg.BANK_GROUPS)
            ax.set_ylim(8, 0)
            ax.set_xticks(
                np.arange(dg.BANK_GROUPS) + 0.5, [f"{4 * g}–{4 * g + 3}" for g in range(8)]
            )
            ax.set_yticks([])
            ax.tick_params(labelsize=6, length=0)
            ax.set_xlabel("banks (bank group = byte address / 16 mod 8)", fontsize=7)
            rule = {
                "plain": f"rows of {row_bytes} B",
                "padded": f"rows of {row_bytes} + {pad} B (PAD = {r17.PAD} halves)",
                "swizzled": "chunk ^ " + ("((row >> 1) & 3)" if name == "A" else "(row & 7)"),
            }[layout]
            verdict = "conflict-free" if depth == 1 else f"{depth}-way conflict"
            ax.set_title(
                f"{name} {rows}, {layout}: {rule}\n{verdict}; +{extra[layout]} B per stage",
                fontsize=8,
            )
    fig.suptitle(
        f"swizzle (r18_swizzle) tiles, one ldmatrix 8 × 8 matrix = rows 0–7 at chunk 0: "
        f"padding costs {extra['padded']:,} B of a {stage:,} B stage "
        f"({100 * extra['padded'] / stage:.0f} %), the swizzle none",
        fontsize=9,
    )
    return fig


# ---- 3. mma.sync m16n8k16 fragments ----


def mma_layout() -> dict[str, np.ndarray]:
    """Owner of every element of mma.sync m16n8k16's operands, from the PTX fragment layout
    (lane = 4g + t): arrays of (lane, register, half) per element of A (16 x 16, row-major),
    B (16 x 8, k x n) and C/D (16 x 8)."""
    a = np.full((MMA_M, MMA_K, 3), -1)
    b = np.full((MMA_K, MMA_N, 3), -1)
    d = np.full((MMA_M, MMA_N, 3), -1)
    for lane in range(dg.WARP):
        g, t = divmod(lane, 4)
        for half in range(2):
            for reg, (row, col) in enumerate(
                ((g, 2 * t), (g + 8, 2 * t), (g, 2 * t + 8), (g + 8, 2 * t + 8))
            ):
                a[row, col + half] = (lane, reg, half)
            for reg, k in enumerate((2 * t, 2 * t + 8)):
                b[k + half, g] = (lane, reg, half)
            for reg, row in enumerate((g, g + 8)):  # d0, d1 row g; d2, d3 row g + 8
                d[row, 2 * t + half] = (lane, 2 * reg + half, 0)
    return {"A": a, "B": b, "C": d}


def mma_fragments() -> Figure:
    """Which lane holds which elements of mma.sync m16n8k16's A (16 x 16), B (16 x 8) and
    C/D (16 x 8): each cell shows the lane and its register (a0..a3, b0..b1 each hold two
    halves; d0..d3 one float each). Colour is the lane's t = lane % 4."""
    layout = mma_layout()
    palette = [dg.BLUE, dg.ORANGE, dg.GREEN, dg.PURPLE]
    fig = dg.figure(6.2)
    axes = fig.subplots(1, 3, width_ratios=(MMA_K, MMA_N, MMA_N))
    names = {"A": "a", "B": "b", "C": "d"}
    shapes = {
        "A": f"A, {MMA_M} × {MMA_K} (row-major)",
        "B": f"B, {MMA_K} × {MMA_N} (k × n)",
        "C": f"C/D, {MMA_M} × {MMA_N} (FP32)",
    }
    for ax, (key, owners) in zip(axes, layout.items(), strict=True):
        labels = [[f"{o[0]}\n{names[key]}{o[1]}" for o in row] for row in owners]
        colors = [[palette[o[0] % 4] for o in row] for row in owners]
        dg.cell_grid(ax, labels, colors, fontsize=5.5, gid=f"{key}-element")
        rows, cols = owners.shape[:2]
        dg.cell_axes(ax, [str(i) for i in range(cols)], [str(i) for i in range(rows)])
        ax.set_aspect("equal")
        ax.set_xlabel("k" if key == "A" else "n", fontsize=8)
        ax.set_ylabel("k" if key == "B" else "m", fontsize=8)
        ax.set_title(shapes[key], fontsize=9)
    fig.suptitle(
        f"mma.sync.m{MMA_M}n{MMA_N}k{MMA_K} fragments (r17_mma_sync): lane = 4g + t; "
        "a0 = A[g][2t..2t+1], a1 = A[g+8][2t..], a2 = A[g][2t+8..], a3 = A[g+8][2t+8..];\n"
        "b0 = B[2t..2t+1][g], b1 = B[2t+8..][g]; d0, d1 = D[g][2t..], d2, d3 = D[g+8][2t..]. "
        "Each cell: lane, then register; colour: t = lane % 4",
        fontsize=9,
    )
    return fig


# ---- 4. wgmma: the TMA -> wgmma ring ----


def ring_schedule(
    stages: int = r22.STAGES, k_tiles: int = 10, copy: float = 0.6, mma: float = 1.0
) -> list[dict[str, Any]]:
    """A model of wgmma's main loop, one record per K tile: when its copy starts and lands
    (the producer waits on ``empty[s]`` first once kt >= stages), when the consumers start
    and finish its MMAs (after waiting on ``full[s]``), and when they release its stage
    (arrive on ``empty[s]`` after ``wgmma.wait_group 1`` in the next iteration: one tile
    late). ``copy`` and ``mma`` are durations in arbitrary units (copies run one at a time)."""
    tiles: list[dict[str, Any]] = []
    engine = consumer = 0.0
    for kt in range(k_tiles):
        s = kt % stages
        free = tiles[kt - stages]["released"] if kt >= stages else 0.0
        start = max(engine, free)
        tiles.append({"tile": kt, "stage": s, "empty_wait": free, "copy_start": start})
        tiles[kt]["full"] = engine = start + copy
        # consumers of tile kt - 1 finish; tile kt needs its full barrier
        mma_start = max(consumer, tiles[kt]["full"])
        tiles[kt]["mma_start"] = mma_start
        tiles[kt]["mma_end"] = consumer = mma_start + mma
        if kt > 0:
            tiles[kt - 1]["released"] = mma_start  # after issuing kt, wait_group 1 -> kt-1 done
    tiles[-1]["released"] = tiles[-1]["mma_end"]
    return tiles


def wgmma_ring(k_tiles: int | None = None) -> Figure:
    """wgmma's pipeline as a timeline: one producer thread issues a bulk tensor copy (TMA)
    per K tile into stage kt % STAGES once that stage's ``empty`` barrier says the consumers
    are done with it; the copy lands and completes the stage's ``full`` barrier, on which the
    consumer warpgroups wait before their wgmma. Rows: the copy engine, each stage's
    contents, the consumers. Arrows: full[s] (copy -> consumers) and empty[s] (consumers ->
    producer)."""
    stages = r22.STAGES
    consumers = r22.THREADS // WARPGROUP_THREADS - 1  # one producer warpgroup, the rest math
    tiles = ring_schedule(stages, k_tiles or 2 * stages + 2)
    stage_kb = (r22.BM * r22.BK + r22.BK * r22.BN) * HALF_BYTES // 1024
    fig = dg.figure(5.4)
    ax = fig.add_subplot()
    rows = {"copy": 0, **{f"stage {s}": 1 + s for s in range(stages)}, "mma": stages + 1}
    palette = [dg.BLUE, dg.ORANGE, dg.GREEN, dg.PURPLE, dg.RED, dg.GREY]
    for t in tiles:
        color = palette[t["stage"] % len(palette)]
        y_copy, y_stage, y_mma = rows["copy"], rows[f"stage {t['stage']}"], rows["mma"]
        tile = str(t["tile"])
        _bar(ax, t["copy_start"], t["full"], y_copy, color, tile, gid="copy")
        # the stage while it is filled (hatched), then while it holds the tile
        _bar(ax, t["copy_start"], t["full"], y_stage, color, "", gid="stage-filling", hatch=True)
        _bar(ax, t["full"], t["released"], y_stage, color, f"tile {tile}", gid="stage-full")
        _bar(ax, t["mma_start"], t["mma_end"], y_mma, color, tile, gid="mma")
        _arrow(ax, (t["full"], y_stage + 0.85), (t["mma_start"], y_mma + 0.15), "full")
        if t["tile"] >= stages:
            _arrow(ax, (t["empty_wait"], y_mma + 0.15), (t["copy_start"], y_copy + 0.85), "empty")
    end = max(t["mma_end"] for t in tiles)
    ax.set_xlim(0, end + 0.2)
    ax.set_ylim(stages + 2, 0)
    labels = [
        "TMA copies\n(1 producer thread)",
        *(f"stage {s}\n({stage_kb} KB)" for s in range(stages)),
        f"wgmma, {consumers}\nconsumer warpgroups",
    ]
    ax.set_yticks(np.arange(stages + 2) + 0.5, labels)
    ax.tick_params(axis="y", labelsize=7, length=0)
    ax.set_xlabel(
        "time (model: a copy takes 0.6 of a K tile's MMAs; the ring fills, then each copy "
        "waits for a stage's release)"
    )
    ax.plot([], [], color=dg.GREEN, lw=1, label="full[s]: copy landed (expect_tx bytes) → MMA")
    ax.plot([], [], color=dg.RED, lw=1, ls="--", label="empty[s]: stage released → next copy")
    ax.plot([], [], color="white", label="hatched: stage being filled; solid: tile resident")
    fig.legend(loc="outside lower center", ncols=3, fontsize=7, frameon=False)
    ax.set_title(
        f"wgmma (r22_wgmma): a ring of STAGES = {stages} shared-memory stages of "
        f"A {r22.BM} × {r22.BK} + B {r22.BK} × {r22.BN} halves;\nK tile kt uses stage "
        f"kt mod {stages}; a stage is released one tile late (after wgmma.wait_group 1)",
        fontsize=9,
    )
    return fig


def _bar(
    ax: Any,
    start: float,
    end: float,
    row: int,
    color: Any,
    label: str,
    gid: str,
    hatch: bool = False,
) -> None:
    """A bar from ``start`` to ``end`` in timeline row ``row``, labelled at its centre."""
    style = {"fc": "white", "hatch": "////", "ec": color} if hatch else {"fc": color, "alpha": 0.6}
    ax.add_patch(Rectangle((start, row + 0.15), end - start - 0.03, 0.7, lw=0.8, gid=gid, **style))
    if label:
        ax.text((start + end) / 2, row + 0.5, label, ha="center", va="center", fontsize=7)


def _arrow(ax: Any, start: tuple[float, float], end: tuple[float, float], barrier: str) -> None:
    """A barrier's signal: ``full`` (copy landed -> MMAs) or ``empty`` (released -> copy)."""
    color, style = (dg.GREEN, "-") if barrier == "full" else (dg.RED, "--")
    ax.add_patch(
        FancyArrowPatch(
            start,
            end,
            arrowstyle="-|>",
            mutation_scale=7,
            color=color,
            lw=0.7,
            ls=style,
            gid=f"{barrier}-arrow",
        )
    )


# ---- 5. smem-epilogue: the epilogue through shared memory ----


def accumulator_rows(lane: int, j: int) -> tuple[int, int, int]:
    """wgmma's m64nNk16 accumulator (wgmma's epilogue comment): lane's (row, first column)
    for 8-column group j of warp 0's rows r0 = lane / 4 (and r0 + 8), and its byte offset in
    that row of C: two halves at columns 8j + 2 (lane % 4)."""
    row, col = lane // 4, 8 * j + 2 * (lane % 4)
    return row, col, col * HALF_BYTES


def epilogue_stores(j: int = 3, row: int = 5) -> Figure:
    """One warp store instruction of wgmma (j: which 8-column group) against smem-epilogue's two
    steps: its staging writes (the same j) among the bank groups of the swizzled chunk, and
    one 16-byte read-back of row ``row`` per quarter-warp, then a warp's whole-row store."""
    fig = dg.figure(3.4)
    direct, write, read = fig.subplots(1, 3)
    units = r23.UNITS_PER_ROW
    rows = dg.WARP // 4
    for lane in range(dg.WARP):  # wgmma: 4 bytes per lane, 8 rows of C, 16 bytes in each
        r, _, byte = accumulator_rows(lane, j)
        direct.add_patch(Rectangle((byte / r23.UNIT_BYTES, r), 0.25, 1, fc=dg.RED, ec="white",
                                   gid="direct"))  # fmt: skip
    sectors = len({(accumulator_rows(lane, j)[0], accumulator_rows(lane, j)[2] // 32)
                   for lane in range(dg.WARP)})  # fmt: skip
    direct.set_xlim(0, units)
    direct.set_ylim(rows, 0)
    direct.set_title(f"wgmma: one store instruction (j = {j})\n{rows} rows × 16 B of C: "
                     f"{sectors} partial 32-byte sectors", fontsize=8)  # fmt: skip
    direct.set_xlabel(f"16-byte units of a {units * r23.UNIT_BYTES}-byte row of C", fontsize=7)
    groups = []
    for r in range(rows):  # smem-epilogue, step 1: the same values into the swizzled staging
        g = (r23.staged(r, j) % r23.ROW_BYTES) // r23.UNIT_BYTES
        groups.append(g)
        write.add_patch(Rectangle((g, r), 1, 1, fc=dg.BLUE, ec="white", gid="staged"))
        write.text(g + 0.5, r + 0.5, f"row {r}", ha="center", va="center", fontsize=6)
    write.set_xlim(0, dg.BANK_GROUPS)
    write.set_ylim(rows, 0)
    depth = max(groups.count(g) for g in set(groups))
    verdict = "conflict-free" if depth == 1 else f"{depth}-way conflict"
    write.set_title(
        f"step 1: the same 32 lanes into shared memory\nunit ^ (row % 8): {verdict}",
        fontsize=8,
    )
    write.set_xlabel("bank group (4 banks, 16 bytes)", fontsize=7)
    reads = [(r23.staged(row, u) % r23.ROW_BYTES) // r23.UNIT_BYTES for u in range(8)]
    for u, g in enumerate(reads):  # step 2: a quarter-warp reads 8 units of one row
        read.add_patch(Rectangle((g, 0), 1, 1, fc=dg.GREEN, ec="white", gid="read"))
        read.text(g + 0.5, 0.5, f"u{u}", ha="center", va="center", fontsize=6)
    read.add_patch(Rectangle((0, 2), dg.BANK_GROUPS, 1, fc=dg.GREEN, alpha=0.5, ec="white",
                             gid="row"))  # fmt: skip
    read.text(dg.BANK_GROUPS / 2, 2.5, f"then one warp stores {dg.WARP} × 16 B = row {row} of C",
              ha="center", va="center", fontsize=6)  # fmt: skip
    read.set_xlim(0, dg.BANK_GROUPS)
    read.set_ylim(3, 0)
    read.set_title(f"step 2: row {row} read back, 8 units per quarter-warp\n"
                   f"{len(set(reads))} bank groups: conflict-free, then whole 32-byte sectors",
                   fontsize=8)  # fmt: skip
    read.set_xlabel("bank group (4 banks, 16 bytes)", fontsize=7)
    for ax in (direct, write, read):
        ax.set_yticks([])
        ax.tick_params(labelsize=6, length=0)
    fig.suptitle("wgmma's epilogue against smem-epilogue's (r23_smem_epilogue): the same values, "
                 "staged through shared memory", fontsize=9)  # fmt: skip
    return fig


# ---- 6. persistent: a block that stays ----


def tiles_schedule(
    persistent: bool,
    tiles: int = 2,
    k_tiles: int = 6,
    stages: int = r24.STAGES,
    copy: float = 0.6,
    mma: float = 1.0,
    epilogue: float = 1.5,
    launch: float = 0.5,
) -> dict[str, list[dict[str, Any]]]:
    """A model of one SM computing ``tiles`` tiles of C, ``k_tiles`` K tiles each, as
    ``ring_schedule`` models one (copies one at a time, ``copy`` long; a K tile's multiplies
    ``mma`` long; a stage released when the next K tile's multiplies start, or after
    ``wait_group 0`` for a tile's last). smem-epilogue (``persistent=False``): a block per tile;
    the next block starts ``launch`` after the last one's epilogue, with an empty ring.
    persistent: one block; the producer's K-tile counter runs across tiles, so it copies the
    next tile while the consumers spend ``epilogue`` writing the last one out. Returns the K
    tiles (tile, k, stage, copy_start, full, mma_start, mma_end, released) and the epilogues
    (tile, start, end)."""
    ks: list[dict[str, Any]] = []
    epilogues: list[dict[str, Any]] = []
    engine = consumer = 0.0
    for tile in range(tiles):
        if not persistent and tile > 0:  # a new block: launched after the last one ended
            engine = consumer = epilogues[-1]["end"] + launch
        first = len(ks)
        for k in range(k_tiles):
            it = len(ks) if persistent else len(ks) - first  # the producer's counter
            free = ks[len(ks) - stages]["released"] if it >= stages else engine
            start = max(engine, free)
            ks.append({"tile": tile, "k": k, "stage": it % stages, "copy_start": start})
            ks[-1]["full"] = engine = start + copy
            ks[-1]["mma_start"] = max(consumer, ks[-1]["full"])
            ks[-1]["mma_end"] = consumer = ks[-1]["mma_start"] + mma
            if k > 0:
                ks[-2]["released"] = ks[-1]["mma_start"]
        ks[-1]["released"] = consumer  # after wait_group 0
        epilogues.append({"tile": tile, "start": consumer, "end": consumer + epilogue})
        consumer += epilogue
    return {"k_tiles": ks, "epilogues": epilogues}


def persistent_timeline(tiles: int = 2, k_tiles: int = 6) -> Figure:
    """One SM over ``tiles`` tiles of C in the ``tiles_schedule`` model: top, `smem-epilogue` (a
    block per tile: each starts with an empty ring, after the last block's epilogue); bottom,
    `persistent` (one block that stays: the copies of the next tile run while the consumers write
    the last one out). Rows: the producer's copies, the consumers' multiplies and epilogues."""
    fig = dg.figure(5.0)
    axes = fig.subplots(2, 1, sharex=True)
    palette = [dg.BLUE, dg.ORANGE, dg.GREEN, dg.PURPLE]
    ends = {}
    for ax, persistent in zip(axes, (False, True), strict=True):
        run = tiles_schedule(persistent, tiles, k_tiles)
        for t in run["k_tiles"]:
            color = palette[t["tile"] % len(palette)]
            label = f"{t['tile']}.{t['k']}"
            _bar(ax, t["copy_start"], t["full"], 0, color, label, gid="copy")
            _bar(ax, t["mma_start"], t["mma_end"], 1, color, label, gid="mma")
        for e in run["epilogues"]:
            color = palette[e["tile"] % len(palette)]
            _bar(ax, e["start"], e["end"], 1, color, "epilogue", gid="epilogue", hatch=True)
        ends[persistent] = run["epilogues"][-1]["end"]
        name = (
            "persistent (r24_persistent): one block stays"
            if persistent
            else ("smem-epilogue (r23_smem_epilogue): a block per tile")
        )
        ax.set_title(f"{name}: {tiles} tiles end at {ends[persistent]:.1f}", fontsize=9)
        ax.set_ylim(2, 0)
        ax.set_yticks([0.5, 1.5], ["TMA copies\n(producer)", "wgmma, then\nepilogue (consumers)"])
        ax.tick_params(axis="y", labelsize=7, length=0)
    axes[1].set_xlim(0, max(ends.values()) + 0.2)
    axes[1].set_xlabel(
        f"time (model: STAGES = {r24.STAGES}; a copy takes 0.6 of a K tile's multiplies, the "
        "epilogue 1.5; label: tile.k)"
    )
    return fig


# ---- 7. wgmma-descriptors: the shared-memory descriptor and the core matrix ----

# wgmma-descriptors' stage (r21_wgmma_descriptors.cu): A's BM x BK tile, then B's BK x BN in chunks
# of 64 columns, both written by TMA with the 128-byte swizzle into 1024-byte-aligned tiles.
# tests/test_diagrams.py evaluates the .cu's own expressions and compares them with these.
A_ROW_BYTES = r21.BK * HALF_BYTES  # a row of A's tile: 128 bytes, one row of the swizzle
B_CHUNK = dg.SWIZZLE_ROW // HALF_BYTES  # columns of B per TMA box: one 128-byte row per k-row
CORE_ROWS = 8  # a core matrix: 8 rows of 16 bytes (8 x 8 halves), the unit wgmma reads
WGMMA_M, WGMMA_K = 64, 16  # a warpgroup's wgmma: 64 rows of A, 16 of K (m64nNk16)
STAGE_BYTES = (r21.BM * r21.BK + r21.BK * r21.BN) * HALF_BYTES


def wgmma_descriptor_args(
    operand: str, stage: int, warpgroup: int, kk: int
) -> tuple[int, int, int]:
    """(address, LBO, SBO) in bytes of the descriptor `wgmma-descriptors` builds for ``operand``
    ("A" or "B") at k16 step ``kk`` of stage ``stage``, addresses from the 1024-byte-aligned base of
    the stage ring. A is K-major: the warpgroup's 64 rows start 64 rows in, a k16 step is 32
    bytes along the rows; LBO is unused by a K-major swizzled operand (one 16-byte unit), SBO is
    a swizzle atom, 8 rows of 128 bytes: the next 8 rows. B is N-major in chunks of B_CHUNK
    columns: a k16 step is 16 k-rows of 128 bytes; LBO is one chunk (BK rows), the next 64
    columns of N; SBO the next 8 k-rows."""
    base = stage * STAGE_BYTES
    atom = CORE_ROWS * dg.SWIZZLE_ROW
    if operand == "A":
        address = base + warpgroup * WGMMA_M * A_ROW_BYTES + kk * WGMMA_K * HALF_BYTES
        return address, dg.CHUNK_BYTES, atom
    if operand == "B":
        address = base + r21.BM * A_ROW_BYTES + kk * WGMMA_K * dg.SWIZZLE_ROW
        return address, r21.BK * dg.SWIZZLE_ROW, atom
    raise ValueError(f"operand is 'A' or 'B', not {operand!r}")


def wgmma_descriptor(operand: str, stage: int = 0, warpgroup: int = 0, kk: int = 0) -> int:
    """The 64-bit descriptor `wgmma-descriptors` gives wgmma for ``operand``
    (``wgmma_descriptor_args``), 128-byte swizzled."""
    return dg.descriptor(*wgmma_descriptor_args(operand, stage, warpgroup, kk), dg.SWIZZLE_ROW)


def a_tile_offset(row: int, k: int) -> int:
    """The byte of a stage's A tile where TMA puts A's element (row, k) of the block's BM x BK
    tile: row-major rows of 128 bytes, then the 128-byte swizzle."""
    return dg.swizzle_128(row * A_ROW_BYTES + k * HALF_BYTES)


def core_matrix_rows(desc: int, i: int, kh: int) -> list[int]:
    """The byte addresses of the 8 rows (16 bytes each) of core matrix (i, kh) that wgmma reads
    through ``desc``, a K-major 128-byte-swizzled descriptor: row group i SBO bytes apart, its
    rows one swizzle row (128 bytes) apart, k8 half kh 16 bytes along, then the swizzle, which
    the hardware applies to the address (why the tiles must be 1024-byte aligned)."""
    fields = dg.descriptor_fields(desc)
    start, sbo = fields["start_address"], fields["sbo"]
    return [
        dg.swizzle_128(start + i * sbo + r * dg.SWIZZLE_ROW + kh * dg.CHUNK_BYTES)
        for r in range(CORE_ROWS)
    ]


FIELD_COLORS = {
    "start_address": dg.BLUE,
    "lbo": dg.ORANGE,
    "sbo": dg.GREEN,
    "base_offset": dg.GREY,
    "swizzle": dg.RED,
}
KK_COLORS = (dg.BLUE, dg.ORANGE, dg.GREEN, dg.PURPLE)


def _draw_bits(ax: Any, desc: int, y0: float, notes: dict[str, str], gid: str) -> None:
    """``desc`` as 4 rows of 16 bits (bit 0 at the right of the first row), each field in its
    colour, its value and ``notes`` beside the row that holds it."""
    spans = {name: (first, first + bits) for name, first, bits in dg.DESCRIPTOR_FIELDS}
    fields = dg.descriptor_fields(desc)
    for bit in range(64):
        owner = next((n for n, (lo, hi) in spans.items() if lo <= bit < hi), None)
        x, y = 15 - bit % 16, y0 + bit // 16
        ax.add_patch(
            Rectangle(
                (x, y),
                1,
                1,
                fc=FIELD_COLORS[owner] if owner else "white",
                alpha=0.55,
                ec=dg.GREY,
                lw=0.4,
                gid=gid,
            )
        )
        ax.text(x + 0.5, y + 0.5, str((desc >> bit) & 1), ha="center", va="center", fontsize=6)
    raw = {name: (desc >> lo) & ((1 << (hi - lo)) - 1) for name, (lo, hi) in spans.items()}
    lines = {
        0: f"bits 0–13, start address >> 4 = {raw['start_address']}: byte "
        f"{fields['start_address']}; {notes['start_address']}",
        1: f"bits 16–29, LBO >> 4 = {raw['lbo']}: {fields['lbo']} B; {notes['lbo']}",
        2: f"bits 32–45, SBO >> 4 = {raw['sbo']}: {fields['sbo']} B; {notes['sbo']}",
        3: f"bits 49–51, base offset {raw['base_offset']}; bits 62–63, swizzle mode "
        f"{raw['swizzle']}: {fields['swizzle']}-byte swizzle",
    }
    for row, line in lines.items():
        ax.text(16.4, y0 + row + 0.5, line, ha="left", va="center", fontsize=6.5)


def draw_wgmma_descriptor(
    stage: int = 0, warpgroup: int = 1, kk: int = 1, path: str | Path | None = None
) -> Figure:
    """`wgmma-descriptors`' descriptors at k16 step ``kk`` of ``stage`` for ``warpgroup``: (a) A's
    and B's 64-bit words, bit by bit, decoded into their fields (start address >> 4, LBO >> 4,
    SBO >> 4, base offset, swizzle mode); (b) the warpgroup's 64 x BK tile of A cut into 8 x
    16-byte core matrices, the 8 x 2 that step kk reads labelled (i, kh); (c) where rows 0 to 7
    of the tile land in shared memory under the 128-byte swizzle, one 1024-byte atom: chunk c of
    row r at chunk c XOR r, so the 8 rows of one core matrix fill all 8 bank groups."""
    fig = dg.figure(7.6)
    grid = fig.add_gridspec(2, 2, height_ratios=(1.05, 1))
    bits = fig.add_subplot(grid[0, :])
    tile, atom = fig.add_subplot(grid[1, 0]), fig.add_subplot(grid[1, 1])

    # (a) the two descriptors
    da, db = (
        wgmma_descriptor("A", stage, warpgroup, kk),
        wgmma_descriptor("B", stage, warpgroup, kk),
    )
    notes_a = {
        "start_address": f"stage {stage} + warpgroup {warpgroup} × 64 rows × 128 B + kk × 32 B",
        "lbo": "unused by a K-major swizzled operand (one unit)",
        "sbo": "the next 8 rows (one 1024-byte swizzle atom)",
    }
    notes_b = {
        "start_address": f"stage {stage} + A's {r21.BM * A_ROW_BYTES} B + kk × 16 k-rows × 128 B",
        "lbo": f"the next {B_CHUNK} columns of N (a chunk of BK = {r21.BK} k-rows)",
        "sbo": "the next 8 k-rows (one swizzle atom)",
    }
    _draw_bits(bits, da, 0, notes_a, "bit-A")
    _draw_bits(bits, db, 5.6, notes_b, "bit-B")
    bits.text(0, -0.15, f"A (64 × 16 slice, K-major): {da:#018x}", fontsize=7.5, va="bottom")
    bits.text(0, 5.45, f"B (16 × {r21.BN} slice, N-major): {db:#018x}", fontsize=7.5, va="bottom")
    bits.set_xlim(0, 48)
    bits.set_ylim(9.6, -1.1)
    bits.set_xticks([0.5, 15.5], ["bit 15 (+16·row)", "bit 0"])
    bits.set_yticks([])
    bits.tick_params(labelsize=6, length=0)
    bits.set_frame_on(False)
    bits.set_title(
        f"(a) the descriptors of k16 step kk = {kk} (stage {stage}, warpgroup {warpgroup}; "
        "addresses from the ring's 1024-byte-aligned base), four rows of 16 bits each",
        fontsize=8,
    )

    # (b) the warpgroup's tile of A in core matrices
    chunks = A_ROW_BYTES // dg.CHUNK_BYTES  # 16-byte columns of a row: 2 per k16 step
    groups = WGMMA_M // CORE_ROWS
    for i in range(groups):
        for c in range(chunks):
            step, half = divmod(c, 2)
            read = step == kk
            tile.add_patch(
                Rectangle(
                    (c, i),
                    1,
                    1,
                    fc=KK_COLORS[step],
                    alpha=0.85 if read else 0.3,
                    ec="black" if read else "white",
                    lw=1.0 if read else 0.5,
                    gid="core-matrix",
                )
            )
            if read:
                tile.text(c + 0.5, i + 0.5, f"({i}, {half})", ha="center", va="center", fontsize=6)
    dg.cell_axes(
        tile,
        [f"k {8 * c}–{8 * c + 7}" for c in range(chunks)],
        [f"rows {8 * i}–{8 * i + 7}" for i in range(groups)],
        labelsize=5.5,
    )
    tile.set_xlabel("colour: the k16 step kk that reads the column", fontsize=7)
    tile.set_title(
        f"(b) warpgroup {warpgroup}'s 64 × BK = 64 × {r21.BK} tile of A: 8 × {chunks} core "
        f"matrices\n(8 rows × 16 B); step kk = {kk} reads 64 × 16 of it: (i, kh) = 8 × 2",
        fontsize=7,
    )

    # (c) rows 0-7 in shared memory: logical chunk c of row r sits at chunk c ^ r
    for r in range(CORE_ROWS):
        for c in range(chunks):
            place = dg.swizzle_128(r * A_ROW_BYTES + c * dg.CHUNK_BYTES) % A_ROW_BYTES
            column = place // dg.CHUNK_BYTES
            read = c // 2 == kk
            atom.add_patch(
                Rectangle(
                    (column, r),
                    1,
                    1,
                    fc=KK_COLORS[c // 2],
                    alpha=0.85 if read else 0.3,
                    ec="black" if read else "white",
                    lw=1.0 if read else 0.5,
                    gid="atom-chunk",
                )
            )
            atom.text(column + 0.5, r + 0.5, f"k{8 * c}", ha="center", va="center", fontsize=6)
    dg.cell_axes(
        atom,
        [f"{4 * b}–{4 * b + 3}" for b in range(chunks)],
        [f"row {r}" for r in range(CORE_ROWS)],
    )
    atom.set_xlabel("banks (16-byte chunk of the 128-byte row)", fontsize=7)
    atom.set_title(
        f"(c) rows 0–7 in shared memory, one 1024-byte atom: chunk c of row r\nat c XOR r; "
        f"step {kk}'s core matrices (0, 0), (0, 1) (outlined) span 8 bank groups each",
        fontsize=7,
    )
    fig.suptitle(
        f"wgmma-descriptors (r21_wgmma_descriptors), BM × BN × BK = {r21.BM} × {r21.BN} × "
        f"{r21.BK}: one wgmma m64n{r21.BN}k16 per k16 step reads A and B through these "
        "descriptors\n(wgmma, smem-epilogue and persistent build the same ones); the tiles are "
        "written by TMA with the 128-byte swizzle, which wgmma undoes from the address bits",
        fontsize=8,
    )
    return dg.saved(fig, path)
