"""Exercises for notebook 03 (convolution).

- ``check_conv1_shape_flops(dict)``: the output shape and GFLOP of the course's conv1 layer.
- ``check_quads_per_window(dict)``: rung 8's window on tensor cores: how many quads (16-byte
  A fragments) a warp loads and how many mma.sync it issues per n8 tile, for T tiles.
"""

from __future__ import annotations

from typing import Any

from ladder.conv.layers import CONV1
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
