"""WMMA: the tensor cores through CUDA C++, one warp per 16 x 16 tile of C.

What changes: Numba exposes no tensor-core instruction, so from here on the kernels are CUDA
C++ (``r14_wmma.cu`` beside this file), compiled with NVRTC and launched through CuPy. The
``nvcuda::wmma`` API is the gentlest entry: a warp loads a 16 x 16 fragment of A and one of B
(``load_matrix_sync``), multiplies them on the tensor cores (``mma_sync``, 4096 multiply-adds
in one warp-wide operation) and accumulates in FP32. This rung is deliberately naive: four
warps per block, each computing its own 16 x 16 tile of C, every fragment loaded straight from
global memory. The accumulator fragment's layout is opaque (it may differ between GPUs), so
converting the FP32 result to half goes through a 1 KB shared-memory staging tile per warp.
Edges: the kernel assumes M and N are multiples of 32 and K of 16; the launcher
(``tensor_core.TiledLauncher``) pads other sizes with zeros.
Why: the tensor cores multiply half-precision tiles many times faster than the FP32 lanes
(cuBLAS HGEMM reaches 782.5 TFLOP/s at 8192³ on the H200, results/nvidia-h200.json).
Prediction: nothing is staged in shared memory, so each warp re-reads its 16-row strip of A
and 16-column strip of B: at M = N = K = 4096 that is 4096/16 = 256 reads of each operand
instead of one, each fragment load a strided access of 16 rows of 32 bytes. Far above the
FP32 rungs in peak terms, a small fraction of cuBLAS in practice: the tensor cores sit idle
waiting for loads.
Measured: on an NVIDIA H200 by ``ladder bench`` (results/nvidia-h200.json): 4.933 ms at 4096³
(27.86 TFLOP/s, 0.040x cuBLAS HGEMM, 1.08x `fp16-staging`) and 38.399 ms at 8192³ (28.63 TFLOP/s,
0.037x). Nsight Compute at 4096³ (lab/gemm/2026-11-22-profiles/nvidia-h200-profile-float16.json): SM
throughput 17.4%, occupancy 72.4%, L2 hit rate 91.6%, DRAM 3.1%.
Verdict: held: about 4% of cuBLAS. Many warps are resident, yet the SM's busiest unit works
under a fifth of the time and the loads are served from L2: the warps wait on loads, not on the
tensor cores. `wmma-shared` reuses the fragments from shared memory.

Lab notes: docs/notes/gemm.md#rung-14-wmma
"""

from ladder.core import cuda_cpp
from ladder.gemm.problem import gemm_rung

SOURCE = cuda_cpp.source(__file__, "r14_wmma.cu", archs=("sm_80", "sm_90"))
BM, BN, BK = 32, 32, 16  # a block's tile of C, and the K step


@gemm_rung(
    name="wmma",
    parent="fp16-staging",
    title="WMMA, one warp per 16 x 16 tile, from global",
    dtypes=("float16",),
    needs=("cupy",),
    units="tensor",
    min_cc=(7, 0),
    cc_needs="WMMA on FP16 (wmma.mma_sync)",
    tiles=(BM, BN, BK),
)
def geometry(m: int, n: int, k: int, dtype: str) -> tuple:
    """``wmma_naive`` on tile-multiple sizes: a block of 4 warps per BM x BN tile of C."""
    return SOURCE.kernel("wmma_naive"), (n // BN, m // BM), (128,), 0
