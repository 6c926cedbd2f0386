"""Triton peer: flash attention forward, one program per tile of queries of one head.

What the program does: program ``(i, h, b)`` owns ``BLOCK_M`` query rows of head ``h`` of batch
``b``, and reads key/value head ``h // (H / HKV)`` (GQA and MQA as they come). It loads its q
tile once and walks the keys in tiles of ``BLOCK_N``: ``s = tl.dot(q, kᵀ)`` in log2 units
(scaled by ``log2(e) / √d``), the online softmax on the block (running max ``m`` and sum ``l``
per row, ``α = exp2(m - m')`` rescaling the sum and the output accumulator when the max grows),
and ``acc += tl.dot(p, v)`` with p in the input dtype (float16 for the tensor cores), then
writes ``acc / l``. Everything accumulates in float32; float32 inputs use
``input_precision="ieee"`` in both products, true FP32 rather than Triton's TF32 default.
Causal programs stop at their diagonal: the key tiles wholly below it take no mask, only the
tiles that cross it do (``attend``, called twice, ``MASKED`` a compile-time flag), and the
programs run last query tile first, the longest first. A head dimension that is not a power of
two is padded in registers to ``D_PAD`` (d = 17 and 80 compute on 32 and 128 lanes): loads
and stores are masked to ``d``, and the zero padding adds nothing to either product. Tile
sizes, warps and stages are autotuned per (N, D_PAD, causal) over ``HALF_CONFIGS`` or
``FP32_CONFIGS``; the interpreter runs the small ``INTERPRETED`` tile, so that the
simulator's N = 17 crosses query and key tiles.

What Triton did that the Numba ladder did by hand: rungs 3 and 4 (``r03_flash.py``,
``r04_flash_fp16.py``) stage k and v tiles through padded shared memory, give each thread a
4 x 2 (or 4 x 4) block of scores and combine row maxima by xor shuffles, on FP32 FMAs. Rung 5
(``r05_tensor_core_flash.py``, CUDA C++) writes ``mma.sync`` and ``ldmatrix`` in PTX, keeps P
in registers by matching the accumulator and operand fragment layouts, double-buffers k and v
with ``cp.async`` into XOR-swizzled shared memory, and zero-pads d to 64 or 128 in copies; rung
6 packs a GQA group's heads into one block. Here ``tl.dot`` brings the tensor cores (``mma`` or
Hopper's ``wgmma``) and their layouts, ``num_stages`` the asynchronous copies, ``tl.max`` and
``tl.sum`` the row reductions, and masks the padding.

What Triton could not do or made hard: block dimensions are powers of two, so odd head
dimensions waste lanes (d = 80 does 1.6x the problem's multiply-adds; rung 5 pads the same way
by hand). The overlap of the softmax with the tensor-core work is the compiler's: warp
specialization (FlashAttention-3's producer and consumer warpgroups) is Blackwell-only in
Triton 3.6, and the bulk copy engine needs the loads written as tensor descriptors, not done
here. Float32 products are FMAs on register tiles, so at d = 128 only small tiles fit without
spilling, learned by compiling (the autotuner sees the others slow). Rung 6's packing of a GQA
group into one block is index arithmetic a Triton program could do; this one, like most,
runs the group's heads as separate programs and leaves their shared k and v to L2.

Measured (NVIDIA H200, ``results/nvidia-h200.json``): FP16, B = 4, H = 16, N = 4096, d = 64: 0.676
ms (407 TFLOP/s) against rung 5's 0.899 and SDPA's 0.599 (its default picks cuDNN); causal 0.392
against 0.519 and 0.354. FP32 23.8 ms against rung 3's 28.7 and SDPA's memory-efficient kernel's
7.9. The verdict: ahead of rung 5 because ``tl.dot`` compiles to Hopper's ``wgmma`` fed by a 3-stage
``cp.async`` ring (the PTX), where rung 5 is ``mma.sync``; behind cuDNN, which also overlaps softmax
and products.
"""

from __future__ import annotations

import math
from typing import Any

from ladder.attention.problem import LOG2E, attention_library, check_arrays
from ladder.core import triton_kernels
from ladder.core.rung import tensor_cores_below_fp32
from ladder.core.torch_views import tensors

