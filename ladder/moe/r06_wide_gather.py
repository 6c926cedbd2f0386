"""Wide gather: x's rows are copied into expert order 8 bytes at a time.

What changes: one line's worth. `wgmma-grouped` copies x's rows into expert order with
``common.gather_rows``, one 16-bit element per thread. Here the same kernel runs on x and on
the rows buffer viewed as 8-byte words (``uint64``: four float16 or bfloat16 values each): a
quarter of the threads, each moving four times the bytes with one load and one store, and the
row's index (``perm_slot[r] / k``) computed once per 8 bytes instead of per 2. The copy moves
bits, so the kernel needs no arithmetic on the values. A width d that is no multiple of 4, or
an x not 8-byte aligned, takes `wgmma-grouped`'s copy. The routing, the two grouped GEMMs and the
combine are `wgmma-grouped`'s (``r05_wgmma_grouped.layer`` with this gather).
Why: the gather is memory-bound, T·k·d·2 bytes read and as many written, and at OLMoE's size
(T·k = 65,536 rows of d = 2048) `wgmma-grouped` spent 0.666 ms on it, 31% of the layer
(lab/moe/2026-11-26-split/nvidia-h100-80gb-hbm3-moe-split.json): 0.8 TB/s of the 3.01 TB/s copy
bandwidth ``ladder info`` measured there. A warp of 16-bit accesses asks for 64 bytes per
instruction, so the copy is likely bound by instructions and address arithmetic, not by bytes (not
profiled): a warp of 8-byte accesses asks for 256.
Prediction: the gather near the copy bandwidth measured by ``ladder info`` (about 0.2 ms at
OLMoE's size, 0.1 ms at the Mixtral-like size, where T·k·d is half as large); the layer about
20% faster at OLMoE's size and 3% at the Mixtral-like one.
Measured: on an NVIDIA H100, float16, with `wgmma-grouped` in the same run
(lab/moe/2026-11-26-wide-gather/nvidia-h100-80gb-hbm3-moe-wide-gather-top8.json, ``ladder run``):
1.678 ms at OLMoE's size against `wgmma-grouped`'s 2.116 ms;
(lab/moe/2026-11-26-wide-gather/nvidia-h100-80gb-hbm3-moe-wide-gather-top2.json) 6.605 ms at the
Mixtral-like size against 6.809 ms; bfloat16, in the bench
(lab/moe/2026-11-26-bench/nvidia-h100-80gb-hbm3-moe.json): 1.696 against 2.106 ms, 6.322 against
6.444 ms. The gather alone (lab/moe/2026-11-26-split/nvidia-h100-80gb-hbm3-moe-split.json): 0.218
ms against 0.666 ms at OLMoE's size (2.5 TB/s), 0.121 ms against 0.334 ms at the Mixtral-like one.
Verdict: held: the gather 3.1x faster and near the copy bandwidth, the layer 1.26x `wgmma-grouped`
at OLMoE's size and 1.03x at the Mixtral-like one. The combine (0.23 ms) is now the largest
memory-bound stage; it sums 16-bit values, so it needs them unpacked, not only moved.

Lab notes: docs/notes/moe.md
"""

from typing import Any

import numpy as np

from ladder.core.fastcall import numba_bits
from ladder.moe import r05_wgmma_grouped as r05
from ladder.moe.common import ELEMENTWISE, gather_rows, grid_for, kernel_args
from ladder.moe.problem import moe_rung
from ladder.moe.r05_wgmma_grouped import CC, DTYPES, Plan, gather_scalar

WORD = 4  # float16 values in an 8-byte word


def gather_words(x: Any, p: Plan, k: int, stream: Any) -> None:
    """x's rows into expert order as 8-byte words, or rung 5's copy where x cannot be viewed
    so (d no multiple of 4, or x not 8-byte aligned)."""
    d = x.shape[1]
    if d % WORD or x.align < 8:
        gather_scalar(x, p, k, stream)
        return
    words = numba_bits(x).view(np.uint64)  # (T, d / 4): the same bytes
    rows = p.rows.view(np.uint64)  # (T·k, padded d / 4): its pad columns stay zero
    gather_rows[grid_for(rows.shape[0], d // WORD), ELEMENTWISE, stream](
        words, p.routing.perm_slot, k, rows
    )


@moe_rung(
    name="wide-gather",
    parent="wgmma-grouped",
    title="Tensor cores, x's rows gathered 8 bytes at a time",
    dtypes=DTYPES,
    needs=("cupy",),
    units="tensor",
    plan=Plan,
    **CC,
)
def layer(p: Plan, x: Any, logits: Any, w1: Any, w2: Any, y: Any, shape: Any, stream: Any) -> None:
    """`wgmma-grouped`'s layer with x's rows gathered 8 bytes at a time (``gather_words``)."""
    r05.layer(p, x, logits, w1, w2, y, shape, stream, gather=gather_words)


# what ``ladder check`` compiles for this rung: the gather on 8-byte words
KERNELS = {"gather_rows": gather_rows}
KERNEL_ARGS = {"gather_rows": kernel_args("gather_rows", "gather_words")}
