"""The lab's entries keep one shape, list exactly the files they hold, hold no code, and the
index (lab/README.md) is the one ``python -m ladder.core.lab`` writes; ``lab.resolve`` is the
only door to a lab file, and it refuses one no entry lists."""

from __future__ import annotations

from pathlib import Path

import pytest

from ladder.core import lab

LAB = lab.LAB
READMES = sorted(LAB.glob("*/*/README.md"))
CODE = {".py", ".cu", ".cuh", ".c", ".cpp", ".h", ".sh", ".ipynb"}


def _id(readme: Path) -> str:
    return readme.parent.relative_to(LAB).as_posix()


def test_the_lab_has_entries():
    assert READMES, "no lab/<area>/<date>-<topic>/README.md found"


@pytest.mark.parametrize("readme", READMES, ids=_id)
def test_entry_has_the_shape(readme):
    entry = lab.parse(readme)  # raises, naming the README, where the form is wrong
    assert entry.area in lab.AREAS, f"{entry.path}: area {entry.area!r} not in {lab.AREAS}"
    assert lab.FOLDER.fullmatch(entry.name), f"{entry.path}: not <YYYY-MM-DD>-<topic>"
    assert entry.title and entry.question and entry.answer and entry.command


@pytest.mark.parametrize("readme", READMES, ids=_id)
def test_entry_lists_exactly_its_files(readme):
    entry = lab.parse(readme)
    held = {p.name for p in readme.parent.iterdir()} - {"README.md"}
    listed = set(entry.files)
    assert held - listed == set(), f"{entry.path}: files not in its Files line"
    assert listed - held == set(), f"{entry.path}: listed files that are not there"
    assert all((readme.parent / name).is_file() for name in listed), entry.path


def test_no_code_in_the_lab():
    code = [p.relative_to(LAB).as_posix() for p in LAB.rglob("*") if p.suffix in CODE]
    assert not code, f"lab code is tested or deleted: {code}"


def test_nothing_outside_entries():
    stray = [
        p.relative_to(LAB).as_posix()
        for p in LAB.rglob("*")
        if p.is_file() and p != LAB / "README.md" and len(p.relative_to(LAB).parts) != 3
    ]
    assert not stray, f"lab files outside lab/<area>/<entry>/: {stray}"


def test_index_is_current():
    written = (LAB / "README.md").read_text()
    assert written == lab.index_markdown(lab.entries()), "run python -m ladder.core.lab"


def test_resolve_finds_a_listed_file():
    entry = lab.entries()[0]
    path = f"{entry.path}/{entry.files[0]}"
    assert lab.resolve(path) == lab.ROOT / path
    assert lab.resolve(path).is_file()


def test_resolve_refuses_an_unlisted_path():
    entry = lab.entries()[0]
    for path in (f"{entry.path}/not-listed.json", f"{entry.path}/README.md", "results/x.json"):
        with pytest.raises(ValueError, match=path.replace(".", r"\.")):
            lab.resolve(path)


def test_resolve_says_when_there_is_no_lab(tmp_path):
    with pytest.raises(ValueError, match="the lab is not here"):
        lab.resolve("lab/gemm/2026-11-21-tile-sweep/nvidia-h200-gemm-sweep.json", root=tmp_path)


def test_parse_refuses_a_readme_out_of_shape(tmp_path):
    folder = tmp_path / "lab" / "gemm" / "2026-01-01-x"
    folder.mkdir(parents=True)
    swapped = "# x\n\n- Question: q\n- Command: c\n- Answer: a\n- Files: `f`\n"
    (folder / "README.md").write_text(swapped)
    with pytest.raises(ValueError, match="2026-01-01-x"):
        lab.parse(folder / "README.md")
