"""The library rows in each configuration: registry facts, the torch.compile cache, the SDPA
backend names and refusals, the prepared cuDNN rows (the holder, its poisoning), and the conv
summary's best-library column.

Without a GPU the PyTorch rows cannot be measured (they need CUDA), but their launchers run on
CPU tensors over the simulator's memory when called directly, so most of this runs anywhere;
``torch.compile`` there uses the "eager" backend (Dynamo's graph, no Inductor), which tests the
cache, not the generated code. On a GPU the compiled rows run through Inductor at a few odd
sizes (the registry-parametrized tests leave them out of their sweeps: ``conftest.swept``).
"""

import dataclasses
import warnings

import numpy as np
import pytest
from conftest import ON_GPU, gpu_only, run_poisoned

from ladder.conv.layers import CONV1, CONV2
from ladder.core import compiled, timing
from ladder.core.dtypes import resolve, to_device, to_host
from ladder.core.rung import Holder, NotApplicable, Prepared, Rung, get_problem, get_rung, rungs
from ladder.core.torch_views import read_back

torch = pytest.importorskip("torch", reason="the library rows need PyTorch")

# ---- a library's output kept in a Holder --------------------------------------------------------


def test_poison_empties_a_holder_and_an_empty_one_reads_back_nan():
    held = Holder()
    held.value = torch.ones(3)
    timing.poison(held)
    assert held.value is None
    out = to_device(np.zeros(3, np.float32))
    copy = read_back(held, out)
    copy()
    assert np.all(np.isnan(to_host(out)))
    held.value = torch.full((3,), 2.0)
    copy()
    assert np.all(to_host(out) == 2.0)


def _stale_holder_rung(store_once: bool) -> Rung:
    """A gemm 'library' whose result lives in a Holder: it stores a right answer on every call,
    or (``store_once``) on the first call only, after which a stale result must not pass."""
    calls = []

    def prepare(args, out):
        held = Holder()
        return Prepared(args, held, read_back(held, out))

    def launch(a, b, held):
        calls.append(1)
        if len(calls) == 1 or not store_once:
            host = [to_host(x).astype(np.float64) for x in (a, b)]
            held.value = torch.from_numpy((host[0] @ host[1]).astype(np.float32))

    return Rung("gemm", 97, "held", "t", ("float32",), launch, doc="t", prepare=prepare)


@pytest.mark.skipif(ON_GPU, reason="the simulator's path: a GPU run checks a fresh call anyway")
def test_a_holder_left_stale_fails_the_check_after_timing():
    case = timing.prepare(get_problem("gemm"), (5, 6, 7))
    assert timing.measure(case, _stale_holder_rung(store_once=False)).ok
    m = timing.measure(case, _stale_holder_rung(store_once=True))
    assert m.status is timing.Status.FAILED and "after timing" in m.error


# ---- the torch.compile cache --------------------------------------------------------------------


@pytest.fixture
def eager(monkeypatch):
    """torch.compile with Dynamo's "eager" backend and an empty cache, restored after."""
    monkeypatch.setattr(compiled, "BACKEND", "eager")
    monkeypatch.setattr(compiled, "_COMPILED", {})


def _double(x, out):
    out.copy_(x * 2)


def test_compile_cache_is_keyed_by_shape_strides_dtype_and_alignment(monkeypatch):
    graphs = []

    def counting(gm, example_inputs):
        graphs.append(tuple(t.shape for t in example_inputs))
        return gm.forward

    monkeypatch.setattr(compiled, "BACKEND", counting)
    monkeypatch.setattr(compiled, "_COMPILED", {})

    def run(x):
        out = torch.full(x.shape, float("nan"), dtype=x.dtype)
        compiled.run(_double, x, out)
        assert torch.equal(out, x * 2)

    run(torch.ones(4, 5))
    run(torch.ones(4, 5))  # same signature: no new compile
    assert len(graphs) == compiled.cached() == 1
    run(torch.ones(5, 4).t())  # other strides
    run(torch.ones(4, 5, dtype=torch.float16))  # other dtype
    run(torch.ones(21)[1:])  # the same shape as below, 4 bytes off alignment
    run(torch.ones(20))
    assert len(graphs) == compiled.cached() == 5
    # many shapes, past Dynamo's recompile_limit (8 per code object): every one compiled
    for n in range(1, 13):
        run(torch.ones(n, 3))
    assert len(graphs) == compiled.cached() == 17


