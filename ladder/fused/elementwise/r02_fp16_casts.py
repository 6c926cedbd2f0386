"""Float16 through float32: cast the inputs to float32, run `fused`'s kernel, cast back.

What changes: a pattern that profiles of real models show. The tensors are float16, but the
operation only has a float32 kernel (or runs under a policy that computes it in float32), so
the framework wraps it in dtype conversions, each its own kernel with its own output in memory:

    cast x to float32      read 2 bytes, write 4     (a and b too: cols values each)
    fused float32 kernel   read 4 bytes, write 4     (`fused`'s kernel, unchanged)
    cast y to float16      read 4 bytes, write 2

The cast kernels are grid-stride loops over the flattened arrays: 256 threads a block, each
thread 8 elements per step, 256 apart (a warp on 32 consecutive elements), all 8 loads issued
before the stores, at most 4096 blocks. The float32 buffers are allocated once per shape and
kept (no allocation is timed), but they are 2 x 268 MB of device memory the float16 data never
needed. ptxas (sm_90): 38 registers for the cast to float32, 42 for the cast back, no spills;
the float32 kernel is `fused`'s (40 registers).
Why: the conversion itself is one instruction per value (``cvt.f32.f16``, ``cvt.rn.f16.f32``);
what costs is materializing the float32 copies, written to memory only to be read back by the
next kernel, and the launches: five (x, a and b cast in, the kernel, y cast back) instead of
one. The result is no more precise: `fused` also computes in float32 registers and rounds to
float16 once, at the end.
Prediction: 20 bytes per element where a float16 kernel that converts in registers moves 4:
1.34 GB instead of 268 MB at 8192 x 8192, more than `fused` moves in float32 (537 MB). So about
five times `fused`'s float16 time, somewhat less if the casts run closer to the copy bandwidth
than `fused` does, and slower than `fused` in float32 too (20 bytes per element against 8).
Measured: on an NVIDIA H200 (results/nvidia-h200.json, ``ladder bench``, 8192 x 8192, float16):
0.356 ms, 3.772 TB/s on the bytes it moves (0.88 of the 4.268 TB/s copy); `fused` takes 0.069 ms
in float16 and 0.130 ms in float32, `three-kernels` 0.621 ms in float16.
Verdict: held: 5.18x `fused`'s float16 time and 2.73x its float32 time. The five kernels run near
the copy bandwidth on five times the bytes, so the time is five times: the rung is bound by its
bytes, and the remedy is not a faster cast but no cast through memory. It is 1.75x faster than
`three-kernels` in float16 while moving more bytes (1.34 GB against 805 MB), as its casts keep 8
loads per thread in flight where `three-kernels` keeps one (a count; neither is profiled).

Lab notes: docs/notes/fused.md
"""

from typing import Any

import numpy as np
from numba import cuda, float32, uint32, uint64

from ladder.fused.elementwise import r03_fused as fused
from ladder.fused.problem import ELEMENTWISE, WORKSPACE_PLANS, flat, fused_rung, workspace

DTYPES = ("float16",)
THREADS = 256
UNROLL = 8  # elements per thread per step, THREADS apart (a warp: 32 consecutive elements)
MAX_BLOCKS = 4096  # grid-stride: enough blocks to fill any GPU, each then loops
U_UNROLL = np.uint32(UNROLL)


def make_cast():
    """``dst[i] = src[i]`` over 1-D arrays, converting to dst's dtype."""

    @cuda.jit
    def cast_kernel(src, dst):
        vals = cuda.local.array(UNROLL, float32)  # holds a float16 exactly
        # flat indices in 64 bits (uint32 x uint32 is uint64 in Numba): past 2^32 elements too
        n = uint64(src.shape[0])
        step = uint32(cuda.gridDim.x) * uint32(cuda.blockDim.x)
        i = uint32(cuda.blockIdx.x) * uint32(cuda.blockDim.x) * U_UNROLL + uint32(cuda.threadIdx.x)
        while i < n:
            for k in range(UNROLL):  # UNROLL independent loads in flight, then the stores
                j = i + uint32(k) * uint32(cuda.blockDim.x)
                if j < n:
                    vals[k] = src[j]
            for k in range(UNROLL):
                j = i + uint32(k) * uint32(cuda.blockDim.x)
                if j < n:
                    dst[j] = vals[k]  # to dst's dtype (to float16: cvt.rn.f16.f32)
            i += step * U_UNROLL

    return cast_kernel


to_float32_kernel = make_cast()  # float16 -> float32
to_float16_kernel = make_cast()  # float32 -> float16

# `ladder check` compiles each kernel for example arguments made from the problem's arrays
KERNEL_ARGS = {
    "to_float32_kernel": lambda x, a, b, out: (x.ravel(), x.ravel().astype(np.float32)),
    "to_float16_kernel": lambda x, a, b, out: (x.ravel().astype(np.float32), out.ravel()),
}


def cast_grid(size: int) -> tuple[int, int]:
    """A cast kernel's grid and block over ``size`` elements."""
    per_block = THREADS * UNROLL
    return min((size + per_block - 1) // per_block, MAX_BLOCKS), THREADS


def _bytes(size: tuple[int, ...], dtype: str) -> float:
    rows, cols = size
    # per element: cast in (2 + 4), float32 kernel (4 + 4), cast out (4 + 2);
    # per column of a and b: cast in (2 + 4) and one read by the float32 kernel (4)
    return float(20 * rows * cols + 2 * 10 * cols)


@fused_rung(
    ELEMENTWISE,
    name="fp16-casts",
    parent="three-kernels",
    title="float16 around a float32 kernel: cast, compute, cast back",
    dtypes=DTYPES,
    bytes_moved=_bytes,
    plans_kept=WORKSPACE_PLANS,  # each plan holds two float32 copies of x
)
def geometry(x: Any, a: Any, b: Any, out: Any) -> list:
    """Five launches in order: x, a and b cast to float32 buffers of the plan's own, `fused`'s
    float32 kernel on them, its result cast back into out (x and out as 1-D arrays)."""
    x32, y32 = workspace(x.shape, "float32", "x32"), workspace(x.shape, "float32", "y32")
    a32, b32 = workspace(a.shape, "float32", "a32"), workspace(b.shape, "float32", "b32")
    kernel, grid, block = fused.geometry(x32, a32, b32, y32)
    return [
        (to_float32_kernel, *cast_grid(x.size), (flat(x), flat(x32))),
        (to_float32_kernel, *cast_grid(a.size), (a, a32)),
        (to_float32_kernel, *cast_grid(b.size), (b, b32)),
        (kernel, grid, block, (x32, a32, b32, y32)),
        (to_float16_kernel, *cast_grid(x.size), (flat(y32), flat(out))),
    ]
