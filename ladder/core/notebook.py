"""Helpers for the notebooks: show a rung's story and lesson, measure it, and read the
canonical results.

The notebooks call these so that the text a learner reads is the rung's own docstring, its
diff from its parent and the canonical file's figures, never a copy that can drift.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ladder.core import canonical as _files
from ladder.core import derived, device, report, roofline, timing
from ladder.core.rung import Rung

# A diff of at most this many changed lines is shown open under the rung's story; a longer one,
# and every .cu diff, is collapsed (a click opens it): a notebook is skimmed in its open text,
# and a rewrite of a few hundred lines is read in the file, not skimmed.
OPEN_LINES = 30


def _collapsed(summary: str, body: str) -> str:
    """``body`` (Markdown) behind a ``<details>`` block that shows ``summary`` closed."""
    return f"<details><summary>{summary}</summary>\n\n{body}\n\n</details>"


def lesson(rung: Rung, context: int = 3, open_lines: int = OPEN_LINES) -> str:
    """Markdown of a rung's lesson: its diff from its parent (``ladder diff``), a block per
    file, with links to the whole files; for the first rung of a ladder, its code whole. A
    Python diff of more than ``open_lines`` changed lines, and both diffs of a CUDA C++ rung
    (its ``.cu`` and its loader), come collapsed, the summary saying how many lines each
    changes."""
    from ladder.core import diff

    path = diff.module_file(rung)
    where = f"ladder/{path.resolve().as_posix().rsplit('/ladder/', 1)[-1]}"
    try:
        found = diff.files(rung, context=context)
    except ValueError:  # the first rung: nothing to diff against
        text = diff.code(path)
        block = f"```python\n{text}```"
        if len(text.splitlines()) > open_lines:
            block = _collapsed(f"the code of <code>{path.name}</code>", block)
        return f"The code ([`{where}`](../{where})), below its docstring:\n\n{block}"
    parent = diff.parent_of(rung)
    cuda = any(f.kind == "cu" for f in found)  # its lesson is the .cu; the .py, its loader
    lines = [
        f"**The lesson**: what `{rung.name}` changes in `{parent.name}` (rung {parent.number}), "
        f"`ladder diff {rung.problem} {rung.name}`; the whole file: [`{where}`](../{where})"
        + (", and its `.cu` beside it." if cuda else ".")
    ]
    for f in found:
        if not f.lines:
            continue
        block = "```diff\n" + "\n".join(f.lines) + "\n```"
        if cuda or f.changed > open_lines:
            block = _collapsed(f"<code>{f.new.name}</code>: {f.changed} lines changed", block)
        lines.append(block)
    return "\n\n".join(lines)


def _label(rung: Rung) -> str:
    if rung.peer:
        return "Peer"
    return "Library" if rung.reference else f"Rung {rung.number}"


def _rate(m: timing.Measurement) -> str:
    if m.tflops:
        return f"{m.tflops:.3f} TFLOP/s"
    # memory-bound: the bytes it moves, and the problem's fewest bytes, over time
    return (
        f"{(m.bytes_moved or m.min_bytes) / 1e9:.3f} GB moved, {m.tbps_moved:.3f} TB/s "
        f"achieved, {m.tbps:.3f} TB/s effective"
    )


def report_line(rung: Rung, m: timing.Measurement, repeats: bool = False) -> None:
    """Print one line for a measurement: its errors before and after timing, its median time
    (and spread, with ``repeats``) and rate, or why it did not run."""
    if m.ok:
        note = " (simulator: not a GPU time)" if m.simulated else ""
        spread = (
            f" (min {m.min_ms:.3f}, max {m.max_ms:.3f}, {len(m.samples_ms)} repeats)"
            if repeats
            else ""
        )
        print(
            f"{rung.name}: rel err {m.rel_err:.1e} before timing, {m.rel_err_after:.1e} after; "
            f"median {m.median_ms:.3f} ms{spread}{note}; {_rate(m)}"
        )
    elif m.status is timing.Status.UNAVAILABLE:
        print(f"{rung.name}: skipped here, {m.error}")
    else:
        print(f"{rung.name}: {m.error}")


def walk(
    case: timing.Case, rung: Rung, show_code: bool = True, show_doc: bool = True
) -> timing.Measurement:
    """Display the rung's story and its lesson (the diff from its parent), then check and time
    it on ``case``. A notebook that walks a rung again (another dtype or size) passes
    ``show_doc=False`` (and usually ``show_code=False``): a heading naming the case instead
    of the story. A library or peer has a story and no lesson; its story comes collapsed
    below its first paragraph."""
    from IPython.display import Markdown, display

    heading = f"### {_label(rung)}: {rung.title}"
    if show_doc and rung.reference:
        # a library's or peer's story (its configurations, why it is a fair reference, how a
        # peer was written) is there to look up, not the lesson: its first paragraph open, the
        # rest collapsed
        first, _, rest = rung.doc.strip().partition("\n\n")
        more = _collapsed("the rest of its story", rest) if rest.strip() else ""
        display(Markdown(f"{heading}\n\n{first}\n\n{more}"))
    elif show_doc:
        display(Markdown(f"{heading}\n\n" + rung.doc.strip()))
    else:
        display(Markdown(f"{heading} ({case.dtype}, {' x '.join(map(str, case.size))})"))
    if show_code and not rung.reference:
        display(Markdown(lesson(rung)))
    m = timing.measure(case, rung)
    report_line(rung, m, repeats=True)
    return m


def between(problem: str, after: str, before: str) -> list[int]:
    """The numbers of the rungs of ``problem`` strictly between the rungs named ``after`` and
    ``before``, in ladder order: a notebook walks a stretch of a ladder by the names at its
    ends, and a rung inserted there is walked too."""
    from ladder.core.rung import get_rung, rungs

    low, high = get_rung(problem, after).number, get_rung(problem, before).number
    return [r.number for r in rungs(problem) if not r.reference and low < r.number < high]


def climb(
    problem: str,
    dtype: str = "float32",
    size: tuple[int, ...] | None = None,
    *,
    numbers: Iterable[int] | None = None,
    libraries: bool = True,
    shown: set[str] | None = None,
) -> list[timing.Measurement]:
    """Check and time, in ladder order, the rungs of ``problem`` that take ``dtype`` (those
    numbered ``numbers``, where given; the libraries and peers too unless ``libraries`` is
    False) on ``size``: by default the problem's first standard size on a GPU and its first
    simulator size without one. A rung whose key is not yet in ``shown`` is walked (its story
    and lesson, then its line) and added to it, with its story; one already there prints its
    line alone, as does one whose story was told already (the libraries of one module share
    theirs; a masked problem's rungs are the plain problem's modules)."""
    from ladder.core.rung import get_problem, rungs

    found = get_problem(problem)
    if size is None:
        sizes = found.standard_sizes if device.gpu_available() else found.simulator_sizes
        size = sizes(dtype)[0]
    case = timing.prepare(found, size, dtype)
    wanted = None if numbers is None else set(numbers)
    shown = set() if shown is None else shown
    measured = []
    for r in rungs(problem):
        if dtype not in r.dtypes:
            continue
        if r.reference or r.peer:
            if not libraries:
                continue
        elif wanted is not None and r.number not in wanted:
            continue
        story = "story:" + r.doc.strip()
        if r.key not in shown and story not in shown:
            measured.append(walk(case, r))
            shown.update((r.key, story))
        else:  # told already, maybe for another problem (a masked problem's rungs are its own)
            m = timing.measure(case, r)
            report_line(r, m)
            measured.append(m)
    return measured


def exercise(check: Any, answer: Any) -> None:
    """Print what an exercise's ``check_<name>(answer)`` says: its message when the answer is
    right, its hint when not, and a reminder while the answer is still the ``None`` shipped."""
    if answer is None:
        print(f"{check.__name__}: replace None with your answer, then run this cell again")
        return
    try:
        print(check(answer))
    except AssertionError as hint:
        print(f"not yet: {hint}")


def show(fig: Any) -> None:
    """Display a matplotlib figure as a PNG and close it. The same under every backend: once
    a report has switched matplotlib to Agg, ``plt.show()`` draws nothing in a notebook."""
    import io

    import matplotlib.pyplot as plt
    from IPython.display import Image, display

    data = io.BytesIO()
    fig.savefig(data, format="png", dpi=100, bbox_inches="tight")
    plt.close(fig)
    display(Image(data=data.getvalue()))


def summary(measurements: list[timing.Measurement], plot_path: str | None = None) -> Any:
    """The ladder's table and bar chart against the library, from these measurements."""
    from IPython.display import Image, display
    from rich.console import Console

    ceilings = roofline.ceilings()
    doc = report.results_document([m.to_dict() for m in measurements], ceilings)
    console = Console(width=150)
    for (problem, dtype, shape), group in derived.groups(doc["runs"]).items():
        title = f"{problem} {dtype} {' x '.join(map(str, shape))} on {doc['gpu']}"
        console.print(report.rich_table(group, ceilings, title))
    if device.simulator():
        print(device.SIMULATOR_NOTE)
    if plot_path:
        report.plot(doc, plot_path)
        display(Image(filename=plot_path))
    return doc


