"""Tensor cores: the grouped GEMMs on wgmma fed by TMA, SiLU and the gate in the epilogues.

What changes: the expert GEMMs move from `fused-gather-scatter`'s CUDA-core tiles to `gemm/wgmma`'s
Hopper kernel (``r05_wgmma_grouped.cu``, the primitives from ``ladder/core/cuda``): one warpgroup
copies 128 × 64 tiles of the rows and 64 × 256 tiles of the expert's weights by TMA into a 4-stage
ring, two warpgroups multiply with ``wgmma`` into 128 × 256 FP32 accumulators. Three changes make
it grouped: each block finds its expert and rows from `grouped`'s tile schedule (at 128 rows a tile
now), the weights are one 3-D tensor map over E × K × N with the expert as a coordinate, and the
epilogue masks the rows past the expert's last. The first GEMM applies SiLU before storing h; the
second multiplies by the gate and stores to the token's slot, as `fused-gather-scatter`. The gather
does not fuse: TMA copies boxes of consecutive rows, and Hopper's TMA has no row gather, so the
rows are copied into expert order first (`grouped`'s ``gather_rows``). Widths that are no multiple
of 8 (TMA's 16-byte rows) or misaligned weights go through zero-padded copies (all the weights, on
every call, for such shapes only). bfloat16 runs the same way: the Numba kernels read it as bits
(``common.bf16_to_float32``; ``combine_slots_bf16`` rounds the sum). The grouped GEMM alone checks
the caller's offsets on the GPU as `grouped` does (``grouped_gemm``).
Why: `fused-gather-scatter`'s GEMM is `gemm/shared-tiling`'s loop on 16 × 16 tiles, 7.15 TFLOP/s, a
ninth of the FP32 peak. This rung changes two things at once, on purpose: the tiles become
`gemm/wgmma`'s pipeline (the GEMM ladder's rungs `gemm/thread-tiling-1d` to `gemm/tma`, climbed in
notebooks 01 and 02) and the products move to the tensor cores. `gemm/wgmma` reaches 678.03 and
746.08 TFLOP/s at 4096³ and 8192³, 0.885x and 0.953x cuBLAS (results/nvidia-h200.json, an H200).
Prediction: the GEMMs near 650 TFLOP/s: 5.9 ms at the Mixtral-like size, 0.85 ms at OLMoE's;
plus the copies (the gather and the combine move about 0.47 and 0.84 GB: 0.16 and 0.28 ms at
the 3.01 TB/s copy bandwidth ``ladder info`` measured) and tens of µs of routing: about 6.1
and 1.2 ms. Each expert's last row tile is partly empty (at most E tiles of padding over
T·k / 128: 6% at the Mixtral-like size, 12% at OLMoE's).
Measured: the layer on an NVIDIA H100 (lab/moe/2026-11-26-bench/nvidia-h100-80gb-hbm3-moe.json),
float16: 6.891 ms at the Mixtral-like size (PyTorch's loop 7.498 ms), 2.140 ms at OLMoE's (loop
10.654 ms); at OLMoE's size the gather took 0.666 ms (31%) and the routing 0.125 ms (lab/moe/2026-
11-26-split/nvidia-h100-80gb-hbm3-moe-split.json). The first GEMM alone (``grouped-gemm``) on an
NVIDIA H200 (results/nvidia-h200.json), balanced, then half the rows in expert 0: float16 2.841 and
2.825 ms at the Mixtral-like size (`grouped` 270.085 ms; ``torch._grouped_mm`` 2.518 and 2.592 ms),
0.502 and 0.495 ms at OLMoE's (``torch._grouped_mm`` 1.440 and 0.981 ms); bfloat16 2.714 and
2.686 ms (PyTorch's loop 2.444 and 2.492 ms), 0.488 and 0.481 ms (``torch._grouped_mm`` 0.424 and
0.431 ms): 677-716 TFLOP/s at the Mixtral-like size, 548-571 at OLMoE's.
Verdict: the layer: close at the Mixtral-like size, 6.891 against 6.1 ms; missed at OLMoE's, 2.140
against 1.2 ms: the gather ran at 0.8 TB/s and the routing (65,536 atomic adds on 64 counters,
twice) took 0.125 ms. Against PyTorch's loop 1.09x, where big experts hide its cost, and 4.98x at
OLMoE's, where its 64 iterations of host waits and launches do not. The GEMM alone: above the
prediction's 650 TFLOP/s at the Mixtral-like size, 95.07x `grouped`, yet 0.89x and 0.92x the fastest
library in float16, 0.90x and 0.93x in bfloat16; below it at OLMoE's, likely the padded row tiles
counted above (not profiled): 0.87x and 0.89x ``torch._grouped_mm`` in bfloat16, 2.87x and 1.98x in
float16, where it is slow at small groups.

Lab notes: docs/notes/moe.md
"""

