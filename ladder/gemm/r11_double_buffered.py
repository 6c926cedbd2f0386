"""Double buffering: the next K tile's global loads overlap the current tile's math.

What changes: shared memory holds two stages of the A and B tiles. While the block computes on
stage s, each thread has already issued the global loads of the next K tile into registers, before
the compute loop; after the compute it writes them to the other stage. One barrier per K tile is
then enough: the barrier after tile t's writes to stage s ^ 1 also separates tile t's reads of
stage s from tile t + 1's writes to it. The tile sizes, the thread layout and every piece of the
kernel (loads, transposed store, inner loop, masked epilogue) are `warp-tiling`'s, imported from
``r10_warp_tiling``; only the kernel body that orders them is new. The two stages live in one
shared array of 2 x BK rows per operand, stage s at row offset s x BK, because ``load4`` takes 2D
arrays: 2 x 16 x (132 + 128) x 4 = 33,280 bytes per block, under the 48 KB a block may declare
statically (Numba cannot raise that limit). The price is registers: the next tile's 32 floats stay
live across the compute loop.
Why: in `warp-tiling` every K tile goes load, barrier, compute, barrier: a warp that reaches the
loads waits the full global-memory latency (hundreds of cycles) with nothing to do, and with 128
accumulators per thread only a few warps fit on an SM to cover for it. Here that latency is hidden
behind 2048 multiply-adds per thread.
Prediction: the global-load stalls between tiles disappear, most visibly at sizes where few
blocks fit per SM; a moderate step over `warp-tiling`.
Measured: on an NVIDIA H200 by ``ladder bench`` (results/nvidia-h200.json): 0.151 ms at
1024³ (1.31x `warp-tiling`) and 3.802 ms at 4096³ (36.15 TFLOP/s, 54% of the FP32 peak, 1.18x, 0.70x
cuBLAS). Nsight Compute at 4096³ (lab/gemm/2026-11-22-profiles/nvidia-h200-profile-float32.json): SM
throughput 69.1% (`warp-tiling`: 57.5%) with occupancy 12.4% (18.0%).
Verdict: held: a busier SM with fewer resident warps, which is what hiding the loads inside
each warp should give, and the larger gain at 1024³, where the 64 blocks leave one per SM.

Lab notes: docs/notes/gemm.md#rung-11-double-buffered
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
from numba import cuda, float32, uint32

from ladder.core.intrinsics import VECTOR_ALIGN
from ladder.gemm.problem import ByAlignment, gemm_rung, grid_2d
from ladder.gemm.r10_warp_tiling import DEFAULT, Config, make_parts

STAGES = 2


@functools.cache
def make_mainloop(config: Config, wide_global: bool) -> tuple[Any, int]:
    """The double-buffered main loop as an inlined device function, and its accumulator count.

    ``mainloop(A, B, acc)`` fills ``acc`` with this thread's part of the block's tile of A @ B
    and returns the row and column in C of its first output. The kernels below (and the fused
    GEMM epilogue of ``ladder.fused``) differ only in what they do with ``acc`` afterwards.
    """
    bad = config.problems(stages=STAGES)
    if bad:
        raise ValueError(f"{config} cannot be double-buffered: " + "; ".join(bad))
    p = make_parts(config, wide_global)
    place, zero, compute = p.place, p.zero, p.compute
    load_a, load_b, store_a, store_b = p.load_a, p.load_b, p.store_a, p.store_b
    stage_rows, bn, as_row = STAGES * config.bk, config.bn, p.as_row  # plain ints for shapes
    n_m, n_n, n_a, n_b = p.n_m, p.n_n, p.n_a, p.n_b
    u_bm, u_bn, u_bk = np.uint32(config.bm), np.uint32(config.bn), np.uint32(config.bk)
    u_zero = np.uint32(0)

    @cuda.jit(device=True, inline="always")
    def mainloop(A, B, acc):
        # stage s of each tile is rows s * bk .. s * bk + bk - 1
        As = cuda.shared.array((stage_rows, as_row), float32, alignment=VECTOR_ALIGN)
        Bs = cuda.shared.array((stage_rows, bn), float32, alignment=VECTOR_ALIGN)
        K = uint32(A.shape[1])
        row0 = uint32(cuda.blockIdx.y) * u_bm
        col0 = uint32(cuda.blockIdx.x) * u_bn
        a_row, a_col, b_row, b_col, m_base, n_base = place(uint32(cuda.threadIdx.x))
        reg_m = cuda.local.array(n_m, float32)
        reg_n = cuda.local.array(n_n, float32)
        a_regs = cuda.local.array(n_a, float32)
        b_regs = cuda.local.array(n_b, float32)
        zero(acc)
        # the first K tile goes straight to stage 0
        load_a(A, row0 + a_row, a_col, a_regs)
        load_b(B, b_row, col0 + b_col, b_regs)
        store_a(As, a_col, a_row, a_regs)
        store_b(Bs, b_row, b_col, b_regs)
        cuda.syncthreads()
        stage = u_zero  # row offset of the stage being computed on: 0 or bk
        for k0 in range(u_zero, K, u_bk):
            k_next = k0 + u_bk
            if k_next < K:  # issue the next tile's loads now; they land during the compute
                load_a(A, row0 + a_row, k_next + a_col, a_regs)
                load_b(B, k_next + b_row, col0 + b_col, b_regs)
            compute(As, Bs, stage, m_base, n_base, acc, reg_m, reg_n)
            if k_next < K:
                stage = u_bk - stage
                store_a(As, stage + a_col, a_row, a_regs)
                store_b(Bs, stage + b_row, b_col, b_regs)
            cuda.syncthreads()
        return row0 + m_base, col0 + n_base

    return mainloop, p.n_acc


@functools.cache
def make_kernel(config: Config, wide_global: bool) -> Any:
    """The double-buffered kernel for ``config``, with 16-byte (``wide_global``) or scalar I/O."""
    mainloop, n_acc = make_mainloop(config, wide_global)
    store_c = make_parts(config, wide_global).store_c

    @cuda.jit
    def kernel(A, B, C):
        acc = cuda.local.array(n_acc, float32)
        row, col = mainloop(A, B, acc)
        store_c(C, row, col, acc)

    return kernel


wide_kernel = make_kernel(DEFAULT, wide_global=True)
scalar_kernel = make_kernel(DEFAULT, wide_global=False)


@gemm_rung(name="double-buffered", parent="warp-tiling", title="Double-buffered shared tiles")
def geometry(m: int, n: int, k: int) -> tuple:
    """The 16-byte kernel where every row of A, B and C allows it, else the scalar one; a block
    of DEFAULT's threads per tile of C."""
    return (
        ByAlignment(wide_kernel, scalar_kernel),
        grid_2d(n, DEFAULT.bn, m, DEFAULT.bm),
        DEFAULT.threads,
    )