# Set by tests/test_notebooks.py, which executes every notebook in the simulator: a compiler
# report then builds its first rung alone, for one architecture (CI's `ladder check` builds
# every rung for every architecture; a notebook's report would build them all again).
QUICK = "LADDER_NOTEBOOK_QUICK"


def compile_report(
    problem: str, names: list[str], archs: tuple[str, ...] = ("sm_80", "sm_90")
) -> list[dict[str, Any]]:
    """Show ``ladder check``'s compiler report for these rungs (no GPU needed) and return it,
    for ``archs``: by default sm_80 and sm_90 (sm_90a where a rung needs it), the two the
    notebooks discuss, rather than every generation ``ladder check`` compiles for. Under the
    notebook test (``QUICK`` set), the first rung for the last architecture, said."""
    import json
    import os
    import subprocess
    import tempfile

    from rich.console import Console

    if os.environ.get(QUICK):
        print(f"(the notebook test: {names[0]} for {archs[-1]} only; run it again for all)")
        names, archs = names[:1], archs[-1:]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "check.json"
        command = [sys.executable, "-m", "ladder", "check", problem, "--rungs", *names]
        command += ["--archs", *archs]
        done = subprocess.run([*command, "--json", str(out)], capture_output=True, text=True)
        if not out.exists():
            raise RuntimeError(f"ladder check failed: {done.stderr[-2000:]}")
        reports = json.loads(out.read_text())
    Console(width=150).print(report.check_table(reports))
    return reports