from collections.abc import Callable
from typing import Any

import numpy as np
from numba import cuda, float32

from ladder.core import cuda_cpp
from ladder.core.fastcall import numba_array, numba_bits
from ladder.gemm.hopper import tensor_launch, tensor_map
from ladder.moe.common import (
    ELEMENTWISE,
    OffsetsCheck,
    Routing,
    bf16_to_float32,
    float32_to_bf16,
    gather_rows,
    grid_for,
    max_tiles,
    tile_starts_of,
)
from ladder.moe.problem import grouped_rung, moe_rung
from ladder.moe.r04_fused_gather_scatter import combine_slots

SOURCE = cuda_cpp.source(__file__, "r05_wgmma_grouped.cu", archs=("sm_90a",), arch_specific=True)
BM, BN, BK = 128, 256, 64  # as in the .cu file
GROUP_M = 8
STAGES = 4
THREADS = 384
SMEM_BYTES = STAGES * (BM * BK + BK * BN) * 2 + 1024  # + slack to align the tiles to 1 KB
ALIGN = 8  # elements: TMA needs 16-byte rows and addresses
DTYPES = ("float16", "bfloat16")
CC = dict(sm90a="wgmma and setmaxnreg")


def padded(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def grouped_launch(
    epilogue: str, dtype: str, rows: int, n: int, k: int, experts: int, extra: tuple[int, ...]
) -> Any:
    """The grouped kernel with ``epilogue`` ("store", "silu" or "gate_scatter") for A (rows ×
    k) and B (experts × k × n): ``launch(a, b, out)`` with device pointers; ``extra`` the
    device pointers of offsets, tile_starts, perm_slot and gates (0 where unused), fixed per
    plan. A block for every tile there can be, in groups of GROUP_M row tiles."""
    kernel = SOURCE.kernel(f"grouped_{epilogue}" + ("_bf16" if dtype == "bfloat16" else ""))

    def maps(a: int, b: int) -> tuple[np.ndarray, np.ndarray]:
        return (
            tensor_map(a, rows, k, BM, 64, dtype),  # 128 rows x 64 (128 bytes) of A
            tensor_map(b, k, n, BK, 64, dtype, layers=experts),  # 64 k x 64 n of one expert
        )

    groups = -(-max_tiles(rows, experts, BM) // GROUP_M)
    blocks = max(1, groups * GROUP_M * -(-n // BN))
    scalars = (*(np.uint64(p) for p in extra), experts, rows, n, k)
    return tensor_launch(kernel, blocks, THREADS, SMEM_BYTES, maps, scalars)


def _ptr(arr: Any) -> int:
    return int(cuda_cpp.pointer(arr))


def _zeros(shape: tuple[int, ...], dtype: Any) -> Any:
    """A zeroed device array (CuPy's memset: no host copy of the zeros), as a Numba array."""
    import cupy
    from numba import cuda

    return cuda.as_cuda_array(cupy.zeros(shape, dtype))


class Plan:
    """Rung 5's buffers and launches for one signature of the operands: the routing (128-row
    tiles), the rows in expert order, h and the slots, their widths padded to multiples of 8
    (zero columns), and the two grouped launches. bfloat16 buffers hold bits (uint16): only the
    tensor-core kernels and ``combine_slots_bf16`` read them as numbers."""

    def __init__(self, x: Any, w1: Any, w2: Any, k: int) -> None:
        tokens, d = x.shape
        experts, _, f = w1.shape
        dp, fp = padded(d), padded(f)
        self.bf16 = x.dtype == "bfloat16"
        self.copy = (dp, fp) != (d, f) or min(w1.align, w2.align) < 2 * ALIGN
        self.routing = r = Routing(tokens, experts, k, BM, x.dtype)
        held = np.uint16 if self.bf16 else np.float16
        self.rows = _zeros((tokens * k, dp), np.uint16)  # bits: only copied, then read by TMA
        self.h = _zeros((tokens * k, fp), np.uint16)
        self.slots = _zeros((tokens * k, dp), held)
        if self.copy:  # zero-padded, 16-byte aligned weights, refilled per call
            self.w1 = _zeros((experts, dp, fp), np.uint16)
            self.w2 = _zeros((experts, fp, dp), np.uint16)
        schedule = (_ptr(r.offsets), _ptr(r.tile_starts), _ptr(r.perm_slot), _ptr(r.gates))
        slots = tokens * k
        self.first = grouped_launch("silu", x.dtype, slots, fp, dp, experts, schedule)
        self.second = grouped_launch("gate_scatter", x.dtype, slots, dp, fp, experts, schedule)

    def weights(self, w1: Any, w2: Any) -> tuple[int, int]:
        """Device pointers of the weights the kernels read: the caller's, or padded copies."""
        if not self.copy:
            return w1.ptr, w2.ptr
        import cupy

        for src, dst in ((w1, self.w1), (w2, self.w2)):
            _, rows, cols = src.shape
            cupy.asarray(dst)[:, :rows, :cols] = cupy.asarray(numba_bits(src))
        return _ptr(self.w1), _ptr(self.w2)

    def combine(self, k: int, y: Any, stream: Any) -> None:
        """y[t] = the sum of token t's k slots: rung 4's ``combine_slots``, or for bfloat16 the
        same sum on bits (``combine_slots_bf16``)."""
        grid = grid_for(*y.shape)
        if self.bf16:
            combine_slots_bf16[grid, ELEMENTWISE, stream](self.slots, k, numba_bits(y))
        else:
            combine_slots[grid, ELEMENTWISE, stream](self.slots, k, numba_array(y))


@cuda.jit
def combine_slots_bf16(slots, k, y):
    """Rung 4's ``combine_slots`` on bfloat16 bit patterns (uint16: Numba has no bfloat16):
    each term widened to float32, the sum rounded to the nearest bfloat16."""
    c, t = cuda.grid(2)
    if t < y.shape[0] and c < y.shape[1]:
        acc = float32(0.0)
        for j in range(k):
            acc += bf16_to_float32(slots[t * k + j, c])
        y[t, c] = float32_to_bf16(acc)


def gather_scalar(x: Any, p: Plan, k: int, stream: Any) -> None:
    """x's rows into expert order, one 16-bit element per thread (`grouped`'s ``gather_rows``,
    on the bits: float16 and bfloat16 alike)."""
    gather_rows[grid_for(p.rows.shape[0], x.shape[1]), ELEMENTWISE, stream](
        numba_bits(x), p.routing.perm_slot, k, p.rows
    )


Gather = Callable[[Any, Plan, int, Any], None]


@moe_rung(
    name="wgmma-grouped",
    parent="fused-gather-scatter",
    title="Tensor cores: grouped wgmma + TMA, SiLU and gate in the epilogues",
    dtypes=DTYPES,
    needs=("cupy",),
    units="tensor",
    plan=Plan,
    **CC,
)
def layer(
    p: Plan, x: Any, logits: Any, w1: Any, w2: Any, y: Any, shape: Any, stream: Any,
    gather: Gather = gather_scalar,
) -> None:  # fmt: skip
    """Route (128-row tiles), ``gather`` the rows (`wide-gather` brings its own), the two
    grouped GEMMs on the current stream, add each token's slots."""
    k = shape.k
    p.routing.run(numba_bits(logits) if p.bf16 else numba_array(logits), stream)
    gather(x, p, k, stream)
    a1, a2 = p.weights(w1, w2)
    p.first(_ptr(p.rows), a1, _ptr(p.h))
    p.second(_ptr(p.h), a2, _ptr(p.slots))
    p.combine(k, y, stream)


class GroupedPlan:
    """The grouped GEMM alone: tile_starts from the given offsets, the plain launch, and, when
    K or N is no multiple of 8 or an operand is misaligned, zero-padded copies to run it on."""

    def __init__(self, a: Any, w: Any, offsets: Any, out: Any) -> None:
        from numba import cuda

        # the plan's own copy of the offsets: a plan serves every call with these shapes, and
        # the kernel's pointers are fixed in it (a caller's offsets differ from call to call)
        self.offsets = cuda.device_array(offsets.shape, np.int32)
        self.tile_starts = cuda.device_array(offsets.shape, np.int32)
        rows, inner = a.shape
        experts, _, cols = w.shape
        kp, np_ = padded(inner), padded(cols)
        aligned = min(a.align, w.align, out.align) >= 2 * ALIGN
        self.copy = (kp, np_) != (inner, cols) or not aligned
        if self.copy:
            self.a = _zeros((rows, kp), np.uint16)
            self.w = _zeros((experts, kp, np_), np.uint16)
            self.out = _zeros((rows, np_), np.uint16)
        extra = (_ptr(self.offsets), _ptr(self.tile_starts), 0, 0)
        self.launch = grouped_launch("store", a.dtype, rows, np_, kp, experts, extra)

    def __call__(self, a: Any, w: Any, out: Any) -> None:
        if not self.copy:
            self.launch(a.ptr, w.ptr, out.ptr)
            return
        import cupy

        def bits(op: Any) -> Any:  # the 16-bit patterns: copies need no arithmetic
            return cupy.asarray(numba_bits(op))

        pa, pw, pout = (cupy.asarray(x) for x in (self.a, self.w, self.out))
        pa[:, : a.shape[1]] = bits(a)
        pw[:, : w.shape[1], : w.shape[2]] = bits(w)
        self.launch(_ptr(self.a), _ptr(self.w), _ptr(self.out))
        bits(out)[...] = pout[:, : out.shape[1]]


OFFSETS = OffsetsCheck("grouped-gemm/wgmma-grouped")


@grouped_rung(
    name="wgmma-grouped",
    parent="grouped",
    title="Tensor cores: grouped wgmma + TMA",
    dtypes=DTYPES,
    needs=("cupy",),
    units="tensor",
    plan=GroupedPlan,
    offsets_check=OFFSETS,
    **CC,
)
def grouped_gemm(p: GroupedPlan, a: Any, w: Any, offsets: Any, out: Any, stream: Any) -> None:
    """The grouped GEMM alone. The offsets (expert e owns rows offsets[e] to offsets[e + 1];
    they must start at 0, never decrease and end at M) are copied on the device into the plan
    and checked there by ``tile_starts_of``: no copy to the host, no wait, no offset trusted,
    only the report deferred. Bad ones get no tiles, so the kernel reads and writes no row (out
    is undefined), and the ValueError naming offsets comes at the next call, before it launches
    anything, or from ``check_offsets()``, which waits for the GPU (call it after the last call,
    and after replaying a graph)."""
    p.offsets.copy_to_device(numba_array(offsets), stream=stream)
    tile_starts_of[1, 1, stream](p.offsets, a.shape[0], BM, p.tile_starts, OFFSETS.status)
    p(a, w, out)


def check_offsets() -> None:
    """Wait for the GPU; raise ValueError (naming offsets) if a call of the grouped GEMM alone
    not yet reported had bad offsets."""
    OFFSETS.check()
