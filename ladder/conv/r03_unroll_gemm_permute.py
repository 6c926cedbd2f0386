"""The course baseline: unroll (im2col), a tiled GEMM, and a permute, as three kernels.

What changes: the convolution becomes a matrix multiply. Unroll the input: column j of a matrix
U (C K² rows) holds the C x K x K window under output pixel j, for every pixel of every image.
Then ``Y' = W U``, with W the weights as an M x (C K²) matrix, and a permute writes Y'
(M x images x Ho x Wo) back as NCHW. Three kernels: **unroll** (one thread per element of U),
**GEMM** (the shared-memory tiled multiply of `gemm/shared-tiling`, 16 x 16 tiles, one
output per thread) and **permute**. U repeats every input element up to K² times (conv2:
9 GB at B = 10,000), so the rung works through slices of images whose U fits in 256 MB.
Why: the structure a library follows (cuDNN's "implicit precomputed GEMM", the im2col + cuBLAS
reference): a GEMM tile reuses every loaded value for many outputs.
Prediction: slower than `shared-tiles` at these shapes. The arithmetic is the same, but U costs K²
times the input's bytes, written and read again: the file counts 28.46 GB moved on conv1 in
float32 against 1.32 GB for the layer. With M = 4 or 16 rows the GEMM is bound by reading U.
Measured: on an NVIDIA H200 by ``ladder bench`` (results/nvidia-h200.json): conv1 76.782 ms and
conv2 53.273 ms in float32 (0.10x and 0.70x `shared-tiles`; 0.15x and 0.13x cuDNN FP32), 76.279 ms
and 53.078 ms in float16.
Verdict: held, but not for the reason given. conv1 moves its 28.46 GB at 0.37 TB/s, under a
tenth of the 4.27 TB/s copy bandwidth, and float16, which halves U, is within 1% of float32's
time: bytes are not the limit. Instructions are: Nsight Compute counts 64.9 billion warp
instructions on conv1 over the unroll, GEMM and permute kernels, 10x `shared-tiles`'s 6.43 billion,
with the schedulers issuing on about 80% of cycles (lab/conv/2026-11-24-counts/nvidia-h200-profile-
conv1-counts.json). They come from the unroll kernel's divisions and modulos for every element of U
and from a GEMM whose 16 x 16 tiles of W are three quarters padding (M = 4) and whose 49-deep
reduction is padded to 64. `implicit-gemm` fuses the three steps into one kernel.

Lab notes: docs/notes/conv.md#rung-3-unroll-gemm
"""

from typing import Any

import numpy as np
from numba import cuda, float32

from ladder.conv.problem import as_matrix, conv_rung, matrix, size_of, workspace

SLICE_BYTES = 256 * 2**20  # the largest unrolled slice U
TILE = 16
THREADS = 256
DTYPES = ("float32", "float16")
# plans kept: each holds its own U and Y' (up to SLICE_BYTES and more), so a few shapes' worth
# of device memory, not fastcall's PLANS_PER_CACHE
WORKSPACE_PLANS = 4


