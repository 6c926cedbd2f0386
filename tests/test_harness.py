"""The shared harness: error measure, poisoning, validation before and after timing, reports."""

import json

import numpy as np
import pytest
from conftest import ON_GPU, gpu_only
from numba import cuda

from ladder import cli
from ladder.core import derived, device, render, report, timing
from ladder.core.rung import (
    NotApplicable,
    Prepared,
    Rung,
    get_problem,
    get_rung,
    problems,
    rung,
    rungs,
)

PROBLEM = get_problem("gemm")


def test_relative_error_is_infinite_on_nan():
    ref = np.ones((3, 3))
    out = ref.copy()
    out[1, 1] = np.nan
    assert timing.relative_error(out, ref) == float("inf")
    assert timing.relative_error(ref, ref) == 0.0


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_the_device_check_is_the_hosts_chunk_by_chunk(dtype, monkeypatch):
    """``device_relative_error``'s norms, chunk by chunk (PyTorch on the CPU here, the
    simulator's arrays): the host's relative error to float64 rounding, infinite on a NaN."""
    torch = pytest.importorskip("torch")
    from ladder.core.dtypes import resolve, to_device

    rng = np.random.default_rng(2)
    ref = rng.standard_normal((37, 101))
    host = (ref + 1e-3 * rng.standard_normal(ref.shape)).astype(resolve(dtype))
    monkeypatch.setattr(timing, "CHECK_CHUNK", 7)  # many chunks, the last one short
    want = torch.from_numpy(ref).to("cuda" if ON_GPU else "cpu")
    found = timing.device_relative_error(to_device(host), want)
    assert found == pytest.approx(timing.relative_error(host, ref), rel=1e-12)
    host[30, 100] = np.nan
    assert timing.device_relative_error(to_device(host), want) == float("inf")


@gpu_only
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float8_e4m3fn"])
def test_the_gpu_check_is_the_hosts(dtype, monkeypatch):
    """A large output is checked on the GPU (PyTorch, float64): the same relative error as
    the host's to float64 rounding, infinite on a NaN, and what ``measure`` uses from
    DEVICE_CHECK_FROM elements on (here every size)."""
    pytest.importorskip("torch")
    from ladder.core.dtypes import resolve, to_device

    rng = np.random.default_rng(1)
    ref = rng.standard_normal((37, 1001))
    host = (ref + 1e-3 * rng.standard_normal(ref.shape)).astype(resolve(dtype))
    case = timing.Case(PROBLEM, (37, 1001, 1), dtype, 0, (), ref)
    monkeypatch.setattr(timing, "DEVICE_CHECK_FROM", 1)
    on_gpu = case.error_of(to_device(host))
    assert case._device_ref is not None  # the GPU's path, not the host's
    assert on_gpu == pytest.approx(timing.relative_error(host, ref), rel=1e-9)
    if dtype != "float8_e4m3fn":  # e4m3fn has no infinity and saturates: NaN only as 0x7F
        host[3, 5] = np.nan
        assert case.error_of(to_device(host)) == float("inf")


def _fake_rung(launch, name="fake"):
    return Rung("gemm", 50, name, "test double", ("float32",), launch, doc="test double")


def test_measure_catches_an_unwritten_output():
    def writes_nothing(a, b, c):
        return c

    m = timing.measure(timing.prepare(PROBLEM, (5, 6, 7)), _fake_rung(writes_nothing))
    assert not m.ok and "wrong answer" in m.error and m.samples_ms == []
    assert m.status is timing.Status.FAILED and m.to_dict()["status"] == "failed"


def test_measure_status_of_a_launcher_that_raises_or_does_not_fit():
    def raises(a, b, c):
        raise RuntimeError("boom")

    def does_not_fit(a, b, c):
        raise MemoryError("the scores need 275 GB")

    case = timing.prepare(PROBLEM, (5, 6, 7))
    m = timing.measure(case, _fake_rung(raises))
    assert m.status is timing.Status.FAILED and "boom" in m.error
    m = timing.measure(case, _fake_rung(does_not_fit))
    assert m.status is timing.Status.UNAVAILABLE and "275 GB" in m.error


