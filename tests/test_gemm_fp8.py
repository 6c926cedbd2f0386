"""The FP8 GEMM problem (``gemm-fp8``): its inputs, reference and checks everywhere; rung 21
and cuBLASLt's FP8 rows against the float64 reference on a GPU.

The reference multiplies the stored 8-bit values and the scales in float64 (the problem's
docstring says why); the tolerance is 1e-2 relative, bfloat16 C's. cuBLASLt refuses sizes off
multiples of 16 and e5m2 x e5m2: there its rows must say so (NotApplicable), not fail.
"""

from __future__ import annotations

import numpy as np
import pytest

from ladder.core import device, timing
from ladder.core.dtypes import resolve, to_device, to_host
from ladder.core.rung import NotApplicable, get_problem, get_rung, rungs
from ladder.gemm.problem_fp8 import DTYPES, LARGEST, TEST_SIZES, operands, quantize

PROBLEM = get_problem("gemm-fp8")
ON_GPU = device.gpu_available()
RUNGS = [r for r in rungs("gemm-fp8") if r.unavailable_reason() is None]
RUNG_DTYPES = [(r, d) for r in RUNGS for d in r.dtypes]


def _ids(case):
    return f"{case[0].name}-{case[1]}"


@pytest.mark.parametrize("dtype", DTYPES)
def test_quantize_scales_into_the_format_and_rounds(dtype):
    x = np.random.default_rng(0).uniform(-3.0, 3.0, (40, 30))
    stored, scale = quantize(x, dtype)
    assert stored.dtype == resolve(dtype) and scale.dtype == np.float32 and scale.shape == (1,)
    assert np.max(np.abs(stored.astype(np.float64))) == pytest.approx(LARGEST[dtype], rel=0.07)
    back = stored.astype(np.float64) * float(scale[0])
    mantissa = {"float8_e4m3fn": 3, "float8_e5m2": 2}[dtype]
    assert np.max(np.abs(back - x) / np.abs(x)) <= 2.0 ** -(mantissa + 1) * 1.01
    zero, one = quantize(np.zeros((2, 3)), dtype)
    assert one[0] == 1.0 and not np.any(zero.astype(np.float64))


@pytest.mark.parametrize("dtype", DTYPES)
def test_inputs_are_row_major_a_column_major_b_and_the_reference_is_scaled(dtype):
    a, b, sa, sb = PROBLEM.make_inputs((5, 7, 9), dtype, 1)
    assert a.shape == (5, 9) and a.flags.c_contiguous
    assert b.shape == (9, 7) and b.flags.f_contiguous and not b.flags.c_contiguous
    assert a.dtype == b.dtype == resolve(dtype)
    ref = PROBLEM.reference((a, b, sa, sb))
    by_hand = [
        [sum(float(a[i, p]) * float(b[p, j]) for p in range(9)) for j in range(7)] for i in range(5)
    ]
    assert np.allclose(ref, float(sa[0]) * float(sb[0]) * np.array(by_hand), rtol=1e-12)
    assert PROBLEM.output_dtype(dtype) == "bfloat16"
    assert PROBLEM.min_bytes((2, 3, 4), dtype) == 2 * 4 + 4 * 3 + 2 * 3 * 2


def test_floor_is_twice_the_fp16_rate():
    ceilings = {"copy_tbps": 3.0, "cublas_fp16_tflops": 700.0}
    size = (8192, 8192, 8192)
    expected = 2 * 8192**3 / (2 * 700e12) * 1e3
    assert PROBLEM.floor_ms(size, "float8_e4m3fn", ceilings) == pytest.approx(expected)


def _device_inputs(size, dtype="float8_e4m3fn", seed=0):
    a, b, sa, sb = PROBLEM.make_inputs(size, dtype, seed)
    return [to_device(x) for x in (a, b, sa, sb)], (a, b, sa, sb)


