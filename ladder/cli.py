"""The ``ladder`` command: list | info | run | bench | render | plot | diff | check | profile |
sanitize | transfer | models.

``python -m ladder`` is the same command.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any, NoReturn

import ladder  # chooses the backend before numba.cuda is imported
from ladder.core import conditions, derived, device, report, roofline, timing
from ladder.core.rung import (
    GENERATIONS,
    Problem,
    Rung,
    arch_cc,
    get_problem,
    get_rung,
    problems,
    rungs,
)
from ladder.transfer import options as transfer_options

PIPE_WIDTH = 1000  # columns when stdout is not a terminal: a table is never cut short in a file
SIMULATOR_LIMIT_S = 600  # ladder run refuses (without --force) what the simulator takes longer on
SIMULATOR_WARN_S = 60  # ... and says how long it will take above this


def _console():
    """The console of results, on stdout: as wide as the terminal, or, when stdout is a file
    or a pipe (and COLUMNS does not say otherwise), wide enough for every table."""
    from rich.console import Console

    console = Console()
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console = Console(width=PIPE_WIDTH)
    return console


class _Progress:
    """Progress on stderr, so that stdout holds only results: a rich bar when stderr is a
    terminal, else one line per step (a log file, a pipe, the child of ``ladder check``).

    ``step(text)`` says that the next of ``total`` counted steps starts; ``note(text)`` says
    what is being done between steps (a reference being computed). Each line starts with the
    seconds since the start, so a log shows where a long bench spends its time."""

    def __init__(self, total: int) -> None:
        import time

        from rich.console import Console

        self.total, self.done = total, 0
        self._began, self._clock = time.perf_counter(), time.perf_counter
        stderr = Console(stderr=True)
        self._bar: Any = None
        if stderr.is_terminal:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
            )

            columns = (
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
            )
            self._bar = Progress(*columns, console=stderr, transient=True)
            self._task = self._bar.add_task("", total=total)

    def __enter__(self) -> _Progress:
        if self._bar is not None:
            self._bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()

    def note(self, text: str) -> None:
        if self._bar is not None:
            self._bar.update(self._task, description=text)
        else:
            print(f"ladder: {self._since()} {text}", file=sys.stderr, flush=True)

    def step(self, text: str) -> None:
        if self._bar is not None:
            self._bar.update(self._task, description=text, completed=self.done)
        else:
            line = f"ladder: {self._since()} [{self.done + 1}/{self.total}] {text}"
            print(line, file=sys.stderr, flush=True)
        self.done += 1

    def _since(self) -> str:
        return f"{self._clock() - self._began:6.1f} s"


def _simulator_banner(console: Any) -> None:
    if device.simulator():
        console.print(f"[bold red]{device.SIMULATOR_NOTE}.[/] CuPy rungs need a GPU.")


def cmd_list(args: argparse.Namespace) -> int:
    from rich.table import Table

    console = _console()
    table = Table(title="ladder rungs", title_justify="left", caption_justify="left")
    if args.gpus:
        columns = ("problem", "#", "name", *(g.name for g in GENERATIONS), "why not")
        table.caption = report.generations_note()
    else:
        columns = ("problem", "#", "name", "title", "dtypes", "needs", "here")
        table.caption = "ladder list --gpus: which GPU generations each rung runs on"
    for col in columns:
        # the names are what --rungs takes: never cut short or wrapped
        table.add_column(col, no_wrap=col in ("problem", "#", "name"))
    for r in rungs(args.problem):
        kind = "peer" if r.peer else "ref" if r.reference else str(r.number)  # as report's
        first = (r.problem, kind, r.name)
        if args.gpus:
            table.add_row(*first, *map(report.plain, report.generation_cells(r)))
            continue
        reason = r.unavailable_reason()
        table.add_row(
            *first,
            report.plain(r.title),
            ", ".join(r.dtypes),
            ", ".join(sorted(r.needs)),
            "yes" if reason is None else report.plain(f"no: {reason}"),
        )
    console.print(table)
    _simulator_banner(console)
    return 0


def cmd_info(args: argparse.Namespace) -> int:
    console = _console()
    facts = device.facts()
    console.print(f"[bold]device[/]: {facts.name}")
    for key, value in facts.to_dict().items():
        if key != "name":
            console.print(f"  {key}: {value}")
    console.print("[bold]versions[/]")
    for key, value in device.library_versions().items():
        console.print(f"  {key}: {value}")
    found = roofline.ceilings(remeasure=args.remeasure)
    if found is None:
        _simulator_banner(console)
        console.print("ceilings: measured only on a real GPU")
        return 0
    console.print(f"[bold]ceilings[/] (measured {found['measured']}; --remeasure to redo)")
    for key, value in found.items():
        if isinstance(value, dict):
            for name, figure in value.items():
                console.print(f"  {key} [{name}]: {figure:.2f}")
        elif key not in ("gpu", "measured"):
            console.print(f"  {key}: {'—' if value is None else f'{value:.2f}'}")
    return 0


def _select(problem: str, names: list[str] | None) -> list[Rung]:
    if not names:
        return rungs(problem)
    return [get_rung(problem, name) for name in names]


def _runnable(r: Rung, dtype: str) -> bool:
    """True when ``r`` takes ``dtype`` and can run here: a step of the progress, a launch in the
    simulator's estimate."""
    return dtype in r.dtypes and r.unavailable_reason() is None


