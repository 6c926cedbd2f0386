"""The canonical results: one file per GPU, ``results/<gpu-slug>.json``, written only by
``ladder bench``.

A canonical file is built up in pieces: each ``ladder bench`` (a problem or a few, one dtype
or all) measures its cases and merges them into the file, replacing the runs of the
(problem, dtype) pairs it measured and keeping every other run. Two benchmarks that are not
ladders live in it too, under ``sections``: ``transfer`` (data movement: link bandwidth,
copy/compute overlap, launch costs) and ``models`` (LeNet and a GPT-2 block on the ladder's
operators against PyTorch), each replaced whole when measured again. Each run carries the date and
the commit it was measured at (``date``, ``commit``); each piece is recorded in ``pieces``
with its conditions (clocks, throttle reasons), ceilings, versions, arguments and how long it
took. Pieces may run at once on several GPUs of one machine: the merge holds a lock on the
file.

Everything the course presents (the README's table, ``docs/results/<problem>.md``, the
figures, the notebooks' tables) is rendered from these files (``ladder.core.render``), never
typed; ``missing`` says which registered rungs a file lacks, so that a new rung cannot land
unmeasured.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import subprocess
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from ladder.core.rung import Rung, rungs

ROOT = Path(__file__).resolve().parents[2]  # the repository, where results/ lives
RESULTS = ROOT / "results"
COMMIT_ENV = "LADDER_COMMIT"  # the commit measured, where the tree is not a git checkout


def folder() -> Path:
    """Where canonical files go: the repository's ``results/`` in a checkout, else
    ``results/`` under the working directory (an installed package has no repository)."""
    return RESULTS if RESULTS.is_dir() else Path("results")


def path_for(slug: str, where: Path | None = None) -> Path:
    """The canonical file of the GPU whose ``device.gpu_slug()`` is ``slug``."""
    return (where or folder()) / f"{slug}.json"


def files(where: Path = RESULTS) -> list[Path]:
    """Every canonical file in ``where``, by name: the JSON files there."""
    return sorted(where.glob("*.json")) if where.is_dir() else []


def commit(root: Path = ROOT) -> str | None:
    """The commit being measured: ``$LADDER_COMMIT`` where set (a copy of the tree with no
    ``.git``, as on a lent GPU machine), else ``git rev-parse HEAD`` of ``root``, with
    ``-dirty`` when the package's files differ from it; None outside a checkout."""
    given = os.environ.get(COMMIT_ENV)
    if given:
        return given
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True
        ).stdout.strip()
        changed = subprocess.run(
            ["git", "status", "--porcelain", "--", "ladder"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return head + ("-dirty" if changed else "") if head else None


def stamp(runs: Iterable[dict[str, Any]], date: str, measured_at: str | None) -> list[dict]:
    """The runs, each with the ``date`` and ``commit`` it was measured at."""
    return [dict(run, date=date, commit=measured_at) for run in runs]


def _pairs(runs: Iterable[dict[str, Any]]) -> set[str]:
    return {f"{r['problem']}/{r['dtype']}" for r in runs}


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock beside ``path`` (another bench merging into it waits)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def merged(earlier: dict[str, Any] | None, piece: dict[str, Any]) -> dict[str, Any]:
    """``earlier`` (a canonical document, or None) with ``piece`` merged in: the piece's runs
    replace every earlier run of the (problem, dtype) pairs it measured; the piece's record is
    appended to ``pieces`` and each earlier record keeps only the pairs still in the file.
    The machine, versions, date and ceilings at the top are the piece's (the latest). A piece
    from another GPU is refused (ValueError)."""
    if earlier is not None and earlier["gpu"] != piece["gpu"]:
        raise ValueError(
            f"a piece measured on {piece['gpu']} cannot go into the file of {earlier['gpu']}"
        )
    sections = dict(piece.get("sections") or {})
    for name, section in sections.items():  # a section measured a dtype at a time
        before = ((earlier or {}).get("sections") or {}).get(name)
        if section.get("runs_by_dtype") and before and before.get("runs"):
            mine = {r["dtype"] for r in section["runs"]}
            kept = [r for r in before["runs"] if r["dtype"] not in mine]
            sections[name] = section | {"runs": kept + section["runs"]}
    redone = _pairs(piece["runs"]) | set(sections)
    kept_runs = [] if earlier is None else earlier["runs"]
    kept_runs = [r for r in kept_runs if f"{r['problem']}/{r['dtype']}" not in redone]
    pieces = []
    for record in [] if earlier is None else earlier.get("pieces", []):
        left = [m for m in record.get("measured", []) if m not in redone]
        if left:
            pieces.append(record | {"measured": left})
    doc = {k: v for k, v in piece.items() if k not in ("runs", "piece", "sections")}
    doc.pop("conditions", None)  # each piece's own, in ``pieces``
    doc["pieces"] = [*pieces, piece["piece"]]
    doc["sections"] = ({} if earlier is None else earlier.get("sections") or {}) | sections
    doc["runs"] = kept_runs + piece["runs"]
    return doc


def merge_into(path: Path, piece: dict[str, Any]) -> dict[str, Any]:
    """Merge ``piece`` into the canonical file at ``path`` under a lock, write it, and return
    the merged document."""
    from ladder.core import report

    with _locked(path):
        earlier = report.read_results(path) if path.is_file() else None
        doc = merged(earlier, piece)
        report.write_results(doc, path)
    return doc


def pieces_of(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """A canonical document taken apart into the pieces that built it, oldest first, each in
    the form ``merged`` takes: so a file measured on another machine (``ladder bench --out``
    there) merges into this checkout's file piece by piece, newer pieces winning."""
    top = {k: v for k, v in doc.items() if k not in ("runs", "pieces", "sections")}
    found = []
    for record in doc.get("pieces") or []:
        pairs = set(record.get("measured", []))
        runs = [r for r in doc["runs"] if f"{r['problem']}/{r['dtype']}" in pairs]
        sections = {k: v for k, v in (doc.get("sections") or {}).items() if k in pairs}
        piece = top | {"runs": runs, "sections": sections, "piece": record}
        for key in ("versions", "ceilings", "date"):
            if record.get(key):
                piece[key] = record[key]
        found.append(piece)
    return found


def piece_seconds(path: Path, problem: str) -> float | None:
    """How long the latest piece of the canonical file at ``path`` that measured ``problem``
    took, or None (no file, never measured, not recorded): what a bench with a deadline
    expects of it."""
    if not path.is_file():
        return None
    from ladder.core import report

    record = latest_piece(report.read_results(path), problem)
    return record.get("seconds") if record else None


def latest_piece(doc: dict[str, Any], problem: str) -> dict[str, Any] | None:
    """The record of the latest piece of ``doc`` that measured ``problem`` (a problem or a
    section), or None."""
    for record in reversed(doc.get("pieces") or []):
        if any(m.split("/")[0] == problem for m in record.get("measured", [])):
            return record
    return None


def piece_record(
    runs: list[dict[str, Any]],
    sections: list[str],
    conditions: dict[str, Any] | None,
    ceilings: dict[str, Any] | None,
    versions: dict[str, Any],
    argv: list[str],
    seconds: float,
    date: str,
    measured_at: str | None,
) -> dict[str, Any]:
    """What a canonical file records of one ``ladder bench``: when, at which commit, on which
    of the machine's GPUs, what it measured, under which conditions, and how long it took."""
    return {
        "date": date,
        "commit": measured_at,
        "measured": sorted(_pairs(runs)) + sorted(sections),
        "argv": list(argv),
        "seconds": round(seconds, 1),
        "visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "versions": versions,
        "ceilings": ceilings,
        "conditions": conditions,
    }


def ceilings_for(doc: dict[str, Any], problem: str) -> dict[str, Any]:
    """The ceilings measured beside ``problem``'s runs: those of the latest piece that
    measured it, else the file's own. A problem measured days before another keeps the roofs
    of its own day, so re-measuring one problem moves no other problem's derived figures."""
    record = latest_piece(doc, problem)
    return (record or {}).get("ceilings") or doc.get("ceilings") or {}


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def runs_on(r: Rung, cc: tuple[int, int]) -> bool:
    """Whether ``r`` runs on a GPU of compute capability ``cc`` (the CPU baseline too)."""
    return r.reason_for_cc(cc) is None


def missing(doc: dict[str, Any], found: Iterable[Rung] | None = None) -> list[str]:
    """Every registered rung, library and peer that can run on the file's GPU and has no run
    in ``doc`` for one of its dtypes, as ``problem/name dtype``: what a bench of those
    problems must measure before the file is whole."""
    cc = tuple(doc.get("device", {}).get("compute_capability") or ())
    have = {(r["problem"], r["rung"], r["dtype"]) for r in doc["runs"]}
    lacking = []
    for r in rungs() if found is None else found:
        if cc and not runs_on(r, cc):
            continue
        for dtype in r.dtypes:
            if (r.problem, r.name, dtype) not in have:
                lacking.append(f"{r.key} {dtype}")
    return lacking