# ---- the cuDNN rows, prepared and called directly -----------------------------------------------


BOTH = ("float32", "float16")
ALL = ("float32", "float16", "bfloat16")


def _conv_inputs(dtype, size=(2, 3, 4, 9, 11, 5)):
    problem = get_problem("conv")
    inputs = problem.make_inputs(size, dtype, seed=3)
    return problem, inputs, problem.reference(inputs)


def _as_run(library):
    """The library as the harness sees it where it can run (here: the simulator's CPU tensors)."""
    return dataclasses.replace(library, needs=frozenset({"numba"})) if not ON_GPU else library


CONV_TORCH = [r for r in rungs("conv") if r.reference and r.needs <= {"torch", "triton"}]


@pytest.mark.parametrize("library", CONV_TORCH, ids=lambda r: r.name)
@pytest.mark.parametrize("dtype", BOTH)
def test_conv_library_rows_measure_and_say_their_configuration(library, dtype, eager):
    if dtype not in library.dtypes or (ON_GPU and library.unavailable_reason()):
        pytest.skip(f"{library.name} does not run {dtype} here")
    problem, _, _ = _conv_inputs(dtype)
    case = timing.prepare(problem, (2, 3, 4, 9, 11, 5), dtype, seed=3)
    m = timing.measure(case, _as_run(library), repeats=1)
    assert m.ok, m.error
    if library.describe is not None:
        assert m.config.startswith("cuDNN fp"), m.config
        assert ("channels_last" in m.config) == ("channels-last" in library.name)
        assert ("benchmark" in m.config) == ("benchmark" in library.name or "fp32" in library.name)


@pytest.mark.parametrize("library", CONV_TORCH, ids=lambda r: r.name)
def test_conv_library_rows_take_the_problems_plain_arrays(library, eager):
    if ON_GPU and library.unavailable_reason():
        pytest.skip(library.unavailable_reason())
    dtype = library.dtypes[-1]
    problem, inputs, ref = _conv_inputs(dtype)
    out = run_poisoned(library, inputs, ref.shape, dtype)
    assert timing.relative_error(out, ref) <= problem.tolerance(dtype)


def test_cudnn_rows_keep_their_input_in_the_configuration_and_name_it():
    for name in (
        "cudnn",
        "cudnn-benchmark",
        "cudnn-channels-last",
        "cudnn-channels-last-benchmark",
    ):
        library = get_rung("conv", name)
        assert library.prepare is not None and library.describe is not None, name
        assert (library.units_for("float32"), library.units_for("float16")) == ("fp32", "tensor")
    fp32 = get_rung("conv", "cudnn-fp32")
    assert fp32.units_for("float16") == "fp32" and fp32.prepare is None


# ---- the conv summary's best library -----------------------------------------------------------