def test_measure_status_of_a_rung_that_cannot_run_here():
    gpu_only = Rung("gemm", 51, "gpu-only", "t", ("float32",), print, frozenset({"cupy"}), doc="t")
    case = timing.prepare(PROBLEM, (5, 6, 7))
    if gpu_only.unavailable_reason() is not None:
        m = timing.measure(case, gpu_only)
        assert m.status is timing.Status.UNAVAILABLE and m.error == gpu_only.unavailable_reason()
    m = timing.measure(timing.prepare(PROBLEM, (5, 6, 7), "float16"), _fake_rung(print))
    assert m.status is timing.Status.UNAVAILABLE and "does not support float16" in m.error
    assert m.to_dict()["status"] == "unavailable" and not m.to_dict()["ok"]


def test_measure_runs_a_prepared_library_on_its_own_form_and_checks_what_it_reads_back():
    """Rung.prepare: made once, the launcher timed on the prepared arrays, read_back before
    every check; a read_back that stops writing is caught after timing, like any rung."""
    good = get_rung("gemm", "coalesced")
    made, calls = [], []

    def prepare(args, out):
        held = cuda.device_array(out.shape, out.dtype)  # the library's own output buffer
        made.append(held)

        def read_back():
            calls.append(1)
            if len(calls) == 1:  # the first check only: later checks see the poison
                out.copy_to_device(held)

        return Prepared(args, held, read_back)

    def launch(a, b, c):
        assert c is made[0]  # timed on the prepared output, not the problem's
        return good.launch(a, b, c)

    fake = Rung("gemm", 50, "prepared", "t", ("float32",), launch, doc="t", prepare=prepare)
    m = timing.measure(timing.prepare(PROBLEM, (5, 6, 7)), fake)
    assert len(made) == 1 and m.rel_err <= 1e-5
    assert not m.ok and "after timing" in m.error  # the second check read nothing back


def test_measure_records_the_configuration_and_reports_not_applicable_as_unavailable():
    good = get_rung("gemm", "coalesced")

    def refuses(a, b, c):
        raise NotApplicable("this backend takes float16 only")

    def describe(args, out):
        return "flash"

    case = timing.prepare(PROBLEM, (5, 6, 7))
    m = timing.measure(case, _fake_rung(refuses))
    assert m.status is timing.Status.UNAVAILABLE and "float16 only" in m.error
    fake = Rung("gemm", 50, "d", "t", ("float32",), good.launch, doc="t", describe=describe)
    m = timing.measure(case, fake)
    assert m.ok and m.config == "flash" and m.to_dict()["config"] == "flash"


def test_run_status_of_records_written_before_runs_had_one():
    def old(ok, error):
        return {"ok": ok, "error": error}

    assert timing.run_status(old(True, None)) is timing.Status.OK
    assert timing.run_status(old(False, "needs CuPy")) is timing.Status.UNAVAILABLE
    assert timing.run_status(old(False, "does not support float16")) is timing.Status.UNAVAILABLE
    assert timing.run_status(old(False, "AttentionMemoryError: ...")) is timing.Status.UNAVAILABLE
    assert timing.run_status(old(False, "wrong answer: ...")) is timing.Status.FAILED
    assert timing.run_status({"status": "unavailable", "ok": False}) is timing.Status.UNAVAILABLE


def test_measure_catches_a_rung_wrong_only_after_the_first_run():
    calls = []
    good = get_rung("gemm", "coalesced")

    def right_once(a, b, c):
        calls.append(1)
        if len(calls) == 1:
            return good.launch(a, b, c)
        return c  # later runs write nothing: the poisoned output must be caught

    m = timing.measure(timing.prepare(PROBLEM, (5, 6, 7)), _fake_rung(right_once))
    assert not m.ok and "after timing" in m.error