def profile_figures(path: str) -> dict[str, Any]:
    """Show the Nsight Compute figures saved by ``ladder profile --json`` on a real GPU."""
    import json
    from pathlib import Path

    from rich.console import Console

    doc = json.loads(Path(path).read_text())
    Console(width=150).print(report.profile_table(doc["profiles"], doc["gpu"]))
    return doc


def committed(name: str) -> Path | None:
    """A committed file: a canonical results file by name (``results/<name>`` of the
    repository, found from a notebook's folder or the repository's), or a lab file by its
    repository path (``lab/...``, through the lab's index, which refuses a file no entry
    lists); None where it is not here (an installed package)."""
    if name.startswith("lab/"):
        from ladder.core import lab

        return lab.resolve(name) if lab.LAB.is_dir() else None
    for path in (Path(name), Path("..") / "results" / name, Path("results") / name):
        if path.is_file():
            return path
    root = Path(__file__).resolve().parents[2] / "results" / name
    return root if root.is_file() else None


def contenders(
    name: str, problems: list[str], dtypes: list[str] | None = None, figure: bool = True
) -> dict[str, Any] | None:
    """From the committed results file ``name`` (as ``committed`` takes it): per case, the best
    rung, every library configuration and every peer, fastest first (a table), and their bars
    (``report.plot_contenders``). None, said, where the file is not here."""
    from IPython.display import Markdown, display

    shown = name if name.startswith("lab/") else f"results/{name}"
    path = committed(name)
    if path is None:
        print(f"{shown} is not here (it comes with the repository, not the package)")
        return None
    doc = report.read_results(path)
    display(
        Markdown(
            f"From `{shown}`, measured on {doc['gpu']} in one run per problem:\n\n"
            + report.contenders_markdown(doc, problems, dtypes)
        )
    )
    if figure:
        show(report.plot_contenders(doc, None, problems, dtypes))
    return doc