def _measure_all(
    cases: list[tuple[str, tuple[int, ...], str]],
    pick: dict[str, list[Rung]],
    repeats: int | None,
) -> list[dict[str, Any]]:
    """Measure every rung on every case that takes the case's dtype, with progress on stderr
    (a rung that cannot run here is reported, not counted); returns result dicts."""
    total = sum(_runnable(r, dtype) for p, _, dtype in cases for r in pick[p])
    results = []
    with _Progress(total) as progress:
        for problem_name, size, dtype in cases:
            problem = get_problem(problem_name)
            label = f"{problem_name} {dtype} {' x '.join(map(str, size))}"
            progress.note(f"{label}: reference (float64)")
            case = timing.prepare(problem, size, dtype)
            for r in pick[problem_name]:
                if dtype not in r.dtypes:
                    continue
                if r.unavailable_reason() is None:
                    progress.step(f"{label}: {r.name}")
                results.append(timing.measure(case, r, repeats=repeats).to_dict())
    return results


def _print_groups(console: Any, runs: list[dict], ceilings: dict | None, gpu: str) -> None:
    for (problem, dtype, shape), group in derived.groups(runs).items():
        title = f"{problem} {dtype} {' x '.join(map(str, shape))} on {gpu}"
        console.print(report.rich_table(group, ceilings, title))


def _exit_code(runs: list[dict[str, Any]]) -> int:
    """1 when a run failed; a rung that cannot run here is not a failure."""
    return int(any(timing.run_status(r) is timing.Status.FAILED for r in runs))


def _user_rungs(
    problem: str, paths: list[str], dtype: str, selected: list[Rung]
) -> dict[Rung, str]:
    """The rungs of ``--rung-file`` files (numbered 80, 81, ...), each with its path."""
    from ladder.core import user_rung

    found: dict[Rung, str] = {}
    taken = {r.name for r in selected}
    for i, path in enumerate(paths):
        r = user_rung.load(path, problem, number=user_rung.FIRST_NUMBER + i)
        if r.name in taken:
            raise ValueError(
                f"rung file {path}: its rung is named {r.name!r}, as another rung of this run; "
                "rename the file or give @rung(name=...) another name"
            )
        if dtype not in r.dtypes:
            raise ValueError(f"rung file {path}: its rung does not take {dtype} ({r.dtypes})")
        taken.add(r.name)
        found[r] = path
    return found


def _duration(seconds: float) -> str:
    for unit, length in (("days", 86400), ("h", 3600), ("min", 60)):
        if seconds >= 2 * length:
            return f"{seconds / length:.0f} {unit}"
    return f"{seconds:.0f} s"


def _simulator_guard(
    problem: Problem, size: tuple[int, ...], dtype: str, count: int, force: bool
) -> None:
    """In the simulator, refuse (ValueError) a run that ``timing.simulator_seconds`` puts above
    SIMULATOR_LIMIT_S unless forced, naming a size that runs in about a minute; say on stderr
    how long a run above SIMULATOR_WARN_S will take."""
    if not device.simulator() or count == 0:
        return
    seconds = timing.simulator_seconds(problem, size, dtype, count)
    if seconds <= SIMULATOR_WARN_S:
        return
    rungs_word = f"{count} rung{'s' * (count != 1)}"
    if seconds <= SIMULATOR_LIMIT_S or force:
        print(
            f"ladder: this takes at least {_duration(seconds)} in the CUDA simulator "
            f"({rungs_word})",
            file=sys.stderr,
            flush=True,
        )
        return
    steps, outputs = timing.simulator_steps(problem, size, dtype)
    smaller = timing.simulator_size(problem, size, dtype, count)
    raise ValueError(
        f"--size {' '.join(map(str, size))}: {problem.name} {dtype} would take at least "
        f"{_duration(seconds)} in the CUDA simulator ({rungs_word}, each launch "
        f"{steps:.2g} inner-loop steps over {outputs:.2g} outputs); --size "
        f"{' '.join(map(str, smaller))} "
        f"takes about a minute (a rough estimate); --force runs it anyway"
    )


