"""Exercises for notebook 09 (mixture of experts).

- ``check_offsets(fn)``: each expert's first row from the tokens' expert ids, the exclusive
  prefix sum that ``scan_offsets`` computes, written by you in NumPy.
- ``check_tile_padding(dict)``: how many 128-row tiles rung 5's grouped launch computes for a
  routing, and what share of their rows are empty.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ladder.exercises._common import as_dict, close, require
from ladder.moe.problem import group_sizes
from ladder.moe.r05_wgmma_grouped import BM

# the routing of check_tile_padding: the fine-grained layer's rows (T·k = 8192 · 8) over 64
# experts, half of the rows in expert 0 (grouped-gemm's skew: harsher than a top-8 layer's,
# where an expert gets at most T rows)
ROWS, EXPERTS, HOT, SEED = 8192 * 8, 64, 50, 9


def padding_counts() -> np.ndarray:
    """The rows per expert of check_tile_padding's routing."""
    return group_sizes(ROWS, EXPERTS, HOT, np.random.default_rng(SEED))


def check_offsets(fn: Callable[..., Any]) -> str:
    """Write ``fn(ids, experts) -> offsets``: ids is a (T, k) int array of each token's experts;
    return E + 1 integers, offsets[e] the first row of expert e once the (token, expert) pairs
    are sorted by expert, offsets[E] = T·k. The check tries routings with empty experts."""
    rng = np.random.default_rng(11)
    for tokens, experts, k in ((7, 5, 2), (1, 8, 2), (40, 3, 3), (16, 64, 8)):
        ids = np.stack([rng.permutation(experts)[:k] for _ in range(tokens)])
        right = np.concatenate([[0], np.cumsum(np.bincount(ids.ravel(), minlength=experts))])
        found = np.asarray(fn(ids.copy(), experts))
        require(
            found.shape == right.shape, f"E + 1 = {experts + 1} offsets, got shape {found.shape}"
        )
        require(found[0] == 0, "offsets[0] is 0: the first expert starts at row 0")
        require(
            np.array_equal(found, right),
            "count each expert's pairs (np.bincount with minlength=E), then an exclusive prefix "
            "sum: offsets[e + 1] = offsets[e] + count[e]",
        )
    return "right: the counts' exclusive prefix sum, which one GPU thread computes for E experts"


def check_tile_padding(answer: Any) -> str:
    """For ``padding_counts()`` rows per expert and rung 5's tiles of BM rows: ``tiles``, the
    row tiles the grouped launch computes (each expert's rows rounded up to whole tiles), and
    ``empty_share``, the fraction of those tiles' rows that hold no token."""
    found = as_dict(answer, ("tiles", "empty_share"), "check_tile_padding")
    counts = padding_counts()
    tiles = int(np.sum(-(-counts // BM)))
    empty = 1 - counts.sum() / (tiles * BM)
    require(found["tiles"] == tiles, f"tiles: ceil(count / {BM}) for each expert, summed")
    require(close(found["empty_share"], empty, 1e-3), "empty_share: 1 - rows / (tiles x BM)")
    return (
        f"right: {tiles} tiles, {empty:.1%} of their rows empty; the tensor cores multiply "
        "those rows anyway, so small experts pay for their last tile in full"
    )
