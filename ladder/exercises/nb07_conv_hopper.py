"""Exercises for notebook 07 (convolution on Hopper: rungs 9 to 13).

- ``check_filter_rows(dict)``: rung 13's A: which (filter, dy, dx) a row of wgmma's 64 holds,
  how many of its window's taps are weights, and how many registers hold A for conv2
  (``conv.diagrams.draw_filters_on_m``, top).
- ``check_step_descriptor(dict)``: rung 13's B: where a k16 step's one descriptor starts, its
  leading byte offset, and which chunk it reads for one block (``draw_filters_on_m``, below).
"""

from __future__ import annotations

from typing import Any

from ladder.conv import r13_filters_on_m as r13
from ladder.conv.layers import CONV2
from ladder.conv.tc import plan
from ladder.exercises._common import as_dict, require

ROW = 37  # check_filter_rows: a row of A
STEP = (1, 2)  # check_step_descriptor: k16 step (channel c, j)
BLOCK = 40  # check_step_descriptor: block g = Y NP + n


def check_filter_rows(answer: Any) -> str:
    """Rung 13 puts 16 filters x 4 output shifts (dy, dx) on wgmma's 64 rows of A: warp wq of
    the warpgroup holds rows 16 wq .. 16 wq + 15, its lane (i, t) rows 16 wq + i (dx = 0) and
    16 wq + i + 8 (dx = 1), for filter f = 4 (i % 4) + wq at dy = i // 4. Row (f, dy, dx), over
    one channel's 8 x 8 window (p, q), holds w[f][c][p - dy][q - dx], zero outside the K x K
    filter. For conv2 (K = 7, C = 4 channels): keys row (the (f, dy, dx) of row ROW = 37), taps
    (the non-zero entries of one row over one channel's window), registers (the 32-bit A
    registers a thread holds for the whole kernel: a k16 step's A fragment is 4 registers, a
    channel's window is 4 k16 steps)."""
    found = as_dict(answer, ("row", "taps", "registers"), "check_filter_rows")
    k, channels = CONV2[5], CONV2[1]
    row = plan.fm_row(ROW)
    taps = sum(plan.fm_tap(ROW, p, q, k) is not None for p in range(8) for q in range(8))
    registers = 4 * plan.PAIRS * channels
    given = tuple(found["row"]) if isinstance(found["row"], (list, tuple)) else None
    require(
        given == row,
        "row: the rows are not filter-major: warp = m // 16, then dx = m // 8 % 2 and "
        "i = m % 8, and f = 4 (i % 4) + warp, dy = i // 4",
    )
    require(
        found["taps"] != 64,
        f"taps: a shift moves the {k} x {k} filter inside the 8 x 8 window; it does not grow it",
    )
    require(
        found["taps"] == taps,
        f"taps: count the (p, q) whose (p - dy, q - dx) lies in the {k} x {k} filter",
    )
    require(
        found["registers"] != 4 * plan.PAIRS,
        "registers: that is one channel; all C channels' steps stay in registers",
    )
    require(found["registers"] == registers, "registers: 4 per k16 step, 4 steps per channel")
    return (
        f"right: row {ROW} is (f, dy, dx) = {row}; {taps} of 64 taps are weights; "
        f"{registers} registers of weights, loaded once before the first image (MAX_CHANNELS = "
        f"{r13.MAX_CHANNELS} keeps them in registers)"
    )


def check_step_descriptor(answer: Any) -> str:
    """Rung 13 on conv2: R = 40 input rows per channel are rewritten, each as NP = 17 chunks of
    16 bytes (chunk n holds x[c][r][2n .. 2n + 7]), the chunk of (c, r, n) at
    (c R + s(r)) NP + n with s(r) = (r % 2) R/2 + r // 2: the even rows first. Block
    g = Y NP + n (a 2 x 2 output block) needs, at k16 step (c, j), input row 2Y + 2j (the even
    k8 half: filter row 2j) and 2Y + 2j + 1 (the odd half). A step has one descriptor: its
    start, the chunk of job 0's block 0's even half, and its LBO, the bytes from a block's even
    half to its odd half. Keys, for step (c, j) = STEP = (1, 2): start_chunk, lbo_bytes and
    odd_chunk (the chunk it reads for block g = BLOCK = 40's odd half)."""
    found = as_dict(answer, ("start_chunk", "lbo_bytes", "odd_chunk"), "check_step_descriptor")
    layout = r13.plan(CONV2)
    rows, blocks = layout.R, layout.NP
    c, j = STEP
    step = plan.fm_step(c, j, 0, rows, blocks, r13.NT)
    y, n = divmod(BLOCK, blocks)
    odd = plan.fm_chunk(c, 2 * y + 2 * j + 1, n, rows, blocks)
    require(
        found["start_chunk"] != (c * rows + 2 * j) * blocks,
        "start_chunk: input row 2j is stored at row s(2j) = j of its channel (even rows "
        "first), not at row 2j",
    )
    require(
        found["start_chunk"] == step["start"],
        "start_chunk: block 0 is Y = 0, n = 0: its even half is input row 2j of channel c, "
        "at chunk (c R + s(2j)) NP",
    )
    require(found["lbo_bytes"] != step["lbo"] // r13.CHUNK, "lbo_bytes: in bytes; a chunk is 16")
    require(
        found["lbo_bytes"] != 2 * step["lbo"],
        "lbo_bytes: the odd rows start halfway, R/2 stored rows after the even ones",
    )
    require(
        found["lbo_bytes"] == step["lbo"],
        "lbo_bytes: from input row 2Y + 2j's chunk to row 2Y + 2j + 1's, for any block",
    )
    require(
        found["odd_chunk"] != step["start"] + BLOCK,
        "odd_chunk: that is the block's even half; the odd half is LBO further",
    )
    require(
        found["odd_chunk"] == odd,
        "odd_chunk: block g = Y NP + n needs input row 2Y + 2j + 1, stored at chunk "
        "(c R + s(2Y + 2j + 1)) NP + n",
    )
    return (
        f"right: start chunk {step['start']}, LBO {step['lbo']} bytes, and block {BLOCK}'s odd "
        f"half at chunk {odd} = start + LBO / 16 + g: because even rows come first, block g's "
        "halves of every step sit at start + g and start + LBO / 16 + g, so one descriptor "
        f"covers all {r13.NT} blocks of a job"
    )
