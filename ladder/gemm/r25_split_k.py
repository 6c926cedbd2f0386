"""Split-K: where C has too few tiles to fill the GPU, several blocks share each tile's K loop.

What changes: the unit of work of `persistent`'s kernel (``r25_split_k.cu``). A unit is a
tile of C and a range of its K tiles; each tile is cut into ``splits`` units, which any
blocks take. With more than one split, a block ends a unit by storing its FP32 partial sums
to a workspace and counting the tile's finished units; the last block to finish adds the
others' partials to its own and writes the tile with `persistent`'s epilogue. ``splits_for``
picks the count per shape, from a model of the time in K-tile steps per SM (a K tile: one
stage, 128 x 256 x 64 multiply-adds): the waves of units times the K tiles of a unit, plus
PARTIAL_STEPS for each partial an SM writes or reads. One split is `persistent` itself.
Why: a 128 x 256 tile per block gives a decode step (128 x 4096 x 4096, a model's matrix
times 128 tokens) 16 tiles for 132 SMs: 116 SMs idle while 16 walk all 64 K tiles. cuBLAS
cuts K in such shapes (split-K, stream-K); this is the plainest form of it.
Prediction: by ``splits_for`` on 132 SMs, decode 128 x 4096 x 4096 takes 8 splits, 64 steps
down to 14 (4.6x `persistent`); LeNet's first fully connected layer (10000 x 128 x 4624), 3
splits, 1.20x; GPT-2's fc2 (8192 x 768 x 3072), 2 splits, 1.07x; the square benchmark sizes and
the other GPT-2 and Llama shapes stay at one split, `persistent`'s time.
Measured: on an NVIDIA H200 by ``ladder bench`` (results/nvidia-h200.json), at the squares only,
where it takes one split as predicted: float16 0.192 ms at 4096³ (`persistent` 0.215, cuBLAS
0.199) and 1.468 ms at 8192³ (`persistent` 1.424, cuBLAS 1.432); bfloat16 0.189 and 1.397 ms
(`persistent` 0.180 and 1.361). The model shapes (the gemm-shapes piece) are not yet measured.
Verdict: at one split it should be `persistent`'s time and is 3% slower at 8192³ in both dtypes
(at 4096³ the spreads, 0.18 to 0.23 ms for each, hide it): the same 168 registers and no spills
(``ladder check``), so the cost is in the instructions the unit loop adds, or the counters'
memset before each launch; which, not measured. The rung's claim, the few-tile shapes, waits
for ``ladder bench --problems gemm-shapes``.

Lab notes: docs/notes/gemm.md#rung-25-split-k
"""

import math
from typing import Any

from ladder.core import cuda_cpp
from ladder.gemm.hopper import sm_count, split_k_launch
from ladder.gemm.problem import gemm_rung
from ladder.gemm.tensor_core import padded_sizes

SOURCE = cuda_cpp.source(__file__, "r25_split_k.cu", archs=("sm_90a",), arch_specific=True)
BM, BN, BK = 128, 256, 64
STAGES = 4
THREADS = 384
SMEM_BYTES = STAGES * (BM * BK + BK * BN) * 2 + 2 * 64 * 128 * 2 + 1024  # as `persistent`
MAX_SPLITS = 16
# K-tile steps an SM spends on one FP32 partial of a tile (128 KB) written or read through
# L2: at about 60 GB/s per SM, 2.1 us, against 0.8 us for a K tile at the tensor cores' rate
PARTIAL_STEPS = 3
_KERNEL = {"float16": "split_k", "bfloat16": "split_k_bf16"}


def splits_for(m: int, n: int, k: int, sms: int) -> int:
    """The splits of K that the model above makes fastest for tile-multiple M, N, K on
    ``sms`` SMs (the fewest among equals): the waves of units times a unit's K tiles, plus,
    with more than one split, PARTIAL_STEPS per partial written (every unit) or read (the
    last unit of each tile reads the others), shared by the SMs."""
    tiles, k_tiles = (m // BM) * (n // BN), k // BK

    def steps(s: int) -> int:
        main = math.ceil(tiles * s / sms) * math.ceil(k_tiles / s)
        return main + (math.ceil(PARTIAL_STEPS * 2 * s * tiles / sms) if s > 1 else 0)

    return min(range(1, max(1, min(MAX_SPLITS, k_tiles)) + 1), key=lambda s: (steps(s), s))


def _describe(args: tuple[Any, ...], out: Any) -> str:
    (m, k), n = args[0].shape, args[1].shape[1]
    return f"{splits_for(*padded_sizes(m, n, k, (BM, BN, BK)), sm_count())} splits of K"


@gemm_rung(
    name="split-k",
    parent="persistent",
    title="Split-K: blocks share a tile's K loop where C has too few tiles",
    dtypes=("float16", "bfloat16"),
    needs=("cupy",),
    units="tensor",
    sm90a="wgmma and setmaxnreg",
    tiles=(BM, BN, BK),
    describe=_describe,
)
def geometry(m: int, n: int, k: int, dtype: str) -> Any:
    """``_KERNEL[dtype]`` on tile-multiple sizes with ``splits_for``'s splits: min(SMs, units)
    blocks, each walking units of (tile, K range)."""
    splits = splits_for(m, n, k, sm_count())
    return split_k_launch(
        SOURCE, _KERNEL[dtype], m, n, k, dtype, (BM, BN, BK), THREADS, SMEM_BYTES, splits
    )
