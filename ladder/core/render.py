"""Everything the course presents from measurements, rendered from the canonical files by one
command, ``ladder render``, and never typed:

- the README's table between ``<!-- results:start GPU -->`` and ``<!-- results:end -->``: for
  each problem and dtype, the best rung at the size ``ladder run`` defaults to against the
  fastest library in the same run, from the canonical file of the GPU the marker names; and
  its start-here table of the notebooks (what each teaches, what it runs on, minutes);
- ``docs/results/<problem>.md``: every case of the problem, every rung, library and peer;
  ``docs/results/transfer.md`` and ``models.md``: the two benchmarks that are not ladders;
- ``docs/results/README.md``: the pages, the canonical files and their pieces, and which GPU
  generations each rung runs on (from the registry);
- the figures beside each canonical file (``results/<gpu>.png``, ``-<problem>.png``,
  ``-contenders.png``), drawn unless ``figures=False``;
- ``lab/README.md``, the lab's index (``ladder.core.lab``).

``ladder render --check`` renders the text into memory and fails where a committed file
differs, so a page cannot go stale (the tests run it).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ladder.core import canonical, derived, report
from ladder.core.rung import get_problem, problems, rungs

ROOT = canonical.ROOT
PAGES = ROOT / "docs" / "results"
README = ROOT / "README.md"
START = re.compile(r"<!-- results:start (?P<gpu>[\w\-]+) -->")
END = "<!-- results:end -->"
NOTES = {"gemm": "gemm", "conv": "conv", "fused": "fused", "attention": "attention", "moe": "moe"}


def readme_gpu(readme: Path = README) -> str | None:
    """The GPU slug the README's results marker names (``<!-- results:start nvidia-h200 -->``),
    or None where it has no marker."""
    found = START.search(readme.read_text()) if readme.is_file() else None
    return found.group("gpu") if found else None


def _shape(shape: Any) -> str:
    return " × ".join(map(str, shape))


def _date(run: dict[str, Any], doc: dict[str, Any]) -> str:
    return str(run.get("date") or doc.get("date") or "—")[:10]


def _notes(problem: str) -> str | None:
    """The lab notes of the package a problem's rungs live in (``docs/notes/<area>.md``)."""
    for r in rungs(problem, references=False):
        area = r.package.split(".")[1] if "." in r.package else ""
        name = NOTES.get(area)
        if name and (ROOT / "docs" / "notes" / f"{name}.md").is_file():
            return f"docs/notes/{name}.md"
    return None


