"""Every exercise: its worked answer passes, and a typical wrong answer fails with a hint."""

import importlib
import importlib.util

import numpy as np
import pytest
from numba import cuda, float32

from ladder.exercises import EXERCISES, solutions

TILE = 8


@cuda.jit
def tiled_unmasked(A, B, C):
    """Rung 3 without the edge masks: reads past A and B where K or M, N are not multiples."""
    As = cuda.shared.array((TILE, TILE), float32)
    Bs = cuda.shared.array((TILE, TILE), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    row = cuda.blockIdx.y * TILE + ty
    col = cuda.blockIdx.x * TILE + tx
    acc = float32(0.0)
    for k0 in range(0, A.shape[1], TILE):
        As[ty, tx] = A[row, k0 + tx]
        Bs[ty, tx] = B[k0 + ty, col]
        cuda.syncthreads()
        for i in range(TILE):
            acc += As[ty, i] * Bs[i, tx]
        cuda.syncthreads()
    if row < C.shape[0] and col < C.shape[1]:
        C[row, col] = acc


@cuda.jit
def naive(A, B, C):
    col, row = cuda.grid(2)
    if row < C.shape[0] and col < C.shape[1]:
        acc = float32(0.0)
        for k in range(A.shape[1]):
            acc += A[row, k] * B[k, col]
        C[row, col] = acc


def softmax_without_rescale(m, s, chunk):
    new = max(m, float(chunk.max()))
    return new, s + float(np.exp(chunk - new).sum())


def merge_without_rescaling_o(a, b):
    m, total, _ = solutions.flash_merge(a, b)
    return m, total, a[2] + b[2]


WRONG = {
    "copy_time": solutions.copy_time * 3,  # the three-kernel bytes
    "roofline": {**solutions.roofline, "bound": "compute"},
    "coalescing": {**solutions.coalescing, "coalesced_B": 32},
    "shared_tiling": tiled_unmasked,
    "local_array": {"constant_index": 64, "runtime_index": 64},
    "bank_conflicts": {**solutions.bank_conflicts, "column_padded": 32},
    "fragment_registers": {"A": 8, "B": 4, "C": 8},  # elements, not registers
    "mma_count": {"block": 256, "warp": 256},
    "epilogue_sectors": {"direct": 32, "staged": 16, "direct_fill": 1.0},  # a sector per lane
    "copy_instructions": {"cp_async": 6, "tma": 5},  # one thread's cp.async, not the block's
    "copy_waits": {"rung_17": 1, "rung_18": 4},  # the barrier read as a one-tile lag
    "fp8_stage": {"k_elements": 64, "wgmma": 4, "ratio": 1},  # rung 20's K counted again
    "conv1_shape_flops": {**solutions.conv1_shape_flops, "output_shape": (10000, 4, 86, 86)},
    "quads_per_window": {"quads": 40, "mma": 40},
    "pipeline_time": {**solutions.pipeline_time, "pipelined_ms": 4.0},
    "graph_launches": {"direct_us": 2200.0, "graph_us": 200.0},
    "call_costs": {"loop_us": 21.0, "graph_us": 6.0},  # host and GPU added
    "fusion_bytes": {"three_kernels_mb": 1610.7, "fused_mb": 536.9},  # float32's bytes
    "online_softmax": softmax_without_rescale,
    "score_memory": {**solutions.score_memory, "growth": 2},
    "flash_merge": merge_without_rescaling_o,
    "backward_products": {"executed": 5, "credited": 5},  # the query kernel's recomputation
    "softmax_share": {"d64": 0.25, "d128": 0.125},  # the exponentials at 64 a clock
    "consumer_registers": {"pool": 65536, "consumer": 120},  # the SM's whole file
    "wide_key_registers": {"s": 256, "p": 128},  # spread over a warp, not the warpgroup
    "matmul_backward": lambda A, B, dC: (dC @ B.T, dC.T @ A),  # dB transposed
    "softmax_backward": lambda y, dy: y * dy,  # the row sum left out
    "offsets": lambda ids, experts: np.cumsum(np.bincount(ids.ravel(), minlength=experts)),
    "tile_padding": {**solutions.tile_padding, "empty_share": 0.0},  # the last tiles full
}

CASES = [(module, name) for module, names in EXERCISES.items() for name in names]
NEEDS_COMPILER = {"local_array"}


def _check(module, name):
    if name in NEEDS_COMPILER and importlib.util.find_spec("cuda.bindings") is None:
        pytest.skip("needs nvJitLink (cuda-bindings) to read the compiler's report")
    return getattr(importlib.import_module(f"ladder.exercises.{module}"), f"check_{name}")


def test_every_exercise_has_a_solution_and_a_wrong_answer():
    names = {name for _, name in CASES}
    assert names == set(WRONG)
    assert all(hasattr(solutions, name) for name in names)


@pytest.mark.parametrize(("module", "name"), CASES)
def test_the_solution_passes(module, name):
    message = _check(module, name)(getattr(solutions, name))
    assert isinstance(message, str) and message.startswith("right")


@pytest.mark.parametrize(("module", "name"), CASES)
def test_a_wrong_answer_fails_with_a_hint(module, name):
    with pytest.raises(AssertionError) as err:
        _check(module, name)(WRONG[name])
    assert len(str(err.value)) > 20


def test_a_kernel_without_shared_memory_is_refused():
    from ladder.exercises import nb01_gemm

    with pytest.raises(AssertionError, match="shared memory"):
        nb01_gemm.check_shared_tiling(naive)


def test_a_malformed_answer_says_what_shape_it_needs():
    from ladder.exercises import nb02_tensor_cores

    with pytest.raises(AssertionError, match="keys"):
        nb02_tensor_cores.check_fragment_registers(4)
