"""Naive direct convolution: one thread per output element, every operand from global
memory.

What changes: the loop moves to the GPU. Thread i of a one-dimensional grid computes output
element i of the B x M x Ho x Wo result (the output column varies fastest across a warp, so a
warp's 32 stores are consecutive and coalesced). It loops over the C x K x K window and reads
each input element and each weight from global memory:

    acc = 0
    for c, p, q:  acc += x[b, c, h + p, w + q] * w[m, c, p, q]

Why: thousands of threads instead of one CPU core. Neighbouring threads read overlapping
windows, so most loads hit L1 or L2 rather than DRAM; the weights are the same for every thread
of a block that shares ``m`` (a broadcast).
Prediction: two loads per multiply-add (conv2, C = 4, K = 7: 196 inputs and 196 weights per
output, 8 bytes per multiply-add in float32), each an instruction, an address computation and a
cache lookup: bound by load instructions and L1 traffic, not by DRAM or arithmetic, a few
percent of the FP32 peak (66.9 TFLOP/s on the H200).
Measured: on an NVIDIA H200 by ``ladder bench`` (results/nvidia-h200.json): conv1 23.650 ms and
conv2 62.807 ms in float32 (1.06 and 1.15 TFLOP/s, 1.6% and 1.7% of the FP32 peak; 0.48x and
0.11x cuDNN FP32), 24.241 ms and 64.367 ms in float16.
Verdict: held, at its low end. Float16 halves the bytes read yet takes slightly longer, so DRAM
is not the limit; the load instructions, their address arithmetic and, in float16, a conversion
per value are the likely cost. This rung has no profile, so which of them dominates is not yet
measured. `shared-tiles` keeps the input tile in shared memory and the weights in constant memory.

Lab notes: docs/notes/conv.md#rung-1-naive
"""

from typing import Any

from numba import cuda, float32

from ladder.conv.problem import conv_rung

THREADS = 256
DTYPES = ("float32", "float16")


@cuda.jit
def kernel(x, w, y):
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


@conv_rung(
    name="naive",
    parent=None,
    title="Naive direct: one thread per output, global loads",
    dtypes=DTYPES,
)
def geometry(x: Any, w: Any, out: Any) -> tuple:
    """One thread per output, THREADS a block."""
    return kernel, (out.size + THREADS - 1) // THREADS, THREADS