def _bad_cases():
    (a, b, sa, sb), host = _device_inputs((4, 6, 8))
    fp16 = to_device(np.ones((4, 8), np.float16))
    row_b = to_device(np.ascontiguousarray(host[1]))
    e5 = to_device(host[1].astype(resolve("float8_e5m2")))
    yield "A float16", (fp16, b, sa, sb), TypeError, "A must be float8_e4m3fn or float8_e5m2"
    yield "B other type", (a, e5, sa, sb), TypeError, "B must be float8_e4m3fn"
    yield "B row-major", (a, row_b, sa, sb), ValueError, "B must be column-major"
    yield "1-D A", (to_device(host[0][0]), b, sa, sb), ValueError, "A must be 2-D"
    yield "inner", (a, to_device(np.asfortranarray(host[1][:5])), sa, sb), ValueError, "inner"
    two = to_device(np.ones(2, np.float32))
    yield "scale size", (a, b, two, sb), TypeError, "scale_a must be one float32"
    yield "scale type", (a, b, sa, to_device(np.ones(1))), TypeError, "scale_b must be one float32"
    c16 = to_device(np.ones((4, 6), np.float16))
    yield "C dtype", (a, b, sa, sb, c16), TypeError, "C must be bfloat16"
    c_shape = to_device(np.ones((3, 3), resolve("bfloat16")))
    yield "C shape", (a, b, sa, sb, c_shape), ValueError, "C must have"


@pytest.mark.parametrize("bad", list(_bad_cases()), ids=lambda b: b[0].replace(" ", "-"))
def test_operands_refuse_bad_input_naming_the_argument(bad):
    _, arrays, error, message = bad
    with pytest.raises(error, match=message):
        operands(*arrays)


def test_host_arrays_are_refused():
    a, b, sa, sb = PROBLEM.make_inputs((4, 6, 8), "float8_e4m3fn", 0)
    with pytest.raises(TypeError, match="host array"):
        operands(a, to_device(b), to_device(sa), to_device(sb))


def test_unavailable_rungs_say_why():
    for rung in rungs("gemm-fp8"):
        reason = rung.unavailable_reason()
        assert reason is None or "needs" in reason
    if not ON_GPU:
        assert all(r.unavailable_reason() for r in rungs("gemm-fp8"))


# ---- on a GPU: rung 21 and cuBLASLt against the reference ----


def _run(rung, size, dtype, seed=0):
    arrays, host = _device_inputs(size, dtype, seed)
    m, n, _ = size
    out = to_device(np.full((m, n), np.nan, resolve("bfloat16")))  # poisoned
    returned = rung.launch(*arrays, out)
    assert returned is out
    return to_host(out).astype(np.float64), PROBLEM.reference(host)


def _applies(rung, size, dtype):
    """cuBLASLt's rows take multiples of 16 only, and no e5m2 x e5m2."""
    if not rung.reference:
        return True
    return all(x % 16 == 0 for x in size) and dtype == "float8_e4m3fn"


