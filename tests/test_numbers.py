"""Numbers in the course's prose come from the files they cite: a measured figure typed into
a notebook's Markdown (a time, a rate, a ratio) must be found in a results or lab file the
same cell cites, as written or rounded to the digits shown. A ratio computed from a file
(one time over another) is not in it: a notebook prints such figures from the file in a code
cell, and its prose reads them without typing them again. Cells that pose an exercise (their
numbers are assumptions, not measurements) say so: "Predict", "Suppose" or "Exercise".
tests/test_docstrings.py holds the rungs' docstrings to the same rule."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ladder.core import lab

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
CITED = re.compile(r"(?:results|lab)/[\w.\-/]+?\.json")
# a measured figure: a decimal number with a unit of time or rate, or a ratio (2.46×, 0.98x)
FIGURE = re.compile(
    r"(?<![\w.])(\d+\.\d+)\s?(?:(ms|µs|us|TFLOP/s|TB/s|GB/s)\b|([×x])(?![\w\d]|\s\d))"
)
# the words of a cell that poses an exercise; a cell that only mentions the exercises ("the
# predict, then check cells are exercises") is read like any other
HYPOTHETICAL = ("Predict", "Suppose", "Exercise")
# a run's repeats: any time can be found among thousands of samples, so they match nothing
SAMPLES = ("samples_ms", "samples_us", "host_samples_us")


def _numbers(value: object) -> set[float]:
    found: set[float] = set()
    if isinstance(value, dict):
        for key, v in value.items():
            if key not in SAMPLES:
                found |= _numbers(v)
    elif isinstance(value, list):
        for v in value:
            found |= _numbers(v)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        found.add(float(value))
        found.add(float(value) * 1e3)  # a time stored in ms may be quoted in µs
        found.add(float(value) / 1e3)
    return found


def _read(path: str) -> dict:
    if path.startswith("lab/"):
        return json.loads(lab.resolve(path).read_text())
    return json.loads((ROOT / path).read_text())


def _matches(text: str, numbers: set[float]) -> bool:
    shown = float(text)
    digits = len(text.split(".")[1])
    return any(round(n, digits) == shown for n in numbers)


def figures(text: str) -> list[str]:
    """The measured figures a piece of prose types: '0.321 ms', '2.46×'."""
    return [m.group(0) for m in FIGURE.finditer(text)]


def test_repeats_match_no_figure():
    run = {"median_ms": 0.321, "samples_ms": [0.318, 0.321, 0.402]}
    assert _matches("0.321", _numbers(run))
    assert not _matches("0.402", _numbers(run))


def test_figures_are_recognized():
    text = "takes 0.321 ms, 2.46× rung 1 and 0.98x SDPA; 8192 × 8192, 1.5 × 2 and 4.0 TB/s"
    assert figures(text) == ["0.321 ms", "2.46×", "0.98x", "4.0 TB/s"]


def _cells(path: Path) -> list[tuple[int, str]]:
    nb = json.loads(path.read_text())
    return [
        (i, "".join(c["source"])) for i, c in enumerate(nb["cells"]) if c["cell_type"] == "markdown"
    ]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_measured_figures_in_markdown_come_from_cited_files(path):
    wrong = []
    for i, text in _cells(path):
        if any(word in text for word in HYPOTHETICAL):
            continue
        found = figures(text)
        if not found:
            continue
        cited = CITED.findall(" ".join(re.sub(r"-\n\s*", "-", text).split()))
        numbers: set[float] = set()
        for name in cited:
            doc = _read(name)
            numbers |= _numbers(doc)
        for figure in found:
            value = FIGURE.match(figure).group(1)
            if not cited:
                wrong.append(f"cell {i}: {figure!r} cites no results or lab file")
            elif not _matches(value, numbers):
                wrong.append(f"cell {i}: {figure!r} is in none of {cited}")
    assert not wrong, f"{path.name}: " + "; ".join(wrong[:12])
