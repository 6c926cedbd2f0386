"""Warp specialization: a producer warpgroup feeds two math warpgroups.

What changes: who does what (``r22_wgmma.cu``); `wgmma-descriptors`'s stages, copies and ``wgmma``
stay. Of three warpgroups, one only copies (one of its threads issues every copy; ``setmaxnreg``
shrinks the warpgroup's registers to 40) and two only multiply (raised to 232). The block barrier
per K tile goes: each stage gets an "empty" mbarrier beside its "full" one, on which all 256 math
threads arrive once their multiplies of the stage are done (``wait_group 1``), and the producer
waits on it before refilling the stage. Each warpgroup now runs at its own pace, and no copy sits
in a math warp's instruction stream. The 40 and 232 split the block's registers: 168 x 384 = 128 x
(40 + 2 x 232). Also changed: blocks are ordered in groups of 8 block rows (16 in
`wgmma-descriptors`), not measured apart. ``launch_transposed`` runs the same template on Aᵀ or Bᵀ
as they lie (``wgmma`` reads 16-bit operands in either major order): the GEMM backward of
``ladder.ops``.
Why: in `wgmma-descriptors` all 256 threads meet at a ``__syncthreads`` every K tile, so a warpgroup
that is ahead waits for the other, and thread 0's copies wait behind its own warp's wgmma
issue. This is the structure CUTLASS and cuBLAS use on Hopper.
Prediction: a few percent to 10% over `wgmma-descriptors`, the part of each K tile spent at the
barrier.
Measured: on an NVIDIA H100 by ``ladder run``, `wgmma-descriptors` and the libraries in the same
run: 0.209 ms at 4096³ (656.92 TFLOP/s; `wgmma-descriptors` 0.209 ms, cuBLAS 0.183 ms,
lab/gemm/2026-11-26-split/nvidia-h100-80gb-hbm3-gemm-split-4096-float16.json), 1.574 ms at 8192³
(698.74 TFLOP/s; `wgmma-descriptors` 1.610 ms,
lab/gemm/2026-11-26-split/nvidia-h100-80gb-hbm3-gemm-split-8192-float16.json); bfloat16 0.203 ms
and 1.568 ms (`wgmma-descriptors` 0.203 and 1.536 ms;
lab/gemm/2026-11-26-split/nvidia-h100-80gb-hbm3-gemm-split-4096-bfloat16.json,
lab/gemm/2026-11-26-split/nvidia-h100-80gb-hbm3-gemm-split-8192-bfloat16.json). ptxas: 168
registers. On an H200 by ``ladder bench`` (results/nvidia-h200.json): 0.208 ms at 4096³
(0.954x cuBLAS), 1.508 ms at 8192³ (0.949x); Nsight Compute at 4096³
(lab/gemm/2026-11-22-profiles/nvidia-h200-profile-float16.json): SM throughput 77.7% against
cuBLAS's 90.4%.
Verdict: missed: 1.00x `wgmma-descriptors` at 4096³, 1.02x at 8192³ (bfloat16 1.00x and 0.98x), the
grouping included; on the H200 0.99x at both sizes. Why: the ring is 4 stages deep, so copies are
issued 3 tiles ahead and land in time either way; the two math warpgroups do equal work, so the
barrier rarely makes one wait; and at 154 registers `wgmma-descriptors` never needed
``setmaxnreg``'s 232. What specialization buys here is room: the producer is done early, so
`smem-epilogue` can stage C in the ring while only the math warpgroups synchronize (a named
barrier), and a bigger tile could take the 232 registers.

Lab notes: docs/notes/gemm.md#rung-22-warp-specialization
"""

from typing import Any

import numpy as np

from ladder.core import cuda_cpp
from ladder.gemm.hopper import gemm_launch, tensor_launch, tensor_map
from ladder.gemm.problem import gemm_rung

SOURCE = cuda_cpp.source(__file__, "r22_wgmma.cu", archs=("sm_90a",), arch_specific=True)
BM, BN, BK = 128, 256, 64
STAGES = 4
THREADS = 384
SMEM_BYTES = STAGES * (BM * BK + BK * BN) * 2 + 1024  # + slack to align the tiles to 1 KB

_KERNEL = {"float16": "wgmma_tma", "bfloat16": "wgmma_tma_bf16"}


def transposed_geometry(m: int, n: int, k: int, dtype: str, layout: str) -> Any:
    """``wgmma_tma_<layout>`` on tile-multiple sizes, A given K x M (``layout="tn"``) or B
    given N x K (``"nt"``): only the tensor maps' boxes and the shared-memory descriptors
    change (``r22_wgmma.cu``); ``Rung.transposed`` runs it for ``ladder.ops``' GEMM backward."""
    kernel = SOURCE.kernel(f"wgmma_tma_{layout}" + ("_bf16" if dtype == "bfloat16" else ""))

    def maps(a: int, b: int) -> tuple[np.ndarray, np.ndarray]:
        if layout == "tn":  # A given K x M: boxes of 64 k-rows x 64 of its columns
            return tensor_map(a, k, m, BK, 64, dtype), tensor_map(b, k, n, BK, 64, dtype)
        # "nt": B given N x K: boxes of 256 n-rows x 64 k, as A's tiles
        return tensor_map(a, m, k, BM, 64, dtype), tensor_map(b, n, k, BN, 64, dtype)

    blocks = (m // BM) * (n // BN)
    return tensor_launch(kernel, blocks, THREADS, SMEM_BYTES, maps, (m, n, k))


@gemm_rung(
    name="wgmma",
    parent="wgmma-descriptors",
    title="Warp specialization: a producer warpgroup, empty barriers, setmaxnreg",
    dtypes=("float16", "bfloat16"),
    needs=("cupy",),
    units="tensor",
    sm90a="wgmma and setmaxnreg",
    tiles=(BM, BN, BK),
    transposed=transposed_geometry,
)
def geometry(m: int, n: int, k: int, dtype: str) -> Any:
    """``_KERNEL[dtype]`` on tile-multiple sizes: a block of THREADS (a producer and two math
    warpgroups) per BM x BN tile of C, the tensor maps of A and B made once per pair of their
    addresses."""
    return gemm_launch(SOURCE, _KERNEL[dtype], m, n, k, dtype, (BM, BN, BK), THREADS, SMEM_BYTES)
