"""Every notebook in notebooks/ executes top to bottom (in the simulator in CI, at small sizes).

The committed notebooks carry outputs from a real GPU run; this test executes a copy in
memory and leaves the files untouched.
"""

from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat", reason="the notebook tests need the dev extra")
nbclient = pytest.importorskip("nbclient", reason="the notebook tests need the dev extra")

NOTEBOOKS = sorted((Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))


def test_there_are_notebooks():
    names = [p.name for p in NOTEBOOKS]
    assert "00_start_here.ipynb" in names and "01_gemm.ipynb" in names


@pytest.mark.notebook
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_executes(path):
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        nb, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    )
    client.execute()
    errors = [
        o
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.get("outputs", [])
        if o.get("output_type") == "error"
    ]
    assert not errors
    text = "".join(
        o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
    )
    assert "device:" in text
