"""Helpers for the notebooks: show a rung's story and lesson, measure it, and read the
canonical results.

The notebooks call these so that the text a learner reads is the rung's own docstring, its
diff from its parent and the canonical file's figures, never a copy that can drift.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from ladder.core import derived, device, report, roofline, timing
from ladder.core.rung import Rung


def lesson(rung: Rung, context: int = 3) -> str:
    """Markdown of a rung's lesson: its diff from its parent (``ladder diff``), a block per
    file, with links to the whole files; for the first rung of a ladder, its code whole."""
    from ladder.core import diff

    path = diff.module_file(rung)
    where = f"ladder/{path.resolve().as_posix().rsplit('/ladder/', 1)[-1]}"
    try:
        found = diff.files(rung, context=context)
    except ValueError:  # the first rung: nothing to diff against
        text = diff.code(path)
        return f"The code ([`{where}`](../{where})), below its docstring:\n```python\n{text}```"
    parent = diff.parent_of(rung)
    lines = [
        f"**The lesson**: what `{rung.name}` changes in `{parent.name}` (rung {parent.number}), "
        f"`ladder diff {rung.problem} {rung.name}`; the whole file: [`{where}`](../{where})"
        + (", and its `.cu` beside it." if any(f.kind == "cu" for f in found) else ".")
    ]
    for f in found:
        lines += ["```diff\n" + "\n".join(f.lines) + "\n```"]
    return "\n\n".join(lines)


def walk(
    case: timing.Case, rung: Rung, show_code: bool = True, show_doc: bool = True
) -> timing.Measurement:
    """Display the rung's story and its lesson (the diff from its parent), then check and time
    it on ``case``. A notebook that walks a rung again (another dtype or size) passes
    ``show_doc=False`` (and usually ``show_code=False``): a heading naming the case instead
    of the story."""
    from IPython.display import Markdown, display

    heading = f"### Rung {rung.number}: {rung.title}"
    if show_doc:
        display(Markdown(f"{heading}\n\n" + rung.doc.strip()))
    else:
        display(Markdown(f"{heading} ({case.dtype}, {' x '.join(map(str, case.size))})"))
    if show_code:
        display(Markdown(lesson(rung)))
    m = timing.measure(case, rung)
    if m.ok:
        note = " (simulator: not a GPU time)" if m.simulated else ""
        if m.tflops:
            rate = f"{m.tflops:.3f} TFLOP/s"
        else:  # memory-bound: the bytes it moves, and the problem's fewest bytes, over time
            rate = (
                f"{(m.bytes_moved or m.min_bytes) / 1e9:.3f} GB moved, {m.tbps_moved:.3f} TB/s "
                f"achieved, {m.tbps:.3f} TB/s effective"
            )
        print(
            f"{rung.name}: rel err {m.rel_err:.1e} before timing, {m.rel_err_after:.1e} after; "
            f"median {m.median_ms:.3f} ms (min {m.min_ms:.3f}, max {m.max_ms:.3f}, "
            f"{len(m.samples_ms)} repeats){note}; {rate}"
        )
    elif m.status is timing.Status.UNAVAILABLE:
        print(f"{rung.name}: skipped here, {m.error}")
    else:
        print(f"{rung.name}: {m.error}")
    return m


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


def compile_report(
    problem: str, names: list[str], archs: tuple[str, ...] = ("sm_80", "sm_90")
) -> list[dict[str, Any]]:
    """Show ``ladder check``'s compiler report for these rungs (no GPU needed) and return it,
    for ``archs``: by default sm_80 and sm_90 (sm_90a where a rung needs it), the two the
    notebooks discuss, rather than every generation ``ladder check`` compiles for."""
    import json
    import subprocess
    import tempfile
    from pathlib import Path

    from rich.console import Console

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
        import matplotlib.pyplot as plt

        report.plot_contenders(doc, None, problems, dtypes)
        plt.show()
    return doc


def canonical(slug: str | None = None) -> dict[str, Any] | None:
    """The canonical results file of the GPU the README reports (or of ``slug``), read; None,
    said, where it is not here (an installed package has no repository)."""
    from ladder.core import canonical as files
    from ladder.core import render

    slug = slug or render.readme_gpu()
    path = files.path_for(slug, files.RESULTS) if slug else None
    if path is None or not path.is_file():
        print("the canonical results are not here (they come with the repository)")
        return None
    return report.read_results(path)


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
        lines += report.group_table(group, doc.get("ceilings"))
    display(Markdown("\n".join(lines)))
    return doc