def test_layer_table_compares_with_the_best_library_of_the_same_dtype(tmp_path):
    from ladder.conv import summary

    def run(rung, shape, ms, dtype, reference=True, peer=False):
        return {
            "problem": "conv", "rung": rung, "number": 95 if reference else 13, "dtype": dtype,
            "shape": list(shape), "ok": True, "median_ms": ms, "reference": reference,
            "peer": peer,
        }  # fmt: skip

    runs = []
    for name, dtype, one, two, reference, peer in [
        ("cudnn", "float32", 12.0, 7.0, True, False),
        ("cudnn-channels-last-benchmark", "float32", 10.0, 6.0, True, False),
        ("cudnn", "float16", 60.0, 2.4, True, False),
        ("cudnn-channels-last-benchmark", "float16", 60.0, 1.0, True, False),
        ("cudnn-fp32", "float16", 11.0, 7.0, True, False),  # the best float16 sum: 18
        ("triton", "float16", 1.0, 1.0, True, True),  # a peer: never the library
        ("filters-on-m", "float16", 6.0, 3.0, False, False),
    ]:
        runs += [run(name, CONV1, one, dtype, reference, peer)]
        runs += [run(name, CONV2, two, dtype, reference, peer)]
    rows = {(r["rung"], r["dtype"]): r for r in summary.layer_table(runs, {})}
    rung = rows[("filters-on-m", "float16")]
    assert rung["x_cudnn_fp32"] == pytest.approx(19.0 / 9.0)
    assert rung["best_library"] == "cudnn-fp32"
    assert rung["x_best_library"] == pytest.approx(18.0 / 9.0)
    fp32 = rows[("cudnn", "float32")]
    assert fp32["best_library"] == "cudnn-channels-last-benchmark"
    assert fp32["x_best_library"] == pytest.approx(16.0 / 19.0)
    text = summary.markdown(list(rows.values()))
    assert "| × cuDNN FP32 | × best library (same dtype) |" in text
    assert "| 13 | filters-on-m | float16 | 6.000 | 3.000 | 9.000 | 2.11 | 2.00 |" in text
    assert "float16: cudnn-fp32, 18.000 ms; float32: cudnn-channels-last-benchmark" in text
    summary.plot(list(rows.values()), str(tmp_path / "layers.png"))
    assert (tmp_path / "layers.png").stat().st_size > 0


# ---- SDPA: the default backend's name, pinned backends' refusals --------------------------------


def test_sdpa_backend_names(monkeypatch):
    from torch.nn import attention

    from ladder.attention.references import backend_name

    monkeypatch.setattr(attention, "current_flash_attention_impl", lambda: None, raising=False)
    backends = attention.SDPBackend
    assert backend_name(backends.CUDNN_ATTENTION.value) == "cuDNN"
    assert backend_name(backends.FLASH_ATTENTION.value) == "FlashAttention-2"
    assert backend_name(backends.EFFICIENT_ATTENTION.value) == "memory-efficient"
    assert backend_name(backends.MATH.value) == "math"
    assert backend_name(99) == "backend 99"
    monkeypatch.setattr(attention, "current_flash_attention_impl", lambda: "FA3")
    assert backend_name(backends.FLASH_ATTENTION.value) == "FlashAttention (FA3)"


def _attention_arrays(size=(1, 4, 2, 17, 16), dtype="float32"):
    problem = get_problem("attention")
    inputs = problem.make_inputs(size, dtype, seed=1)
    out = to_device(np.full(inputs[0].shape, np.nan, resolve(dtype)))
    return problem, inputs, [to_device(x) for x in inputs], out


@pytest.mark.parametrize("size", [(1, 2, 2, 17, 16), (1, 4, 2, 17, 16)], ids=["mha", "gqa"])
def test_sdpa_records_the_backend_the_default_call_picks(size, monkeypatch):
    import torch

    library = get_rung("attention", "sdpa")
    _, _, arrays, out = _attention_arrays(size)
    assert library.describe(tuple(arrays), out).startswith("default picks ")
    monkeypatch.delattr(torch, "_fused_sdp_choice", raising=False)
    assert "does not say" in library.describe(tuple(arrays), out)


