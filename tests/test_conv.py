"""Every convolution rung against float64, and the errors every launcher gives for bad input.

Parametrized over the registry: a rung added to ladder/conv is tested here without edits. On a
GPU the shapes are the problem's test sizes (C=1, M=1, K=1, K=5, H != W, B=1, and a few images
of each canonical layer); in the simulator, smaller shapes of the same kinds.
"""

import numpy as np
import pytest
from conftest import ON_GPU, gpu_only, quick_unless, run_poisoned, swept

from ladder.conv.layers import CONV1, CONV2
from ladder.conv.problem import SIMULATOR_SIZES, conv_numpy
from ladder.core import timing
from ladder.core.dtypes import resolve, to_device, to_host
from ladder.core.rung import get_problem, get_rung, rungs

PROBLEM = get_problem("conv")
DEVICE_RUNGS = [r for r in rungs("conv") if not r.on_cpu and r.unavailable_reason() is None]


def _cases():
    for rung in rungs("conv"):
        if rung.unavailable_reason() is not None or not swept(rung):
            continue
        for dtype in rung.dtypes:
            sizes = PROBLEM.test_sizes(dtype) if ON_GPU else SIMULATOR_SIZES
            for size in sizes:  # the fast path (-m "not slow") keeps the first two sizes
                slow = quick_unless(size in SIMULATOR_SIZES[2:])
                yield pytest.param(rung, dtype, size, id=f"{rung.name}-{dtype}-{size}", marks=slow)


def _run(rung, inputs, dtype, **kwargs):
    shape = PROBLEM.reference(inputs).shape
    if rung.on_cpu:
        out = np.full(shape, np.nan, resolve(dtype))
        assert rung.launch(*inputs, out) is out
        return out
    return run_poisoned(rung, inputs, shape, dtype, **kwargs)


@pytest.mark.parametrize(("rung", "dtype", "size"), list(_cases()))
def test_conv_rung_matches_float64_reference(rung, dtype, size):
    inputs = PROBLEM.make_inputs(size, dtype, seed=sum(size))
    out = _run(rung, inputs, dtype)
    assert out.dtype == resolve(dtype)
    assert out.shape == PROBLEM.output_shape(size)
    assert np.all(np.isfinite(out)), "an element was never written (still NaN)"
    assert timing.relative_error(out, PROBLEM.reference(inputs)) <= PROBLEM.tolerance(dtype)


def test_reference_is_the_definition():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 6, 5))
    w = rng.standard_normal((4, 3, 3, 3))
    y = conv_numpy(x, w)
    assert y.shape == (2, 4, 4, 3)
    expect = sum(
        x[1, c, 2 + p, 1 + q] * w[3, c, p, q] for c in range(3) for p in range(3) for q in range(3)
    )
    assert y[1, 3, 2, 1] == pytest.approx(expect)


def test_problem_figures_for_the_layers():
    assert PROBLEM.output_shape(CONV1) == (10000, 4, 80, 80)
    assert PROBLEM.output_shape(CONV2) == (10000, 16, 34, 34)
    assert PROBLEM.flops(CONV2) == 2.0 * 10000 * 16 * 4 * 49 * 34 * 34
    ceilings = {"copy_tbps": 4.0, "fp32_peak_tflops": 60.0, "cublas_fp16_tflops": 700.0}
    memory = PROBLEM.min_bytes(CONV1, "float32") / 4e12 * 1e3
    arithmetic = PROBLEM.flops(CONV1) / 60e12 * 1e3
    assert PROBLEM.floor_ms(CONV1, "float32", ceilings, False) == pytest.approx(arithmetic)
    assert memory < arithmetic
    assert PROBLEM.floor_ms(CONV1, "float16", ceilings, True) == pytest.approx(memory / 2)
    assert PROBLEM.floor_ms(CONV1, "float32", {}, False) is None


@pytest.mark.parametrize("rung", DEVICE_RUNGS, ids=lambda r: r.name)
def test_bad_input_gives_clear_errors(rung):
    dtype = rung.dtypes[0]
    x, w = PROBLEM.make_inputs((1, 2, 3, 6, 5, 3), dtype)
    dx, dw = to_device(x), to_device(w)
    with pytest.raises(TypeError, match="host array"):
        rung.launch(x, dw)
    with pytest.raises(ValueError, match="input channels"):
        rung.launch(dx, to_device(np.zeros((3, 1, 3, 3), x.dtype)))
    with pytest.raises(ValueError, match="does not fit"):
        rung.launch(dx, to_device(np.zeros((3, 2, 6, 6), x.dtype)))
    with pytest.raises(ValueError, match="4-D"):
        rung.launch(to_device(x[0]), dw)
    with pytest.raises(TypeError, match="like x"):
        rung.launch(dx, to_device(w.astype(np.float64)))
    with pytest.raises(ValueError, match="out must have shape"):
        rung.launch(dx, dw, to_device(np.zeros((1, 3, 4, 4), x.dtype)))
    other = "float16" if dtype == "float32" else "float32"
    if other not in rung.dtypes:
        with pytest.raises(TypeError, match=f"got {other}"):
            rung.launch(to_device(x.astype(other)), to_device(w.astype(other)))


def test_cpu_rung_refuses_device_arrays_and_mixed_dtypes():
    cpu = get_rung("conv", "cpu-numpy")
    x, w = PROBLEM.make_inputs((1, 1, 2, 5, 5, 3), "float32")
    with pytest.raises(TypeError, match="NumPy"):
        cpu.launch(to_device(x), w)
    with pytest.raises(TypeError, match="must both be float32"):
        cpu.launch(x, w.astype(np.float16))


