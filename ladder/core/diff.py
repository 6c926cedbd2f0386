"""A rung against its parent: the lesson of a rung is what it changes (``ladder diff``).

Each rung declares its parent (``@rung(parent=...)``, an earlier rung of its ladder); the diff
compares the two rung modules below their docstrings (the story is read, not diffed) and, for
CUDA C++ rungs, the ``.cu`` files beside them. A rung whose parent is a Numba rung and which is
itself CUDA C++ shows its whole ``.cu`` as new.
"""

from __future__ import annotations

import ast
import difflib
import sys
from dataclasses import dataclass
from pathlib import Path

from ladder.core.rung import Rung, parent_of

__all__ = ["FileDiff", "code", "files", "module_file", "parent_of", "text"]


@dataclass(frozen=True)
class FileDiff:
    """One file of a rung against the same kind of file of its parent."""

    kind: str  # "py" or "cu"
    old: Path | None  # the parent's file, None where the parent has no such file
    new: Path
    lines: list[str]  # a unified diff, each line without its newline

    @property
    def changed(self) -> int:
        """Lines added plus lines removed."""
        return sum(1 for line in self.lines if line[:1] in "+-" and line[:3] not in ("+++", "---"))


def module_file(r: Rung) -> Path:
    """The rung's module (``ladder/gemm/r02_coalesced.py``)."""
    return Path(sys.modules[r.launch.__module__].__file__ or "")


def code(path: Path) -> str:
    """A file's text as a lesson shows it: a Python module below its docstring, a ``.cu``
    whole."""
    text = path.read_text()
    if path.suffix != ".py":
        return text
    body = ast.parse(text).body
    first = body[0] if body else None
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
        text = "\n".join(text.splitlines()[first.end_lineno :]).lstrip("\n") + "\n"
    return text


def _relative(path: Path) -> str:
    parts = path.resolve().parts
    return "/".join(parts[parts.index("ladder") :]) if "ladder" in parts else str(path)


def files(r: Rung, parent: Rung | None = None, context: int = 3) -> list[FileDiff]:
    """The rung's module (and ``.cu``) against its parent's; ValueError for a rung with no
    parent (the first of its ladder, or a library)."""
    parent = parent or parent_of(r)
    if parent is None:
        what = "a library or peer" if r.reference else "the first rung of its ladder"
        raise ValueError(f"{r.key} is {what}: it has no parent to show it against")
    found = []
    new_py, old_py = module_file(r), module_file(parent)
    for kind, new, old in (
        ("py", new_py, old_py),
        ("cu", new_py.with_suffix(".cu"), old_py.with_suffix(".cu")),
    ):
        if not new.is_file():
            continue
        before = code(old).splitlines() if old.is_file() else []
        after = code(new).splitlines()
        lines = list(
            difflib.unified_diff(
                before,
                after,
                _relative(old) if old.is_file() else "/dev/null",
                _relative(new),
                n=context,
                lineterm="",
            )
        )
        found.append(FileDiff(kind, old if old.is_file() else None, new, lines))
    return found


def text(r: Rung, parent: Rung | None = None, context: int = 3) -> str:
    """The whole lesson as one unified diff (empty lines between files)."""
    return "\n\n".join("\n".join(f.lines) for f in files(r, parent, context) if f.lines) + "\n"
