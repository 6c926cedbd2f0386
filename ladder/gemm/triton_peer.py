"""Triton peer: GEMM, one program per tile of C, ``tl.dot`` over K, autotuned tile sizes.

What the program does: program ``p`` owns a ``BLOCK_M x BLOCK_N`` tile of C. The programs are
ordered in groups of ``GROUP_M`` tile rows, so that those running together share rows of A and
columns of B in L2 (the order `warp-tile-64` to `smem-epilogue` use). It walks K in steps of
``BLOCK_K``: loads a tile of A and one of B (rows and columns past the edge wrap around with ``% M``
and ``% N``, so only the K tail is masked; their results are never stored), and accumulates
``tl.dot(a, b)`` in a float32 block. The tile goes out once, converted to C's dtype, masked at the
edges. float16 inputs accumulate in float32 like cuBLAS HGEMM; float32 inputs use
``input_precision="ieee"``: true FP32 multiply-adds, where Triton's default for float32 is TF32
(10-bit mantissas), faster and unfair to the FP32 rungs and to cuBLAS SGEMM.
The tile sizes, warps and pipeline stages are chosen by ``@triton.autotune`` over a handful of
configurations per dtype family (``FP32_CONFIGS``, ``HALF_CONFIGS``) at the first call of each
(M, N, K): what a Triton user does. The interpreter, with no clock, runs the smallest
(``INTERPRETED``), so the simulator's sizes cross every tile edge.

What Triton did that the Numba ladder did by hand, all from ``tl.dot`` and the tile sizes:
- FP32, against `shared-tiling` to `tuned` (``r12_tuned.py``): shared-memory tiles, register
  blocking of each thread's outputs, unsigned indices and conflict-free shared layouts
  (`unsigned-indices` to `interleaved-columns`), 16-byte loads, warp tiling and the next tile's
  loads in flight during the math (`double-buffered`; Triton pipelines ``num_stages`` tiles with
  ``cp.async``);
- float16, against `fp16-staging` to `smem-epilogue`: the tensor cores. `mma-sync` to
  `warp-tile-64` wrote ``mma.sync`` and ``ldmatrix`` with their fragment layouts, an XOR swizzle
  of shared memory and a 4-stage ``cp.async`` ring; `tma` to `wgmma` wrote tensor maps for the
  bulk copy engine, mbarriers, Hopper's ``wgmma`` and warp specialization. Triton picks
  ``mma.sync`` or ``wgmma`` for the GPU from the same ``tl.dot``, with its own swizzled layouts
  and pipelining.

What Triton could not do or made hard: the schedule is the compiler's; ``num_warps`` and
``num_stages`` (the depth of the copy ring) are all the program holds. `wgmma`'s warp
specialization (one warpgroup that only copies, its registers cut by ``setmaxnreg``) cannot be
asked for on Hopper: Triton 3.6's ``tl.range(..., warp_specialize=True)`` is for Blackwell
only. The bulk copy engine needs the loads written another way (tensor descriptors), not
used here. Whether a configuration fits a GPU is learned by compiling it (autotune times an
over-large one as infinite); autotuning costs seconds at each new (M, N, K) and makes the
choice depend on the machine and its noise, so ``Rung.describe`` records it. Sizes off the
tile get masked loads; Triton specializes on M, N, K and the pointers being multiples of 16.

Measured (NVIDIA H200, ``results/nvidia-h200.json``): FP32 4096³ 3.080 ms (44.6 TFLOP/s), between
`tuned`'s 3.804 and cuBLAS's 2.688; at 1024³ 0.060 ms, cuBLAS 0.064, `double-buffered` 0.151.
FP16 4096³ 0.188 ms (732 TFLOP/s) and 8192³ 1.434, against `wgmma`'s 0.203 and 1.474 and cuBLAS's
0.179 and 1.405. The verdict: the PTX shows ``wgmma`` fed by ``cp.async`` (no
bulk copies): the same tensor-core instruction as `wgmma` without its copy warpgroup, and within 2
to 5% of cuBLAS in FP16.
"""

from __future__ import annotations

from typing import Any

from ladder.core import triton_kernels
from ladder.core.rung import rung, tensor_cores_below_fp32
from ladder.core.torch_views import tensors
from ladder.gemm.problem import check_operands
from ladder.gemm.tensor_core import operand_dtype

DTYPES = ("float32", "float16")
GROUP_M = 8  # tile rows per group in the program order (L2 reuse)
INDEX_LIMIT = 2**31  # A's and B's offsets are 32-bit integers in the kernel (as a user's are)