@pytest.mark.parametrize("name", ["naive", "register-tiled"])
def test_launch_on_a_stream(name):
    from numba import cuda

    rung = get_rung("conv", name)
    x, w = PROBLEM.make_inputs((2, 2, 3, 7, 9, 3), "float32", seed=3)
    stream = cuda.stream()
    out = rung.launch(to_device(x), to_device(w), stream=stream)
    stream.synchronize()
    assert timing.relative_error(to_host(out), PROBLEM.reference((x, w))) <= 1e-5


def test_register_tiled_configs_are_checked():
    from ladder.conv.r05_register_tiled import Config, choose

    with pytest.raises(ValueError, match="local memory"):
        Config(mg=16, th=4, tw=2)
    with pytest.raises(ValueError, match="1024"):
        Config(bw=64, bh=32, tw=1, th=1)
    assert choose((1, 3, 5, 200, 200, 60)).fits(60)
    with pytest.raises(ValueError, match="rungs 1, 3 and 4"):
        choose((1, 1, 1, 300, 300, 200))
    config = choose(CONV2)
    assert config.outputs <= 64 and config.fits(7)


def test_constant_memory_rung_refuses_weights_beyond_64_kb():
    rung = get_rung("conv", "shared-tiles")
    x = to_device(np.zeros((1, 64, 9, 9), np.float32))
    w = to_device(np.zeros((32, 64, 3, 3), np.float32))  # 73,728 bytes
    with pytest.raises(ValueError, match="constant memory"):
        rung.launch(x, w)


def test_sweep_times_candidates_fastest_first():
    from ladder.conv.r05_register_tiled import Config
    from ladder.conv.r06_tuned import sweep

    found = sweep((2, 1, 3, 9, 11, 5))
    assert found and all(r["ok"] for r in found), found
    Config(**found[0]["config"])  # a record rebuilds its config


@gpu_only
@pytest.mark.parametrize("rung", [r for r in DEVICE_RUNGS if swept(r)], ids=lambda r: r.name)
def test_more_images_than_one_grid_launch(rung):
    size = (70000, 1, 1, 3, 3, 3)  # the grid's z dimension holds 65,535 images
    dtype = rung.dtypes[0]
    inputs = PROBLEM.make_inputs(size, dtype, seed=7)
    out = _run(rung, inputs, dtype)
    assert timing.relative_error(out, PROBLEM.reference(inputs)) <= PROBLEM.tolerance(dtype)


@gpu_only
def test_float64_reference_on_the_gpu_matches_numpy():
    from ladder.conv.problem import conv_float64_gpu

    rng = np.random.default_rng(5)
    x = rng.standard_normal((7, 3, 20, 17))
    w = rng.standard_normal((5, 3, 5, 5))
    np.testing.assert_allclose(conv_float64_gpu(x, w), conv_numpy(x, w), rtol=1e-12, atol=1e-12)


def test_layer_table_sums_layers_and_compares_with_cudnn(tmp_path):
    from ladder.conv import summary

    def run(rung, shape, ms, dtype="float32", reference=False):
        return {
            "problem": "conv", "rung": rung, "number": 99 if reference else 5, "dtype": dtype,
            "shape": list(shape), "ok": True, "median_ms": ms, "reference": reference,
        }  # fmt: skip

    runs = [
        run("register-tiled", CONV1, 1.0),
        run("register-tiled", CONV2, 2.0),
        run("cudnn", CONV1, 10.0, reference=True),
        run("cudnn", CONV2, 8.0, reference=True),
        run("naive", CONV1, 5.0),  # one layer only: no row
    ]
    ceilings = {"copy_tbps": 4.0, "fp32_peak_tflops": 60.0, "cublas_fp16_tflops": 700.0}
    rows = summary.layer_table(runs, ceilings)
    assert [r["rung"] for r in rows] == ["register-tiled", "cudnn"]
    tiled = rows[0]
    assert tiled["sum_ms"] == 3.0 and tiled["x_cudnn_fp32"] == pytest.approx(6.0)
    assert tiled["conv1_x_floor"] == pytest.approx(
        1.0 / PROBLEM.floor_ms(CONV1, "float32", ceilings, False)
    )
    assert "| 5 | register-tiled | float32 | 1.000 | 2.000 | 3.000 | 6.00 |" in summary.markdown(
        rows
    )
    summary.plot(rows, str(tmp_path / "layers.png"))
    assert (tmp_path / "layers.png").stat().st_size > 0


def test_every_cuda_cpp_rung_is_placed_against_the_tensor_core_floor():
    for r in rungs("conv", references=False):
        assert (r.units_for("float16") == "tensor") == ("cupy" in r.needs), r.name
    for name in ("cudnn", "im2col-cublas"):  # libraries: tensor cores in FP16 only
        library = get_rung("conv", name)
        assert (library.units_for("float16"), library.units_for("float32")) == ("tensor", "fp32")


def test_readme_summary_is_the_layer_table():
    def run(rung, dtype, size, ms, reference=False):
        return {
            "problem": "conv", "rung": rung, "number": 5, "reference": reference,
            "dtype": dtype, "shape": list(size), "ok": True, "median_ms": ms,
        }  # fmt: skip

    runs = [run("register-tiled", "float32", CONV1, 1.0)]
    runs += [run("register-tiled", "float32", CONV2, 2.0)]
    runs += [run("cudnn", "float32", CONV1, 4.0, True), run("cudnn", "float32", CONV2, 8.0, True)]
    text = PROBLEM.readme_summary(runs, {"copy_tbps": 4.0, "fp32_peak_tflops": 60.0})
    assert "| 5 | register-tiled | float32 | 1.000 | 2.000 | 3.000 | 4.00 |" in text
    assert PROBLEM.readme_summary([], {}) == ""
