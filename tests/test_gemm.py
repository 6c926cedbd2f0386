"""Every registered GEMM rung against a float64 reference, and every launcher's input checks.

Parametrized over the registry: a rung added to ladder/gemm is tested here without edits.
Sizes are not multiples of any tile; the 4-aligned ones take the float4 paths.
"""

import numpy as np
import pytest
from conftest import ON_GPU
from numba import cuda

from ladder.core import timing
from ladder.core.rung import get_problem, rungs

PROBLEM = get_problem("gemm")
SIZES = [(1, 1, 1), (17, 33, 65), (129, 7, 70), (20, 36, 68), (3, 5, 0)]
if ON_GPU:
    SIZES += [(257, 515, 1031), (1000, 1004, 996), (2048, 2052, 64), (1, 4099, 513)]

RUNGS = [r for r in rungs("gemm") if r.unavailable_reason() is None]
SKIPPED = [r for r in rungs("gemm") if r.unavailable_reason() is not None]
DEVICE_RUNGS = [r for r in RUNGS if not r.on_cpu]


def _run(rung, size, seed=0):
    a, b = PROBLEM.make_inputs(size, "float32", seed)
    m, n, _ = size
    if rung.on_cpu:
        out = np.full((m, n), np.nan, np.float32)
        rung.launch(a, b, out)
        return out, PROBLEM.reference((a, b))
    out = cuda.to_device(np.full((m, n), np.nan, np.float32))  # poisoned: unwritten = NaN
    returned = rung.launch(cuda.to_device(a), cuda.to_device(b), out)
    assert returned is out
    return out.copy_to_host(), PROBLEM.reference((a, b))


@pytest.mark.parametrize("size", SIZES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("rung", RUNGS, ids=lambda r: r.name)
def test_rung_matches_float64_reference(rung, size):
    out, ref = _run(rung, size, seed=sum(size))
    assert np.all(np.isfinite(out)), "an element of C was never written (still NaN)"
    assert timing.relative_error(out, ref) <= PROBLEM.tolerance("float32")


@pytest.mark.parametrize("rung", DEVICE_RUNGS, ids=lambda r: r.name)
def test_launcher_allocates_output_when_none(rung):
    a, b = PROBLEM.make_inputs((9, 10, 11), "float32", 1)
    c = rung.launch(cuda.to_device(a), cuda.to_device(b))
    assert timing.relative_error(c.copy_to_host(), PROBLEM.reference((a, b))) <= 1e-5


def _bad_inputs():
    f32 = np.ones((4, 8), np.float32)
    yield "float64 A", (f32.astype(np.float64), f32.T.copy()), TypeError, "A must be float32"
    yield "inner mismatch", (f32, f32), ValueError, "inner dimensions differ"
    yield "1-D A", (np.ones(8, np.float32), f32.T.copy()), ValueError, "A must be 2-D"
    yield "C shape", (f32, f32.T.copy(), np.ones((3, 3), np.float32)), ValueError, "C must have"


@pytest.mark.parametrize("rung", DEVICE_RUNGS, ids=lambda r: r.name)
@pytest.mark.parametrize("case", list(_bad_inputs()), ids=lambda c: c[0])
def test_bad_input_raises_clear_error(rung, case):
    _, arrays, error, message = case
    with pytest.raises(error, match=message):
        rung.launch(*[cuda.to_device(x) for x in arrays])


@pytest.mark.parametrize("rung", DEVICE_RUNGS, ids=lambda r: r.name)
def test_host_array_is_refused(rung):
    a = np.ones((4, 8), np.float32)
    with pytest.raises(TypeError, match="host array"):
        rung.launch(a, cuda.to_device(a.T.copy()))


@pytest.mark.parametrize("rung", DEVICE_RUNGS, ids=lambda r: r.name)
def test_non_contiguous_is_refused(rung):
    a = cuda.to_device(np.ones((4, 16), np.float32))[:, ::2]
    b = cuda.to_device(np.ones((8, 4), np.float32))
    with pytest.raises(ValueError, match="C-contiguous"):
        rung.launch(a, b)


def test_cpu_rung_refuses_device_arrays():
    cpu = next(r for r in rungs("gemm") if r.on_cpu)
    a = np.ones((4, 8), np.float32)
    with pytest.raises(TypeError, match="NumPy array"):
        cpu.launch(cuda.to_device(a), a.T.copy())


def test_unavailable_rungs_say_why():
    for rung in SKIPPED:
        assert "needs" in rung.unavailable_reason()
    if not ON_GPU:
        assert any(r.reference for r in SKIPPED), "cuBLAS should need a GPU here"


@pytest.mark.skipif(not ON_GPU, reason="needs a CUDA GPU: CuPy and PyTorch arrays are GPU arrays")
def test_cupy_and_torch_arrays_are_accepted():
    cupy = pytest.importorskip("cupy")
    best = DEVICE_RUNGS[-1]
    a, b = PROBLEM.make_inputs((65, 66, 67), "float32", 3)
    c = best.launch(cupy.asarray(a), cupy.asarray(b))
    assert timing.relative_error(c.copy_to_host(), PROBLEM.reference((a, b))) <= 1e-5
    torch = pytest.importorskip("torch")
    ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
    c = best.launch(ta, tb)
    assert timing.relative_error(c.copy_to_host(), PROBLEM.reference((a, b))) <= 1e-5