def test_a_pinned_backend_that_refuses_is_not_applicable(monkeypatch):
    from ladder.attention import references

    def refuses(*args, **kwargs):
        warnings.warn("Flash attention kernel not used because: head dim 17", stacklevel=1)
        raise RuntimeError("No available kernel. Aborting execution.")

    def out_of_memory(*args, **kwargs):
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 64 GiB")

    def breaks(*args, **kwargs):
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    library = get_rung("attention", "sdpa-efficient")
    _, _, arrays, out = _attention_arrays()
    monkeypatch.setattr(references, "sdpa_tensors", refuses)
    with pytest.raises(NotApplicable, match=r"memory-efficient refuses this input: Flash .*dim 17"):
        library.launch(*arrays, out)
    monkeypatch.setattr(references, "sdpa_tensors", out_of_memory)
    with pytest.raises(MemoryError, match="64 GiB"):
        library.launch(*arrays, out)
    monkeypatch.setattr(references, "sdpa_tensors", breaks)
    with pytest.raises(RuntimeError, match="illegal memory access"):
        library.launch(*arrays, out)
    cudnn_error = RuntimeError("cuDNN Frontend error: no valid execution plan for this graph")
    assert references.refused("CUDNN_ATTENTION", cudnn_error)
    assert not references.refused("EFFICIENT_ATTENTION", cudnn_error)
    assert not references.refused("CUDNN_ATTENTION", RuntimeError("CUDA error: cudnn kernel"))
    # the harness reports the refusal as unavailable, with the reason
    monkeypatch.setattr(references, "sdpa_tensors", refuses)
    case = timing.prepare(get_problem("attention"), (1, 2, 1, 17, 16))
    m = timing.measure(case, _as_run(library))
    assert m.status is timing.Status.UNAVAILABLE and "head dim 17" in m.error


ATTENTION_TORCH = [
    r
    for name in ("attention", "attention-causal")
    for r in rungs(name)
    if r.reference and r.needs <= {"torch", "triton"}
]


@pytest.mark.skipif(ON_GPU, reason="on a GPU tests/test_attention.py runs every library row")
@pytest.mark.parametrize("library", ATTENTION_TORCH, ids=lambda r: r.key)
def test_attention_library_rows_on_cpu_tensors(library, eager):
    problem = get_problem(library.problem)
    for dtype in library.dtypes:
        _, inputs, arrays, out = _attention_arrays((1, 4, 2, 17, 16), dtype)
        try:
            assert library.launch(*arrays, out) is out
        except NotApplicable as err:  # PyTorch's CPU build has no cuDNN or efficient kernel
            assert library.name in ("sdpa-cudnn", "sdpa-efficient", "sdpa-flash"), err
            continue
        ref = problem.reference(inputs)
        assert timing.relative_error(to_host(out), ref) <= problem.tolerance(dtype), dtype


@gpu_only
def test_sdpa_names_a_backend_on_the_gpu():
    case = timing.prepare(get_problem("attention"), (1, 2, 2, 130, 64), "float16")
    m = timing.measure(case, get_rung("attention", "sdpa"), repeats=2)
    assert m.ok and m.config.startswith("default picks "), (m.error, m.config)
    assert "not reported" not in m.config


# ---- cuBLAS through PyTorch ---------------------------------------------------------------------


@pytest.mark.skipif(ON_GPU, reason="on a GPU tests/test_gemm.py runs it at every size")
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_torch_matmul_writes_the_given_output(dtype):
    library = get_rung("gemm", "torch-matmul")
    problem = get_problem("gemm")
    for size in [(17, 33, 65), (3, 5, 0)]:
        a, b = problem.make_inputs(size, dtype, seed=2)
        out = to_device(np.full(size[:2], np.nan, resolve(dtype)))
        assert library.launch(to_device(a), to_device(b), out) is out
        ref = problem.reference((a, b))
        assert timing.relative_error(to_host(out), ref) <= problem.tolerance(dtype), size
    assert not torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction
    assert not torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction


# ---- the torch.compile rows ---------------------------------------------------------------------


def test_compiled_rows_write_the_output_in_place(eager):
    problem = get_problem("softmax")
    (x,) = problem.make_inputs((3, 65), "float32", seed=1)
    out = to_device(np.full(x.shape, np.nan, np.float32))
    library = get_rung("softmax", "torch-compile")
    if ON_GPU:
        pytest.skip("on a GPU: test_compiled_rows_at_odd_sizes")
    assert library.launch(to_device(x), out) is out
    assert timing.relative_error(to_host(out), problem.reference((x,))) <= 1e-5


