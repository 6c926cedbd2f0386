"""Tuned: `double-buffered`'s kernel with tile sizes chosen by measuring, not by reasoning.

What changes: nothing in the kernel. `double-buffered`'s factory is built for each of eight
candidate configurations (``CONFIGS``: block tiles of 64 to 256 along M and N, BK of 8, 16 and 32,
4 or 8 warps, 4 x 4 to 8 x 8 outputs per lane and sub-tile); ``sweep(m, n, k)`` times each with the
harness's own recipe (checked output, flushed L2, CUDA events, median of repeats), and the launcher
uses the winner, ``TUNED``. Every candidate fits `double-buffered`'s 48 KB of static shared memory
with two stages and handles any M, N and K.
Why: rungs `warp-tiling` and `double-buffered` fix one set of sizes (128 x 128 x 16 block tile, 64
x 64 warp tile, 8 x 4 outputs per lane and sub-tile, 128 threads) that is a good guess, not a
measured optimum. Bigger tiles reuse each loaded value more but need more registers and shared
memory per block, so fewer blocks share an SM to hide latency; at small M and N, big tiles also
leave SMs idle (a 1024 x 1024 C is 64 tiles of 128 x 128, for 132 SMs on an H200).
Prediction: a few percent to a few tens of percent over `double-buffered` at the shapes swept; the
gain is largest where the default tile is furthest from the best one for the GPU.
Measured: on an NVIDIA H200, the sweep at 4096³
(lab/gemm/2026-11-21-tile-sweep/nvidia-h200-gemm-sweep.json) timed the eight candidates from 3.819
ms to 4.910 ms, and the fastest was `double-buffered`'s own configuration; 8 x 8 per lane and the
128 x 256 block were within 1.2% of it. ``ladder bench`` (results/nvidia-h200.json): 3.804 ms at
4096³ and 0.151 ms at 1024³, the same as `double-buffered` (1.00x at both).
Verdict: missed: no gain, because the sweep found the default best at 4096³, so ``TUNED`` is
`double-buffered`'s configuration and the rung runs `double-buffered`'s kernel. At 1024³, where 64
large tiles leave SMs idle and a smaller tile might win, no sweep was run: not yet measured.

Lab notes: docs/notes/gemm.md#rung-12-tuned
"""

from __future__ import annotations

from typing import Any

from ladder.core import timing, tuning
from ladder.core.rung import get_problem, get_rung
from ladder.gemm.problem import (
    ByAlignment,
    aligned_for_float4,
    check_operands,
    gemm_rung,
    grid_2d,
)
from ladder.gemm.r10_warp_tiling import DEFAULT, Config
from ladder.gemm.r11_double_buffered import make_kernel

CONFIGS = [
    DEFAULT,  # 128 x 128 x 16, 4 warps of 64 x 64, 8 x 4 per lane: warp-tiling and double-buffered
    Config(bm=128, bn=128, bk=8),  # half the K tile: less shared memory, more barriers
    Config(bm=128, bn=128, bk=16, wm=64, wn=64, wniter=4, tm=4, tn=4),  # WMITER = 2
    Config(bm=128, bn=128, bk=16, wm=64, wn=64, wniter=2, tm=8, tn=8),  # 8 x 8 per lane
    Config(bm=128, bn=128, bk=16, wm=64, wn=32, wniter=2, tm=8, tn=4, threads=256),  # 8 warps
    Config(bm=128, bn=256, bk=8, wm=64, wn=64, wniter=4, tm=8, tn=4, threads=256),
    Config(bm=256, bn=128, bk=8, wm=64, wn=64, wniter=4, tm=8, tn=4, threads=256),
    Config(bm=64, bn=64, bk=32, wm=32, wn=32, wniter=2, tm=4, tn=4),  # small tiles, long K
]

# The sweep's winner at 4096 x 4096 x 4096 on an NVIDIA H200
# (lab/gemm/2026-11-21-tile-sweep/nvidia-h200-gemm-sweep.json): double-buffered's own config came
# first, with 8 x 8 per lane and the 128 x 256 block within 1.2% of it, so tuning did not move this
# size.
TUNED = Config(bm=128, bn=128, bk=16, wm=64, wn=64, wniter=4, tm=8, tn=4, threads=128)


# the kernels the rung launches (double-buffered's factory, TUNED's sizes), named for `ladder check`
wide_kernel = make_kernel(TUNED, wide_global=True)
scalar_kernel = make_kernel(TUNED, wide_global=False)


def launch_config(config: Config, A: Any, B: Any, C: Any = None) -> Any:
    """`double-buffered`'s kernel built for ``config``: C = A @ B."""
    A, B, C, m, n, _ = check_operands(A, B, C)
    if m and n:
        kernel = make_kernel(config, aligned_for_float4(A, B, C))
        kernel[grid_2d(n, config.bn, m, config.bm), config.threads](A, B, C)
    return C


def sweep(m: int, n: int, k: int, configs: list[Config] | None = None) -> list[dict[str, Any]]:
    """Time every candidate at M x N x K with ``ladder.core.tuning``; fastest first (failed
    candidates last). ``Config(**entry["config"])`` rebuilds an entry's config."""
    case = timing.prepare(get_problem("gemm"), (m, n, k))
    return tuning.sweep(get_rung("gemm", "tuned"), case, configs or CONFIGS, launch_config)


@gemm_rung(name="tuned", parent="double-buffered", title="Tile sizes chosen by a sweep")
def geometry(m: int, n: int, k: int) -> tuple:
    """TUNED's kernel, 16-byte where every row of A, B and C allows it, else scalar; a block of
    TUNED's threads per tile of C."""
    return ByAlignment(wide_kernel, scalar_kernel), grid_2d(n, TUNED.bn, m, TUNED.bm), TUNED.threads