@cuda.jit
def unroll_kernel(x, u, b0, k, ho, wo):
    """u[(c, p, q), (b, oy, ox)] = x[b0 + b, c, oy + p, ox + q]."""
    i = cuda.grid(1)
    cols = u.shape[1]
    if i >= u.shape[0] * cols:
        return
    row, j = i // cols, i % cols
    q = row % k
    p = (row // k) % k
    c = row // (k * k)
    ox = j % wo
    oy = (j // wo) % ho
    b = j // (wo * ho)
    u[row, j] = x[b0 + b, c, oy + p, ox + q]


@cuda.jit
def gemm_kernel(a, u, out):
    """out = a @ u with 16 x 16 shared-memory tiles (the GEMM ladder's rung 3)."""
    sa = cuda.shared.array((TILE, TILE), float32)
    su = cuda.shared.array((TILE, TILE), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    row = cuda.blockIdx.y * TILE + ty
    col = cuda.blockIdx.x * TILE + tx
    m, kk = a.shape
    n = u.shape[1]
    acc = float32(0.0)
    for t in range(0, kk, TILE):
        sa[ty, tx] = float32(a[row, t + tx]) if row < m and t + tx < kk else float32(0.0)
        su[ty, tx] = float32(u[t + ty, col]) if t + ty < kk and col < n else float32(0.0)
        cuda.syncthreads()
        for s in range(TILE):
            acc += sa[ty, s] * su[s, tx]
        cuda.syncthreads()
    if row < m and col < n:
        out[row, col] = acc


@cuda.jit
def permute_kernel(prod, y, b0):
    """y[b0 + b, m, pixel] = prod[m, (b, pixel)]."""
    i = cuda.grid(1)
    m_count, cols = prod.shape
    if i >= m_count * cols:
        return
    pixels = y.shape[2] * y.shape[3]
    m, j = i // cols, i % cols
    b, pix = j // pixels, j % pixels
    y[b0 + b, m, pix // y.shape[3], pix % y.shape[3]] = prod[m, j]


def _blocks(n: int) -> int:
    return (n + THREADS - 1) // THREADS


@conv_rung(
    name="unroll-gemm",
    parent="shared-tiles",
    title="Unroll (im2col) + tiled GEMM + permute: three kernels",
    dtypes=DTYPES,
    bytes_moved=lambda size, dtype: _bytes_moved(size, dtype),
    plans_kept=WORKSPACE_PLANS,
)
def geometry(x: Any, w: Any, out: Any) -> list:
    """The slices of images whose U fits in SLICE_BYTES, and per slice, in order: unroll into U,
    the GEMM of the weights (as an M x C K² matrix) with U into Y', the permute into out. U and
    Y' are the plan's own, sized for the largest slice; a plan's kernels all run on one stream,
    so a call's unroll waits for the last call's GEMM to be done with U."""
    b, c, m, _, _, k = size_of(x, w)
    ho, wo = out.shape[2], out.shape[3]
    rows = c * k * k
    per_image = max(1, rows * ho * wo * x.itemsize)
    step = max(1, min(b, SLICE_BYTES // per_image))
    u_buffer = workspace(rows * step * ho * wo, x.dtype)
    prod_buffer = workspace(m * step * ho * wo, x.dtype)
    a = as_matrix(w, m, rows)
    steps = []
    for b0 in range(0, b, step):
        cols = min(step, b - b0) * ho * wo
        u, prod = matrix(u_buffer, rows, cols, "u"), matrix(prod_buffer, m, cols, "prod")
        if rows:  # no channels: U is empty, the GEMM writes zeros
            steps.append((unroll_kernel, _blocks(rows * cols), THREADS, (x, u, b0, k, ho, wo)))
        grid = ((cols + TILE - 1) // TILE, (m + TILE - 1) // TILE)
        steps.append((gemm_kernel, grid, (TILE, TILE), (a, u, prod)))
        steps.append((permute_kernel, _blocks(m * cols), THREADS, (prod, out, b0)))
    return steps


def _example(rows: int, cols: int, like: np.ndarray) -> np.ndarray:
    return np.empty((rows, cols), like.dtype)


# `ladder check` compiles each kernel for example arguments made from the problem's arrays
KERNEL_ARGS = {
    "unroll_kernel": lambda x, w, out: (x, _example(9, 4, x), np.int64(0), 3, 2, 2),
    "gemm_kernel": lambda x, w, out: (_example(2, 9, x), _example(9, 4, x), _example(2, 4, x)),
    "permute_kernel": lambda x, w, out: (_example(2, 4, x), out, np.int64(0)),
}


def _bytes_moved(size: tuple[int, ...], dtype: str) -> float:
    """Input read, U written and read, Y' written and read, output written (weights aside)."""
    bsz, c, m, h, wd, k = size
    ho, wo = h - k + 1, wd - k + 1
    item = 2 if dtype == "float16" else 4
    u = c * k * k * bsz * ho * wo
    y = bsz * m * ho * wo
    return float((bsz * c * h * wd + 2 * u + 3 * y) * item)