def test_measure_reports_simulator_times_as_simulated():
    m = timing.measure(timing.prepare(PROBLEM, (5, 6, 7)), get_rung("gemm", "naive"))
    assert m.ok and m.rel_err <= 1e-5 and m.rel_err_after <= 1e-5
    assert m.status is timing.Status.OK and m.to_dict()["status"] == "ok"
    assert m.simulated == device.simulator()
    assert m.median_ms is not None and m.min_ms <= m.median_ms <= m.max_ms
    assert m.flops == 2 * 5 * 6 * 7
    # the head start is written with every run: none where no CUDA events timed it
    assert (m.to_dict()["head_start_us"] is None) == m.simulated


def test_poison_sets_every_element_to_nan():
    out = cuda.to_device(np.zeros((3, 4), np.float32))
    timing.poison(out)
    assert np.all(np.isnan(out.copy_to_host()))


def test_registry_is_ordered_and_documented():
    found = rungs("gemm", references=False)
    numbers = [r.number for r in found]
    assert numbers == sorted(numbers) and len(set(numbers)) == len(numbers)
    assert numbers[:6] == [0, 1, 2, 3, 4, 5]
    for r in rungs("gemm"):
        assert r.summary(), f"{r.key} has no docstring"
    libraries = [r.name for r in rungs("gemm") if r.reference and not r.peer]
    assert libraries == ["cublas", "torch-matmul"]
    assert [r.name for r in rungs("gemm") if r.peer] == ["triton"]


def test_units_default_from_the_problem_and_name_tensor_cores():
    assert get_rung("gemm", "coalesced").units == "fp32"  # a compute-bound problem
    assert get_rung("softmax", "online").units == "memory"  # a memory-bound one
    assert get_rung("gemm", "wmma").units == "tensor"
    cublas = get_rung("gemm", "cublas")
    assert (cublas.units_for("float32"), cublas.units_for("float16")) == ("fp32", "tensor")
    with pytest.raises(ValueError, match="units 'int8'"):
        rung(name="x", title="x", problem="gemm", reference=True, units="int8")(lambda: None)
    assert "gemm/x" not in {r.key for r in rungs("gemm")}


def test_get_rung_by_name_or_number():
    assert get_rung("gemm", "r03").name == get_rung("gemm", "3").name == "shared-tiling"
    with pytest.raises(KeyError, match="unknown rung"):
        get_rung("gemm", "nope")


@pytest.mark.slow  # a whole bench of one problem, every rung
def test_cli_run_bench_plot(tmp_path, capsys, monkeypatch):
    if ON_GPU:  # the path, not the standard sizes (four minutes of GEMMs on an H200)
        monkeypatch.setattr(PROBLEM, "standard_sizes", lambda dtype: PROBLEM.test_sizes(dtype)[:1])
    out = tmp_path / "bench.json"
    assert cli.main(["bench", "--problems", "gemm", "--out", str(out), "--repeats", "1"]) == 0
    doc = report.read_results(out)
    for key in ("gpu", "driver", "versions", "date", "ceilings", "pieces", "runs"):
        assert key in doc
    measured = sorted({f"gemm/{r['dtype']}" for r in doc["runs"]})
    (piece,) = doc["pieces"]
    assert piece["measured"] == piece["conditions"]["measured"] == measured
    assert "samples" in piece["conditions"] and "throttle_reasons" in piece["conditions"]
    assert piece["seconds"] > 0 and piece["argv"][:3] == ["bench", "--problems", "gemm"]
    assert all(r["date"] == piece["date"] and r["commit"] == piece["commit"] for r in doc["runs"])
    assert {"cudnn", "triton"} <= set(doc["versions"])
    run = doc["runs"][0]
    for key in (
        "problem",
        "rung",
        "reference",
        "dtype",
        "shape",
        "median_ms",
        "min_ms",
        "max_ms",
        "tflops",
        "tbps",
        "rel_err",
    ):
        assert key in run
    assert {r["rung"] for r in doc["runs"]} == {r.name for r in rungs("gemm")}
    assert {r["status"] for r in doc["runs"]} <= {"ok", "unavailable"}
    assert all(r["ok"] == (r["status"] == "ok") for r in doc["runs"])
    png = tmp_path / "bench.png"
    assert cli.main(["plot", str(out), "--out", str(png)]) == 0
    assert png.stat().st_size > 10_000
    assert (tmp_path / "bench-gemm.png").stat().st_size > 10_000  # one figure per problem
    page = render.problem_page("gemm", {"bench": doc})
    assert "| 1 | naive |" in page and "## " + doc["gpu"] in page
    json.loads(out.read_text())
    assert cli.main(["plot", str(out), "--problems", "nope"]) == 2  # a problem not in the file