def _dtype_note(problem: str, dtype: str, given: bool) -> str | None:
    """What ``ladder run`` did not run because of the dtype, and how to run it; None when every
    rung of the problem takes ``dtype``."""
    every = rungs(problem)
    others = [r for r in every if dtype not in r.dtypes]
    if not others:
        return None
    choices = sorted({d for r in others for d in r.dtypes}, key=get_problem(problem).dtypes.index)
    default = "" if given else " (the default --dtype)"
    return (
        f"{problem}: the table holds the {len(every) - len(others)} of its {len(every)} rungs "
        f"that take {dtype}{default}; the others take "
        f"{' or '.join(f'--dtype {d}' for d in choices)}"
    )


def cmd_run(args: argparse.Namespace) -> int:
    console = _console()
    problem = get_problem(args.problem)
    dtype = args.dtype  # checked against the problem's dtypes in main
    if args.size:
        size = args.size  # checked by problem.parse_size in main
    elif device.simulator():
        size = problem.simulator_sizes(dtype)[0]
    else:
        size = problem.standard_sizes(dtype)[-1]
    selected = _select(args.problem, args.rungs)
    if args.rungs:
        for r in selected:
            if dtype not in r.dtypes:
                raise ValueError(
                    f"--rungs: {r.name} does not take --dtype {dtype}; it takes "
                    f"{', '.join(r.dtypes)}"
                )
    files = _user_rungs(args.problem, args.rung_files or [], dtype, selected)
    timing.check_memory(problem, size, dtype)
    count = sum(_runnable(r, dtype) and not r.on_cpu for r in [*selected, *files])
    _simulator_guard(problem, size, dtype, count, args.force)
    ceilings = roofline.ceilings()
    runs = _measure_all(
        [(args.problem, size, dtype)], {args.problem: selected + list(files)}, args.repeats
    )
    paths = {r.name: path for r, path in files.items()}
    for run in runs:  # a failure of a user's kernel names its file
        path = paths.get(run["rung"])
        if path is not None and run["error"]:
            run["error"] = f"{path}: {run['error']}"
            console.print(f"[red]{report.plain(run['error'])}[/]")
    _print_groups(console, runs, ceilings, device.facts().name)
    ran = [r for r in runs if timing.run_status(r) is not timing.Status.UNAVAILABLE]
    note = None if args.rungs else _dtype_note(args.problem, dtype, args.dtype_given)
    if note:
        console.print(note)
    _simulator_banner(console)
    if args.json:
        path = report.write_results(report.results_document(runs, ceilings), args.json)
        console.print(f"wrote {path}")
    if not ran:
        console.print(
            f"nothing ran: every selected rung of {args.problem} ({dtype}) is unavailable here "
            "(the table says why)"
        )
        return 1
    return _exit_code(runs)


SECTIONS = ("gemm-shapes", "transfer", "models")  # benchmarks beside the ladders, same file


def _section(name: str, dtypes: list[str] | None) -> dict[str, Any]:
    """Measure one of SECTIONS and return its document (progress on stderr)."""

    def log(text: object) -> None:
        print(f"ladder: {name}: {text}", file=sys.stderr, flush=True)

    if name == "transfer":
        from ladder.transfer import bench as transfer_bench

        return transfer_bench.run(log=log)
    if name == "gemm-shapes":  # the GEMM's contenders at each shape, measured as a ladder is
        from ladder.gemm import shapes

        wanted = shapes.checked(tuple(dtypes) if dtypes else None)
        cases = [("gemm", size, dtype) for dtype in wanted for _, size in shapes.shapes()]
        return shapes.document(_measure_all(cases, {"gemm": shapes.contenders()}, None))
    try:
        from ladder.models import bench as models_bench
    except ImportError as err:
        raise ValueError(f"--problems models needs PyTorch ({err}): the ops extra") from None
    wanted = tuple(dtypes) if dtypes else None
    return models_bench.run(dtypes=wanted, log=log)


