"""Rung 1, naive: one thread per element of C, with the threads of a warp walking down a column.

What changes: the first GPU kernel. Thread (x, y) of the grid computes ``C[x, y]`` as the dot
product of row x of A and column y of B, both read from global memory every time.
Why: it is the formula written as a kernel, and it shows what the memory system charges for
a bad layout. A warp is 32 threads that issue each load together; ``threadIdx.x``, the index
that varies fastest inside a warp, picks the *row* here. So a warp's 32 loads of A hit 32
rows, K floats apart: 32 separate 32-byte sectors (the unit the caches and DRAM move) for 32
useful floats, and its stores of C are N floats apart. Only the B load is shared: the whole
warp reads one element. Per step of k a warp touches 33 sectors.
Prediction: memory transactions, not arithmetic, set the pace; a few percent of the FP32
peak (66.9 TFLOP/s on the H200, from its SMs, lanes and clock).
Measured: on an NVIDIA H200 by ``ladder bench`` (results/nvidia-h200.json): 4.431 ms at
1024³ (0.48 TFLOP/s) and 276.079 ms at 4096³ (0.50 TFLOP/s, 0.7% of the FP32 peak), slower
than NumPy on the CPU at both sizes. Nsight Compute at 4096³
(lab/gemm/2026-11-22-profiles/nvidia-h200-profile-float32.json): DRAM throughput 0.6% of its peak,
L2 hit rate 87%, SM throughput (its busiest unit, as % of that unit's peak) 26.8%, occupancy (warps
resident, as % of the most an SM holds) 94.6%.
Verdict: the kind held, the number missed low: 0.7% of the peak, not a few percent. The
profile fits a kernel that waits on loads: nearly every warp slot is filled, yet the SM's
busiest unit works a quarter of the time and DRAM is idle (the data come from cache). How
long each scattered load takes, which the count did not price, decides the rate; the L1 and
L2 sector counts that would show which cache level sets it are not in the profile file: not
yet measured.

Numba notes that apply from here on:
- write ``float32(0.0)``, not ``0.0``: a bare ``0.0`` is a float64, and ``acc += a * b``
  then runs in double precision (``fma.rn.f64`` in the PTX), with conversions every step;
- every integer is widened to 64 bits and every index on a signed integer carries
  wrap-around code for negative values (``shr.s64``/``and``/``add`` before each load in the
  PTX); rung 6 removes both.

Lab notes: docs/notes/gemm.md#rung-1-naive
"""

from __future__ import annotations

from typing import Any

from numba import cuda, float32

from ladder.core.fastcall import NumbaLaunch, Operand, PlanCache
from ladder.core.rung import rung
from ladder.gemm.problem import grid_2d, launch_planned

BLOCK = 32  # 32 x 32 = 1024 threads, the most a block may have


@cuda.jit
def naive_kernel(A, B, C):
    row = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x  # fastest index -> row: strided
    col = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
    if row < C.shape[0] and col < C.shape[1]:
        acc = float32(0.0)
        for k in range(A.shape[1]):
            acc += A[row, k] * B[k, col]
        C[row, col] = acc


def plan(a: Operand, b: Operand, c: Operand) -> NumbaLaunch:
    """The kernel's launch for C's shape (grid and block): built once per signature of A, B
    and C (``PLANS``)."""
    m, n = c.shape
    return NumbaLaunch(naive_kernel, grid_2d(m, BLOCK, n, BLOCK), (BLOCK, BLOCK))


PLANS = PlanCache(plan)


@rung(name="naive", parent=None, title="Naive: one thread per output, uncoalesced")
def launch(A: Any, B: Any, C: Any = None) -> Any:
    return launch_planned(PLANS, A, B, C)
