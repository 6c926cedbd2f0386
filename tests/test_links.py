"""Every link in the Markdown a learner reads resolves, and every source file the prose names
exists: a page that points at a moved or deleted file fails here, not in a learner's browser."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").rglob("*.md")),
    ROOT / "lab" / "README.md",
]
LINK = re.compile(r"\]\(([^)\s]+)\)")
SOURCE = re.compile(r"(?<![\w/.])(ladder/[\w/]+\.(?:py|cuh|cu))\b")


def _targets(page: Path) -> list[str]:
    text = page.read_text()
    return [t for t in LINK.findall(text) if not re.match(r"[a-z]+:", t) and not t.startswith("#")]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page):
    missing = []
    for target in _targets(page):
        path = (page.parent / target.split("#")[0]).resolve()
        if not path.exists():
            missing.append(target)
    assert not missing, f"{page.relative_to(ROOT)} links to missing files: {missing}"


def _docstrings() -> list[Path]:
    return sorted(p for p in (ROOT / "ladder").rglob("*") if p.suffix in (".py", ".cu", ".cuh"))


@pytest.mark.parametrize("path", [*PAGES, *_docstrings()], ids=lambda p: str(p.relative_to(ROOT)))
def test_every_source_file_named_exists(path):
    text = " ".join(re.sub(r"-\n\s*", "-", path.read_text()).split())
    missing = sorted({name for name in SOURCE.findall(text) if not (ROOT / name).exists()})
    assert not missing, f"{path.relative_to(ROOT)} names files that do not exist: {missing}"
