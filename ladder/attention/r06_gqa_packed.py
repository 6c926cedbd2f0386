"""Rung 6, grouped-query and multi-query attention: the heads that share K/V packed in one block.

In grouped-query attention (GQA) the H query heads share HKV < H key/value heads, G = H / HKV
query heads each (multi-query attention, MQA, is HKV = 1). Every rung so far already accepts
it: query head h reads key/value head h // G, and the G blocks of a group read the same k and v
lines, which L2 serves after the first. The win GQA is designed for is memory: k and v are G
times smaller (for every rung alike; the memory table shows it), and so are their DRAM reads.

This rung is rung 5's kernel with the ``PACKED`` layout (the ``flash_packed_*`` entry points of
the same ``.cu`` file): block row r is position r / G of query head kv·G + r % G, so a block of
128 rows holds 128 / G positions of all G heads of one group, and each k and v tile it stages,
and each fragment a warp loads from it, serves all G heads. Nothing else changes: the rows'
positions drive the causal mask, and q and the output are addressed a row at a time.

What packing does not change: there are as many blocks as in rung 5 (B·H·N / 128), each still
streams all of k and v of its group once, so at N = 4096 both rungs are bound by the same
matrix products and exponentials. What it changes is how full and how unmasked the blocks
are: at short sequences a rung 5 block holds N of its 128 rows (N = 17: 17), a packed block
G·N; on the causal diagonal a packed block's rows span 128 / G positions instead of 128, so
less of its work lands on masked keys (about 3% of the causal work at N = 4096 for rung 5).
With G = 1 the layout is rung 5's (row r is position r), but the packed entry point is still
its own instantiation, which divides each row index by G.

Prediction: within a few percent of rung 5 at the benchmark's GQA shape (G = 4, N = 4096),
slightly ahead on the causal problem, and faster than rung 5 at short sequences.

Measured on an H200 by ``ladder bench`` (results/nvidia-h200.json): in float16 at the SDPA
shape [4, 16, 16, 4096, 64] (B, H, HKV, N, d; G = 1), 0.917 ms and 299.8 TFLOP/s, 0.98x rung 5
and 0.65x SDPA; causal, 0.530 ms and 259.3 TFLOP/s, 0.98x rung 5 and 0.67x SDPA. At the GQA
shape [4, 16, 4, 4096, 64]: 0.919 ms and 299.1 TFLOP/s, 0.98x rung 5 (0.903 ms) and 0.65x SDPA;
causal, 0.514 ms and 267.3 TFLOP/s, 1.01x rung 5 (0.518 ms) and 0.75x SDPA. "Within a few
percent" held, but the packed rung is not faster at the GQA shape: even its fastest of 100
repeats (0.917 ms) is slower than rung 5's median, and its causal lead is within the spread of
the repeats. Likely cause: rung 5's four blocks of a group already read k and v from L2, so
packing saves only L2 traffic, while every row pays the packed addressing (a division and a
remainder by G) and 3 more registers; the same 0.98x at G = 1, where packing buys nothing, points
the same way. The short sequences where packing should win are not in the benchmark.

ptxas reports (CUDA 13, sm_90): ``flash_packed_d64_w4_m2`` 241 registers (sm_80: 237),
``flash_packed_d128_w4_m1`` 216 (sm_80: 212), the other configurations 151 to 212; no spills.
The packed one-tile d = 64 entries are built for 3 (4 warps) and 1 (8 warps) blocks per SM,
one fewer than rung 5's: capped at 128 registers, their row arithmetic spilled.
"""

from __future__ import annotations

from typing import Any

from ladder.attention.problem import attention_rung, check_arrays
from ladder.attention.r05_tensor_core_flash import SOURCE, run_flash

__all__ = ["SOURCE", "launch"]  # SOURCE: `ladder check` compiles the .cu this rung launches


@attention_rung(
    name="gqa-packed",
    title="GQA/MQA: the query heads that share K/V packed into one block",
    dtypes=("float16",),
    needs=("cupy",),
    units="tensor",
    min_cc=(8, 0),
)
def launch(q: Any, k: Any, v: Any, out: Any = None, causal: bool = False) -> Any:
    q, k, v, out, shape = check_arrays(q, k, v, out, ("float16",))
    if out.size:
        run_flash(q, k, v, out, shape, causal, packed=True, rung="rung 6")
    return out
