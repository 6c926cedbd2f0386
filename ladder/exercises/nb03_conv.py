"""Exercises for notebook 03 (convolution).

- ``check_conv1_shape_flops(dict)``: the output shape and GFLOP of the course's conv1 layer.
- ``check_quads_per_window(dict)``: rung 8's window on tensor cores: how many quads (16-byte
  A fragments) a warp loads and how many mma.sync it issues per n8 tile, for T tiles.
- ``check_quad_words(dict)``: which input rows make the pair words of one quad, which (tile,
  k16 step) pairs it feeds, and which input columns one lane's pair words hold
  (``conv.diagrams.draw_quads``).
- ``check_job_rounds(dict)``: how many rounds of jobs rung 8's warps take over conv2's output
  plane, and which warp in which round computes one output (``conv.diagrams.draw_jobs``).
"""

from __future__ import annotations

from typing import Any

from ladder.conv import r08_tensor_core as r08
from ladder.conv.layers import CONV1, CONV2
from ladder.conv.tc import plan
from ladder.core.rung import get_problem
from ladder.exercises._common import as_dict, close, require

T = 10  # m16 tiles stacked down the image per warp job: conv1's rung 8 kernel


def check_conv1_shape_flops(answer: Any) -> str:
    """conv1 is (B, C, M, H, W, K) = ``CONV1``: B images of C channels, H x W, M filters of
    K x K, no padding, stride 1. Keys: output_shape (a tuple), gflop (a multiply-add is 2)."""
    found = as_dict(answer, ("output_shape", "gflop"), "check_conv1_shape_flops")
    problem = get_problem("conv")
    shape = problem.output_shape(CONV1)
    gflop = problem.flops(CONV1) / 1e9
    h, k = CONV1[3], CONV1[5]
    require(
        tuple(found["output_shape"]) == tuple(shape),
        f"output_shape: (B, M, Ho, Wo); without padding a {k} x {k} filter fits "
        f"{h} - {k} + 1 times across {h} rows",
    )
    if close(found["gflop"], gflop / 2):
        raise AssertionError("gflop: count a multiply-add as 2 operations")
    require(
        close(found["gflop"], gflop),
        "gflop: 2 x B x M x Ho x Wo outputs' worth of C x K x K multiply-adds, over 1e9",
    )
    return f"right: {shape}, {gflop:.1f} GFLOP"


def check_quads_per_window(answer: Any) -> str:
    """Rung 8 runs a window over P_BLOCK = 8 filter rows in PAIRS = 4 k16 steps j. Tile i at
    step j needs quad k = i + j (input rows 2k .. 2k + 2). For T tiles, how many distinct quads
    does a warp load per window, and how many mma per n8 tile? Keys: quads, mma."""
    found = as_dict(answer, ("quads", "mma"), "check_quads_per_window")
    pairs = [(i, j) for i in range(T) for j in range(plan.PAIRS)]
    quads = len({i + j for i, j in pairs})
    require(
        found["quads"] == quads,
        f"quads: tiles share quads along diagonals i + j; list k = i + j for i < {T}, "
        f"j < {plan.PAIRS} and count the distinct values",
    )
    require(found["mma"] == len(pairs), "mma: one per (tile, k16 step)")
    return (
        f"right: {quads} 16-byte loads feed {len(pairs)} mma; without sharing it would be "
        f"{len(pairs)} loads"
    )


QUAD = 3  # check_quad_words: the quad (diagonal) asked about
LANE = (2, 3)  # check_quad_words: lane (g, t), g = lane // 4, t = lane % 4
OUTPUT = (14, 5)  # check_job_rounds: (output row, output column) of conv2


