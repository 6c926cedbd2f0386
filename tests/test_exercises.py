"""Every exercise: its worked answer passes, and a typical wrong answer fails with a hint."""

import importlib
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from numba import cuda, float32

from ladder.exercises import EXERCISES, solutions
from ladder.exercises._common import MissingCompiler, compile_report

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
def tiled_without_second_sync(A, B, C):
    """The worked answer without the syncthreads after the products."""
    As = cuda.shared.array((TILE, TILE), float32)
    Bs = cuda.shared.array((TILE, TILE), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    row = cuda.blockIdx.y * TILE + ty
    col = cuda.blockIdx.x * TILE + tx
    M, K = A.shape
    N = B.shape[1]
    acc = float32(0.0)
    for k0 in range(0, K, TILE):
        As[ty, tx] = A[row, k0 + tx] if row < M and k0 + tx < K else float32(0.0)
        Bs[ty, tx] = B[k0 + ty, col] if k0 + ty < K and col < N else float32(0.0)
        cuda.syncthreads()
        for i in range(TILE):
            acc += As[ty, i] * Bs[i, tx]
    if row < M and col < N:
        C[row, col] = acc


@cuda.jit
def tiled_without_zero_fill(A, B, C):
    """The worked answer with masked loads but no zeros past the edges: a tile element past
    M, N or K keeps the previous tile's value."""
    As = cuda.shared.array((TILE, TILE), float32)
    Bs = cuda.shared.array((TILE, TILE), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    row = cuda.blockIdx.y * TILE + ty
    col = cuda.blockIdx.x * TILE + tx
    M, K = A.shape
    N = B.shape[1]
    acc = float32(0.0)
    for k0 in range(0, K, TILE):
        if row < M and k0 + tx < K:
            As[ty, tx] = A[row, k0 + tx]
        if k0 + ty < K and col < N:
            Bs[ty, tx] = B[k0 + ty, col]
        cuda.syncthreads()
        for i in range(TILE):
            acc += As[ty, i] * Bs[i, tx]
        cuda.syncthreads()
    if row < M and col < N:
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
    "copy_waits": {"wgmma_descriptors": 1, "wgmma": 4},  # the barrier read as a one-tile lag
    "fp8_stage": {"k_elements": 64, "wgmma": 4, "ratio": 1},  # persistent's K counted again
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
    "descriptor_fields": {**solutions.descriptor_fields, "lbo": 512},  # the field, not bytes
    "core_matrix": {**solutions.core_matrix, "byte": 13 * 128 + 84},  # the swizzle left out
    "quad_words": {**solutions.quad_words, "rows": (6, 7, 8, 9)},  # four rows, not three
    "job_rounds": {**solutions.job_rounds, "warp": 0},  # row 14 taken as sub-band 0
    "filter_rows": {**solutions.filter_rows, "taps": 64},  # the window, not the filter
    "step_descriptor": {**solutions.step_descriptor, "start_chunk": (40 + 4) * 17},  # row 2j
}

CASES = [(module, name) for module, names in EXERCISES.items() for name in names]
NEEDS_COMPILER = {"local_array"}


def _check(module, name):
    if name in NEEDS_COMPILER:
        try:
            compile_report(f"ladder.exercises.{module}")
        except MissingCompiler as missing:
            pytest.skip(str(missing))  # a plain install: test_a_missing_compiler_... covers it
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


def test_each_tiling_mistake_gets_its_own_hint():
    """A missing second syncthreads and a missing zero fill are told apart: the first from the
    kernel's loop, the second because the kernel is right on a size with no edges."""
    from ladder.exercises import nb01_gemm

    try:  # the simulator's threads race (wrong answer); a GPU's two warps may not
        no_sync = nb01_gemm.check_shared_tiling(tiled_without_second_sync)
        assert "lacks a syncthreads" in no_sync
    except AssertionError as err:
        no_sync = str(err)
        assert "second syncthreads" in no_sync
    with pytest.raises(AssertionError) as no_fill:
        nb01_gemm.check_shared_tiling(tiled_without_zero_fill)
    assert "store 0" in str(no_fill.value) and "syncthreads" not in str(no_fill.value)
    assert "store 0" not in no_sync


@pytest.mark.parametrize("word", ["Memory", "  memory ", "MEMORY\n"])
def test_a_word_answer_is_taken_in_any_case(word):
    from ladder.exercises import nb00_start_here

    assert solutions.roofline["bound"] == "memory"
    message = nb00_start_here.check_roofline({**solutions.roofline, "bound": word})
    assert message.startswith("right")


def test_the_graph_question_names_the_sum_as_a_mistake():
    from ladder.exercises import nb04_streams_and_graphs as nb04

    summed = nb04.KERNELS * (nb04.REPLAY_US + nb04.KERNEL_US)
    with pytest.raises(AssertionError, match="not their sum"):
        nb04.check_graph_launches({**solutions.graph_launches, "graph_us": summed})


# run in a child: NVRTC hidden, as on a plain install (no cuda13/cuda12 extra)
_WITHOUT_NVRTC = """
import cuda.pathfinder as pathfinder
found = pathfinder.load_nvidia_dynamic_lib
def load(name, *args, **kwargs):
    if name == "nvrtc":
        raise pathfinder.DynamicLibNotFoundError('Failure finding "libnvrtc.so": not installed')
    return found(name, *args, **kwargs)
pathfinder.load_nvidia_dynamic_lib = load
"""


def test_a_missing_compiler_is_one_line_naming_the_extra(tmp_path):
    """Without NVRTC (a plain install), check_local_array says in one line what is missing and
    which extra installs it, instead of the compiler's traceback."""
    (tmp_path / "sitecustomize.py").write_text(textwrap.dedent(_WITHOUT_NVRTC))
    path = os.pathsep.join(p for p in (str(tmp_path), os.environ.get("PYTHONPATH")) if p)
    run = """
from ladder.exercises import nb01_gemm, solutions
from ladder.exercises._common import MissingCompiler
try:
    nb01_gemm.check_local_array(solutions.local_array)
except MissingCompiler as missing:
    print(missing)
"""
    done = subprocess.run(
        [sys.executable, "-c", run],
        env=dict(os.environ, PYTHONPATH=path),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    (line,) = done.stdout.strip().splitlines()
    assert "NVRTC" in line and "numba-ladder[cuda13]" in line and "no GPU needed" in line
    assert issubclass(MissingCompiler, AssertionError)  # a notebook's exercise cell prints it


# ---- the layout exercises (issue 53): every planted mistake gets its own hint ----

# (module, exercise, a wrong answer, the words its hint must hold); each exercise's hints differ
MISTAKES = [
    ("nb03_conv", "quad_words", {"rows": (6, 7, 8, 9)}, "the middle one twice"),
    ("nb03_conv", "quad_words", {"rows": (3, 4, 4, 5)}, "not k"),
    (
        "nb03_conv",
        "quad_words",
        {"pairs": [(0, 3), (1, 2), (2, 1), (3, 0), (4, -1)]},
        "do not exist",
    ),
    ("nb03_conv", "quad_words", {"pairs": [(0, 3), (3, 0)]}, "every (i, j) with i + j = 3"),
    ("nb03_conv", "quad_words", {"column": 6}, "add the lane's own output column"),
    ("nb03_conv", "quad_words", {"column": 5}, "two halves"),
    ("nb03_conv", "job_rounds", {"rounds": 13}, "one job for each of the NWARPS"),
    ("nb03_conv", "job_rounds", {"rounds": 3}, "sub-bands = ceil(Ho / 2T)"),
    ("nb03_conv", "job_rounds", {"warp": 0}, "numbered sub-band by sub-band"),
    ("nb03_conv", "job_rounds", {"round": 1}, "round = job // NWARPS"),
    ("nb07_conv_hopper", "filter_rows", {"row": (9, 0, 1)}, "not filter-major"),
    ("nb07_conv_hopper", "filter_rows", {"taps": 64}, "does not grow"),
    ("nb07_conv_hopper", "filter_rows", {"taps": 42}, "count the (p, q)"),
    ("nb07_conv_hopper", "filter_rows", {"registers": 16}, "that is one channel"),
    ("nb07_conv_hopper", "step_descriptor", {"start_chunk": 748}, "not at row 2j"),
    ("nb07_conv_hopper", "step_descriptor", {"start_chunk": 42}, "(c R + s(2j)) NP"),
    ("nb07_conv_hopper", "step_descriptor", {"lbo_bytes": 340}, "a chunk is 16"),
    ("nb07_conv_hopper", "step_descriptor", {"lbo_bytes": 10880}, "start halfway"),
    ("nb07_conv_hopper", "step_descriptor", {"odd_chunk": 754}, "LBO further"),
    ("nb07_conv_hopper", "step_descriptor", {"odd_chunk": 1093}, "s(2Y + 2j + 1)"),
    ("nb02_tensor_cores", "descriptor_fields", {"start_address": 4352}, "bytes >> 4"),
    ("nb02_tensor_cores", "descriptor_fields", {"lbo": 1024, "sbo": 8192}, "LBO is bits 16-29"),
    ("nb02_tensor_cores", "descriptor_fields", {"sbo": 2048}, "read bits 32-45"),
    ("nb02_tensor_cores", "descriptor_fields", {"swizzle": 1}, "answer in bytes"),
    ("nb02_tensor_cores", "core_matrix", {"kk": 1}, "16 of K"),
    ("nb02_tensor_cores", "core_matrix", {"core_matrix": (1, 0)}, "(k mod 16) // 8"),
    ("nb02_tensor_cores", "core_matrix", {"byte": 13 * 128 + 84}, "c XOR (r mod 8)"),
    ("nb02_tensor_cores", "core_matrix", {"byte": 13 * 128 + 16 * (2 ^ 5) + 10}, "2 bytes"),
    ("nb02_tensor_cores", "core_matrix", {"byte": 1700}, "the byte within the chunk stays"),
]


@pytest.mark.parametrize(("module", "name", "wrong", "hint"), MISTAKES)
def test_each_layout_mistake_gets_its_own_hint(module, name, wrong, hint):
    """The worked answer with one mistake planted: the hint names that mistake."""
    with pytest.raises(AssertionError) as err:
        _check(module, name)({**getattr(solutions, name), **wrong})
    assert hint in str(err.value)
    others = {h for m, n, _, h in MISTAKES if (m, n) == (module, name) and h != hint}
    assert not any(other in str(err.value) for other in others)


def test_the_layout_exercises_read_the_kernels_constants():
    """The numbers the exercises ask about come from the plans and rungs they name, and a
    learner reads the descriptor as the docstring says."""
    from ladder.conv import r08_tensor_core as r08
    from ladder.conv import r13_filters_on_m as r13
    from ladder.conv.layers import CONV2
    from ladder.exercises import nb02_tensor_cores

    assert r08.plan(CONV2).tiles == 6 and r08.plan(CONV2).rounds == solutions.job_rounds["rounds"]
    assert (r13.plan(CONV2).R, r13.plan(CONV2).NP) == (40, 17)
    assert hex(nb02_tensor_cores.DESCRIPTOR) == "0x4000004002001100"
