"""GQA packed: the query heads that share K/V packed into one block's rows.

What changes: in grouped-query attention (GQA) the H query heads share HKV < H key/value heads, G =
H / HKV each (multi-query attention, MQA, is HKV = 1). Every rung already accepts it: query head h
reads key/value head h // G, and the G blocks of a group read the same k and v lines, which L2
serves after the first. This rung is `tensor-core-flash`'s kernel with the ``PACKED`` layout (the
``flash_packed_*`` entry points of the same ``.cu`` file): block row r is position r / G of query
head kv·G + r % G, so a block of 128 rows holds 128 / G positions of all G heads of one group, and
each k and v tile it stages, and each fragment a warp loads from it, serves all G heads. The rows'
positions drive the causal mask; q and the output are addressed a row at a time. With G = 1 the
layout is `tensor-core-flash`'s, but the packed entry point still divides each row index by G.
Why: GQA's designed win is memory (k and v G times smaller, for every rung alike). Packing does not
change the number of blocks (B·H·N / 128), each still streams all of k and v of its group once, so
at N = 4096 both rungs are bound by the same products and exponentials. It changes how full and how
unmasked the blocks are: at short sequences a `tensor-core-flash` block holds N of its 128 rows (N
= 17: 17), a packed block G·N; on the causal diagonal a packed block's rows span 128 / G positions
instead of 128, so less work lands on masked keys (about 3% of the causal work at N = 4096 for
`tensor-core-flash`).
Prediction: within a few percent of `tensor-core-flash` at the benchmark's GQA shape (G = 4, N =
4096), slightly ahead on the causal problem, and faster than `tensor-core-flash` at short
sequences.
Measured: on an NVIDIA H200 (results/nvidia-h200.json, ``ladder bench``), float16. GQA shape [4, 16,
4, 4096, 64] (B, H, HKV, N, d): 0.911 ms and 301.6 TFLOP/s (`tensor-core-flash`: 0.897 ms; SDPA:
0.600 ms), fastest of 100 repeats 0.909 ms; causal (the file's earlier run, 2026-11-25), 0.514 ms
(`tensor-core-flash`: 0.520 ms). SDPA shape [4, 16, 16, 4096, 64] (G = 1): 0.913 ms
(`tensor-core-flash`: 0.903 ms); causal, 0.534 ms (`tensor-core-flash`: 0.519 ms).
Verdict: "within a few percent" held (0.98x `tensor-core-flash`; causal GQA 1.01x), but the packed
rung is not faster at the GQA shape: even its fastest repeat is slower than `tensor-core-flash`'s
median, and its causal lead is within the spread of the repeats. Likely cause: `tensor-core-flash`'s
four blocks of a group already read k and v from L2, so packing saves only L2 traffic, while every
row pays the packed addressing (a division and a remainder by G) and 3 more registers; a like 0.99x
at G = 1, where packing buys nothing, points the same way (not profiled). The short sequences where
packing should win are not in the benchmark.

Lab notes: docs/notes/attention.md
"""

from typing import Any

from ladder.attention.problem import attention_rung
from ladder.attention.r05_tensor_core_flash import SOURCE, flash_plan

__all__ = ["SOURCE", "geometry"]  # SOURCE: `ladder check` compiles the .cu this rung launches


@attention_rung(
    name="gqa-packed",
    parent="tensor-core-flash",
    title="GQA/MQA: the query heads that share K/V packed into one block",
    dtypes=("float16",),
    needs=("cupy",),
    units="tensor",
    min_cc=(8, 0),
    cc_needs="cp.async and mma.sync m16n8k16",
)
def geometry(q: Any, k: Any, v: Any, out: Any) -> Any:
    """The packed kernel for this head dimension, a block per tile of the rows of the query
    heads that share a K/V head."""
    return flash_plan(q, k, v, out, packed=True, rung="rung 6")
