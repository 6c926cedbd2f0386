"""Flash fp16: the q, k and v tiles kept as float16 in shared memory, FP32 accumulation.

What changes: `flash` on float16 inputs reads half the bytes from global memory but converts
every value to float32 as it stages the tiles, so its shared memory and tile shapes are those
of float32. This rung is `flash`'s kernel (``r03_flash.make_kernel``) with the q, k and v tiles
staged as float16: each value is converted (``cvt.f32.f16``) when it is read from shared memory
into a register; scores, probabilities, running max and sum and the output accumulators stay
float32, the contract of every half-precision rung and of SDPA. The P tile stays float32.
Memory: as `flash`, inputs and output only; shared memory per block 41.7 KB at d = 64 and
41.6 KB at d = 128 (the padded float16 rows shift by one 4-byte bank each).
Why: half the bytes per value buys wider tiles in the same 48 KB: 64 keys per tile instead of
32 at d <= 64 (each thread computes 4 x 4 scores, 16 multiply-adds per 8 shared loads in Q·Kᵀ,
against `flash`'s 8 per 6) and 64 queries instead of 32 at d = 128; half as many trips through
the loop, its two block barriers and its shuffles per key.
Prediction: 1.2 to 1.5x `flash` in float16, from the wider tiles, less the conversions (one
instruction per value read from shared memory). Still FP32 arithmetic on the CUDA cores: the
tensor cores of `tensor-core-flash` are the step that matters.
Measured: on an NVIDIA H200 (results/nvidia-h200.json, ``ladder bench``), at the SDPA shape
[4, 16, 16, 4096, 64] (B, H, HKV, N, d) in float16: 24.073 ms and 11.4 TFLOP/s (`flash`:
29.104 ms; SDPA: 0.600 ms); causal (the file's earlier run, 2026-11-25), 12.541 ms (`flash`:
15.255 ms).
Verdict: held at its low end, 1.21x `flash` (causal 1.22x); 0.02x SDPA. Likely because only
Q·Kᵀ gains from the wider tiles, while ``P·V`` keeps `flash`'s 16 multiply-adds per 8 shared
loads and every value read from shared memory now pays a conversion (not profiled).

Lab notes: docs/notes/attention.md
"""

from typing import Any

import numpy as np
from numba.types import float16

from ladder.attention.problem import attention_rung
from ladder.attention.r03_flash import SIDE, check_d, flash_geometry, make_kernel, padded


def tile_shape(padded_d: int) -> tuple[int, int]:
    """(TM, TN): 64 queries and 64 keys per tile up to d = 64, 64 and 32 up to 128."""
    return (4, 4) if padded_d <= 64 else (4, 2)


_kernels: dict[int, Any] = {}


def kernel_for(d: int) -> Any:
    dp = padded(d)
    if dp not in _kernels:
        _kernels[dp] = make_kernel(dp, *tile_shape(dp), staging=float16)
    return _kernels[dp]


# what ``ladder check`` compiles: the kernel for three head dimensions
KERNELS = {f"flash_fp16_d{d}": kernel_for(d) for d in (16, 64, 128)}
KERNEL_ARGS = {name: lambda q, k, v, out: (q, k, v, out, np.float32(1), False) for name in KERNELS}


@attention_rung(
    name="flash-fp16",
    parent="flash",
    title="Flash attention, FP16 tiles in shared memory, FP32 accumulation",
    dtypes=("float16",),
)
def geometry(q: Any, k: Any, v: Any, out: Any) -> tuple:
    """The kernel for this head dimension (up to `flash`'s MAX_D) and its tile of queries."""
    d = q.shape[3]
    check_d(d, "rung 4")
    return flash_geometry(kernel_for(d), q, SIDE * tile_shape(padded(d))[0])