def _merge_files(console: Any, paths: list[str], out: str | None) -> int:
    """``ladder bench --merge``: the pieces of canonical files measured elsewhere, merged into
    ``out`` or the file of their GPU; nothing is measured."""
    from ladder.core import canonical

    docs = []
    for name in paths:
        path = Path(name)
        if not path.is_file():
            raise ValueError(f"--merge {name}: no such file")
        doc = report.read_results(path)
        if not doc.get("pieces"):
            raise ValueError(f"--merge {name}: not a canonical file (it has no pieces)")
        docs.append((path, doc))
    for path, doc in docs:
        target = Path(out) if out else canonical.path_for(device.gpu_slug(doc["gpu"]))
        pieces = canonical.pieces_of(doc)
        for piece in pieces:
            canonical.merge_into(target, piece)
        measured = sorted({m for p in pieces for m in p["piece"]["measured"]})
        console.print(f"merged {path} into {target}: {', '.join(measured)}")
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    import time

    from ladder.core import canonical

    console = _console()
    if args.merge:
        return _merge_files(console, args.merge, args.out)
    asked = args.problems or [*problems(), *SECTIONS]
    sections = [n for n in asked if n in SECTIONS]
    names = [n for n in asked if n not in SECTIONS]
    cases = []
    for name in names:
        problem = get_problem(name)
        for dtype in problem.dtypes:
            if args.dtypes and dtype not in args.dtypes:
                continue
            sizes = (problem.simulator_sizes if device.simulator() else problem.standard_sizes)(
                dtype
            )
            cases += [(name, size, dtype) for size in sizes]
    if not cases and not sections:
        raise ValueError(
            f"--dtypes {' '.join(args.dtypes)}: none of --problems {' '.join(names)} takes them"
        )
    out = report.results_path(args.out, canonical.path_for(device.gpu_slug()))
    began = time.perf_counter()
    ceilings = roofline.ceilings(remeasure=True)
    with conditions.Sampler() as sampler:
        runs = _measure_all(cases, {n: rungs(n) for n in names}, args.repeats)
        measured = {name: _section(name, args.dtypes) for name in sections}
    date, measured_at = canonical.now(), canonical.commit()
    pairs = sorted({f"{n}/{d}" for n, _, d in cases}) + sections
    during = sampler.summary() | {"measured": pairs}
    piece = report.results_document(canonical.stamp(runs, date, measured_at), ceilings)
    piece["sections"] = {
        name: doc | {"date": date, "commit": measured_at} for name, doc in measured.items()
    }
    piece["piece"] = canonical.piece_record(
        runs, sections, during, ceilings, piece["versions"], args.argv,
        time.perf_counter() - began, date, measured_at,
    )  # fmt: skip
    if out is None:
        doc = canonical.merged(None, piece)
    elif args.replace:
        doc = canonical.merged(None, piece)
        report.write_results(doc, out)
    else:
        doc = canonical.merge_into(out, piece)
    _print_groups(console, runs, ceilings, doc["gpu"])
    _simulator_banner(console)
    if out is None:
        console.print(report.NOT_WRITTEN)
    else:
        kept = len(doc["runs"]) - len(runs)
        what = [f"{len(runs)} runs"] if runs or not sections else []
        console.print(
            f"wrote {out}: {' and '.join([*what, *sections])} measured in "
            f"{piece['piece']['seconds']:.0f} s"
            + (f", {kept} runs kept from earlier pieces" if kept else "")
        )
    return _exit_code(runs)


def cmd_plot(args: argparse.Namespace) -> int:
    console = _console()
    if not Path(args.results).is_file():
        raise ValueError(f"RESULTS {args.results}: no such file (ladder bench writes one)")
    doc = report.read_results(args.results)
    out = Path(args.out or Path(args.results).with_suffix(".png"))
    names = list(dict.fromkeys(key[0] for key in derived.groups(doc["runs"])))
    unknown = set(args.problems or ()) - set(names)
    if unknown:
        raise ValueError(
            f"--problems: {args.results} has no runs of {', '.join(sorted(unknown))}; it has "
            f"{', '.join(names)}"
        )
    report.plot_overview(doc, out)
    console.print(f"wrote {out}")
    figures = {}
    for name in args.problems or names:
        path = out.with_name(f"{out.stem}-{name}.png")
        report.plot(doc, path, [name])
        figures[name] = path.as_posix()
        console.print(f"wrote {path}")
    contenders = out.with_name(f"{out.stem}-contenders.png")
    try:
        report.plot_contenders(doc, contenders, args.problems)
        console.print(f"wrote {contenders}")
        figures["contenders"] = contenders.as_posix()
    except ValueError:  # no library or peer measured (the simulator runs none)
        pass
    return 0


