"""Fused epilogue: bias + GELU applied in the GEMM kernel's store, C stored to DRAM once.

What changes: `gemm-then-epilogue` wrote C, then read it back to add the bias and apply GELU.
Here the main loop is `gemm/double-buffered`'s, unchanged (``make_mainloop`` of
``ladder.gemm.r11_double_buffered``, the very device function its kernel calls), and only the
store differs, in two steps:

1. `gemm/warp-tiling`'s store of ``acc + bias`` (additions only, so everything unrolls and the 128
   accumulators stay in registers; the thread's 16 bias values are loaded once);
2. a plain loop over the thread's own 128 outputs, just written and still in L2, applying the
   activation in place. Its reads and second writes stay in L2 (a block's tile is 64 KB, and
   the resident blocks' tiles fit in L2 many times over), so C still reaches DRAM once.

The split is needed because GELU's ``erf`` is a few dozen instructions: applied to the accumulators
inside `gemm/warp-tiling`'s store loops it is inlined 128 times, the loops grow past what the
compiler unrolls, and an array indexed by a loop that is not unrolled cannot live in registers
(``ladder check`` showed the accumulators moved to a stack frame; the lab notes keep that try).
ReLU, a single ``max``, does not have this problem. ``make_fused_kernel(config, wide_global,
activation)`` builds the kernel for any `gemm/double-buffered` tile configuration and any
activation device function; GELU (erf form) is the problem's, ReLU the cheap alternative (tested,
not benchmarked). ptxas: 0 bytes of stack, 202 registers on sm_90 (`gemm/double-buffered`: 208).
Why: the second launch and the extra pass over C in DRAM (2 x M x N x 4 bytes) disappear.
Prediction: within a few percent of the plain GEMM: the epilogue is 128 outputs per thread
against 128 x K multiply-adds, plus an L2 round trip of the tile.
Measured: on an NVIDIA H200 (results/nvidia-h200.json, ``ladder bench``, 4096³, float32): 3.577 ms,
against 3.876 ms for `gemm-then-epilogue` in the same run and 3.802 ms for the plain GEMM
(`gemm/double-buffered`) in a separate run of the same day (2026-11-29), another piece of the
file. The library, cuBLAS SGEMM then a CuPy bias + GELU kernel: 2.759 ms.
Verdict: beat the prediction: 1.08x `gemm-then-epilogue`, and 5.9% faster than the GEMM without any
epilogue. The cause is not established: the main loop is the same device function, but the compiler
allocates it differently in this kernel (202 registers against 208); its GEMM is profiled
(lab/gemm/2026-11-22-profiles/nvidia-h200-profile-float32.json) and this kernel is not, so comparing
the two profiles is the next step. cuBLAS stays 1.30x faster: its GEMM alone is faster than
`gemm/double-buffered` (``references.py``).

Lab notes: docs/notes/fused.md
"""

import functools
from typing import Any

from numba import cuda, float32, uint32

from ladder.core.intrinsics import store4
from ladder.fused.gemm_epilogue.r01_separate import gelu
from ladder.fused.problem import GEMM_EPILOGUE, fused_launcher, fused_rung
from ladder.gemm.problem import aligned_for_float4, grid_2d
from ladder.gemm.r10_warp_tiling import DEFAULT, Config
from ladder.gemm.r11_double_buffered import make_mainloop


@functools.cache
def make_fused_kernel(config: Config, wide_global: bool, activation: Any) -> Any:
    """Rung 9's kernel with C = activation(acc + bias) stored instead of acc."""
    mainloop, n_acc = make_mainloop(config, wide_global)
    wmiter, tm, tn, wniter = config.wmiter, config.tm, config.tn, config.wniter
    wsubm, wsubn = config.wm // wmiter, config.wn // wniter
    n_n, tn4 = wniter * tn, tn // 4

    @cuda.jit(device=True, inline="always")
    def store_epilogue(C, bias, row, col, acc):
        # 1. warp-tiling's store (r10_warp_tiling.make_parts.store_c) of acc + bias: additions only,
        #    so the loops unroll and acc stays in registers. The thread's n_n bias values are
        #    loaded once, not once per row.
        M, N = uint32(C.shape[0]), uint32(C.shape[1])
        b = cuda.local.array(n_n, float32)
        for j_sub in range(wniter):
            for j in range(tn):
                c = col + uint32(j_sub * wsubn + j)
                b[j_sub * tn + j] = bias[c] if c < N else float32(0.0)
        for i_sub in range(wmiter):
            for i in range(tm):
                r = row + uint32(i_sub * wsubm + i)
                if r < M:
                    for j_sub in range(wniter):
                        for q in range(tn4):
                            c = col + uint32(j_sub * wsubn + 4 * q)
                            a = (i_sub * tm + i) * n_n + j_sub * tn + 4 * q
                            t = j_sub * tn + 4 * q
                            if wide_global:
                                if c < N:  # N is a multiple of 4: all or nothing
                                    store4(
                                        C, r, c,
                                        acc[a] + b[t], acc[a + 1] + b[t + 1],
                                        acc[a + 2] + b[t + 2], acc[a + 3] + b[t + 3],
                                    )  # fmt: skip
                            else:
                                for j in range(4):
                                    if c + uint32(j) < N:
                                        C[r, c + uint32(j)] = acc[a + j] + b[t + j]
        # 2. the activation, over the thread's own outputs just written (still in L2): a
        #    loop the compiler need not unroll, so GELU's erf is not inlined 128 times
        for i_sub in range(wmiter):
            for i in range(tm):
                r = row + uint32(i_sub * wsubm + i)
                if r < M:
                    for j_sub in range(wniter):
                        for j in range(tn):
                            c = col + uint32(j_sub * wsubn + j)
                            if c < N:
                                C[r, c] = activation(C[r, c])

    @cuda.jit
    def fused_epilogue_kernel(A, B, C, bias):
        acc = cuda.local.array(n_acc, float32)
        row, col = mainloop(A, B, acc)
        store_epilogue(C, bias, row, col, acc)

    return fused_epilogue_kernel


wide_kernel = make_fused_kernel(DEFAULT, True, gelu)
scalar_kernel = make_fused_kernel(DEFAULT, False, gelu)
KERNEL_ARGS = {
    name: lambda A, B, bias, out: (A, B, out, bias) for name in ("wide_kernel", "scalar_kernel")
}


@fused_rung(
    GEMM_EPILOGUE,
    name="fused-epilogue",
    parent="gemm-then-epilogue",
    title="Bias + GELU fused into gemm/double-buffered's store",
)
def geometry(a: Any, b: Any, c: Any, bias: Any, activation: Any = gelu) -> tuple:
    """The fused kernel with ``activation`` (GELU; 16-byte accesses where every row allows
    them), a block of DEFAULT's threads per tile of C."""
    m, n = c.shape
    kernel = make_fused_kernel(DEFAULT, aligned_for_float4(a, b, c), activation)
    return kernel, grid_2d(n, DEFAULT.bn, m, DEFAULT.bm), DEFAULT.threads


@functools.cache
def _with(activation: Any) -> Any:
    return fused_launcher(
        GEMM_EPILOGUE, functools.partial(geometry, activation=activation), ("float32",)
    )


def launch_activation(activation: Any, A: Any, B: Any, bias: Any, out: Any = None) -> Any:
    """C = activation(A @ B + bias) with the fused kernel (any activation device function)."""
    return _with(activation)(A, B, bias, out)
