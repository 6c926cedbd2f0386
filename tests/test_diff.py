"""``ladder diff``: every rung with a parent shows against it, code below the docstrings."""

import pytest

from ladder import cli
from ladder.core import diff
from ladder.core.rung import get_rung, parent_of, rungs

WITH_PARENT = [r for r in rungs(references=False) if parent_of(r) is not None]


@pytest.mark.parametrize("rung", WITH_PARENT, ids=lambda r: r.key)
def test_every_rung_with_a_parent_differs_from_it(rung):
    found = diff.files(rung)
    assert found and found[0].kind == "py"
    assert sum(f.changed for f in found) > 0, f"{rung.key} is its parent's code"
    for f in found:
        assert '"""' not in "\n".join(f.lines[:6]), "the docstrings are not diffed"


def test_a_cuda_rung_over_a_numba_parent_shows_its_cu_as_new():
    wmma = get_rung("gemm", "wmma")
    cu = next(f for f in diff.files(wmma) if f.kind == "cu")
    assert cu.old is None and cu.lines[0] == "--- /dev/null"


def test_a_rung_without_a_parent_says_so(capsys):
    with pytest.raises(ValueError, match="first rung of its ladder"):
        diff.files(get_rung("gemm", "naive"))
    assert cli.main(["diff", "gemm", "naive"]) == 2
    assert "has no parent" in capsys.readouterr().err
    assert cli.main(["diff", "gemm", "cublas"]) == 2
    assert "a library or peer" in capsys.readouterr().err


def test_ladder_diff_prints_the_lesson(capsys):
    assert cli.main(["diff", "gemm", "coalesced"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("gemm/coalesced (rung 2) against gemm/naive (rung 1)")
    assert "+++ ladder/gemm/r02_coalesced.py" in out
    assert "-    row = cuda.blockIdx.x" in out
    assert cli.main(["diff", "attention", "11", "--parent", "pingpong-flash"]) == 0
    assert "against attention/pingpong-flash (rung 10)" in capsys.readouterr().out
    assert cli.main(["diff", "gemm", "coalesced", "--parent", "nope"]) == 2