def cmd_render(args: argparse.Namespace) -> int:
    from ladder.core import render

    console = _console()
    if args.check:
        stale = render.stale()
        for path in stale:
            console.print(f"stale: {path.relative_to(render.ROOT)} (ladder render rewrites it)")
        console.print(f"{len(stale)} rendered files differ from the canonical results")
        return 1 if stale else 0
    render.write(figures=not args.no_figures, say=console.print)
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    import json
    import subprocess

    if device.simulator():
        # Numba compiles kernels only outside its simulator; compile_ptx needs no GPU. The
        # child inherits stdout and stderr, so its table and its progress show as they are.
        if os.environ.get("LADDER_CHECK_CHILD"):
            raise RuntimeError("ladder check: NUMBA_ENABLE_CUDASIM=0 did not take effect")
        env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0", LADDER_CHECK_CHILD="1")
        return subprocess.call([sys.executable, "-m", "ladder", *args.argv], env=env)
    from ladder.core.check import check

    console = _console()
    console.width = max(console.width, 120)
    selected = _select(args.problem, args.rungs) if args.problem else rungs()
    compiled = [r for r in selected if not (r.on_cpu or r.reference)]  # what check() compiles
    with _Progress(len(compiled)) as progress:
        reports = check(
            compiled, tuple(args.archs), lambda r: progress.step(f"compiling {r.key}"), args.jobs
        )
    table = report.check_table(reports)
    console.print(table)
    failed = [r for r in reports if r.error]
    if args.json:
        Path(args.json).write_text(json.dumps([r.to_dict() for r in reports], indent=1) + "\n")
        console.print(f"wrote {args.json}")
    if failed:
        console.print(f"[red]{len(failed)} kernel builds failed[/]")
        return 1
    skips = sum(bool(r.skipped) for r in reports)
    console.print(f"{len(reports) - skips} kernel builds, all compiled; {skips} not for the GPU")
    return 0


def cmd_profile(args: argparse.Namespace) -> int:
    import json

    from ladder.core import tools

    console = _console()
    console.width = max(console.width, 140)
    tools.find_tool("ncu")  # a clear message before anything runs
    problem = get_problem(args.problem)  # --dtype and --size are checked in main
    size = args.size or problem.standard_sizes(args.dtype)[-1]
    timing.check_memory(problem, size, args.dtype)
    if args.rung == "all":
        targets = [r for r in rungs(args.problem) if args.dtype in r.dtypes and not r.on_cpu]
    else:
        target = get_rung(args.problem, args.rung)
        below = None if args.no_below else tools.rung_below(target, args.dtype)
        targets = [r for r in (below, target) if r is not None]
    found = []
    for r in targets:
        console.print(f"profiling {r.name} ({args.dtype}, {' x '.join(map(str, size))}) ...")
        found.append(tools.profile_rung(r, size, args.dtype, args.metrics or ()))
    console.print(report.profile_table(found, device.facts().name))
    if args.json:
        doc = {"gpu": device.facts().name, "device": device.facts().to_dict()}
        doc["profiles"] = [p.to_dict() for p in found]
        Path(args.json).write_text(json.dumps(doc, indent=1) + "\n")
        console.print(f"wrote {args.json}")
    return 1 if any(p.error for p in found) else 0


def cmd_sanitize(args: argparse.Namespace) -> int:
    import json

    from ladder.core import tools

    console = _console()
    console.width = max(console.width, 120)
    names = [args.problem] if args.problem else list(problems())  # --rungs: main checked them
    found = []
    for name in names:
        which = ", ".join(args.rungs) if args.rungs else "every rung"
        console.print(f"{name}: {which} under compute-sanitizer {', '.join(args.tools)} ...")
        found += tools.sanitize(name, args.tools, args.rungs)
    planted = [r for r in found if r.problem == "planted"]
    found = [r for r in found if r.problem != "planted"]
    console.print(report.sanitize_table(found, device.facts().name))
    bad = [r for r in found if r.errors or not r.checked]
    missed = [
        r for r in planted if r.tool == tools.PLANTED.get(r.rung) and r.errors == 0
    ]  # a planted bug its tool did not report: the run proves nothing
    for r in planted:
        if r.tool == tools.PLANTED.get(r.rung):
            seen = f"reported ({r.errors})" if r.errors else "[red]NOT reported[/]"
            console.print(f"planted bug {r.rung}: {r.tool} {seen}")
    if args.json:
        doc = {"gpu": device.facts().name, "device": device.facts().to_dict()}
        doc["tools"] = args.tools
        doc["sizes"] = {name: problems()[name].sanitize_sizes() for name in names}
        doc["results"] = [r.to_dict() for r in found]
        doc["planted"] = [r.to_dict() for r in planted]
        Path(args.json).write_text(json.dumps(doc, indent=1) + "\n")
        console.print(f"wrote {args.json}")
    console.print(f"{len(found)} rung runs, {len(bad)} with errors or wrong answers")
    return 1 if bad or missed else 0


def cmd_diff(args: argparse.Namespace) -> int:
    from ladder.core import diff

    r = get_rung(args.problem, args.rung)  # main checked both
    parent = get_rung(args.problem, args.parent) if args.parent else None
    found = diff.files(r, parent, args.context)
    shown = parent or diff.parent_of(r)
    summary = ", ".join(f"{f.new.name}: {f.changed} lines changed" for f in found)
    print(f"{r.key} (rung {r.number}) against {shown.key} (rung {shown.number}): {summary}")
    body = diff.text(r, parent, args.context)
    console = _console()
    if console.is_terminal:
        from rich.syntax import Syntax

        console.print(Syntax(body, "diff", theme="ansi_dark", background_color="default"))
    else:
        print(body, end="")
    return 0