COMPILED_SIZES = {  # two odd sizes per problem, each with one of its dtypes
    "elementwise": [(1000, 33), (3, 50000)],
    "softmax": [(1000, 33), (65, 1030)],
    "layernorm": [(1000, 33), (65, 1030)],
    "gemm-epilogue": [(17, 33, 65), (1, 130, 7)],
    "attention": [(1, 2, 1, 33, 17), (2, 2, 2, 200, 80)],
    "attention-causal": [(1, 4, 2, 130, 64), (1, 1, 1, 1, 16)],
    "conv": [(2, 1, 4, 13, 17, 5), (7, 6, 9, 19, 23, 5)],
}


def _compiled_cases():
    for name, sizes in COMPILED_SIZES.items():
        library = get_rung(name, "torch-compile")
        for i, size in enumerate(sizes):
            dtype = library.dtypes[i % len(library.dtypes)]
            yield pytest.param(library, dtype, size, id=f"{name}-{dtype}-{size}")


@gpu_only
@pytest.mark.parametrize(("library", "dtype", "size"), list(_compiled_cases()))
def test_compiled_rows_at_odd_sizes(library, dtype, size):
    if library.unavailable_reason():
        pytest.skip(library.unavailable_reason())
    problem = get_problem(library.problem)
    inputs = problem.make_inputs(size, dtype, seed=sum(size))
    ref = problem.reference(inputs)
    arrays = [to_device(x) for x in inputs]
    out = to_device(np.full(ref.shape, np.nan, resolve(dtype)))
    assert library.launch(*arrays, out) is out
    assert timing.relative_error(to_host(out), ref) <= problem.tolerance(dtype)
    before = compiled.cached()
    timing.poison(out)
    library.launch(*arrays, out)  # the second call reuses the compiled function
    assert compiled.cached() == before
    assert timing.relative_error(to_host(out), ref) <= problem.tolerance(dtype)


# ---- the registry ------------------------------------------------------------------------------


LIBRARIES = {
    "conv": {
        "cudnn": BOTH,
        "cudnn-benchmark": BOTH,
        "cudnn-channels-last": BOTH,
        "cudnn-channels-last-benchmark": BOTH,
        "cudnn-fp32": ("float16",),
        "torch-compile": BOTH,
        "im2col-cublas": BOTH,
    },
    "attention": {
        "sdpa": ALL,
        "sdpa-cudnn": ("float16", "bfloat16"),
        "sdpa-flash": ("float16", "bfloat16"),
        "sdpa-efficient": ALL,
        "sdpa-math": ALL,
        "torch-materialized": ALL,
        "torch-compile": ALL,
    },
    "gemm": {
        "cublas": ALL,
        "torch-matmul": ALL,
    },
    "elementwise": {"cupy-elementwise": BOTH, "torch-compile": BOTH},
    "softmax": {"torch-softmax": BOTH, "torch-compile": BOTH},
    "layernorm": {"torch-layer-norm": ("float32",), "torch-compile": ("float32",)},
    "gemm-epilogue": {"cublas+cupy": BOTH, "torch-compile": ALL},
}
LIBRARIES["attention-causal"] = LIBRARIES["attention"]


@pytest.mark.parametrize("problem", sorted(LIBRARIES))
def test_every_configuration_is_a_library_with_its_dtypes(problem):
    found = {r.name: r for r in rungs(problem) if r.reference and not r.peer}
    assert set(found) == set(LIBRARIES[problem])
    for name, dtypes in LIBRARIES[problem].items():
        library = found[name]
        assert library.dtypes == dtypes, name
        assert library.number >= 90 and library.summary(), name
        if name == "torch-compile":
            assert {"torch", "triton"} <= library.needs
