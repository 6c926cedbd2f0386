"""``ladder run PROBLEM --rung-file PATH``: a user's launcher, checked and timed as a rung."""

import json

import pytest

from ladder import cli
from ladder.core import user_rung

GEMM = '''"""My GEMM: one thread per output."""
from numba import cuda, float32

from ladder.core.rung import rung


@cuda.jit
def kernel(A, B, C):
    i, j = cuda.grid(2)
    if i < C.shape[0] and j < C.shape[1]:
        acc = float32(0.0)
        for k in range(A.shape[1]{stop}):
            acc += A[i, k] * B[k, j]
        C[i, j] = acc


{decorator}
def launch(A, B, C=None):
    m, n = C.shape
    kernel[((m + 7) // 8, (n + 7) // 8), (8, 8)](A, B, C)
    return C
'''
SIZE = ["--size", "5", "7", "9"]


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def _run(tmp_path, *files):
    out = tmp_path / "runs.json"
    argv = ["run", "gemm", *SIZE, "--rungs", "naive", "--json", str(out)]
    for f in files:
        argv += ["--rung-file", f]
    code = cli.main(argv)
    return code, {r["rung"]: r for r in json.loads(out.read_text())["runs"]}


def test_a_correct_user_gemm_runs_beside_the_rungs(tmp_path):
    mine = _write(
        tmp_path, "my_gemm.py", GEMM.format(stop="", decorator='@rung(name="mine", title="t")')
    )
    code, runs = _run(tmp_path, mine)
    assert code == 0
    assert runs["mine"]["status"] == "ok" and runs["mine"]["number"] == 80
    assert runs["naive"]["status"] == "ok" and runs["mine"]["shape"] == [5, 7, 9]


def test_an_off_by_one_user_gemm_fails_and_names_its_file(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)  # 80 columns would wrap the file's long path
    wrong = _write(tmp_path, "off_by_one.py", GEMM.format(stop=" - 1", decorator=""))
    code, runs = _run(tmp_path, wrong)
    assert code == 1
    assert runs["off_by_one"]["status"] == "failed"  # a plain launch is named after its file
    assert wrong in runs["off_by_one"]["error"] and "wrong answer" in runs["off_by_one"]["error"]
    assert "off_by_one.py" in capsys.readouterr().out


def test_missing_file_no_launch_and_bad_signature_are_clean_errors(tmp_path, capsys):
    missing = str(tmp_path / "nowhere.py")
    empty = _write(tmp_path, "no_launch.py", "def go(A, B, C=None):\n    return C\n")
    bad = _write(tmp_path, "bad_signature.py", "def launch(A, C=None):\n    return C\n")
    for path, words in (
        (missing, "no such file"),
        (empty, "defines no function `launch`"),
        (bad, "launch(A, B, C=None)"),
    ):
        assert cli.main(["run", "gemm", *SIZE, "--rung-file", path]) == 2
        err = capsys.readouterr().err
        assert path in err and words in err


def test_a_returned_array_of_the_wrong_shape_is_reported(tmp_path):
    text = "import numpy as np\ndef launch(A, B, C):\n    return np.zeros((2, 2), np.float32)\n"
    code, runs = _run(tmp_path, _write(tmp_path, "shape.py", text))
    assert code == 1 and "shape.py" in runs["shape"]["error"] and "(5, 7)" in runs["shape"]["error"]


def test_load_from_python(tmp_path):
    path = _write(tmp_path, "mine.py", GEMM.format(stop="", decorator=""))
    r = user_rung.load(path, "gemm", number=81)
    assert (r.problem, r.number, r.name, r.dtypes) == (
        "gemm",
        81,
        "mine",
        ("float32", "float16", "bfloat16"),
    )
    with pytest.raises(ValueError, match=r"bad\.py"):
        user_rung.load(_write(tmp_path, "bad.py", "def launch(:\n"), "gemm")
