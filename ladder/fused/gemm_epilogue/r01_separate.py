"""GEMM then epilogue: the best FP32 GEMM writes C, a second kernel applies bias + GELU.

What changes: nothing yet; this is where the ladder starts. C = gelu(A @ B + bias) the way a
framework runs it without fusion: the GEMM (`gemm/double-buffered`, 128 x 128 tiles,
unchanged) writes C to device memory, then an elementwise kernel, one element
of C per thread, reads C and the bias, applies GELU (erf form) and writes C again, in place.
Why: the baseline: the cost of an unfused epilogue is one more pass over C, read and written.
Prediction: at 4096³ the GEMM moves at least 201 MB and takes milliseconds; the epilogue moves
2 x 67 MB (read and write C), about 0.03 ms at the copy bandwidth, plus a launch: a few percent
over the plain GEMM, nearly all of it the extra pass over C.
Measured: on an NVIDIA H200 (results/nvidia-h200.json, ``ladder bench``, 4096³, float32):
3.876 ms, against 3.802 ms for the plain GEMM (`gemm/double-buffered`) in the same file: both
measured on 2026-11-29, but in separate runs (two pieces of the file), not in one.
Verdict: held: 1.9% over the plain GEMM. The difference of the two medians, 0.074 ms, is more than
the 0.03 ms the copy bandwidth allows for 134 MB (about 1.8 TB/s for the epilogue kernel, if all of
the difference is its own, and if the GEMM took the same time in both runs); the epilogue kernel has
not been profiled, so what holds it there (one element per thread, a division and a remainder for
its row and column, ``erf``) is not yet measured.

Lab notes: docs/notes/fused.md
"""

import math
from typing import Any

import numpy as np
from numba import cuda, float32, uint32

from ladder.fused.problem import GEMM_EPILOGUE, fused_rung
from ladder.gemm.problem import aligned_for_float4, grid_2d
from ladder.gemm.r10_warp_tiling import DEFAULT
from ladder.gemm.r11_double_buffered import make_kernel

INV_SQRT2 = np.float32(1.0 / math.sqrt(2.0))
THREADS = 256


@cuda.jit(device=True, inline="always")
def gelu(v):
    return float32(0.5) * v * (float32(1.0) + math.erf(v * INV_SQRT2))


@cuda.jit(device=True, inline="always")
def relu(v):
    return max(v, float32(0.0))


def make_bias_activation_kernel(activation: Any) -> Any:
    """An elementwise kernel C[i, j] = activation(C[i, j] + bias[j]), in place."""

    @cuda.jit
    def bias_activation(C, bias):
        i = uint32(cuda.blockIdx.x) * uint32(cuda.blockDim.x) + uint32(cuda.threadIdx.x)
        n = uint32(C.shape[1])
        if i < uint32(C.shape[0]) * n:
            r, c = i // n, i % n
            C[r, c] = activation(C[r, c] + bias[c])

    return bias_activation


bias_gelu_kernel = make_bias_activation_kernel(gelu)
wide_gemm, scalar_gemm = make_kernel(DEFAULT, True), make_kernel(DEFAULT, False)
KERNELS = {"bias_gelu_kernel": bias_gelu_kernel}  # the GEMM kernels are gemm/double-buffered's
KERNEL_ARGS = {"bias_gelu_kernel": lambda A, B, bias, out: (out, bias)}


def _bytes(size: tuple[int, ...], dtype: str) -> float:
    m, n, k = size
    return float((m * k + k * n + 3 * m * n + n) * 4)  # GEMM, then read and write C again


@fused_rung(
    GEMM_EPILOGUE,
    name="gemm-then-epilogue",
    parent=None,
    title="GEMM (gemm/double-buffered), then a bias + GELU kernel",
    bytes_moved=_bytes,
)
def geometry(a: Any, b: Any, c: Any, bias: Any) -> list:
    """`gemm/double-buffered`'s GEMM (16-byte accesses where every row allows them), then the
    bias + GELU kernel over C, a thread per element."""
    m, n = c.shape
    gemm = wide_gemm if aligned_for_float4(a, b, c) else scalar_gemm
    return [
        (gemm, grid_2d(n, DEFAULT.bn, m, DEFAULT.bm), DEFAULT.threads, (a, b, c)),
        (bias_gelu_kernel, (m * n + THREADS - 1) // THREADS, THREADS, (c, bias)),
    ]
