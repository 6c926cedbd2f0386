"""Rung 5, tensor-core flash attention: mma.sync + ldmatrix in CUDA C++, P kept in registers.

Rung 4 still multiplies on the CUDA cores, one FP32 FMA per multiply-add, which caps it near
the FP32 peak (66.9 TFLOP/s on an H200) however well it is tiled. This rung moves both matrix
products to the tensor cores with the FlashAttention-2 kernel layout, written as inline PTX in
``r05_tensor_core_flash.cu`` (the GEMM ladder's rung 15 introduces the instructions):

- a block of 4 warps owns 128 query rows of one head (d = 64: each warp two m16 tiles, 32
  rows; d = 128: 64 rows, one m16 tile per warp) and walks the keys in tiles of 64. The q tile
  is loaded once, by ldmatrix, into A fragments that stay in registers for the whole loop;
- ``S = Q·Kᵀ`` is ``mma.m16n8k16`` with B = Kᵀ: k's rows (keys) are B's columns with d
  contiguous, the "col" layout, so a plain ``ldmatrix.x4`` gives the B fragments of 16 keys;
- the online softmax runs on the FP32 accumulator fragments themselves: a lane holds two rows
  of each m16 tile (g and g + 8, g = lane / 4) at two keys of each n8 tile, so a row max is
  the lane's own max and two xor shuffles across the quad of lanes sharing the row. Scores
  are prescaled into log2 units (``log2(e)/√d``): one FFMA and one ``ex2`` per probability;
- the accumulator layout of two adjacent n8 tiles of S is exactly the A fragment layout of
  one k16 step of ``P·V``, so P is rounded to half2 in registers and fed straight back to the
  tensor cores, never stored; V is "row" (keys x d, d contiguous), so ``ldmatrix.x4.trans``
  gives its B fragments;
- k and v tiles are double-buffered in shared memory by ``cp.async`` (16 bytes per thread per
  copy, zero-filled past N): tile j + 1's keys load while tile j's softmax and ``P·V`` run,
  two block barriers per tile, none for P;
- shared rows are swizzled (16-byte chunk ``c`` of row ``r`` stored at ``c ^ (r & 7)``), so the
  8 rows of every ldmatrix matrix and every 8-chunk copy phase hit 8 different bank groups;
- causal blocks stop at their last row's diagonal tile, mask only the tiles that cross the
  diagonal (or N), and run longest first.

Head dimensions other than 64 and 128 are zero-padded to the next of the two (up to 128; a
zero column adds nothing to q·k, and the padded output columns are dropped), and operands
that are not 16-byte aligned are copied; both copies are workspaces the memory table shows.
The kernel is compiled for several tile configurations (``CONFIGS``); ``sweep`` times them
with the harness's recipe and ``TUNED`` holds the choice.

Verification without a GPU: ``lane_model.py`` executes the kernel's steps with the same
formulas in NumPy, lane by lane (ldmatrix, mma fragments, shuffles, cp.async groups landing
early or late), and the tests hold it to the float64 reference and to zero bank conflicts.

Arithmetic per 64-key tile and warp (d = 64, 32 rows): 128 mma for 524,288 FLOP, 32
ldmatrix.x4 (16 KB of shared reads), 64 ``ex2`` per lane. At the mma.sync rate the GEMM
ladder measured (451 TFLOP/s at 4096³ on an H200), the exponentials on the MUFU pipe and the
shared-memory reads each need about as long as the mma, so they must overlap across warps.

Prediction: a little above half of the GEMM's mma.sync rate, 220 to 300 TFLOP/s at the SDPA
shape on an H200, at least half of SDPA's 443 (the issue's figure) and about 20x rung 4.
Below SDPA because SDPA on Hopper can use the Hopper-only instructions (wgmma, TMA) and
warp-specialized pipelines that overlap the softmax with the next tile's matrix products.

Measured on an H200 by ``ladder bench`` (results/nvidia-h200.json): at the SDPA shape
[4, 16, 16, 4096, 64] (B, H, HKV, N, d) in float16, 0.902 ms and 304.8 TFLOP/s, 26.66x rung 4
and 0.66x SDPA (0.596 ms, 461.0 TFLOP/s); causal, 0.519 ms and 265.0 TFLOP/s, 24.28x rung 4 and
0.68x SDPA. At the GQA shape [4, 16, 4, 4096, 64]: 0.903 ms and 304.5 TFLOP/s, 26.49x rung 4 and
0.67x SDPA; causal, 0.518 ms and 265.2 TFLOP/s, 24.06x rung 4 and 0.74x SDPA. The prediction
held, slightly exceeded: 0.68 of the mma.sync GEMM's 451 TFLOP/s, 26.66x rung 4 against about
20x predicted, and the issue's target of 0.5x SDPA met at 0.66x, against a measured SDPA of
461.0 TFLOP/s rather than the issue's 443. The causal rate is 0.87 of the non-causal one,
likely because a causal block walks half as many key tiles on average, so loading q, filling
the cp.async pipeline and the final normalization weigh more, and its diagonal tiles do masked
work.

ptxas reports (CUDA 13, sm_90): ``flash_d64_w4_m2`` 238 registers (sm_80: 231; two blocks of
4 warps per SM), ``flash_d128_w4_m1`` 216 (sm_80: 212), the other configurations 126 to 211;
no spills in any; 48 KB (d = 64) and 80 KB (d = 128) of dynamic shared memory per block.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from ladder.attention import memory
from ladder.attention.problem import LOG2E, Shape, attention_rung, check_arrays, get_problem_for
from ladder.core import cuda_cpp, timing, tuning
from ladder.core.rung import get_rung

SOURCE = cuda_cpp.source(__file__, "r05_tensor_core_flash.cu", archs=("sm_80", "sm_90"))
BKV = 64  # keys per tile (as in the .cu file)
HEAD_DIMS = (64, 128)  # the kernel's head dimensions; smaller ones are padded up
ALIGN = 16  # bytes: cp.async copies 16-byte chunks
# (warps per block, m16 tiles per warp) compiled for each head dimension
CONFIGS = {64: ((4, 2), (4, 1), (8, 1)), 128: ((4, 1), (8, 1))}
TUNED = {64: (4, 2), 128: (4, 1)}


def kernel_name(d: int, warps: int, mi: int, packed: bool) -> str:
    return f"flash_{'packed_' if packed else ''}d{d}_w{warps}_m{mi}"


def shared_bytes(d: int, warps: int, mi: int) -> int:
    """Dynamic shared memory: the q tile and two stages each of k and v, d halves per row."""
    return (16 * mi * warps + 4 * BKV) * d * 2


def kernel_d(d: int, rung: str) -> int:
    """The head dimension the kernel runs: d itself, or the next one up (zero-padded)."""
    if d > HEAD_DIMS[-1]:
        raise ValueError(f"{rung} supports head dimensions up to {HEAD_DIMS[-1]}, got d={d}")
    return next(size for size in HEAD_DIMS if size >= d)


def _aligned(*arrays: Any) -> bool:
    return all(int(cuda_cpp.pointer(x)) % ALIGN == 0 for x in arrays)


def _padded_copy(x: Any, kd: int, what: str) -> Any:
    """x (..., d) copied into a zeroed (..., kd) workspace."""
    import cupy

    buffer = memory.empty((*x.shape[:-1], kd), np.float16, what)
    view = cupy.asarray(buffer)
    view.fill(0)
    view[..., : x.shape[-1]] = cupy.asarray(x)
    return buffer


def run_flash(
    q: Any, k: Any, v: Any, out: Any, shape: Shape, causal: bool, packed: bool,
    config: tuple[int, int] | None = None, rung: str = "rung 5",
) -> Any:  # fmt: skip
    """Launch the kernel (``packed``: rung 6's layout) on checked float16 arrays."""
    import cupy

    batch, heads, kv_heads, n, d = shape
    kd = kernel_d(d, rung)
    warps, mi = config or TUNED[kd]
    kernel = SOURCE.kernel(kernel_name(kd, warps, mi, packed))
    smem = shared_bytes(kd, warps, mi)
    if kernel.max_dynamic_shared_size_bytes < smem:
        kernel.max_dynamic_shared_size_bytes = smem  # above the 48 KB default at d = 128

    copy = kd != d or not _aligned(q, k, v, out)
    if copy:  # workspaces the kernel can take: d padded with zeros, 16-byte aligned
        q_in = _padded_copy(q, kd, f"{rung}'s padded copy of q")
        k_in = _padded_copy(k, kd, f"{rung}'s padded copy of k")
        v_in = _padded_copy(v, kd, f"{rung}'s padded copy of v")
        o_in = memory.empty((batch, heads, n, kd), np.float16, f"{rung}'s padded output")
    else:
        q_in, k_in, v_in, o_in = q, k, v, out
    rows = n * (heads // kv_heads) if packed else n
    block_rows = 16 * mi * warps
    grid = ((rows + block_rows - 1) // block_rows, kv_heads if packed else heads, batch)
    args = (
        *(cuda_cpp.pointer(x) for x in (q_in, k_in, v_in, o_in)),
        np.int32(n), np.int32(heads), np.int32(kv_heads),
        np.float32(LOG2E / math.sqrt(d)), np.int32(bool(causal)),
    )  # fmt: skip
    kernel(grid, (32 * warps,), args, shared_mem=smem)
    if copy:
        cupy.asarray(out)[...] = cupy.asarray(o_in)[..., :d]
    return out


def launch_config(
    config: tuple[int, int], q: Any, k: Any, v: Any, out: Any = None, causal: bool = False,
    packed: bool = False,
) -> Any:  # fmt: skip
    """The kernel with ``config`` = (warps, m16 tiles per warp) instead of ``TUNED``."""
    q, k, v, out, shape = check_arrays(q, k, v, out, ("float16",))
    if out.size:
        run_flash(q, k, v, out, shape, causal, packed, config)
    return out


def sweep(
    size: tuple[int, ...], causal: bool = False, packed: bool = False
) -> list[dict[str, Any]]:
    """Time every configuration compiled for this size's head dimension with
    ``ladder.core.tuning``; fastest first. Each entry's ``config`` is [warps, m16 tiles per
    warp]; meaningful on a GPU only."""
    problem = get_problem_for(causal)
    case = timing.prepare(problem, tuple(size), "float16")
    configs = CONFIGS[kernel_d(size[4], "rung 5")]
    launch = functools.partial(launch_config, causal=causal, packed=packed)
    return tuning.sweep(get_rung(problem.name, "tensor-core-flash"), case, configs, launch)


@attention_rung(
    name="tensor-core-flash",
    title="Tensor-core flash attention: mma.sync, ldmatrix, cp.async (CUDA C++)",
    dtypes=("float16",),
    needs=("cupy",),
    units="tensor",
    min_cc=(8, 0),
)
def launch(q: Any, k: Any, v: Any, out: Any = None, causal: bool = False) -> Any:
    q, k, v, out, shape = check_arrays(q, k, v, out, ("float16",))
    if out.size:
        run_flash(q, k, v, out, shape, causal, packed=False)
    return out
