"""Every fusion rung (elementwise, softmax, layer norm, GEMM epilogue) against float64.

Parametrized over the registry: a rung added to ladder/fused is tested here without edits. On a
GPU the shapes are the problems' test sizes (one column, one row, 1000 x 33, 3 x 50000, ...);
in the simulator, smaller shapes of the same kinds, since it runs every thread in Python.
"""

import numpy as np
import pytest
from conftest import ON_GPU, bad_input_cases, launch_refuses, quick_unless, run_poisoned, swept

from ladder.core import timing
from ladder.core.dtypes import resolve, to_device, to_host
from ladder.core.rung import get_problem, get_rung, rungs

FUSED = ["elementwise", "softmax", "layernorm", "gemm-epilogue"]
# the simulator runs every thread of every block as a Python thread: few rows (blocks) only
SIM_SHAPES = [(1, 1), (1, 257), (3, 1), (2, 33), (2, 1030)]
# left out of the fast path (-m "not slow"), which keeps (2, 33): two rows, each past a warp;
# and for the GEMM epilogue 1 x 1 x 1 and 17 x 33 x 65, past every tile
SLOW_SHAPES = {(1, 1), (1, 257), (3, 1), (2, 1030), (1, 130, 7), (20, 36, 68)}


def _cases():
    for name in FUSED:
        problem = get_problem(name)
        for rung in rungs(name):
            if rung.unavailable_reason() is not None or not swept(rung):
                continue
            for dtype in rung.dtypes:
                sizes = problem.test_sizes(dtype)
                if not ON_GPU and name != "gemm-epilogue":
                    sizes = SIM_SHAPES
                for size in sizes:
                    marks, key = quick_unless(size in SLOW_SHAPES), f"{rung.key}-{dtype}-{size}"
                    yield pytest.param(rung, dtype, size, id=key, marks=marks)


def _run(rung, inputs, dtype):
    return run_poisoned(rung, inputs, get_problem(rung.problem).reference(inputs).shape, dtype)


@pytest.mark.parametrize(("rung", "dtype", "size"), list(_cases()))
def test_fused_rung_matches_float64_reference(rung, dtype, size):
    problem = get_problem(rung.problem)
    inputs = problem.make_inputs(size, dtype, seed=sum(size))
    out = _run(rung, inputs, dtype)
    assert out.dtype == resolve(dtype)
    assert np.all(np.isfinite(out)), "an element was never written (still NaN) or overflowed"
    assert timing.relative_error(out, problem.reference(inputs)) <= problem.tolerance(dtype)


SOFTMAX = [r for r in rungs("softmax") if r.unavailable_reason() is None]


# float16 on the fast path: its exp overflows first (at 11.1 against float32's 88.7)
@pytest.mark.parametrize("dtype", [pytest.param("float32", marks=quick_unless(True)), "float16"])
@pytest.mark.parametrize("rung", SOFTMAX, ids=lambda r: r.name)
def test_softmax_is_stable_for_large_inputs(rung, dtype):
    problem = get_problem("softmax")
    (x,) = problem.make_inputs((2, 300), dtype, seed=1)
    x = (x.astype(np.float64) * 2500.0).astype(resolve(dtype))  # values up to +-1e4
    out = _run(rung, (x,), dtype)
    assert np.all(np.isfinite(out))
    assert timing.relative_error(out, problem.reference((x,))) <= problem.tolerance(dtype)


def test_fused_epilogue_takes_any_activation():
    from ladder.fused.gemm_epilogue.r01_separate import relu
    from ladder.fused.gemm_epilogue.r02_fused import launch_activation

    problem = get_problem("gemm-epilogue")
    a, b, bias = problem.make_inputs((19, 37, 23), "float32", seed=4)
    out = to_host(launch_activation(relu, *[to_device(x) for x in (a, b, bias)]))
    ref = np.maximum(a.astype(np.float64) @ b.astype(np.float64) + bias, 0.0)
    assert timing.relative_error(out, ref) <= 1e-5


DEVICE_RUNGS = [r for name in FUSED for r in rungs(name) if r.unavailable_reason() is None]


def _bad(rung):
    problem = get_problem(rung.problem)
    size = (4, 8, 6) if rung.problem == "gemm-epilogue" else (4, 8)
    good = problem.make_inputs(size, rung.dtypes[0], 0)
    wrong = np.float64 if rung.dtypes[0] == "float32" else np.float32
    yield "dtype", [good[0].astype(wrong), *good[1:]], TypeError, "must be"
    if len(good) > 1:
        yield "vector", [*good[:-1], good[-1][:-1]], ValueError, "must have shape"
    yield "1-D", [good[0].ravel(), *good[1:]], ValueError, "2-D"


@pytest.mark.parametrize(
    ("rung", "arrays", "error", "message"), bad_input_cases(DEVICE_RUNGS, _bad)
)
def test_fused_bad_input_raises_clear_error(rung, arrays, error, message):
    launch_refuses(rung, arrays, error, message)


@pytest.mark.parametrize("rung", DEVICE_RUNGS, ids=lambda r: r.key)
def test_fused_host_array_is_refused(rung):
    problem = get_problem(rung.problem)
    size = (4, 8, 6) if rung.problem == "gemm-epilogue" else (4, 8)
    inputs = problem.make_inputs(size, rung.dtypes[0], 0)
    with pytest.raises(TypeError, match="host array"):
        rung.launch(inputs[0], *[to_device(x) for x in inputs[1:]])


# The tensor-core epilogue (gemm/bias-gelu) on the operands themselves (tile multiples), on
# padded copies (odd sizes: the bias padded with zeros too), and at K = 0 (gelu of the bias).
@pytest.mark.parametrize("size", [(256, 512, 128), (257, 515, 1031), (130, 260, 0)])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_bias_gelu_on_its_tiles_off_them_and_without_k(size, dtype):
    rung = get_rung("gemm-epilogue", "bias-gelu")
    why = rung.unavailable_reason()
    if why:
        pytest.skip(why)
    problem = get_problem("gemm-epilogue")
    inputs = problem.make_inputs(size, dtype, seed=7)
    out = _run(rung, inputs, dtype)
    assert np.all(np.isfinite(out.astype(np.float32))), "an element was never written"
    assert timing.relative_error(out, problem.reference(inputs)) <= problem.tolerance(dtype)
