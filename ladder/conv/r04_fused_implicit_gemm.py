"""Fused unroll + GEMM + permute: an implicit GEMM, with no intermediate buffer.

What changes: `unroll-gemm`'s matrix U never exists. The GEMM kernel loads 16 x 16 tiles of U into
shared memory anyway; here it computes each tile element from the input instead: row (c, p, q)
and column (b, oy, ox) of U are ``x[b, c, oy + p, ox + q]``. The result (m, (b, oy, ox)) is
written straight to ``y[b, m, oy, ox]``, so there is no permute: one kernel, no workspace, no
slices. Each tile load now does integer division and modulo to decode (c, p, q) and
(b, oy, ox), and the tile is still the GEMM ladder's 16 x 16 square.
Why: the bytes drop from `unroll-gemm`'s (K² copies of the input, written and read) to the input
(read through L1 and L2, each element by up to K² tiles) and the output, once.
Prediction: several times faster than `unroll-gemm`, assuming it spent most of its time writing and
reading U; well short of the arithmetic peak, since a thread still does one multiply-add per
pair of shared loads.
Measured: on an NVIDIA H200 by ``ladder bench`` (results/nvidia-h200.json): conv1 50.025 ms and
conv2 35.906 ms in float32 (1.53x and 1.48x over `unroll-gemm`; 0.23x and 0.19x cuDNN FP32),
50.612 ms and 36.107 ms in float16.
Verdict: missed: about 1.5x, not several times, because U was not where `unroll-gemm` spent its
time: instructions were. Nsight Compute on conv1
(lab/conv/2026-11-24-counts/nvidia-h200-profile-conv1-counts.json): 36.3 billion warp instructions
against `unroll-gemm`'s 64.9 billion (0.56x) and `shared-tiles`'s 6.43 billion (5.6x), DRAM 0.5%
busy, the schedulers issuing on 69% of cycles. With M = 4, twelve of each block's sixteen thread
rows compute only padding, the 49-deep reduction is padded to 64, and every tile load divides its
index: so on conv1 this rung is 6.4 times slower than `shared-tiles`; on conv2 it about matches it.
`register-tiled` gives each thread many outputs.

Lab notes: docs/notes/conv.md#rung-4-implicit-gemm
"""

from typing import Any

from numba import cuda, float32

from ladder.conv.problem import conv_rung, size_of

TILE = 16
DTYPES = ("float32", "float16")


@cuda.jit
def kernel(x, w, y):
    sw = cuda.shared.array((TILE, TILE), float32)
    sx = cuda.shared.array((TILE, TILE), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    m_count, c_count, k = w.shape[0], w.shape[1], w.shape[2]
    ho, wo = y.shape[2], y.shape[3]
    pixels = ho * wo
    n = y.shape[0] * pixels
    kk = c_count * k * k
    row = cuda.blockIdx.y * TILE + ty  # output channel m
    col = cuda.blockIdx.x * TILE + tx  # output pixel (b, oy, ox)
    # the column this thread loads in the U tile: fixed for the whole loop
    b, pix = col // pixels, col % pixels
    oy, ox = pix // wo, pix % wo
    acc = float32(0.0)
    for t in range(0, kk, TILE):
        r = t + tx  # W tile: row m, column r of the M x (C K K) weights
        if row < m_count and r < kk:
            sw[ty, tx] = float32(w[row, r // (k * k), (r // k) % k, r % k])
        else:
            sw[ty, tx] = float32(0.0)
        r = t + ty  # U tile: row r = (c, p, q), column col = (b, oy, ox)
        if r < kk and col < n:
            sx[ty, tx] = float32(x[b, r // (k * k), oy + (r // k) % k, ox + r % k])
        else:
            sx[ty, tx] = float32(0.0)
        cuda.syncthreads()
        for s in range(TILE):
            acc += sw[ty, s] * sx[s, tx]
        cuda.syncthreads()
    if row < m_count and col < n:
        y[b, row, oy, ox] = acc


@conv_rung(
    name="implicit-gemm",
    parent="unroll-gemm",
    title="Fused unroll + GEMM + permute (implicit GEMM)",
    dtypes=DTYPES,
)
def geometry(x: Any, w: Any, out: Any) -> tuple:
    """A block of TILE x TILE threads per 16 output pixels and 16 filters."""
    b, _, m, _, _, _ = size_of(x, w)
    n = b * out.shape[2] * out.shape[3]
    return kernel, ((n + TILE - 1) // TILE, (m + TILE - 1) // TILE), (TILE, TILE)
