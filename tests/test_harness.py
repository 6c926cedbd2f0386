"""The shared harness: error measure, poisoning, validation before and after timing, reports."""

import json

import numpy as np
import pytest
from numba import cuda

from ladder import cli
from ladder.core import device, report, timing
from ladder.core.rung import Rung, get_problem, get_rung, rung, rungs

PROBLEM = get_problem("gemm")


def test_relative_error_is_infinite_on_nan():
    ref = np.ones((3, 3))
    out = ref.copy()
    out[1, 1] = np.nan
    assert timing.relative_error(out, ref) == float("inf")
    assert timing.relative_error(ref, ref) == 0.0


def _fake_rung(launch, name="fake"):
    return Rung("gemm", 50, name, "test double", ("float32",), launch, doc="test double")


def test_measure_catches_an_unwritten_output():
    def writes_nothing(a, b, c):
        return c

    m = timing.measure(timing.prepare(PROBLEM, (5, 6, 7)), _fake_rung(writes_nothing))
    assert not m.ok and "wrong answer" in m.error and m.samples_ms == []


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
    assert m.simulated == device.simulator()
    assert m.median_ms is not None and m.min_ms <= m.median_ms <= m.max_ms
    assert m.flops == 2 * 5 * 6 * 7


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
    assert [r.name for r in rungs("gemm") if r.reference] == ["cublas"]


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


def test_cli_run_bench_plot(tmp_path, capsys):
    out = tmp_path / "bench.json"
    assert cli.main(["bench", "--problems", "gemm", "--out", str(out), "--repeats", "1"]) == 0
    doc = report.read_results(out)
    for key in ("gpu", "driver", "versions", "date", "ceilings", "runs"):
        assert key in doc
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
    assert all(r["ok"] for r in doc["runs"] if not (r["error"] or "").startswith("needs"))
    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n{report.README_START}\nold\n{report.README_END}\nend\n")
    png = tmp_path / "bench.png"
    assert cli.main(["plot", str(out), "--out", str(png), "--readme", str(readme)]) == 0
    assert png.stat().st_size > 10_000
    assert (tmp_path / "bench-gemm.png").stat().st_size > 10_000  # one figure per problem
    text = readme.read_text()
    assert "old" not in text and "| 1 | naive |" in text and text.endswith("end\n")
    assert "| gemm | float32 |" in text  # the headline row: best rung against cuBLAS
    assert "<details><summary><b>gemm</b>" in text and "(bench-gemm.png)" in text.replace(
        str(tmp_path) + "/", ""
    )
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
            run("lib", 3.0, reference=True, number=0),
        ]
    }
    (row,) = report.best_rows(doc)
    assert (row["rung"], row["library"]) == ("fast", "lib")
    assert row["vs_library"] == pytest.approx(1.5)


def test_cli_run_rejects_bad_arguments(capsys):
    assert cli.main(["run", "gemm", "--size", "4", "4"]) == 2
    assert cli.main(["run", "gemm", "--rungs", "nope", "--size", "2", "2", "2"]) == 2
    assert "unknown rung" in capsys.readouterr().err


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
