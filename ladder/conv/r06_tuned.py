"""Tuned per layer: `register-tiled`'s kernel with tile sizes chosen by measuring each layer.

What changes: only the tile sizes. ``sweep(size)`` times every candidate in ``CANDIDATES[layer]``
with the harness's own recipe (checked output, flushed L2, CUDA events, median;
``ladder.core.tuning``), `fp16-staging`'s ``sweep`` the same candidates in float16, and ``TUNED``
holds the winners found on the GPU named below (the sweep is recorded in
lab/conv/2026-11-22-tile-sweep/nvidia-h200-conv-sweep.json). Any other shape uses
`register-tiled`'s choice; same kernel factory, same correctness at every shape.
Why: the two layers pull in different directions. conv1 (one input channel, four filters)
wants threads that cover columns and rows, with a small input tile; conv2 (sixteen filters over
four channels) wants threads that cover all sixteen channels of a few pixels, and its weights
(12.5 KB) and four-channel tile fill shared memory, which caps the blocks per SM. Occupancy,
waste at tile edges (34 x 34 does not divide into tiles of 32) and shared loads per
multiply-add trade off in ways quicker to measure than to predict.
Prediction: a few to a few tens of percent over `register-tiled` per layer.
Measured: on an NVIDIA H200 by ``ladder bench`` (results/nvidia-h200.json): conv1 2.071 ms and
conv2 4.033 ms in float32 (1.00x and 1.02x `register-tiled`; 5.470x and 1.652x the fastest cuDNN
FP32 configuration), 12.11 and 17.98 TFLOP/s, 18.1% and 26.9% of the FP32 peak.
Verdict: missed. The sweep kept `register-tiled`'s tiles for conv1, so it is the same kernel, and
the conv2 tiles it chose (mg 8, th 4, tw 2) gain 1.7%. The tile sizes are not what limits
`register-tiled`: every candidate runs the same loops, so the costs `register-tiled` leaves (its
verdict) change little from one tiling to another. Which of those costs dominates is not yet
measured.

Lab notes: docs/notes/conv.md#rung-6-tuned
"""

from typing import Any

import numpy as np
from numba import float32

from ladder.conv.layers import CONV1, CONV2
from ladder.conv.problem import conv_rung, size_of
from ladder.conv.r05_register_tiled import (
    DEFAULTS,
    Config,
    choose,
    config_plan,
    launch_config,
    make_kernel,
)
from ladder.core import timing, tuning
from ladder.core.rung import get_problem, get_rung

CANDIDATES = {
    CONV1: [
        DEFAULTS[CONV1],  # 16 x 8 threads, 2 x 5 outputs each: 16 x 80 per block
        Config(bw=16, bh=10, tw=5, th=2, mg=4, cc=1),  # 20 rows: four tiles per image
        Config(bw=16, bh=16, tw=5, th=1, mg=4, cc=1),
        Config(bw=16, bh=4, tw=5, th=4, mg=2, cc=1),  # two filter groups
        Config(bw=20, bh=8, tw=4, th=2, mg=4, cc=1),
        Config(bw=32, bh=4, tw=3, th=4, mg=4, cc=1),  # 96 columns: 1/6 idle
        Config(bw=40, bh=4, tw=2, th=5, mg=4, cc=1),
        Config(bw=16, bh=8, tw=5, th=2, mg=2, cc=1),
    ],
    CONV2: [
        DEFAULTS[CONV2],  # 17 x 9 threads, 16 x 2 x 2 outputs each: 18 x 34 per block
        Config(bw=17, bh=17, tw=2, th=2, mg=16, cc=4),  # a whole 34 x 34 image per block
        Config(bw=17, bh=9, tw=2, th=4, mg=8, cc=4),
        Config(bw=17, bh=9, tw=2, th=2, mg=8, cc=4),
        Config(bw=17, bh=6, tw=2, th=3, mg=8, cc=4),
        Config(bw=17, bh=17, tw=2, th=1, mg=16, cc=4),
        Config(bw=17, bh=9, tw=2, th=2, mg=16, cc=2),  # half the shared memory per block
        Config(bw=34, bh=9, tw=1, th=4, mg=16, cc=4),
    ],
}

# Winners per layer and dtype from `sweep` on an NVIDIA H200 (the file it wrote is
# lab/conv/2026-11-22-tile-sweep/nvidia-h200-conv-sweep.json). conv1 kept rung 5's guess in both
# dtypes; for conv2 in float32, 8 filters x 4 rows x 2 columns per thread beat rung 5's 16 x 2 x 2
# by about 2%.
TUNED: dict[str, dict[tuple[int, ...], Config]] = {
    "float32": {
        CONV1: DEFAULTS[CONV1],
        CONV2: Config(bw=17, bh=9, tw=2, th=4, mg=8, cc=4),
    },
    "float16": dict(DEFAULTS),
}


def candidates(size: tuple[int, ...]) -> list[Config]:
    """The configurations a sweep tries for ``size``: its layer's, or rung 5's choice alone."""
    return CANDIDATES.get(tuple(size), [choose(tuple(size))])


def sweep(size: tuple[int, ...]) -> list[dict[str, Any]]:
    """Time every candidate for ``size`` (a layer of CANDIDATES, else rung 5's choice) in
    float32 with ``ladder.core.tuning``; fastest first. ``Config(**entry["config"])`` rebuilds
    an entry's config. Rung 7's ``sweep`` runs the same candidates in float16."""
    size = tuple(size)
    case = timing.prepare(get_problem("conv"), size, "float32")
    return tuning.sweep(get_rung("conv", "tuned"), case, candidates(size), launch_config)


@conv_rung(
    name="tuned",
    parent="register-tiled",
    title="Tile sizes chosen per layer by a sweep",
    dtypes=("float32",),
)
def geometry(x: Any, w: Any, out: Any) -> Any:
    """`register-tiled`'s kernel with TUNED's config for this layer (its choice elsewhere)."""
    return config_plan(x, w, out, choose(size_of(x, w), TUNED["float32"]), float32)


LAYERS = (CONV1, CONV2)

# the kernels the rung launches for the two layers, named for `ladder check`
KERNELS = {
    f"{name}_kernel": make_kernel(size[5], TUNED["float32"][size])
    for name, size in (("conv1", CONV1), ("conv2", CONV2))
}
KERNEL_ARGS = {name: lambda x, w, out: (x, w, out, np.int64(0)) for name in KERNELS}