def headline_rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per registered problem and dtype: the best rung at the size ``ladder run``
    defaults to (the problem's last standard size) against the fastest library of the same run;
    a row with ``rung`` None where the file has no passing rung there."""
    best = {(r["problem"], r["dtype"], tuple(r["shape"])): r for r in derived.best_rows(doc)}
    dates = {}
    for run in doc["runs"]:
        dates[(run["problem"], run["dtype"], tuple(run["shape"]))] = _date(run, doc)
    found = []
    for name, problem in problems().items():
        for dtype in problem.dtypes:
            shape = tuple(problem.standard_sizes(dtype)[-1])
            row = best.get((name, dtype, shape))
            found.append(
                {
                    "problem": name,
                    "dtype": dtype,
                    "shape": shape,
                    "rung": row["rung"] if row else None,
                    "number": row["number"] if row else None,
                    "library": row["library"] if row else None,
                    "vs_library": row["vs_library"] if row else None,
                    "date": dates.get((name, dtype, shape), "—"),
                }
            )
    return found


def headline_markdown(doc: dict[str, Any], slug: str) -> str:
    """The README's table: problem, dtype, size, best rung, × the fastest library (named), the
    date measured; the GPU and the file named above it."""
    gpu = doc["gpu"]
    lines = [
        f"The best rung of each ladder against the fastest library call measured in the same run "
        f"(× above 1: the rung is faster; within a few percent is parity), on **{gpu}**, from "
        f"[`results/{slug}.json`](results/{slug}.json) (`ladder bench`). Every rung, library "
        f"and peer: [docs/results](docs/results/README.md).",
        "",
        "| problem | dtype | size | best rung | × fastest library | library | measured |",
        "|---|---|---|---|---:|---|---|",
    ]
    for row in headline_rows(doc):
        page = f"[{row['problem']}](docs/results/{row['problem']}.md)"
        if row["rung"] is None:
            lines.append(f"| {page} | {row['dtype']} | {_shape(row['shape'])} | not measured | — "
                         f"| — | — |")  # fmt: skip
            continue
        ratio = "—" if row["vs_library"] is None else f"{row['vs_library']:.2f}"
        lines.append(
            f"| {page} | {row['dtype']} | {_shape(row['shape'])} | {row['number']} "
            f"`{row['rung']}` | {ratio} | {row['library'] or '—'} | {row['date']} |"
        )
    return "\n".join(lines) + "\n"


def _figure(slug: str, problem: str | None = None) -> str:
    return f"{slug}-{problem}.png" if problem else f"{slug}.png"


def problem_page(problem: str, docs: dict[str, dict[str, Any]]) -> str:
    """``docs/results/<problem>.md``: per canonical file (GPU), the problem's figure, its own
    summary, the best rung against every library configuration and peer, and every rung's
    table, per case."""
    found = get_problem(problem)
    ladder_rungs = rungs(problem, references=False)
    lines = [
        f"# {problem}: results",
        "",
        "Rendered by `ladder render` from the canonical results files; do not edit. "
        f"Sizes are {' × '.join(found.size_names)}. The rungs, in ladder order: "
        + ", ".join(f"{r.number} `{r.name}`" for r in ladder_rungs)
        + ".",
        "",
    ]
    notes = _notes(problem)
    for slug, doc in docs.items():
        runs = [r for r in doc["runs"] if r["problem"] == problem]
        if not runs:
            continue
        dates = sorted({_date(r, doc) for r in runs})
        commits = sorted({str(r.get("commit") or "—")[:12] for r in runs})
        lines += [
            f"## {doc['gpu']}",
            "",
            f"From [`results/{slug}.json`](../../results/{slug}.json), measured "
            f"{' to '.join(dict.fromkeys([dates[0], dates[-1]]))} at commit "
            f"{', '.join(commits)}. × library is against the fastest library row of the same "
            "run; a margin within the spread of the repeats is parity.",
            "",
            f"![{problem} on {doc['gpu']}](../../results/{_figure(slug, problem)})",
            "",
        ]
        summary = derived.problem_summary(problem, runs, canonical.ceilings_for(doc, problem))
        if summary:
            lines += [summary.rstrip(), ""]
        lost = report.losses({"runs": runs}, notes and f"../../{notes}")
        if lost:
            lines += lost
        every = report.contenders_markdown({"runs": runs}, [problem])
        if every:
            lines += ["### The best rung, every library configuration and peer", "", every]
        lines += ["### Every rung", ""]
        for group in derived.groups(runs).values():
            lines += report.group_table(group, canonical.ceilings_for(doc, problem))
    if len(lines) < 6:
        lines += ["Not measured yet: `ladder bench --problems " + problem + "` writes it.", ""]
    return "\n".join(lines).rstrip() + "\n"


def _lacking(doc: dict[str, Any]) -> list[str]:
    """What the file still lacks, one row per problem, with the command that measures it."""
    by_problem: dict[str, list[str]] = {}
    for entry in canonical.missing(doc):
        key, dtype = entry.rsplit(" ", 1)
        problem, name = key.split("/", 1)
        by_problem.setdefault(problem, []).append(f"`{name}` {dtype}")
    if not by_problem:
        return ["Every registered rung, library and peer that runs on this GPU is in the file."]
    lines = [
        "Registered and able to run on this GPU but not in the file yet:",
        "",
        "| problem | not measured | measure with |",
        "|---|---|---|",
    ]
    for problem, names in by_problem.items():
        lines.append(f"| {problem} | {', '.join(names)} | `ladder bench --problems {problem}` |")
    return lines


SECTION_TITLES = {
    "gemm-shapes": "GEMM at the shapes models call (ladder bench --problems gemm-shapes)",
    "transfer": "data movement (ladder bench --problems transfer)",
    "models": "models on the ladder's operators (ladder bench --problems models)",
}


def section_page(name: str, docs: dict[str, dict[str, Any]], root: Path = ROOT) -> str:
    """``docs/results/<name>.md`` for a section of the canonical files (``transfer``,
    ``models``): the section's own Markdown, per GPU, with the figures drawn beside the file."""
    lines = [
        f"# {SECTION_TITLES[name]}: results",
        "",
        "Rendered by `ladder render` from the canonical results files; do not edit.",
        "",
    ]
    for slug, doc in docs.items():
        section = (doc.get("sections") or {}).get(name)
        if section is None:
            continue
        figures = sorted((root / "results").glob(f"{slug}-{name}-*.png"))
        links = [f"../../results/{p.name}" for p in figures]
        where = f"results/{slug}.json"
        lines += [f"## {doc['gpu']}", "", f"From [`{where}`](../../{where}), measured "
                  f"{str(section.get('date'))[:10]} at commit "
                  f"{str(section.get('commit') or '—')[:12]}.", ""]  # fmt: skip
        if name == "transfer":
            from ladder.transfer import bench

            body = bench.markdown(section, links)
        elif name == "gemm-shapes":
            from ladder.gemm import shapes

            body = shapes.markdown(section, links)
        else:
            from ladder.models import bench as models

            body = models.markdown(section, links, where)
        lines += [body.rstrip(), ""]
    if len(lines) == 4:
        lines += [f"Not measured yet: `ladder bench --problems {name}` writes it.", ""]
    return "\n".join(lines).rstrip() + "\n"


def index_page(docs: dict[str, dict[str, Any]]) -> str:
    """``docs/results/README.md``: the problem pages, the canonical files and their pieces
    (what each measured, when, at which commit, how long it took), and which GPU generations
    each rung runs on."""
    lines = [
        "# Results",
        "",
        "Rendered by `ladder render` from the canonical results files; do not edit. One file "
        "per GPU, written only by `ladder bench`, built up in pieces (a problem or a few at a "
        "time); each run records the date and commit it was measured at.",
        "",
        "Problems: " + ", ".join(f"[{name}]({name}.md)" for name in problems()) + ". Beside "
        "them: " + ", ".join(f"[{name}]({name}.md)" for name in SECTION_TITLES) + ".",
        "",
    ]
    for slug, doc in docs.items():
        lines += [
            f"## {doc['gpu']}: [`results/{slug}.json`](../../results/{slug}.json)",
            "",
            f"Driver {doc.get('driver')}, CUDA runtime {doc.get('cuda_runtime')}; "
            f"{len(doc['runs'])} runs. The overview: "
            f"[`results/{_figure(slug)}`](../../results/{_figure(slug)}).",
            "",
            "| piece | measured | date | commit | seconds | CUDA_VISIBLE_DEVICES (— unset) |",
            "|---:|---|---|---|---:|---|",
        ]
        for i, piece in enumerate(doc.get("pieces", []), 1):
            lines.append(
                f"| {i} | {', '.join(piece.get('measured', []))} | "
                f"{str(piece.get('date'))[:16]} | {str(piece.get('commit') or '—')[:12]} | "
                f"{piece.get('seconds') or '—'} | {piece.get('visible_devices') or '—'} |"
            )
        notes = [
            f"Piece {i}: {piece['note']}."
            for i, piece in enumerate(doc.get("pieces", []), 1)
            if piece.get("note")
        ]
        lines += ["", *notes, *([""] if notes else []), *_lacking(doc), ""]
    lines += ["## Which GPU generations each rung runs on", ""]
    lines += [report.generations_markdown(rungs()).rstrip(), ""]
    return "\n".join(lines).rstrip() + "\n"


NOTEBOOKS_START, NOTEBOOKS_END = "<!-- notebooks:start -->", "<!-- notebooks:end -->"
WORDS_PER_MINUTE = 200  # prose, read
SECONDS_PER_CODE_LINE = 2  # code, skimmed
SECONDS_PER_FIGURE = 20


COLLAPSED = re.compile(r"<details>\s*<summary>(.*?)</summary>.*?</details>", re.S)


def skim_minutes(path: Path) -> float:
    """About how long a notebook takes to skim with its outputs: its prose (Markdown cells and
    Markdown outputs: a rung's story) at WORDS_PER_MINUTE, its code (cells, and code shown in
    outputs: a diff) at SECONDS_PER_CODE_LINE a line, and SECONDS_PER_FIGURE per figure. A
    collapsed ``<details>`` block counts as its summary line: a reader skims what is open and
    opens what they mean to read."""
    import json

    nb = json.loads(path.read_text())
    words = code_lines = figures = 0
    for cell in nb["cells"]:
        source = COLLAPSED.sub(r"\1", "".join(cell["source"]))
        if cell["cell_type"] == "markdown":
            words += len(source.split())
            continue
        code_lines += len(source.splitlines())
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            figures += "image/png" in data
            text = "".join(out.get("text", "")) + "".join(data.get("text/markdown", ""))
            text = COLLAPSED.sub(r"\1", text)
            inside = False
            for line in text.splitlines():
                if line.startswith("```"):
                    inside = not inside
                elif inside:
                    code_lines += 1
                else:
                    words += len(line.split())
    seconds = code_lines * SECONDS_PER_CODE_LINE + figures * SECONDS_PER_FIGURE
    return words / WORDS_PER_MINUTE + seconds / 60


NEXT = re.compile(r"\*\*Next:\*\*[^\n]*?\]\(([\w.-]+\.ipynb)\)")


def reading_order(folder: Path) -> list[Path]:
    """The notebooks in the order a learner reads them: from the first by file name, each
    notebook's opening "**Next:**" link to the one after; any the chain misses, by name."""
    import json

    every = sorted(folder.glob("*.ipynb"))
    order: list[Path] = []
    path = every[0] if every else None
    while path is not None and path not in order and path.is_file():
        order.append(path)
        cells = json.loads(path.read_text())["cells"]
        found = NEXT.search("".join(cells[0]["source"])) if cells else None
        path = folder / found.group(1) if found else None
    return order + [p for p in every if p not in order]


def notebooks_markdown(folder: Path) -> str:
    """The README's start-here table: each notebook in order, what it teaches and what it runs
    on (its metadata's ``ladder.learn`` and ``ladder.runs_on``), and minutes to skim it."""
    import json

    lines = [
        "| notebook | you will learn | runs on | minutes |",
        "|---|---|---|---:|",
    ]
    for path in reading_order(folder):
        meta = json.loads(path.read_text()).get("metadata", {}).get("ladder", {})
        lines.append(
            f"| [{path.stem}](notebooks/{path.name}) | {meta.get('learn', '—')} | "
            f"{meta.get('runs_on', '—')} | {skim_minutes(path):.0f} |"
        )
    return "\n".join(lines) + "\n"


def readme_block(readme: Path, docs: dict[str, dict[str, Any]]) -> str | None:
    """The README with its results block rendered from the file of the GPU its marker names;
    None where the README has no marker."""
    text = readme.read_text()
    found = START.search(text)
    if found is None or END not in text:
        return None
    slug = found.group("gpu")
    if slug not in docs:
        raise ValueError(f"{readme} reports {slug}, which has no results/{slug}.json")
    body = headline_markdown(docs[slug], slug)
    pattern = re.escape(found.group(0)) + ".*?" + re.escape(END)
    text = re.sub(pattern, lambda _: f"{found.group(0)}\n{body}{END}", text, count=1, flags=re.S)
    if NOTEBOOKS_START in text and NOTEBOOKS_END in text:
        table = notebooks_markdown(readme.parent / "notebooks")
        pattern = re.escape(NOTEBOOKS_START) + ".*?" + re.escape(NOTEBOOKS_END)
        block = f"{NOTEBOOKS_START}\n{table}{NOTEBOOKS_END}"
        text = re.sub(pattern, lambda _: block, text, count=1, flags=re.S)
    return text


def load(folder: Path = canonical.RESULTS) -> dict[str, dict[str, Any]]:
    """Every canonical file, by GPU slug."""
    return {path.stem: report.read_results(path) for path in canonical.files(folder)}


def texts(root: Path = ROOT) -> dict[Path, str]:
    """Every rendered text file, by path, from the canonical files under ``root``."""
    from ladder.core import lab

    docs = load(root / "results")
    out: dict[Path, str] = {}
    readme = root / "README.md"
    if readme.is_file():
        block = readme_block(readme, docs)
        if block is not None:
            out[readme] = block
    pages = root / "docs" / "results"
    out[pages / "README.md"] = index_page(docs)
    for name in problems():
        out[pages / f"{name}.md"] = problem_page(name, docs)
    for name in SECTION_TITLES:
        out[pages / f"{name}.md"] = section_page(name, docs, root)
    if (root / "lab").is_dir():
        out[root / "lab" / "README.md"] = lab.index_markdown(lab.entries(root / "lab"))
    return out


def draw(root: Path = ROOT, say: Callable[[str], None] = print) -> list[Path]:
    """The figures of every canonical file, beside it: the overview, one per problem, the
    contenders."""
    drawn = []
    for slug, doc in load(root / "results").items():
        folder = root / "results"
        drawn.append(report.plot_overview(doc, folder / _figure(slug)))
        say(f"drew {drawn[-1]}")
        for name in dict.fromkeys(r["problem"] for r in doc["runs"]):
            drawn.append(report.plot(doc, folder / _figure(slug, name), [name]))
            say(f"drew {drawn[-1]}")
        path = folder / _figure(slug, "contenders")
        try:
            report.plot_contenders(doc, path)
            drawn.append(path)
            say(f"drew {path}")
        except ValueError:  # no library or peer measured (a simulated file)
            pass
        sections = doc.get("sections") or {}
        if "gemm-shapes" in sections:
            from ladder.gemm import shapes

            drawn += shapes.figures(sections["gemm-shapes"], folder, f"{slug}-gemm-shapes")
        if "transfer" in sections:
            from ladder.transfer import bench

            drawn += bench.figures(sections["transfer"], folder, f"{slug}-transfer")
        if "models" in sections:
            from ladder.models import plot

            drawn += plot.figures(sections["models"], folder, f"{slug}-models")
    return drawn


def stale(root: Path = ROOT) -> list[Path]:
    """The rendered text files that differ from what ``ladder render`` would write now."""
    return [p for p, text in texts(root).items() if not p.is_file() or p.read_text() != text]


def write(root: Path = ROOT, figures: bool = True, say: Callable[[str], None] = print) -> None:
    """Render every figure (with ``figures``) and then every text, which links the figures,
    from the canonical files."""
    if figures:
        draw(root, say)
    for path, text in texts(root).items():
        if not path.is_file() or path.read_text() != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            say(f"wrote {path.relative_to(root)}")