# (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages): a handful per dtype family, from large
# tiles for large matrices to small ones for small matrices, the last the interpreter's
FP32_CONFIGS = [
    (128, 128, 32, 8, 3),
    (128, 128, 16, 8, 4),
    (128, 64, 32, 4, 4),
    (64, 128, 32, 4, 4),
    (64, 64, 32, 4, 4),
    (32, 32, 32, 4, 2),
]
HALF_CONFIGS = [
    (128, 256, 64, 8, 3),
    (256, 128, 64, 8, 3),
    (128, 128, 64, 8, 4),
    (128, 128, 32, 4, 4),
    (64, 128, 32, 4, 4),
    (32, 32, 32, 4, 2),
]
INTERPRETED = -1  # the interpreter cannot time configurations: it runs the smallest

# Triton's modules, bound by ``triton_kernels.builder`` at ``_kernels``'s first call: importing
# ladder never imports Triton, and Triton reads ``tl`` from this module's globals.
triton: Any = None
tl: Any = None


@triton_kernels.builder
def _kernels() -> dict[bool, triton_kernels.Tuned]:
    """The autotuned kernel for float32 (True) and for the 16-bit dtypes (False)."""

    @triton.jit
    def matmul_kernel(
        a_ptr, b_ptr, c_ptr, M, N, K,
        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
        GROUP_M: tl.constexpr,
    ):  # fmt: skip
        # program p -> tile (pid_m, pid_n), column-major within groups of GROUP_M tile rows
        pid = tl.program_id(0)
        tiles_m = tl.cdiv(M, BLOCK_M)
        tiles_n = tl.cdiv(N, BLOCK_N)
        per_group = GROUP_M * tiles_n
        first_m = (pid // per_group) * GROUP_M
        rows_in_group = min(tiles_m - first_m, GROUP_M)
        pid_m = first_m + (pid % per_group) % rows_in_group
        pid_n = (pid % per_group) // rows_in_group

        # rows and columns past the edge wrap around: their loads stay in bounds unmasked
        rm = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
        rn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
        rk = tl.arange(0, BLOCK_K)
        a_ptrs = a_ptr + rm[:, None] * K + rk[None, :]
        b_ptrs = b_ptr + rk[:, None] * N + rn[None, :]

        acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
        for k in range(0, K, BLOCK_K):
            a = tl.load(a_ptrs, mask=rk[None, :] < K - k, other=0.0)  # only K's tail is cut
            b = tl.load(b_ptrs, mask=rk[:, None] < K - k, other=0.0)
            # float32: IEEE FP32 multiply-adds, not TF32; 16-bit inputs: the tensor cores,
            # which take them exactly ("ieee" changes nothing there), float32 accumulators
            acc = tl.dot(a, b, acc, input_precision="ieee")
            a_ptrs += BLOCK_K
            b_ptrs += BLOCK_K * N

        cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        c_ptrs = c_ptr + cm[:, None].to(tl.int64) * N + cn[None, :]
        mask = (cm[:, None] < M) & (cn[None, :] < N)
        tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=mask)

    def configs(table: list[tuple[int, ...]]) -> list[Any]:
        return [
            triton.Config(
                {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk}, num_warps=warps, num_stages=stages
            )
            for bm, bn, bk, warps, stages in table
        ]

    key = ("M", "N", "K")
    return {
        True: triton_kernels.Tuned(matmul_kernel, configs(FP32_CONFIGS), key, INTERPRETED),
        False: triton_kernels.Tuned(matmul_kernel, configs(HALF_CONFIGS), key, INTERPRETED),
    }


def _grid(m: int, n: int) -> Any:
    def grid(meta: dict[str, Any]) -> tuple[int]:
        return (-(-m // meta["BLOCK_M"]) * -(-n // meta["BLOCK_N"]),)

    return grid


def _describe(args: tuple[Any, ...], out: Any) -> str:
    return _kernels()[operand_dtype(args[0], DTYPES) == "float32"].chosen()


@rung(
    name="triton",
    title="Triton: tl.dot tiles, autotuned (FP32 as IEEE FP32)",
    dtypes=DTYPES,
    needs=("triton",),
    peer=True,
    units=tensor_cores_below_fp32,
    describe=_describe,
)
def launch(A: Any, B: Any, C: Any = None) -> Any:
    name = operand_dtype(A, DTYPES)
    A, B, C, m, n, k = check_operands(A, B, C, name)
    if max(m * k, k * n) >= INDEX_LIMIT:
        raise ValueError(
            f"the Triton peer indexes A and B with 32-bit offsets: at most {INDEX_LIMIT - 1} "
            f"elements each, got A {m}x{k} and B {k}x{n}"
        )
    if m and n:
        ta, tb, tc = tensors(A, B, C)
        _kernels()[name == "float32"][_grid(m, n)](ta, tb, tc, m, n, k, GROUP_M=GROUP_M)
    return C