def canonical_path(slug: str | None = None) -> Path | None:
    """The canonical results file of the GPU the README reports (or of ``slug``); None where
    it is not here (an installed package has no repository)."""
    from ladder.core import render

    slug = slug or render.readme_gpu()
    path = _files.path_for(slug, _files.RESULTS) if slug else None
    return path if path is not None and path.is_file() else None


def canonical(slug: str | None = None) -> dict[str, Any] | None:
    """The canonical results file of the GPU the README reports (or of ``slug``), read; None,
    said, where it is not here (an installed package has no repository)."""
    path = canonical_path(slug)
    if path is None:
        print("the canonical results are not here (they come with the repository)")
        return None
    return report.read_results(path)


def runs_of(
    problem: str, dtype: str, shape: tuple[int, ...] | None = None
) -> dict[str, dict[str, Any]]:
    """The runs of one case in the canonical file that passed, by rung name (the first shape
    of ``problem`` and ``dtype`` in the file, where ``shape`` is not given); {} where the file
    or the case is not here. Notebooks compute their ratios from these and print them, never
    type them."""
    doc = canonical()
    if doc is None:
        return {}
    runs = [r for r in doc["runs"] if r["problem"] == problem and r["dtype"] == dtype]
    if shape is None and runs:
        shape = tuple(runs[0]["shape"])
    return {
        r["rung"]: r
        for r in runs
        if tuple(r["shape"]) == tuple(shape or ()) and derived.passed(r) and r["median_ms"]
    }


def times(problem: str, dtype: str, shape: tuple[int, ...] | None = None) -> dict[str, float]:
    """The median ms of every rung, library and peer of one case in the canonical file, by name
    (``runs_of``)."""
    return {name: r["median_ms"] for name, r in runs_of(problem, dtype, shape).items()}


def measured(
    problem: str, dtype: str | None = None, shape: tuple[int, ...] | None = None
) -> dict[str, Any] | None:
    """Show the canonical file's tables of ``problem`` (every rung, library and peer; one
    dtype or shape where given), naming the file, the GPU and the dates; return the file's
    document. Notebooks print their measured figures this way, never type them."""
    from IPython.display import Markdown, display

    doc = canonical()
    if doc is None:
        return None
    runs = [
        r
        for r in doc["runs"]
        if r["problem"] == problem
        and (dtype is None or r["dtype"] == dtype)
        and (shape is None or tuple(r["shape"]) == tuple(shape))
    ]
    if not runs:
        print(f"{problem} {dtype or ''} has no runs in the canonical file yet")
        return doc
    dates = sorted({str(r.get("date") or doc["date"])[:10] for r in runs})
    lines = [
        f"From the canonical file of the {doc['gpu']} (`ladder bench`, measured "
        f"{' to '.join(dict.fromkeys([dates[0], dates[-1]]))}):",
        "",
    ]
    for group in derived.groups(runs).values():
        lines += report.group_table(group, _files.ceilings_for(doc, problem))
    display(Markdown("\n".join(lines)))
    return doc
