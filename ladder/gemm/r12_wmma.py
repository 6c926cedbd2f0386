"""Rung 12, WMMA: the tensor cores through CUDA C++, one warp per 16 x 16 tile of C.

Numba exposes no tensor-core instruction, so from here on the kernels are CUDA C++
(``r12_wmma.cu`` beside this file), compiled with NVRTC and launched through CuPy. The
``nvcuda::wmma`` API is the gentlest entry: a warp loads a 16 x 16 fragment of A and one of B
(``load_matrix_sync``), multiplies them on the tensor cores (``mma_sync``, 4096 multiply-adds
in one warp-wide instruction sequence) and accumulates in FP32.

This rung is deliberately naive: four warps per block, each computing its own 16 x 16 tile of
C, every fragment loaded straight from global memory. Nothing is staged in shared memory, so
each warp re-reads its 16-row strip of A and 16-column strip of B from L2 or DRAM: for
M = N = K = 4096 that is 4096/16 = 256 reads of each operand instead of one, and every
fragment load is a strided access of 16 rows of 32 bytes.

The accumulator fragment's layout is opaque (it may differ between GPUs), so converting the
FP32 result to half goes through a 1 KB shared-memory staging tile per warp.

Edges: the kernel assumes M and N are multiples of 32 and K of 16; the launcher
(``tensor_core.launch_tiled``) pads other sizes with zeros.

Prediction: far above the FP32 rungs in peak terms, a small fraction of cuBLAS in practice:
the tensor cores sit idle waiting for global loads, because nothing is reused from fast memory.

Measured on an H200 by ``ladder bench`` (results/nvidia-h200.json): 28.19 TFLOP/s at 4096³
(0.037x cuBLAS HGEMM) and 28.63 at 8192³ (0.038x): barely above the FP16-staging rung,
because the tensor cores wait on global loads that nothing reuses.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ladder.core import cuda_cpp
from ladder.core.rung import rung
from ladder.gemm.tensor_core import launch_tiled

SOURCE = cuda_cpp.source(__file__, "r12_wmma.cu", archs=("sm_80", "sm_90"))
BM, BN, BK = 32, 32, 16  # a block's tile of C, and the K step


@rung(
    name="wmma",
    title="WMMA, one warp per 16 x 16 tile, from global",
    dtypes=("float16",),
    needs=("cupy",),
    units="tensor",
    min_cc=(7, 0),
)
def launch(A: Any, B: Any, C: Any = None) -> Any:
    kernel = SOURCE.kernel("wmma_naive")

    def body(a: np.uint64, b: np.uint64, c: np.uint64, m: int, n: int, k: int) -> None:
        grid = (n // BN, m // BM)
        kernel(grid, (128,), (a, b, c, np.int32(m), np.int32(n), np.int32(k)))

    return launch_tiled(A, B, C, (BM, BN, BK), body)