def test_best_rows_pick_the_fastest_passing_rung_and_the_library():
    def run(rung, ms, reference=False, ok=True, number=1):
        return {
            "problem": "p", "rung": rung, "number": number, "reference": reference,
            "dtype": "float32", "shape": [8], "ok": ok, "median_ms": ms,
        }  # fmt: skip

    doc = {
        "runs": [
            run("slow", 4.0, number=1),
            run("fast-but-wrong", 1.0, ok=False, number=2),
            run("fast", 2.0, number=3),
            run("lib-default", 5.0, reference=True, number=0),
            run("lib", 3.0, reference=True, number=0),
            run("lib-broken", 0.5, reference=True, ok=False, number=0),
        ]
    }
    (row,) = derived.best_rows(doc)
    # the library's best configuration that passed, whatever order the rows came in
    assert (row["rung"], row["library"]) == ("fast", "lib")
    assert row["vs_library"] == pytest.approx(1.5)
    ratios = {r["rung"]: r["vs_reference"] for r in derived.rows(doc["runs"], None)}
    assert ratios["slow"] == pytest.approx(0.75) and ratios["lib-default"] == pytest.approx(0.6)


def _runs_with_a_peer():
    def run(rung, ms, reference=False, peer=False, number=1, config=None):
        return {
            "problem": "p", "rung": rung, "number": number, "reference": reference,
            "peer": peer, "config": config, "dtype": "float16", "shape": [8], "ok": True,
            "median_ms": ms,
        }  # fmt: skip

    return {
        "gpu": "test GPU",
        "date": "2026-11-25",
        "runs": [
            run("rung-a", 3.0, number=1),
            run("rung-b", 2.0, number=2),
            run("sdpa", 2.5, reference=True, number=90, config="flash"),
            run("torch-compile", 4.0, reference=True, number=91),
            run("triton", 1.0, reference=True, peer=True, number=92),
        ],
    }


def test_a_peer_is_never_the_library_but_is_beside_it():
    doc = _runs_with_a_peer()
    (row,) = derived.best_rows(doc)
    assert (row["rung"], row["library"], row["peer"]) == ("rung-b", "sdpa (flash)", "triton")
    assert row["vs_library"] == pytest.approx(1.25) and row["vs_peer"] == pytest.approx(0.5)
    text = "\n".join(report.group_table(doc["runs"], None))
    assert "| peer | triton |" in text and "| ref | sdpa (flash) |" in text
    assert "| 1 | triton | peer |" in report.contenders_markdown(doc)
    (lost, *_) = [line for line in report.losses(doc, "notes.md") if line.startswith("- ")]
    assert lost == (
        "- p float16 8: rung 2 rung-b 2.000 ms; fastest peer: triton 1.000 ms (the rung at "
        "0.50× its speed)"
    )
    assert "[the lab notes](notes.md)" in report.losses(doc, "notes.md")[0]


