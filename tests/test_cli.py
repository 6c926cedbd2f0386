"""The ``ladder`` command's surface: errors that name their argument, help, version, output
that stays readable when piped, progress on stderr, the simulator's time guard and where the
simulator's results go. Fast: ``cli.main`` in-process, and one subprocess for piped output."""

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ON_GPU

import ladder
from ladder import cli
from ladder.core import report, timing
from ladder.core.rung import get_problem, get_rung, problems, rungs

simulator_only = pytest.mark.skipif(ON_GPU, reason="the simulator's behaviour")

BAD_ARGUMENTS = [
    (["check", "matmul"], "unknown problem 'matmul'; problems: attention, "),
    (["list", "matmul"], "unknown problem 'matmul'; problems: attention, "),
    (["run", "gemmm"], "unknown problem 'gemmm'; problems: attention, "),
    (["plot", "missing.json"], "RESULTS missing.json: no such file"),
    (["run", "conv", "--size", "1", "2", "3"], "--size for conv takes 6 values B C M H W K, got 3"),
    (["run", "conv", "--size", "1", "1", "2", "5", "5", "7"], "--size for conv: the filter K=7"),
    (["run", "attention", "--size", "1", "3", "2", "17", "16"], "H must be a multiple of HKV"),
    (["run", "attention", "--size", "64", "64", "64", "65536", "128"], "GB of host memory"),
    (["run", "gemm", "--repeats", "0"], "argument --repeats: must be at least 1, got 0"),
    (["bench", "--repeats", "two"], "argument --repeats: a whole number, got 'two'"),
    (["run", "gemm", "--dtype", "float8"], "--dtype for gemm is one of float32, float16, bfloat16"),
    (["run", "gemm", "--rungs", "nope"], "--rungs: unknown rung 'nope' for gemm; known: "),
    (["run", "gemm", "--rungs", "wmma"], "--rungs: wmma does not take --dtype float32"),
    (["check", "--rungs", "6"], "--rungs: name their PROBLEM too"),
    (["profile", "gemm", "nope"], "RUNG: unknown rung 'nope' for gemm"),
    (["bench", "--problems", "gemmm"], "--problems: unknown problem 'gemmm'"),
    (["bench", "--dtypes", "float8"], "--dtypes: no problem takes float8; dtypes: float32"),
    (["transfer", "--only", "nothing"], "argument --only: invalid choice: 'nothing'"),
    (["frob"], "argument COMMAND: invalid choice: 'frob'"),
    (["check", "--archs", "sm_99"], "--archs sm_99: the compilers here build sm_"),
    (["check", "--archs", "ampere"], "architecture 'ampere': expected sm_<major><minor>"),
    (["run", "gemm", "--json", "README.md/x.json"], "--json README.md/x.json: README.md is a file"),
    (["run", "gemm", "--json", "no/such/dir/x.json"], "the folder no/such/dir does not exist"),
    (["bench", "--out", "tests"], "--out tests: is a folder; give a file name"),
]


@pytest.mark.parametrize(
    ("argv", "words"), BAD_ARGUMENTS, ids=[" ".join(a) for a, _ in BAD_ARGUMENTS]
)
def test_a_bad_argument_is_one_line_naming_it_and_exit_status_2(argv, words, capsys):
    assert cli.main(argv) == 2
    captured = capsys.readouterr()
    assert captured.err.count("\n") == 1 and captured.err.startswith("ladder")
    assert ": error: " in captured.err and words in captured.err
    assert captured.out == ""


def test_registry_lookups_name_the_problems_when_the_problem_is_unknown():
    with pytest.raises(KeyError, match="unknown problem 'gemmm'; problems: attention, "):
        get_rung("gemmm", "naive")
    with pytest.raises(KeyError, match="unknown problem 'matmul'"):
        rungs("matmul")


