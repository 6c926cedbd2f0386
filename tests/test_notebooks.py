"""Every notebook in notebooks/ executes top to bottom (in the simulator in CI, at small sizes).

The committed notebooks carry outputs from a real GPU run; this test executes a copy in
memory and leaves the files untouched. Each notebook's kernel starts in the environment the
test session started in, not the one ladder changed: without a GPU, the notebook itself must
choose Numba's simulator (by importing ladder before numba.cuda), as it must for a user who
opens it from a plain shell.

Executed, each notebook must also stay skimmable: at most MAX_SKIM_MINUTES by
``render.skim_minutes`` (the README's minutes column), its outputs included (each rung's story
and lesson, as ``notebook.walk`` shows them), a collapsed ``<details>`` block counted as its
summary line: a reader skims what is open, and opens what they mean to read.
"""

import json
import re
from pathlib import Path

import pytest
from conftest import clean_environment

from ladder.core import notebook, render

nbformat = pytest.importorskip("nbformat", reason="the notebook tests need the dev extra")
nbclient = pytest.importorskip("nbclient", reason="the notebook tests need the dev extra")

NOTEBOOKS = sorted((Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))
MAX_SKIM_MINUTES = 45


def skim_minutes(nb: dict, folder: Path) -> float:
    """``render.skim_minutes`` of ``nb`` (a notebook as JSON), which counts every collapsed
    block as its summary alone."""
    path = folder / "skimmed.ipynb"
    path.write_text(json.dumps(nb))
    return render.skim_minutes(path)


def test_collapsed_blocks_are_skimmed_as_their_summary(tmp_path):
    code = "\n".join(f"x = {i}" for i in range(300))
    block = f"<details><summary>a.cu: 300 lines</summary>\n\n```diff\n{code}\n```\n\n</details>"
    cell = {
        "cell_type": "code",
        "source": "walk()",
        "metadata": {},
        "outputs": [
            {"output_type": "display_data", "metadata": {}, "data": {"text/markdown": block}}
        ],
    }
    nb = {"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    assert skim_minutes(nb, tmp_path) < 0.1
    opened = json.loads(json.dumps(nb).replace("<details>", "").replace("</details>", ""))
    assert skim_minutes(opened, tmp_path) > 9


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_says_what_it_teaches(path):
    """The opening names what the notebook teaches, what it runs on, what it needs and what
    comes next, each link to a notebook that exists; the metadata carry the first two for the
    README's start-here table (``render.notebooks_markdown``)."""
    nb = nbformat.read(path, as_version=4)
    opening = nb.cells[0].source
    for label in ("**You'll learn:**", "**Runs on:**", "**You need:**", "**Next:**"):
        assert label in opening, f"{path.name}: its first cell does not say {label}"
    for target in re.findall(r"\]\(([\w.-]+\.ipynb)\)", opening):
        assert (path.parent / target).is_file(), f"{path.name} links {target}, which is not there"
    meta = nb.metadata.get("ladder", {})
    for key in ("learn", "runs_on"):
        assert isinstance(meta.get(key), str) and meta[key].strip(), (
            f"{path.name}: metadata ladder.{key} is missing"
        )
        assert "\n" not in meta[key], f"{path.name}: metadata ladder.{key} is one line"


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
def test_notebook_executes(path, tmp_path):
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        nb, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    )
    # the compiler reports build one rung each: CI's `ladder check` builds them all
    client.execute(env={**clean_environment(), notebook.QUICK: "1"})
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
    empty = [
        i
        for i, c in enumerate(nb.cells)
        if c.cell_type == "code" and c.source.strip() and not c.get("outputs")
    ]
    assert not empty, f"{path.name}: code cells {empty} print nothing"
    shown = [
        i
        for i, c in enumerate(nb.cells)
        if c.cell_type == "code"
        for o in c.get("outputs", [])
        if "<Figure size" in "".join(o.get("data", {}).get("text/plain", ""))
        and "image/png" not in o.get("data", {})
    ]
    assert not shown, f"{path.name}: cells {shown} print a figure's repr instead of drawing it"
    minutes = skim_minutes(nb, tmp_path)
    assert minutes <= MAX_SKIM_MINUTES, (
        f"{path.name} takes about {minutes:.0f} minutes to skim, more than {MAX_SKIM_MINUTES}: "
        "split it or trim it, keeping every rung's story"
    )
