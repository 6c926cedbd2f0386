"""`shared-tiles`, shared-memory input tiles, weights in constant memory.

What changes: `naive`'s two global loads per multiply-add go. A block of 16 x 16 threads
computes a 16 x 16 tile of one output channel of one image: it loads the (16 + K - 1)² input
window per channel into shared memory once (coalesced, one element per thread), waits at a
barrier, and every thread reads its K x K window from there. The weights live in constant
memory: Numba fills it at compile time (``cuda.const.array_like``), so the rung compiles one
kernel per distinct weight tensor (C, M and K compile-time constants), found by the weights'
bytes, which the launcher copies to the host on every call (12.5 KB for conv2; that copy is
inside the measured time and the host time per call, 85 to 116 µs on an NVIDIA H200 in
lab/harness/2026-11-25-hosttime/nvidia-h200-hosttime.json, which no plan can save, and keeps the
rung out of CUDA graphs). Weights over 64 KB are refused.
Why: shared memory is on the SM, a few cycles away, and a tile element loaded once serves every
thread whose window covers it. All threads of a block use the same weight at the same time: the
constant cache broadcasts it to the warp and feeds it straight into the FMA.
Prediction: for K = 7, 484 global loads per channel instead of 12,544, one per multiply-add:
several times faster than `naive`, now bound by one shared-memory load per multiply-add. Each
block still handles one output channel (the input tile is reloaded, from L2, for each of M).
Measured: on an NVIDIA H200 by ``ladder bench`` (results/nvidia-h200.json): conv1 7.812 ms and
conv2 37.089 ms in float32 (3.03x and 1.69x over `naive`; 1.45x and 0.18x cuDNN FP32),
7.866 ms and 37.449 ms in float16.
Verdict: held on conv1, where this rung already beats cuDNN FP32; short on conv2. conv2's
34 x 34 output does not divide into 16 x 16 tiles: its 3 x 3 tiles per channel run 2,304
threads for 1,156 outputs, and every thread runs the whole C K² loop whether it stores or not,
so about half of conv2's work is wasted (counted from the code; conv1's 80 x 80 output is
exactly 5 x 5 tiles). Not profiled. `unroll-gemm` restructures the computation as a matrix multiply.

Lab notes: docs/notes/conv.md#rung-2-shared-tiles
"""

import functools
import hashlib
from typing import Any

import numpy as np
from numba import cuda, float32

from ladder.conv.problem import by_weights, conv_rung, size_of
from ladder.core.dtypes import to_host
from ladder.core.fastcall import numba_array

TILE = 16
CONSTANT_BYTES = 64 * 1024
DTYPES = ("float32", "float16")


@functools.lru_cache(maxsize=16)
def _kernel_for(key: bytes, weights: bytes, shape: tuple[int, int, int, int]) -> Any:
    """A kernel with these weights baked into its constant memory (one per weight tensor)."""
    W = np.frombuffer(weights, dtype=np.float32).reshape(shape)
    _, c_count, k, _ = shape
    span = TILE + k - 1

    @cuda.jit
    def kernel(x, y, b0):
        wc = cuda.const.array_like(W)
        tile = cuda.shared.array((span, span), float32)
        ho, wo = y.shape[2], y.shape[3]
        tiles_w = (wo + TILE - 1) // TILE
        ty, tx = cuda.threadIdx.y, cuda.threadIdx.x
        row0 = (cuda.blockIdx.x // tiles_w) * TILE
        col0 = (cuda.blockIdx.x % tiles_w) * TILE
        m = cuda.blockIdx.y
        b = cuda.blockIdx.z + b0
        h, wd = x.shape[2], x.shape[3]
        acc = float32(0.0)
        for c in range(c_count):
            cuda.syncthreads()  # the previous channel's tile is no longer read
            for r in range(ty, span, TILE):
                for s in range(tx, span, TILE):
                    gy, gx = row0 + r, col0 + s
                    tile[r, s] = float32(x[b, c, gy, gx]) if gy < h and gx < wd else float32(0)
            cuda.syncthreads()
            for p in range(k):
                for q in range(k):
                    acc += tile[ty + p, tx + q] * wc[m, c, p, q]
        if row0 + ty < ho and col0 + tx < wo:
            y[b, m, row0 + ty, col0 + tx] = acc

    return kernel


NOT_IN_A_GRAPH = (
    "conv rung 2 compiles the weights' values into its kernel (constant memory), so each call "
    "copies them to the host to find that kernel: a graph can hold neither the copy nor the "
    "choice, and its replays would keep the captured weights. Use a later rung in a graph"
)


def _weights_kernel(w: Any) -> Any:
    """The kernel for the contents of ``w``, copied to the host to find it (every call)."""
    weights = np.ascontiguousarray(to_host(numba_array(w)), dtype=np.float32)
    raw = weights.tobytes()
    return _kernel_for(hashlib.sha1(raw).digest(), raw, weights.shape)


@conv_rung(
    name="shared-tiles",
    parent="naive",
    title="Shared-memory input tiles, weights in constant memory",
    dtypes=DTYPES,
)
def geometry(x: Any, w: Any, out: Any) -> Any:
    """A block of TILE x TILE threads per output tile, channel and image (MAX_GRID_Z images a
    launch); which kernel depends on the weights' values, so each call finds its own
    (``_weights_kernel``, ``by_weights``)."""
    if w.size * 4 > CONSTANT_BYTES:
        raise ValueError(
            f"the weights take {w.size * 4} bytes as float32; constant memory holds "
            f"{CONSTANT_BYTES}. Use a later rung, which reads them from shared memory"
        )
    b, _, m, _, _, _ = size_of(x, w)
    ho, wo = out.shape[2], out.shape[3]
    tiles = ((ho + TILE - 1) // TILE) * ((wo + TILE - 1) // TILE)
    return by_weights(_weights_kernel, (tiles, m), (TILE, TILE), b, NOT_IN_A_GRAPH)


def _example_kernel() -> Any:
    weights = np.random.default_rng(0).uniform(-1, 1, (16, 4, 7, 7)).astype(np.float32)
    raw = weights.tobytes()
    return _kernel_for(hashlib.sha1(raw).digest(), raw, weights.shape)


# `ladder check` compiles the kernel for conv2's shape of weights (random values)
KERNELS = {"kernel_conv2_weights": _example_kernel()}
KERNEL_ARGS = {"kernel_conv2_weights": lambda x, w, out: (x, out, np.int64(0))}
