"""Tensor-core flash: mma.sync + ldmatrix in CUDA C++, P kept in registers.

What changes: both matrix products move from FP32 FMAs on the CUDA cores to the tensor cores,
in the FlashAttention-2 layout, as inline PTX in ``r05_tensor_core_flash.cu``. The instructions
are the ones notebook 02 climbs to (`gemm/mma-sync`, ``mma.sync`` + ``ldmatrix``, with
its fragment layouts); what is new here is the softmax between the two products:
- a block of 4 warps owns 128 query rows of one head (d = 64: two m16 tiles per warp; d = 128:
  one) and walks the keys in tiles of 64; the q tile is loaded once by ldmatrix into A
  fragments that stay in registers for the whole loop;
- ``S = Q·Kᵀ`` is ``mma.m16n8k16`` with B = Kᵀ: k's rows are B's columns with d contiguous, the
  "col" layout, so a plain ``ldmatrix.x4`` gives the B fragments of 16 keys;
- the online softmax runs on the FP32 accumulator fragments: a lane holds two rows of each m16
  tile (g and g + 8, g = lane / 4), so a row max is the lane's own max and two xor shuffles
  across the quad sharing the row; scores in log2 units: one FFMA and one ``ex2`` each;
- two adjacent n8 tiles of S in the accumulator layout are exactly the A fragment of one k16
  step of ``P·V``, so P is rounded to half2 in registers and fed back to the tensor cores,
  never stored; V is "row", so ``ldmatrix.x4.trans`` gives its B fragments;
- k and v tiles are double-buffered in shared memory by ``cp.async`` (16 bytes per copy,
  zero-filled past N): tile j + 1 loads while tile j's softmax and ``P·V`` run; shared rows
  are swizzled (chunk ``c`` of row ``r`` at ``c ^ (r & 7)``), so every ldmatrix and every copy
  phase hits 8 different bank groups; causal blocks stop at their diagonal tile, mask only
  the tiles that cross it, and run longest first.
Other head dimensions are zero-padded to 64 or 128, unaligned operands copied (workspaces the
memory table shows). ``lane_model.py`` executes the kernel's steps lane by lane in NumPy, and
the tests hold it to the float64 reference and to zero bank conflicts, without a GPU.
Why: `flash-fp16` multiplies on the CUDA cores, one FP32 FMA per multiply-add, capped near the FP32
peak (66.9 TFLOP/s on an H200) however well it is tiled.
Prediction: per 64-key tile and warp (d = 64): 128 mma for 524,288 FLOP, 32 ldmatrix.x4 (16 KB of
shared reads), 64 ``ex2`` per lane. At the mma.sync rate of the GEMM ladder (451 TFLOP/s at 4096³),
the exponentials and the shared reads each take about as long as the mma, so they must overlap
across warps: a little above half that rate, 220 to 300 TFLOP/s, about 20x `flash-fp16`, and below
SDPA, which on Hopper can use wgmma, TMA and warp-specialized pipelines.
Measured: on an NVIDIA H200 (results/nvidia-h200.json, ``ladder bench``), float16, SDPA shape [4,
16, 16, 4096, 64] (B, H, HKV, N, d): 0.903 ms and 304.3 TFLOP/s (`flash-fp16`: 24.073 ms; SDPA:
0.600 ms, 458.4 TFLOP/s); causal (the file's earlier run, 2026-11-25), 0.519 ms and 264.9 TFLOP/s
(SDPA: 0.354 ms). GQA shape [4, 16, 4, 4096, 64]: 0.897 ms (SDPA: 0.600 ms); causal, 0.520 ms (SDPA:
0.356 ms).
Verdict: held, slightly exceeded: 0.68 of the fastest mma.sync GEMM's rate (`gemm/warp-tile-64`,
449.31 TFLOP/s), 26.65x `flash-fp16` against about 20x, 0.66x SDPA (causal 0.68x; GQA 0.67x and
0.68x). The causal rate is 0.87 of the non-causal one, likely because a causal block walks half as
many key tiles on average, so loading q, filling the pipeline and the final normalization weigh
more, and its diagonal tiles do masked work (not profiled).

Lab notes: docs/notes/attention.md
"""

import functools
from typing import Any

from ladder.attention import tensor_core
from ladder.attention.problem import attention_rung, get_problem_for, operands
from ladder.attention.tensor_core import kernel_d
from ladder.core import cuda_cpp, timing, tuning
from ladder.core.rung import get_rung

SOURCE = cuda_cpp.source(__file__, "r05_tensor_core_flash.cu", archs=("sm_80", "sm_90"))
BKV = 64  # keys per tile (as in the .cu file)
# (warps per block, m16 tiles per warp) compiled for each head dimension
CONFIGS = {64: ((4, 2), (4, 1), (8, 1)), 128: ((4, 1), (8, 1))}
TUNED = {64: (4, 2), 128: (4, 1)}


def kernel_name(d: int, warps: int, mi: int, packed: bool) -> str:
    return f"flash_{'packed_' if packed else ''}d{d}_w{warps}_m{mi}"


def shared_bytes(d: int, warps: int, mi: int) -> int:
    """Dynamic shared memory: the q tile and two stages each of k and v, d halves per row."""
    return (16 * mi * warps + 4 * BKV) * d * 2


def flash_plan(
    q: Any, k: Any, v: Any, out: Any, packed: bool,
    config: tuple[int, int] | None = None, rung: str = "rung 5",
) -> Any:  # fmt: skip
    """The kernel (``packed``: rung 6's layout) for these float16 operands, its grid and shared
    memory, and its launch without and with the causal mask (``tensor_core.plan``)."""
    kd = kernel_d(q.shape[3], rung)
    warps, mi = config or TUNED[kd]
    kernel = SOURCE.kernel(kernel_name(kd, warps, mi, packed))
    smem, rows = shared_bytes(kd, warps, mi), 16 * mi * warps
    return tensor_core.plan(q, k, v, out, kernel, smem, rows, 32 * warps, packed, rung)


def launch_config(
    config: tuple[int, int], q: Any, k: Any, v: Any, out: Any = None, causal: bool = False,
    packed: bool = False,
) -> Any:  # fmt: skip
    """The kernel with ``config`` = (warps, m16 tiles per warp) instead of ``TUNED``."""
    q, k, v, out, _ = operands(q, k, v, out, ("float16",))
    if 0 not in out.shape:
        flash_plan(q, k, v, out, packed, config)[bool(causal)](q, k, v, out)
    return out.obj


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
    parent="flash-fp16",
    title="Tensor-core flash attention: mma.sync, ldmatrix, cp.async (CUDA C++)",
    dtypes=("float16",),
    needs=("cupy",),
    units="tensor",
    min_cc=(8, 0),
    cc_needs="cp.async and mma.sync m16n8k16",
)
def geometry(q: Any, k: Any, v: Any, out: Any) -> Any:
    """TUNED's kernel for this head dimension, a block per tile of query rows and head."""
    return flash_plan(q, k, v, out, packed=False)