DTYPES = ("float32", "float16")
MAX_D = 256  # head dimensions this peer takes (one block of D_PAD values per row)

# (BLOCK_M, BLOCK_N, num_warps, num_stages); BLOCK_M a multiple of BLOCK_N in each (the causal
# split at the diagonal needs it). The last of each is the interpreter's.
HALF_CONFIGS = [
    (128, 64, 8, 3),
    (128, 128, 8, 3),
    (128, 32, 4, 3),
    (64, 64, 4, 3),
    (16, 16, 4, 1),
]
# float32 products are FMAs on register tiles: smaller tiles, more warps per tile
FP32_CONFIGS = [
    (64, 32, 8, 2),
    (64, 32, 8, 3),
    (64, 16, 8, 2),
    (32, 32, 4, 2),
    (32, 16, 4, 2),
    (16, 16, 4, 1),
]
INTERPRETED = -1

# Triton's modules (bound by ``triton_kernels.builder``) and the kernel's helper, bound at
# ``_kernels``' first call: importing ladder never imports Triton, and Triton (its interpreter
# above all) finds the names a kernel uses in this module's globals.
triton: Any = None
tl: Any = None
attend: Any = None


@triton_kernels.builder
def _kernels() -> dict[bool, triton_kernels.Tuned]:
    """The autotuned kernel for float32 (True) and for float16 (False)."""
    global attend

    @triton.jit
    def attend(
        acc, l_i, m_i, q, k_base, v_base, offs_m, lo, hi, N, D, scale_log2,
        BLOCK_N: tl.constexpr, D_PAD: tl.constexpr, MASKED: tl.constexpr,
        CAUSAL: tl.constexpr,
    ):  # fmt: skip
        """The key tiles from ``lo`` to ``hi`` folded into (acc, l, m). MASKED: tiles that
        cross the end of the sequence or (CAUSAL) the diagonal, which need the mask."""
        offs_n = tl.arange(0, BLOCK_N)
        offs_d = tl.arange(0, D_PAD)
        in_d = offs_d < D
        for start in range(lo, hi, BLOCK_N):
            keys = start + offs_n
            in_n = keys < N
            # k tile as kᵀ (D_PAD x BLOCK_N): the dot's B operand; padding loads as zeros
            k_t = tl.load(
                k_base + keys[None, :] * D + offs_d[:, None],
                mask=in_d[:, None] & in_n[None, :], other=0.0,
            )  # fmt: skip
            s = tl.dot(q, k_t, input_precision="ieee") * scale_log2  # scores in log2 units
            if MASKED:
                seen = in_n[None, :]
                if CAUSAL:
                    seen = seen & (keys[None, :] <= offs_m[:, None])
                s = tl.where(seen, s, -float("inf"))
            # online softmax: every row has a finite score in its first tile (key 0), so m
            # is finite from then on and exp2(-inf - m) is 0, never NaN
            m_new = tl.maximum(m_i, tl.max(s, axis=1))
            alpha = tl.exp2(m_i - m_new)
            p = tl.exp2(s - m_new[:, None])
            l_i = l_i * alpha + tl.sum(p, axis=1)
            v = tl.load(
                v_base + keys[:, None] * D + offs_d[None, :],
                mask=in_n[:, None] & in_d[None, :], other=0.0,
            )  # fmt: skip
            # p in v's dtype: float16 feeds the tensor cores, float32 stays float32
            acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None], input_precision="ieee")
            m_i = m_new
        return acc, l_i, m_i

    @triton.jit
    def flash_kernel(
        q_ptr, k_ptr, v_ptr, o_ptr, H, HKV, N, D, scale_log2,
        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, D_PAD: tl.constexpr,
        CAUSAL: tl.constexpr,
    ):  # fmt: skip
        tile = tl.program_id(0)
        if CAUSAL:  # the longest programs (the last query tiles) first
            tile = tl.num_programs(0) - 1 - tile
        h = tl.program_id(1)
        b = tl.program_id(2)
        # the heads' first elements, in 64 bits (B * H * N * d may pass 2**31)
        head = (b * H + h).to(tl.int64) * N * D
        kv_head = (b * HKV + h // (H // HKV)).to(tl.int64) * N * D  # the k/v head h reads
        q_base, o_base = q_ptr + head, o_ptr + head
        k_base, v_base = k_ptr + kv_head, v_ptr + kv_head

        offs_m = tile * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_d = tl.arange(0, D_PAD)
        io_mask = (offs_m[:, None] < N) & (offs_d[None, :] < D)
        q = tl.load(q_base + offs_m[:, None] * D + offs_d[None, :], mask=io_mask, other=0.0)

        acc = tl.zeros([BLOCK_M, D_PAD], dtype=tl.float32)
        l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
        m_i = tl.full([BLOCK_M], -float("inf"), dtype=tl.float32)
        if CAUSAL:
            # keys below the tile's first query are seen by all its rows: no mask; then the
            # tiles crossing the diagonal, up to its last query, masked
            first = tile * BLOCK_M  # a multiple of BLOCK_N
            acc, l_i, m_i = attend(
                acc, l_i, m_i, q, k_base, v_base, offs_m, 0, first, N, D, scale_log2,
                BLOCK_N, D_PAD, False, CAUSAL,
            )  # fmt: skip
            last = min(first + BLOCK_M, N)
            acc, l_i, m_i = attend(
                acc, l_i, m_i, q, k_base, v_base, offs_m, first, last, N, D, scale_log2,
                BLOCK_N, D_PAD, True, CAUSAL,
            )  # fmt: skip
        else:
            # full tiles without a mask, then the last partial tile (if any) with it
            whole = (N // BLOCK_N) * BLOCK_N
            acc, l_i, m_i = attend(
                acc, l_i, m_i, q, k_base, v_base, offs_m, 0, whole, N, D, scale_log2,
                BLOCK_N, D_PAD, False, CAUSAL,
            )  # fmt: skip
            acc, l_i, m_i = attend(
                acc, l_i, m_i, q, k_base, v_base, offs_m, whole, N, N, D, scale_log2,
                BLOCK_N, D_PAD, True, CAUSAL,
            )  # fmt: skip
        out = acc / l_i[:, None]
        o_ptrs = o_base + offs_m[:, None] * D + offs_d[None, :]
        tl.store(o_ptrs, out.to(o_ptr.dtype.element_ty), mask=io_mask)

    def configs(table: list[tuple[int, ...]]) -> list[Any]:
        return [
            triton.Config({"BLOCK_M": bm, "BLOCK_N": bn}, num_warps=warps, num_stages=stages)
            for bm, bn, warps, stages in table
        ]

    key = ("N", "D_PAD", "CAUSAL")
    return {
        True: triton_kernels.Tuned(flash_kernel, configs(FP32_CONFIGS), key, INTERPRETED),
        False: triton_kernels.Tuned(flash_kernel, configs(HALF_CONFIGS), key, INTERPRETED),
    }


def _grid(n: int, heads: int, batch: int) -> Any:
    def grid(meta: dict[str, Any]) -> tuple[int, int, int]:
        return (-(-n // meta["BLOCK_M"]), heads, batch)

    return grid


def _describe(args: tuple[Any, ...], out: Any, causal: bool = False) -> str:
    return _kernels()[out.dtype == "float32"].chosen()


@attention_library(
    name="triton",
    title="Triton: flash attention, tl.dot tiles, autotuned",
    dtypes=DTYPES,
    needs=("triton",),
    peer=True,
    units=tensor_cores_below_fp32,
    describe=_describe,
)
def launch(q: Any, k: Any, v: Any, out: Any = None, causal: bool = False) -> Any:
    q, k, v, out, shape = check_arrays(q, k, v, out, DTYPES)
    batch, heads, kv_heads, n, d = shape
    if d > MAX_D:
        raise ValueError(f"the Triton peer supports head dimensions up to {MAX_D}, got d={d}")
    if out.size:
        fp32 = q.dtype == "float32"
        tq, tk, tv, to = tensors(q, k, v, out)
        # the dots need 16 or more lanes on every side: d pads to a power of two, at least 16
        d_pad = max(16, triton_kernels.next_power_of_2(d))
        _kernels()[fp32][_grid(n, heads, batch)](
            tq, tk, tv, to, heads, kv_heads, n, d, LOG2E / math.sqrt(d),
            D_PAD=d_pad, CAUSAL=bool(causal),
        )  # fmt: skip
    return out