@pytest.mark.skipif(not ON_GPU, reason="needs a CUDA GPU: rung 21 is sm_90a, cuBLASLt a GPU's")
@pytest.mark.parametrize("size", TEST_SIZES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("case", RUNG_DTYPES, ids=_ids)
def test_rung_matches_float64_reference(case, size):
    rung, dtype = case
    if not _applies(rung, size, dtype) and 0 not in size[:2]:
        with pytest.raises(NotApplicable):
            _run(rung, size, dtype)
        return
    out, ref = _run(rung, size, dtype, seed=sum(size))
    assert np.all(np.isfinite(out)), "an element of C was never written (still NaN)"
    assert timing.relative_error(out, ref) <= PROBLEM.tolerance(dtype)


@pytest.mark.skipif(not ON_GPU, reason="needs a CUDA GPU")
@pytest.mark.parametrize("case", RUNG_DTYPES, ids=_ids)
def test_long_k_stays_within_the_tolerance(case):
    # K = 8192: the tensor cores' own accumulation (rung 21, use_fast_accum) over a long sum
    rung, dtype = case
    size = (256, 256, 8192)
    if not _applies(rung, size, dtype):
        pytest.skip(f"{rung.name} does not take {dtype} (cuBLASLt: no e5m2 x e5m2)")
    out, ref = _run(rung, size, dtype, seed=5)
    assert timing.relative_error(out, ref) <= PROBLEM.tolerance(dtype)


@pytest.mark.skipif(not ON_GPU, reason="needs a CUDA GPU")
def test_launcher_allocates_c_and_takes_torch_tensors():
    rung = get_rung("gemm-fp8", "fp8")
    if rung.unavailable_reason():
        pytest.skip(rung.unavailable_reason())
    torch = pytest.importorskip("torch")
    a, b, sa, sb = PROBLEM.make_inputs((96, 80, 112), "float8_e4m3fn", 2)
    ref = PROBLEM.reference((a, b, sa, sb))
    c = rung.launch(*[to_device(x) for x in (a, b, sa, sb)])
    assert str(c.dtype) == "bfloat16" and c.shape == (96, 80)
    assert timing.relative_error(to_host(c).astype(np.float64), ref) <= 1e-2
    ta = torch.from_numpy(a.view(np.uint8)).cuda().view(torch.float8_e4m3fn)
    tbt = torch.from_numpy(np.ascontiguousarray(b.T).view(np.uint8)).cuda()
    tb = tbt.view(torch.float8_e4m3fn).t()  # column-major, as torch._scaled_mm takes it
    tc = torch.empty((96, 80), dtype=torch.bfloat16, device="cuda")
    out = rung.launch(ta, tb, torch.from_numpy(sa).cuda(), torch.from_numpy(sb).cuda(), tc)
    assert out is tc
    assert timing.relative_error(tc.double().cpu().numpy(), ref) <= 1e-2


@pytest.mark.skipif(not ON_GPU, reason="needs a CUDA GPU")
def test_misaligned_views_take_the_padded_path():
    rung = get_rung("gemm-fp8", "fp8")
    if rung.unavailable_reason():
        pytest.skip(rung.unavailable_reason())
    a, b, sa, sb = PROBLEM.make_inputs((128, 256, 128), "float8_e4m3fn", 4)
    flat = np.zeros(1 + a.size, a.dtype)
    flat[1:] = a.reshape(-1)
    view = to_device(flat)[1:].reshape(128, 128)  # A, starting 1 byte into its buffer
    c = rung.launch(view, to_device(b), to_device(sa), to_device(sb))
    ref = PROBLEM.reference((a, b, sa, sb))
    assert timing.relative_error(to_host(c).astype(np.float64), ref) <= 1e-2


# Rung 21 carries its ring's stage and phase across a block's tiles, as rung 20 does: 140 tiles
# on fewer SMs gives some blocks two, and K = 384 (3 K tiles) starts a block's second tile at
# stage 3 of the ring of 4.
@pytest.mark.skipif(not ON_GPU, reason="needs a CUDA GPU")
@pytest.mark.parametrize("dtype", DTYPES)
def test_persistent_ring_across_tiles(dtype):
    rung = get_rung("gemm-fp8", "fp8")
    if rung.unavailable_reason():
        pytest.skip(rung.unavailable_reason())
    out, ref = _run(rung, (128 * 140, 256, 384), dtype, seed=11)
    assert np.all(np.isfinite(out))
    assert timing.relative_error(out, ref) <= PROBLEM.tolerance(dtype)


@pytest.mark.skipif(not ON_GPU, reason="needs a CUDA GPU")
def test_profile_child_launches_the_rung_with_a_bfloat16_c():
    # what `ladder profile gemm-fp8 fp8` runs under Nsight Compute: C is the problem's output
    # dtype (bfloat16), not the inputs' (the launcher refuses an 8-bit C)
    import subprocess
    import sys

    rung = get_rung("gemm-fp8", "fp8")
    if rung.unavailable_reason():
        pytest.skip(rung.unavailable_reason())
    argv = ["profile", "gemm-fp8", "fp8", "128x256x128", "float8_e4m3fn"]
    done = subprocess.run(
        [sys.executable, "-m", "ladder", "_child", *argv], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]