def cmd_transfer(args: argparse.Namespace) -> int:
    from ladder.transfer import bench

    return bench.run_args(args)


def cmd_models(args: argparse.Namespace) -> int:
    try:
        from ladder.models import bench
    except ImportError as err:  # the models are written against PyTorch
        raise ValueError(
            f"ladder models needs PyTorch ({err}): pip install 'numba-ladder[ops]'"
        ) from None
    return bench.run_args(args)


def cmd_child(argv: list[str]) -> int:
    """``ladder _child ...``: what profile and sanitize run under the NVIDIA tools; not a
    command of the help."""
    from ladder.core import tools

    return tools.child(argv)


PROBLEMS = "<problems>"  # in a help text: the names of the problems, read when help is shown
SIZE_HELP = (
    "the problem's size (default: its largest standard size; a small one in the simulator); "
    "per problem, with its dtypes:"
)
DTYPE_HELP = "the inputs' dtype (default: float32); each problem's dtypes are listed under --size"


class _ProblemsHelp(argparse.HelpFormatter):
    """Help that names the problems, and lists for --size what it means for each problem
    (``Problem.size_help``) and the problem's dtypes, read from the registry only when help is
    shown, so that parsing never imports the rungs."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if text == SIZE_HELP:
            found = problems().values()
            return "\n".join(
                [SIZE_HELP, *(f"{p.name} ({', '.join(p.dtypes)}): {p.size_help}" for p in found)]
            )
        if PROBLEMS in text:
            return text.replace(PROBLEMS, ", ".join(problems()))
        return action.help

    def _split_lines(self, text: str, width: int) -> list[str]:
        lines = []
        for line in text.splitlines():
            lines += super()._split_lines(line, width)
        return lines


class _Parser(argparse.ArgumentParser):
    """argparse with each error on one line of stderr, ``ladder <command>: error: ...`` as
    ``main`` words its own, and exit status 2 (``ladder <command> --help`` gives the usage)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def _positive(text: str) -> int:
    """An argparse type: a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="ladder",
        description="An optimization ladder for GPU kernels in Python. "
        "ladder COMMAND --help says more of each command.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {ladder.__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, text: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=text, description=text, formatter_class=_ProblemsHelp)

    p = command("list", "list every rung and whether it can run here")
    p.add_argument("problem", nargs="?", help=f"only this problem: {PROBLEMS}")
    p.add_argument("--gpus", action="store_true", help="which GPU generations each rung runs on")
    p.set_defaults(func=cmd_list)

    p = command("info", "device facts, library versions and measured ceilings")
    p.add_argument("--remeasure", action="store_true", help="measure the ceilings again")
    p.set_defaults(func=cmd_info)

    p = command("run", "validate and time the rungs of one problem")
    p.add_argument("problem", help=f"one of {PROBLEMS}")
    p.add_argument("--size", type=int, nargs="+", metavar="N", help=SIZE_HELP)
    p.add_argument("--rungs", nargs="+", metavar="RUNG", help="names or numbers (default: all)")
    p.add_argument("--dtype", help=DTYPE_HELP)
    p.add_argument(
        "--repeats", type=_positive, help="timed repeats (default: as many as fit in 1 s)"
    )
    p.add_argument("--json", help="also write the results to this file")
    p.add_argument(
        "--rung-file",
        action="append",
        dest="rung_files",
        metavar="PATH",
        help="also run the launcher `launch` that this Python file defines, as rung 80+ of "
        "the problem (repeatable; README: Bring your own kernel)",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help=f"run in the CUDA simulator even what it would take more than "
        f"{SIMULATOR_LIMIT_S // 60} minutes on",
    )
    p.set_defaults(func=cmd_run)

    p = command(
        "bench",
        "problems at their standard sizes, merged into results/<gpu>.json (the canonical file)",
    )
    p.add_argument(
        "--problems",
        nargs="+",
        metavar="PROBLEM",
        help=f"only these (default: every problem, then every section): {PROBLEMS}; also "
        f"{', '.join(SECTIONS)} (GEMM at the shapes models call, data movement, and the models "
        "on the ladder's operators)",
    )
    p.add_argument("--dtypes", nargs="+", metavar="DTYPE", help="only these dtypes")
    p.add_argument(
        "--repeats",
        type=_positive,
        help="timed repeats per case (default: until about a second has run, 5 to 100)",
    )
    p.add_argument(
        "--out",
        help="results file (default: results/<gpu>.json, the GPU's canonical file; in the "
        "simulator nothing is written without --out)",
    )
    p.add_argument(
        "--replace",
        action="store_true",
        help="start the file anew; by default the runs measured now replace those of the same "
        "problems and dtypes, and every other run is kept (a file is built up in pieces)",
    )
    p.add_argument(
        "--merge",
        nargs="+",
        metavar="FILE",
        help="measure nothing: merge the pieces of canonical files written by `ladder bench "
        "--out` on another machine into --out or results/<their gpu>.json",
    )
    p.set_defaults(func=cmd_bench)
    p = command("check", "compile every rung without a GPU: registers, shared memory, spills")
    p.add_argument("problem", nargs="?", help=f"only this problem: {PROBLEMS}")
    p.add_argument("--rungs", nargs="+", metavar="RUNG", help="only these rungs (with PROBLEM)")
    p.add_argument(
        "--archs",
        nargs="+",
        default=[g.arch for g in GENERATIONS],
        metavar="SM",
        help="the architectures to compile for (default: "
        + " ".join(g.arch for g in GENERATIONS)
        + "; sm_90 builds the Hopper-only rungs as sm_90a); only those the compilers here build",
    )
    p.add_argument(
        "--jobs", type=_positive, help="compiling processes (default: one per CPU, at most 8)"
    )
    p.add_argument("--json", help="also write the reports to this file")
    p.set_defaults(func=cmd_check)

    p = command("profile", "Nsight Compute on one launch of a rung (and of the rung below)")
    p.add_argument("problem", help=f"one of {PROBLEMS}")
    p.add_argument("rung", help="a rung's name or number, or 'all'")
    p.add_argument("--size", type=int, nargs="+", metavar="N", help=SIZE_HELP)
    p.add_argument("--dtype", help=DTYPE_HELP)
    p.add_argument("--no-below", action="store_true", help="do not profile the rung below")
    p.add_argument(
        "--metrics",
        nargs="+",
        metavar="METRIC",
        help="more Nsight Compute metrics, full names as `ncu --query-metrics` lists them with "
        "a suffix (e.g. on Hopper, the tensor pipe's busy share with wgmma: sm__pipe_tensor_op_"
        "hmma_type_hmma_hgmma_qgmma_cycles_active.avg.pct_of_peak_sustained_active)",
    )
    p.add_argument("--json", help="also write the profiles to this file")
    p.set_defaults(func=cmd_profile)

    p = command("sanitize", "every rung under compute-sanitizer, at small odd sizes")
    p.add_argument("problem", nargs="?", help=f"only this problem: {PROBLEMS}")
    p.add_argument("--rungs", nargs="+", metavar="RUNG", help="only these rungs (with PROBLEM)")
    p.add_argument("--tools", nargs="+", default=["memcheck", "racecheck"])
    p.add_argument("--json", help="also write the results to this file")
    p.set_defaults(func=cmd_sanitize)

    p = command("diff", "a rung against its parent: the lesson, as a unified diff")
    p.add_argument("problem", help=f"one of {PROBLEMS}")
    p.add_argument("rung", help="a rung's name or number")
    p.add_argument("--parent", metavar="RUNG", help="against this rung instead of the parent")
    p.add_argument(
        "--context", type=int, default=3, metavar="N", help="lines of context (default 3)"
    )
    p.set_defaults(func=cmd_diff)

    p = command(
        "transfer", "data movement: transfers, overlap, launch costs (ladder bench keeps them)"
    )
    transfer_options.add_arguments(p)
    p.set_defaults(func=cmd_transfer)

    p = command(
        "models",
        "the course's LeNet and a GPT-2 block on the ladder's operators, against PyTorch eager "
        "and torch.compile (needs PyTorch: the ops extra; ladder bench keeps them)",
    )
    p.add_argument(
        "--parts",
        nargs="+",
        default=["lenet", "block", "host"],
        choices=["lenet", "block", "host"],
        help="host: ladder.ops' host time per call at the block's shapes",
    )
    p.add_argument("--dtypes", nargs="+", metavar="DTYPE", help="only these dtypes")
    p.add_argument(
        "--out",
        help="results file (default: none; ladder bench --problems models keeps the results in "
        "the GPU's canonical file)",
    )
    p.add_argument(
        "--from-results",
        metavar="FILE",
        help="measure nothing: read this results file and draw its figures again (beside it)",
    )
    p.add_argument("--readme", help="also write this README's models block from the results")
    p.set_defaults(func=cmd_models)

    p = command("plot", "figures (PNG) of a results file: an overview, and one per problem")
    p.add_argument("results", help="results/<gpu>.json")
    p.add_argument(
        "--out",
        help="the overview's PNG path (default: beside the results file); each problem's "
        "figure goes beside it, named <stem>-<problem>.png",
    )
    p.add_argument("--problems", nargs="+", metavar="PROBLEM", help="figures of these only")
    p.set_defaults(func=cmd_plot)

    p = command(
        "render",
        "the README's table, docs/results/ and the figures, from the canonical results files",
    )
    p.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 where a rendered file is stale"
    )
    p.add_argument("--no-figures", action="store_true", help="the text only, no PNG")
    p.set_defaults(func=cmd_render)
    return parser


def _known_rung(problem: str, name: str, argument: str) -> None:
    try:
        get_rung(problem, name)
    except KeyError as err:
        raise ValueError(f"{argument}: {err.args[0]}") from None


def _check_output(path: str, argument: str) -> None:
    """Refuse, before anything runs, an output path that cannot be written: a folder, a folder
    that does not exist, a parent that is a file, or one this user may not write in."""
    target = Path(path)
    parent = target.parent
    if target.is_dir():
        raise ValueError(f"{argument} {path}: is a folder; give a file name")
    if parent.exists() and not parent.is_dir():
        raise ValueError(f"{argument} {path}: {parent} is a file, not a folder")
    if not parent.exists():
        raise ValueError(f"{argument} {path}: the folder {parent} does not exist")
    if not os.access(parent, os.W_OK):
        raise ValueError(f"{argument} {path}: cannot write in {parent}")


def _check_archs(archs: list[str]) -> None:
    """Refuse an architecture ``ladder check`` cannot build here, naming those it can."""
    from ladder.core.cuda_cpp import supported_archs

    can = supported_archs()
    for arch in archs:
        arch_cc(arch)  # ValueError naming it for a malformed one
        if can and arch.rstrip("af") not in can:
            raise ValueError(
                f"--archs {arch}: the compilers here build {', '.join(can)} (and the a/f "
                "variants of those with them)"
            )


def _check_arguments(args: argparse.Namespace) -> None:
    """Check what argparse cannot against the registry, each error naming its argument: the
    problem, --dtype (the problem's first when not given), --size, the rungs, --problems and
    --dtypes. Sets ``args.dtype_given``."""
    name = getattr(args, "problem", None)
    problem = get_problem(name) if name else None
    if problem is not None and hasattr(args, "dtype"):
        args.dtype_given = args.dtype is not None
        if args.dtype is None:
            args.dtype = problem.dtypes[0]
        elif args.dtype not in problem.dtypes:
            raise ValueError(
                f"--dtype for {problem.name} is one of {', '.join(problem.dtypes)}: "
                f"got {args.dtype}"
            )
    if problem is not None and getattr(args, "size", None) is not None:
        args.size = problem.parse_size(args.size)
    for argument in ("json", "out"):
        value = getattr(args, argument, None)
        if value and args.command != "plot":  # plot's --out is checked by its own rules
            _check_output(value, f"--{argument}")
    if args.command == "check" and args.archs:
        _check_archs(args.archs)
    if getattr(args, "rungs", None):
        args.rungs = list(dict.fromkeys(args.rungs))  # a rung named twice runs once
        if problem is None:
            example = f"ladder {args.command} gemm --rungs 6"
            raise ValueError(f"--rungs: name their PROBLEM too, e.g. {example}")
        for rung_name in args.rungs:
            _known_rung(problem.name, rung_name, "--rungs")
    if args.command == "profile" and args.rung != "all":
        _known_rung(args.problem, args.rung, "RUNG")
    if args.command == "diff":
        _known_rung(args.problem, args.rung, "RUNG")
        if args.parent:
            _known_rung(args.problem, args.parent, "--parent")
    if args.command == "bench":  # (plot checks its --problems against its results file)
        for problem_name in args.problems or ():
            if problem_name in SECTIONS:
                continue
            try:
                get_problem(problem_name)
            except KeyError as err:
                raise ValueError(f"--problems: {err.args[0]}") from None
    if getattr(args, "dtypes", None):
        known = list(dict.fromkeys(d for p in problems().values() for d in p.dtypes))
        unknown = [d for d in args.dtypes if d not in known]
        if unknown:
            raise ValueError(
                f"--dtypes: no problem takes {', '.join(unknown)}; dtypes: {', '.join(known)}"
            )


def main(argv: list[str] | None = None) -> int:
    """The ``ladder`` command; returns its exit status: 0, 1 when a rung failed or a check did
    not pass, 2 for an argument that is not valid (one line on stderr that names it)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["_child"]:  # not a command of the help: see cmd_child
        return cmd_child(argv[1:])
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as done:  # --help, --version, or an error argparse has printed
        return done.code if isinstance(done.code, int) else 0
    args.argv = argv
    try:
        _check_arguments(args)
        return args.func(args)
    except (KeyError, ValueError) as err:
        message = err.args[0] if err.args else str(err)
    except OSError as err:
        message = f"{err.filename}: {err.strerror}" if err.filename else str(err)
    print(f"ladder {args.command}: error: {message}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
