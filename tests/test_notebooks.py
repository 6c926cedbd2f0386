"""Every notebook in notebooks/ executes top to bottom (in the simulator in CI, at small sizes).

The committed notebooks carry outputs from a real GPU run; this test executes a copy in
memory and leaves the files untouched. Each notebook's kernel starts in the environment the
test session started in, not the one ladder changed: without a GPU, the notebook itself must
choose Numba's simulator (by importing ladder before numba.cuda), as it must for a user who
opens it from a plain shell.
"""

from pathlib import Path

import pytest
from conftest import clean_environment

nbformat = pytest.importorskip("nbformat", reason="the notebook tests need the dev extra")
nbclient = pytest.importorskip("nbclient", reason="the notebook tests need the dev extra")

NOTEBOOKS = sorted((Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))


def test_there_are_notebooks():
    names = [p.name for p in NOTEBOOKS]
    assert "00_start_here.ipynb" in names and "01_gemm.ipynb" in names


def _imports(line: str, module: str) -> bool:
    """Whether a line of code imports ``module`` (``ladder`` or ``numba.cuda``)."""
    words = line.replace(",", " ").split()
    if words[:1] == ["import"]:
        return any(w == module or w.startswith(module + ".") for w in words[1:])
    if words[:1] == ["from"] and len(words) > 3:
        parent, _, child = module.rpartition(".")
        if words[1] == module or words[1].startswith(module + "."):
            return True
        return bool(parent) and words[1] == parent and child in words[3:]
    return False


def _first_import(nb, module: str) -> tuple[int, int] | None:
    """(cell, line) of the first line of code that imports ``module``, or None."""
    for i, cell in enumerate(c for c in nb.cells if c.cell_type == "code"):
        for j, line in enumerate(cell.source.splitlines()):
            if _imports(line, module):
                return i, j
    return None


def test_import_lines_are_recognized():
    assert _imports("from numba import cuda, float32", "numba.cuda")
    assert _imports("import numba.cuda", "numba.cuda")
    assert _imports("from numba.cuda import jit", "numba.cuda")
    assert not _imports("from numba.core.errors import NumbaPerformanceWarning", "numba.cuda")
    assert _imports("import ladder  # first", "ladder")
    assert _imports("from ladder.core import device", "ladder")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_imports_ladder_before_numba_cuda(path):
    """Numba picks its backend when numba.cuda is first imported; ladder must come first."""
    nb = nbformat.read(path, as_version=4)
    first_ladder = _first_import(nb, "ladder")
    first_cuda = _first_import(nb, "numba.cuda")
    assert first_ladder is not None, f"{path.name} never imports ladder"
    if first_cuda is not None:
        assert first_ladder < first_cuda, f"{path.name} imports numba.cuda before ladder"


@pytest.mark.notebook
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_executes(path):
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        nb, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    )
    client.execute(env=clean_environment())
    errors = [
        o
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.get("outputs", [])
        if o.get("output_type") == "error"
    ]
    assert not errors, "\n".join(f"{e['ename']}: {e['evalue']}" for e in errors)
    text = "".join(
        o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
    )
    assert "device:" in text