def test_contenders_list_the_best_rung_every_library_and_every_peer_fastest_first(tmp_path):
    doc = _runs_with_a_peer()
    found = derived.contenders(doc["runs"])
    assert [c["label"] for c in found] == [
        "triton", "rung 2 rung-b", "sdpa (flash)", "torch-compile"
    ]  # fmt: skip
    assert [c["kind"] for c in found] == ["peer", "rung", "library", "library"]
    assert [c["x_best"] for c in found] == pytest.approx([1.0, 2.0, 2.5, 4.0])
    table = report.contenders_markdown(doc)
    assert "| 2 | rung 2 rung-b | rung | 2.000 | 2.00 |" in table
    png = tmp_path / "contenders.png"
    report.plot_contenders(doc, png)
    assert png.stat().st_size > 5_000
    with pytest.raises(ValueError, match="no measured runs"):
        report.plot_contenders(doc, tmp_path / "none.png", problems=["other"])


def test_cli_run_rejects_bad_arguments(capsys):
    assert cli.main(["run", "gemm", "--size", "4", "4"]) == 2
    err = capsys.readouterr().err
    assert err == "ladder run: error: --size for gemm takes 3 values M N K, got 2\n"
    assert cli.main(["run", "conv", "--size", "1", "1", "2", "5", "5", "7"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ladder run: error: --size for conv") and err.count("\n") == 1
    assert cli.main(["run", "gemm", "--rungs", "nope", "--size", "2", "2", "2"]) == 2
    assert "unknown rung" in capsys.readouterr().err


PROBLEM_NAMES = list(problems())


@pytest.mark.parametrize("name", PROBLEM_NAMES)
def test_every_problem_implements_the_protocol(name):
    problem = get_problem(name)
    assert problem.bound in ("compute", "memory")
    assert problem.size_help.startswith(" ".join(problem.size_names) + ":")
    for dtype in problem.dtypes:
        for size in (*problem.test_sizes(dtype), *problem.simulator_sizes(dtype)):
            assert len(size) == len(problem.size_names)
        standard = problem.standard_sizes(dtype)
        assert problem.parse_size(list(standard[-1])) == tuple(standard[-1])
    assert isinstance(problem.readme_summary([], {}), str)
    for size in problem.sanitize_sizes():  # ladder sanitize's sizes pass --size's own checks
        assert problem.parse_size(list(size)) == tuple(size)
    size = problem.standard_sizes(problem.dtypes[0])[0]
    ceilings = {"copy_tbps": 4.0, "fp32_peak_tflops": 60.0, "cublas_fp16_tflops": 700.0}
    assert problem.floor_ms(size, problem.dtypes[0], ceilings) > 0
    assert problem.floor_ms(size, problem.dtypes[0], {}) is None


@pytest.mark.parametrize("name", PROBLEM_NAMES)
def test_parse_size_refuses_a_wrong_count_or_value_naming_size(name):
    problem = get_problem(name)
    good = list(problem.standard_sizes(problem.dtypes[0])[0])
    count = len(problem.size_names)
    with pytest.raises(ValueError, match=f"--size for {name} takes {count} values"):
        problem.parse_size(good[:-1])
    with pytest.raises(ValueError, match=f"--size for {name}: .*at least 1"):
        problem.parse_size([0, *good[1:]])


def test_parse_size_checks_each_problems_own_rules():
    with pytest.raises(ValueError, match=r"--size for conv: .*K <= H and K <= W"):
        get_problem("conv").parse_size([1, 1, 2, 9, 5, 7])
    assert get_problem("conv").parse_size([1, 1, 2, 7, 9, 7]) == (1, 1, 2, 7, 9, 7)
    for name in ("attention", "attention-causal"):
        with pytest.raises(ValueError, match=f"--size for {name}: H must be a multiple of HKV"):
            get_problem(name).parse_size([1, 3, 2, 16, 16])
        assert get_problem(name).parse_size([1, 4, 2, 16, 16]) == (1, 4, 2, 16, 16)


def _run_record(problem, rung, number, ms, flops, reference=False):
    return {
        "problem": problem, "rung": rung, "number": number, "reference": reference,
        "dtype": "float32", "shape": [64, 64], "ok": True, "median_ms": ms,
        "flops": flops, "min_bytes": 1e9, "tflops": None, "tbps": 1e9 / (ms * 1e-3) / 1e12,
    }  # fmt: skip


def test_derived_figures_take_memory_bound_from_the_problem():
    ceilings = {"copy_tbps": 4.0, "fp32_peak_tflops": 60.0}
    # a memory-bound problem that counts FLOPs is still placed against the copy bandwidth
    softmax = [_run_record("softmax", "one", 1, 0.5, flops=1e6)]
    assert derived.is_memory(softmax)
    assert derived.rows(softmax, ceilings)[0]["pct_peak"] == pytest.approx(50.0)
    assert derived.ceiling(softmax, ceilings) == ("device copy", 4.0)
    # a compute-bound problem whose runs count no FLOPs is not memory-bound
    gemm = [_run_record("gemm", "one", 1, 0.5, flops=0.0)]
    assert not derived.is_memory(gemm)
    assert derived.ceiling(gemm, ceilings) == ("FP32 peak (clock)", 60.0)
    # a problem no longer registered: the FLOP count decides
    assert derived.is_memory([_run_record("retired", "one", 1, 0.5, flops=0.0)])
    assert not derived.is_memory([_run_record("retired", "one", 1, 0.5, flops=1e6)])


def test_cli_list_and_info(capsys):
    assert cli.main(["list"]) == 0
    assert cli.main(["info"]) == 0
    text = capsys.readouterr().out
    assert "naive" in text and "numba" in text


def test_bfloat16_inputs_are_rounded_and_checked_in_float64():
    a, b = PROBLEM.make_inputs((5, 6, 7), "bfloat16", 0)
    assert a.dtype.name == "bfloat16" and b.dtype.name == "bfloat16"
    ref = PROBLEM.reference((a, b))
    assert ref.dtype == np.float64
    assert np.array_equal(ref, a.astype(np.float64) @ b.astype(np.float64))
    assert PROBLEM.min_bytes((5, 6, 7), "bfloat16") == (5 * 7 + 7 * 6 + 5 * 6) * 2


@pytest.mark.parametrize(
    ("gpu_ms", "host", "in_a_row"), [(1.0, 30, 50), (1e-6, 30, 1000), (100.0, 5, 3)]
)
def test_call_costs_time_each_call_and_a_bounded_run_in_a_row(gpu_ms, host, in_a_row):
    """A slow call is timed fewer times on the host and in a row: the counts follow about
    HOST_CALLS_S and BACK_TO_BACK_S of GPU work, within their bounds."""
    calls = []
    costs = timing.time_calls(lambda: calls.append(1), gpu_ms, graph=False)
    assert timing.host_calls_for(gpu_ms) == host
    assert len(calls) == host + in_a_row
    assert 0 < costs.host_us < 1e5 and 0 < costs.back_to_back_us < 1e5
    assert costs.graph_us is None and costs.graph_error is None


def test_call_costs_replay_a_captured_call_as_many_times_in_a_row():
    """With graphs: one warm-up call before capture, then as many replays as calls in a row.
    On a GPU the call runs once more, recorded, and replays run no Python; the simulator's
    graph replays the call itself."""
    calls = []
    costs = timing.time_calls(lambda: calls.append(1), 1.0)
    replays = 1 if ON_GPU else 50
    assert len(calls) == timing.HOST_CALLS + 50 + 1 + replays
    assert costs.graph_error is None and 0 < costs.graph_us < 1e5


def test_a_call_that_cannot_be_captured_says_why_and_keeps_its_other_costs():
    calls = []

    def call():
        calls.append(1)
        if len(calls) > timing.HOST_CALLS + 50:  # the capture's warm-up call
            raise RuntimeError("allocated during capture")

    costs = timing.time_calls(call, 1.0)
    assert costs.graph_us is None and costs.host_us > 0 and costs.back_to_back_us > 0
    assert costs.graph_error == "RuntimeError: allocated during capture"


@gpu_only
def test_a_measurement_carries_its_call_costs():
    case = timing.prepare(get_problem("gemm"), (64, 64, 64))
    m = timing.measure(case, get_rung("gemm", "tuned"), repeats=3)
    assert m.ok, m.error
    assert m.host_us > 0 and m.back_to_back_us > 0
    assert m.graph_us > 0 and m.graph_error is None, m.graph_error
    assert m.to_dict()["host_us"] == m.host_us and m.to_dict()["graph_us"] == m.graph_us
    # the head start its repeats were given, written with the run
    assert m.head_start_us >= timing.COMMON_HEAD_START_US
    assert m.to_dict()["head_start_us"] == m.head_start_us


def test_head_start_grows_with_the_launchers_host_time():
    """A launcher whose host work outlasts the queued GPU work would have the GPU idle between
    the start event and its kernel, and that idle time counted as its own: the head start
    covers twice the warm-up calls' median host time, and is the same common head start for
    every launcher lighter than that."""
    assert timing.head_start_us(0.0) == timing.COMMON_HEAD_START_US
    assert timing.head_start_us(0.2) == timing.COMMON_HEAD_START_US
    # the heaviest launcher that still gets the common head start, and one past it
    common = (timing.COMMON_HEAD_START_US - timing.HEAD_START_US) / 2
    assert timing.head_start_us(common) == timing.COMMON_HEAD_START_US
    assert timing.head_start_us(common + 50.0) == timing.COMMON_HEAD_START_US + 100
    assert timing.head_start_us(500.0) == timing.HEAD_START_US + 1000


@gpu_only
def test_a_slow_launchers_host_time_is_not_counted_as_gpu_time():
    """A launcher that spends 2 ms on the host before a tiny kernel: the events time the
    kernel, not the host's 2 ms (the head start covers it)."""
    import time

    out = cuda.device_array(1, np.float32)

    @cuda.jit
    def tiny(x):
        x[0] = 1.0

    def slow_launch():
        began = time.perf_counter()
        while time.perf_counter() - began < 2e-3:
            pass
        tiny[1, 1](out)

    tiny[1, 1](out)  # compiled here, not in a warm-up call
    samples = timing.time_ms(slow_launch, repeats=10)
    assert np.median(samples) < 0.5, samples


def test_float64_products_are_numpys_below_the_gpu_threshold(monkeypatch):
    """A small reference product never touches a GPU; a large one would where PyTorch sees
    one, and here (no GPU) falls back to NumPy with the same answer."""
    from ladder.core import device, float64

    rng = np.random.default_rng(0)
    a = rng.standard_normal((5, 7)).astype(np.float16)
    b = rng.standard_normal((7, 3)).astype(np.float16)
    monkeypatch.setattr(device, "torch_cuda_available", lambda: pytest.fail("asked the GPU"))
    assert np.array_equal(float64.matmul(a, b), a.astype(np.float64) @ b.astype(np.float64))
    assert float64.matmul(a, b).dtype == np.float64


@gpu_only
def test_float64_products_on_the_gpu_agree_with_numpy():
    from ladder.core import device, float64

    if not device.torch_cuda_available():
        pytest.skip("the GPU product goes through PyTorch with CUDA, not installed here")
    rng = np.random.default_rng(1)
    a = rng.standard_normal((1024, 1031)).astype(np.float16)
    b = rng.standard_normal((1031, 1024)).astype(np.float16)
    assert 1024 * 1024 * 1031 >= float64.GPU_FROM
    want = a.astype(np.float64) @ b.astype(np.float64)
    got = float64.matmul(a, b)
    assert got.dtype == np.float64
    assert np.max(np.abs(got - want)) <= 1e-12 * np.max(np.abs(want))