def test_version_and_help(capsys):
    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out == f"ladder {ladder.__version__}\n"
    assert cli.main(["--help"]) == 0
    text = capsys.readouterr().out
    assert "_child" not in text and "run" in text and "transfer" in text
    assert cli.main(["transfer", "--help"]) == 0
    text = capsys.readouterr().out
    for option in ("--out", "--figures", "--only", "--rung", "--layers", "--from-results"):
        assert option in text
    assert cli.main(["run", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())  # argparse wraps at the terminal width
    for problem in problems().values():
        assert f"{problem.name} ({', '.join(problem.dtypes)}): {problem.size_help}" in text
    assert "--force" in text


def test_a_run_in_the_simulator_shows_answers_not_speeds(capsys, monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)  # an 80-column table would elide the units
    argv = ["run", "gemm", "--size", "2", "3", "4", "--rungs", "naive", "cpu-numpy", "cublas"]
    assert cli.main(argv) == 0
    captured = capsys.readouterr()
    if ON_GPU:
        assert "TFLOP/s" in captured.out
        return
    for meaningless in ("TFLOP/s", "× below", "× library", "% FP32", "nan"):
        assert meaningless not in captured.out
    assert "CPU ms (simulator)" in captured.out and "rel err" in captured.out
    assert "unavailable: needs a real CUDA GPU (not available in the simulator)" in captured.out
    # progress on stderr, one line per rung that runs (cuBLAS cannot: not counted)
    lines = [_untimed(line) for line in captured.err.splitlines()]
    assert lines == [
        "ladder: gemm float32 2 x 3 x 4: reference (float64)",
        "ladder: [1/2] gemm float32 2 x 3 x 4: naive",
        "ladder: [2/2] gemm float32 2 x 3 x 4: cpu-numpy",
    ]


def _untimed(line: str) -> str:
    """A progress line without its leading seconds since the start ("ladder:   12.3 s ...")."""
    return re.sub(r"^ladder: +[0-9.]+ s ", "ladder: ", line)


def test_progress_lines_say_the_seconds_since_the_start(capsys):
    with cli._Progress(1) as progress:
        progress.step("work")
    assert re.fullmatch(r"ladder: +[0-9]+\.[0-9] s \[1/1\] work\n", capsys.readouterr().err)


def test_progress_counts_only_the_rungs_that_run(capsys):
    pick = [get_rung("gemm", n) for n in ("naive", "wmma", "cublas")]  # wmma: float16 only
    runs = cli._measure_all([("gemm", (2, 2, 2), "float32")], {"gemm": pick}, None)
    assert [r["rung"] for r in runs] == ["naive", "cublas"]
    steps = [_untimed(line) for line in capsys.readouterr().err.splitlines() if "[" in line]
    total = 1 if pick[2].unavailable_reason() else 2
    assert steps[0] == f"ladder: [1/{total}] gemm float32 2 x 2 x 2: naive"


def test_the_default_dtype_is_said_with_how_to_run_the_other_rungs():
    note = cli._dtype_note("gemm", "float32", given=False)
    assert "float32 (the default --dtype)" in note
    assert note.endswith("the others take --dtype float16 or --dtype bfloat16")
    assert cli._dtype_note("layernorm", "float32", given=False) is None


@simulator_only
def test_the_simulator_refuses_a_run_it_would_take_days_on(capsys):
    start = time.perf_counter()
    argv = ["run", "gemm", "--size", "4096", "4096", "4096", "--rungs", "naive"]
    assert cli.main(argv) == 2
    assert time.perf_counter() - start < 5
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("ladder run: error: --size 4096 4096 4096")
    assert "days in the CUDA simulator" in err and "--force runs it anyway" in err
    suggested = err.split("; --size ")[1].split(" takes about a minute")[0]
    size = tuple(int(v) for v in suggested.split())
    gemm = get_problem("gemm")
    assert gemm.parse_size(list(size)) == size
    seconds = timing.SIMULATOR_TYPICAL * timing.simulator_seconds(gemm, size, "float32", 1)
    assert 10 < seconds <= 60


def test_simulator_estimates_are_below_a_measured_run():
    # gemm rung 1 at 64 x 64 x 64 took 6.7 s in the simulator on a 2-core CPU (two launches)
    gemm = get_problem("gemm")
    assert timing.simulator_seconds(gemm, (64, 64, 64), "float32", 1) < 6.7
    smaller = timing.simulator_size(get_problem("conv"), (10000, 1, 4, 86, 86, 7), "float32", 6)
    assert get_problem("conv").parse_size(list(smaller)) == smaller


def test_a_case_too_large_for_memory_is_refused_before_allocating():
    attention = get_problem("attention")
    with pytest.raises(ValueError, match=r"--size 64 64 64 65536 128 .* GB of host memory"):
        timing.check_memory(attention, (64, 64, 64, 65536, 128), "float32")
    timing.check_memory(attention, (1, 2, 1, 17, 16), "float32")


def test_piped_output_keeps_tables_whole():
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1])
    done = subprocess.run(
        [sys.executable, "-m", "ladder", "list", "gemm"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    longest = max((r for r in rungs("gemm")), key=lambda r: len(r.title))
    assert longest.title in done.stdout and "…" not in done.stdout
    assert max(len(line) for line in done.stdout.splitlines()) > 80


@simulator_only
def test_simulator_results_are_written_only_where_asked(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert report.results_path(None, Path("results/x.json")) is None
    assert report.results_path("mine.json", None) == Path("mine.json")
    assert cli.main(["transfer", "--only", "launch"]) == 0
    assert cli.main(["bench", "--problems", "layernorm", "--repeats", "1"]) == 0
    assert capsys.readouterr().out.count("nothing written") == 2
    assert list(tmp_path.iterdir()) == []


def test_check_shows_its_progress_on_stderr_through_its_child(capfd):
    assert cli.main(["check", "gemm", "--rungs", "naive"]) == 0
    captured = capfd.readouterr()
    assert "ladder: [1/1] compiling gemm/naive" in map(_untimed, captured.err.splitlines())
    assert "kernel builds, all compiled" in captured.out


def test_extras_in_messages_keep_their_brackets(capsys, monkeypatch):
    """Rich markup would take ``[triton]`` for a style tag and print ``numba-ladder``."""
    from ladder.core import device

    monkeypatch.setattr(device, "triton_reason", lambda: "needs Triton: pip install "
                        "'numba-ladder[triton]'")  # fmt: skip
    monkeypatch.setenv("COLUMNS", "300")
    assert cli.main(["list", "gemm"]) == 0
    assert "'numba-ladder[triton]'" in capsys.readouterr().out


def test_list_never_cuts_a_rung_name_short(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    assert cli.main(["list"]) == 0
    out = capsys.readouterr().out
    for r in rungs():
        assert r.name in out, r.key


def test_models_without_pytorch_is_one_line(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch raises ImportError
    monkeypatch.delitem(sys.modules, "ladder.models.bench", raising=False)
    monkeypatch.delitem(sys.modules, "ladder.models", raising=False)
    assert cli.main(["models"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "needs PyTorch" in err and "numba-ladder[ops]" in err


@simulator_only
def test_a_run_where_nothing_can_run_says_so_and_fails(capsys):
    assert cli.main(["run", "gemm-fp8"]) == 1
    assert "nothing ran: every selected rung of gemm-fp8" in capsys.readouterr().out


def test_a_rung_named_twice_runs_once(capsys):
    assert cli.main(["run", "gemm", "--size", "2", "2", "2", "--rungs", "naive", "naive"]) == 0
    assert capsys.readouterr().err.count(": naive") == 1