def check_quad_words(answer: Any) -> str:
    """Rung 8 on conv2 (its kernel stacks T = 6 m16 tiles; a window has PAIRS = 4 k16 steps).
    Lane (g, t) of tile i at k16 step j holds in a0 the A elements of output row 2i at filter
    row 2j, in a1 output row 2i + 1 at filter row 2j, in a2 row 2i at filter row 2j + 1, in a3
    row 2i + 1 at 2j + 1, each at filter columns 2t, 2t + 1 and output column g (g = lane // 4,
    t = lane % 4; the window of filter columns 0 to 7). An input row is an output row plus a
    filter row; a column likewise. Rows count from the job's first output row. Keys: rows (the
    input rows of a0, a1, a2, a3 for quad k = QUAD = 3, i.e. i + j = 3), pairs (every (i, j)
    whose A fragment is that quad), column (the first of the two input columns of lane (g, t) =
    LANE = (2, 3)'s pair words)."""
    found = as_dict(answer, ("rows", "pairs", "column"), "check_quad_words")
    layout = r08.plan(CONV2)
    rows = plan.quad_words(QUAD)
    pairs = plan.diagonal(QUAD, layout.tiles)
    g, t = LANE
    column = plan.pair_word_column(layout, g, t)
    given = tuple(found["rows"]) if isinstance(found["rows"], (list, tuple)) else None
    require(
        given != (2 * QUAD, 2 * QUAD + 1, 2 * QUAD + 2, 2 * QUAD + 3),
        "rows: a1 (output row 2i + 1, filter row 2j) and a2 (output row 2i, filter row 2j + 1) "
        "read the same input row: a quad holds three rows, the middle one twice",
    )
    require(
        given != (QUAD, QUAD + 1, QUAD + 1, QUAD + 2),
        "rows: a tile is 2 output rows and a step 2 filter rows, so a0's input row is "
        "2i + 2j = 2k, not k",
    )
    require(given == rows, "rows: a0 is output row 2i plus filter row 2j = 2k; add a1, a2, a3")
    try:
        given_pairs = {tuple(pair) for pair in found["pairs"]}
    except TypeError:
        given_pairs = set()
    require(bool(given_pairs), "pairs: a list of (i, j) pairs, e.g. [(0, 3), ...]")
    outside = [
        (i, j)
        for i, j in given_pairs
        if i + j == QUAD and (i < 0 or j < 0 or i >= layout.tiles or j >= plan.PAIRS)
    ]
    require(
        not outside,
        f"pairs: {sorted(outside)} do not exist: 0 <= i < T = {layout.tiles}, "
        f"0 <= j < PAIRS = {plan.PAIRS}",
    )
    require(given_pairs == set(pairs), "pairs: every (i, j) with i + j = 3, i a tile, j a step")
    require(
        found["column"] != 2 * t,
        "column: add the lane's own output column g: an input column is the output column "
        "plus the filter column",
    )
    require(
        found["column"] != g + t,
        "column: lane t holds filter columns 2t and 2t + 1 (a register is two halves)",
    )
    require(found["column"] == column, "column: output column g plus filter column 2t")
    return (
        f"right: quad {QUAD} = F({rows[0]}), F({rows[1]}), F({rows[2]}), F({rows[3]}) at input "
        f"columns {column}, {column + 1}: one 16-byte load feeds the {len(pairs)} mma of "
        f"{pairs}"
    )


def check_job_rounds(answer: Any) -> str:
    """Rung 8 on conv2 (B, C, M, H, W, K) = CONV2: the output plane is Ho x Wo = 34 x 34, its
    kernel stacks T = 6 m16 tiles, so a job's sub-band is 2T = 12 output rows; 16 filters are
    one filter group (NFG = 1); a block has NWARPS = 8 warps. Columns are numbered sub-band by
    sub-band, n = sub_band · Wn + w (Wn = Wo = 34); job j computes n = 8j .. 8j + 7 of every
    row of its sub-band, and warp j % NWARPS takes it in round j // NWARPS. Keys: rounds (how
    many rounds the plane takes), warp and round (which warp, in which round, computes output
    row 14, column 5: OUTPUT)."""
    found = as_dict(answer, ("rounds", "warp", "round"), "check_job_rounds")
    layout = r08.plan(CONV2)
    walk = plan.job_walk(layout)
    row, col = OUTPUT
    sub_band = row // (layout.tile_rows * layout.tiles)
    job = next(j for j in walk if (sub_band, col) in j["columns"])
    require(found["rounds"] != len(walk), "rounds: a round is one job for each of the NWARPS warps")
    require(
        found["rounds"] == layout.rounds,
        "rounds: sub-bands = ceil(Ho / 2T), jobs = ceil(sub-bands · Wn / 8), NWARPS a round",
    )
    first_band_job = next(j for j in walk if (0, col) in j["columns"])
    require(
        (found["warp"], found["round"]) != (first_band_job["slot"], first_band_job["round"]),
        "warp: columns are numbered sub-band by sub-band; row 14 is not in sub-band 0, so n = "
        "sub_band · Wn + w",
    )
    require(found["warp"] == job["slot"], "warp: job = n // 8, warp = job % NWARPS")
    require(found["round"] == job["round"], "round: round = job // NWARPS")
    return (
        f"right: {layout.rounds} rounds; n = {sub_band} · {layout.Wn} + {col} = "
        f"{sub_band * layout.Wn + col}, job {job['job']}: warp {job['slot']} in round "
        f"{job['round']}; the 8 columns of a job may wrap into the next sub-band, so no lane "
        "idles where Wo is not a multiple of 8"
    )
