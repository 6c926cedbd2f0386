"""The expert loop: route on the GPU, then one expert at a time from the host.

What changes: this is the layer as a user first writes it, the baseline of the ladder. One
kernel routes (``common.top_k_softmax``: a thread per token keeps its k largest logits in
registers and writes their experts and softmax gates). The expert ids come back to the host,
and NumPy finds each expert's tokens. Then, for each expert that has tokens: copy their rows of
x together (a gather), ``h = silu(rows @ w1[e])`` and ``rows @ w2[e]`` with the shared-memory
tiled GEMM of `gemm/shared-tiling` (16 × 16 tiles, ``common.tile_dot``), and add the
gate-weighted result into a float32 y (zeroed on the host and uploaded on each call: part of
this rung's host cost) at those tokens. Each expert sees a token at most once, so the adds of
one expert never collide. Every token is computed: nothing is dropped.
Why: it is the shape of the PyTorch loop (``torch.where`` per expert, index, two matmuls,
``index_add_``), so its costs are the ones to remove: the host waits for the GPU once per call
(the ids), each expert launches four kernels and allocates its buffers, and a small expert's
GEMM fills only a few of the GPU's 132 SMs while the others idle.
Prediction: the GEMMs at about the GEMM ladder's shared-tiling rate (`gemm/shared-tiling`: 7.82
TFLOP/s in float32 at 4096³ on an H200, results/nvidia-h200.json): about 490 ms at the Mixtral-like
size (3.85 TFLOP) and 70 ms at OLMoE's (0.55 TFLOP), and at E = 64 the host's loop on top.
Measured: on an NVIDIA H100 (lab/moe/2026-11-26-bench/nvidia-h100-80gb-hbm3-moe.json, ``ladder
bench``), float16: 557.052 ms at the Mixtral-like size (T = 8192, d = 4096, f = 14336, E = 8, k =
2), 6.91 TFLOP/s; 135.547 ms at OLMoE's (T = 8192, d = 2048, f = 1024, E = 64, k = 8), 4.06 TFLOP/s.
PyTorch's loop takes 7.498 and 10.654 ms on the tensor cores.
Verdict: held: at E = 8 the time is the GEMMs' (16 × 16 tiles, a little slower than `grouped`'s
32 × 32); at E = 64 the host's loop and the small experts' launches add about 65 ms to them.

Lab notes: docs/notes/moe.md
"""

from typing import Any

import numpy as np
from numba import cuda

from ladder.core.fastcall import numba_array
from ladder.moe.common import (
    ELEMENTWISE,
    TILE,
    grid_for,
    kernel_args,
    matmul,
    matmul_grid,
    matmul_silu,
    top_k_softmax,
)
from ladder.moe.problem import moe_rung

ROUTE_THREADS = 128  # tokens per block of the routing kernel


@cuda.jit
def scatter_add(rows, tokens, weights, y):
    """y[tokens[r], c] += weights[r] · rows[r, c]: an expert's outputs added at its tokens."""
    c, r = cuda.grid(2)
    if r < rows.shape[0] and c < rows.shape[1]:
        y[tokens[r], c] += weights[r] * rows[r, c]


@cuda.jit
def cast_into(y32, y):
    c, t = cuda.grid(2)
    if t < y.shape[0] and c < y.shape[1]:
        y[t, c] = y32[t, c]


@cuda.jit
def gather(x, tokens, rows):
    c, r = cuda.grid(2)
    if r < rows.shape[0] and c < rows.shape[1]:
        rows[r, c] = x[tokens[r], c]


def route(logits: Any, k: int, stream: Any) -> tuple[Any, Any]:
    """The routing kernel on device arrays: (ids, gates), T × k each."""
    tokens = logits.shape[0]
    ids = cuda.device_array((tokens, k), np.int32, stream=stream)
    gates = cuda.device_array((tokens, k), np.float32, stream=stream)
    blocks = max(1, -(-tokens // ROUTE_THREADS))
    top_k_softmax[blocks, ROUTE_THREADS, stream](logits, ids, gates)
    return ids, gates


@moe_rung(
    name="expert-loop",
    parent=None,
    title="A loop over experts from the host (the baseline)",
    not_in_a_graph="cannot be captured: moe rung 1 reads the experts' ids on the host",
)
def layer(p: Any, x: Any, logits: Any, w1: Any, w2: Any, y: Any, shape: Any, stream: Any) -> None:
    """Route on the GPU, read the ids on the host, then per expert: gather its tokens' rows, the
    two GEMMs, add the weighted rows into a float32 y; cast y at the end."""
    k = shape.k
    nx, nw1, nw2, ny = (numba_array(a) for a in (x, w1, w2, y))
    ids, gates = route(numba_array(logits), k, stream)
    host_ids = ids.copy_to_host(stream=stream)
    host_gates = gates.copy_to_host(stream=stream)
    if stream:
        stream.synchronize()  # the host waits for the GPU here
    y32 = cuda.to_device(np.zeros(y.shape, np.float32), stream=stream)
    for e in range(shape.experts):
        tokens, slots = np.nonzero(host_ids == e)
        if tokens.size == 0:
            continue
        n = tokens.size
        d_tokens = cuda.to_device(tokens.astype(np.int32), stream=stream)
        d_weights = cuda.to_device(host_gates[tokens, slots], stream=stream)
        rows = cuda.device_array((n, shape.d), nx.dtype, stream=stream)
        gather[grid_for(n, shape.d), ELEMENTWISE, stream](nx, d_tokens, rows)
        h = cuda.device_array((n, shape.f), nx.dtype, stream=stream)
        matmul_silu[matmul_grid(n, shape.f), (TILE, TILE), stream](rows, nw1[e], h)
        expert_out = cuda.device_array((n, shape.d), np.float32, stream=stream)
        matmul[matmul_grid(n, shape.d), (TILE, TILE), stream](h, nw2[e], expert_out)
        scatter_add[grid_for(n, shape.d), ELEMENTWISE, stream](expert_out, d_tokens, d_weights, y32)
    cast_into[grid_for(*y.shape), ELEMENTWISE, stream](y32, ny)


# what ``ladder check`` compiles for this rung: the kernels it introduces
KERNELS = {
    "top_k_softmax": top_k_softmax,
    "gather": gather,
    "matmul_silu": matmul_silu,
    "matmul": matmul,
    "scatter_add": scatter_add,
    "cast_into": cast_into,
}
KERNEL_ARGS = {name: kernel_args(name) for name in KERNELS}
