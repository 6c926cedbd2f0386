"""Rung 1, naive direct convolution: one thread per output element, every operand from global
memory.

Thread i of a one-dimensional grid computes output element i of the B x M x Ho x Wo result
(the fastest index, the output column, varies fastest across a warp, so the 32 stores of a
warp are consecutive and coalesced). It loops over the C x K x K window and reads each input
element and each weight from global memory:

    acc = 0
    for c, p, q:  acc += x[b, c, h + p, w + q] * w[m, c, p, q]

Every output does C K² multiply-adds and as many loads of each operand: conv2 (C = 4, K = 7)
reads 196 inputs and 196 weights per output, 8 bytes per multiply-add. Neighbouring threads
read overlapping windows, so most of those loads hit L1 or L2 rather than DRAM, but each is
still an instruction, an address computation and a cache lookup. The weights are the same for
every thread of a block that shares ``m`` (a broadcast); the inputs are shared by neighbours.

Prediction: bound by load instructions and L1 traffic, not by DRAM or arithmetic; a few
percent of the FP32 peak. Rung 2 keeps the input tile in shared memory and the weights in
constant memory.

Measured on an H200 by ``ladder bench`` (results/nvidia-h200.json): conv1 23.654 ms and conv2
62.782 ms in float32 (368.95x and 24.26x over rung 0, NumPy on the CPU; 0.50x and 0.11x cuDNN
FP32), 24.235 ms and 64.356 ms in float16 (0.49x and 0.11x cuDNN FP32; rung 0 has no float16).
The prediction held, at its low end: 1.06 and 1.15 TFLOP/s in float32, under 2% of the FP32
peak. Float16 halves the bytes read yet takes slightly longer, so DRAM is not what limits this
rung; likely the load instructions, their address arithmetic and, in float16, a conversion per
value set the time (the bench times the kernel; it does not profile it).
"""

from __future__ import annotations

from typing import Any

from numba import cuda, float32

from ladder.conv.problem import check_arrays
from ladder.core.rung import rung

THREADS = 256


@cuda.jit
def naive_kernel(x, w, y):
    i = cuda.grid(1)
    wo = y.shape[3]
    ho = y.shape[2]
    m_count = y.shape[1]
    if i >= y.size:
        return
    col = i % wo
    row = (i // wo) % ho
    m = (i // (wo * ho)) % m_count
    b = i // (wo * ho * m_count)
    k = w.shape[2]
    acc = float32(0.0)
    for c in range(x.shape[1]):
        for p in range(k):
            for q in range(k):
                acc += float32(x[b, c, row + p, col + q]) * float32(w[m, c, p, q])
    y[b, m, row, col] = acc


@rung(
    name="naive",
    title="Naive direct: one thread per output, global loads",
    dtypes=("float32", "float16"),
)
def launch(x: Any, w: Any, out: Any = None, *, stream: Any = 0) -> Any:
    x, w, out, _ = check_arrays(x, w, out, ("float32", "float16"))
    n = out.size
    if n:
        naive_kernel[(n + THREADS - 1) // THREADS, THREADS, stream](x, w, out)
    return out
