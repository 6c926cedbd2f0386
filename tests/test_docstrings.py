"""Every rung's docstring has one shape (docs/design.md, "The rung docstring"): at most
MAX_LINES lines, five labelled parts in order (What changes, Why, Prediction, Measured,
Verdict), no development history (commit hashes), and every results file, lab file and
lab-notes file it cites exists (a lab file through the lab's index, ``ladder.core.lab.resolve``).
The numbers it gives under "Measured" come from the files it cites: each such number must appear
in one of them (as written, or rounded to the digits shown)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ladder.core import lab
from ladder.core.rung import rungs

ROOT = Path(__file__).resolve().parent.parent
MAX_LINES = 45
PARTS = ("What changes:", "Why:", "Prediction:", "Measured:", "Verdict:")
HASH = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}\b")
CITED = re.compile(r"(?:results/|lab/[\w\-]+/[\w\-]+/)[\w.\-]+\.json")
NOTES = re.compile(r"docs/notes/[\w\-]+\.md")
RUNGS = [r for r in rungs() if not r.reference and not r.problem.endswith("-causal")]


def _doc(rung) -> str:
    return rung.doc.strip("\n")


@pytest.mark.parametrize("rung", RUNGS, ids=lambda r: r.key)
def test_docstring_has_the_shape(rung):
    doc = _doc(rung)
    lines = doc.splitlines()
    assert len(lines) <= MAX_LINES, f"{rung.key}: {len(lines)} lines (at most {MAX_LINES})"
    starts = [line for line in lines if line.startswith(PARTS)]
    found = [p for p in PARTS if any(line.startswith(p) for line in starts)]
    assert found == list(PARTS), f"{rung.key}: parts {found}, wanted {list(PARTS)} in order"
    order = [next(i for i, line in enumerate(lines) if line.startswith(p)) for p in PARTS]
    assert order == sorted(order), f"{rung.key}: the parts are out of order"
    assert not HASH.search(doc), f"{rung.key}: a commit hash ({HASH.search(doc).group()})"
    assert "commit" not in doc.lower(), f"{rung.key}: development history belongs in docs/notes"


def _cited(path: str) -> Path:
    """A cited file: results/ read directly, a lab file only through the lab's index (which
    raises, naming the path, for a file no lab entry lists)."""
    return lab.resolve(path) if path.startswith("lab/") else ROOT / path


def _joined(doc: str) -> str:
    """The docstring on one line; a path wrapped after a hyphen is joined back together."""
    return " ".join(re.sub(r"-\n\s*", "-", doc).split())


@pytest.mark.parametrize("rung", RUNGS, ids=lambda r: r.key)
def test_cited_files_exist(rung):
    doc = _joined(_doc(rung))
    for path in CITED.findall(doc) + NOTES.findall(doc):
        assert _cited(path).is_file(), f"{rung.key} cites {path}, which does not exist"


def _times_ms(value, unit: str | None = None) -> set[float]:
    """The times in a results file, in milliseconds: the numbers under keys ending in "ms"
    (median_ms, min_ms, stages_ms, ...) or "_us" (divided by 1000), at any depth, but not the
    single repeats (``samples_ms``): a docstring's time is a median or an extreme, and a stale
    median must not pass because it equals one of the repeats."""
    found: set[float] = set()
    if isinstance(value, dict):
        for key, v in value.items():
            key = str(key)
            if key == "samples_ms":
                continue
            inner = "ms" if key.endswith("ms") else "us" if key.endswith("_us") else unit
            found |= _times_ms(v, inner)
    elif isinstance(value, list):
        for v in value:
            found |= _times_ms(v, unit)
    elif isinstance(value, (int, float)) and not isinstance(value, bool) and unit:
        found.add(float(value) if unit == "ms" else float(value) / 1e3)
    return found


def _matches(text: str, numbers: set[float]) -> bool:
    shown = float(text)
    digits = len(text.split(".")[1]) if "." in text else 0
    return any(round(n, digits) == shown for n in numbers)


@pytest.mark.parametrize("rung", RUNGS, ids=lambda r: r.key)
def test_measured_times_come_from_the_cited_results(rung):
    """Each time in milliseconds under "Measured:" is a time in a cited results file."""
    doc = _doc(rung)
    start = doc.index("Measured:")
    end = doc.index("Verdict:")
    measured = " ".join(doc[start:end].split())
    cited = CITED.findall(_joined(doc))
    numbers: set[float] = set()
    for path in cited:
        if _cited(path).is_file():
            numbers |= _times_ms(json.loads(_cited(path).read_text()))
    for text in re.findall(r"(\d+\.\d+) ms\b", measured):
        assert cited, f"{rung.key}: 'Measured' gives {text} ms but cites no results file"
        assert _matches(text, numbers), f"{rung.key}: {text} ms is in none of {cited}"
