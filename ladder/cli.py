"""The ``ladder`` command: list | info | run | bench | plot | check | profile | sanitize |
transfer.

``python -m ladder`` is the same command.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import ladder  # noqa: F401  (chooses the backend before numba.cuda is imported)
from ladder.core import derived, device, report, roofline, timing
from ladder.core.rung import GENERATIONS, Rung, get_problem, get_rung, problems, rungs


def _console():
    from rich.console import Console

    return Console()


def _simulator_banner(console: Any) -> None:
    if device.simulator():
        console.print(f"[bold red]{device.SIMULATOR_NOTE}.[/] CuPy rungs need a GPU.")


def cmd_list(args: argparse.Namespace) -> int:
    from rich.table import Table

    console = _console()
    if args.readme:
        report.update_generations_readme(args.readme, rungs())
        console.print(f"updated the GPU-generation table of {args.readme}")
        return 0
    table = Table(title="ladder rungs", title_justify="left", caption_justify="left")
    if args.gpus:
        columns = ("problem", "#", "name", *(g.name for g in GENERATIONS), "why not")
        table.caption = report.generations_note()
    else:
        columns = ("problem", "#", "name", "title", "dtypes", "needs", "here")
        table.caption = "ladder list --gpus: which GPU generations each rung runs on"
    for col in columns:
        table.add_column(col)
    for r in rungs(args.problem):
        first = (r.problem, "ref" if r.reference else str(r.number), r.name)
        if args.gpus:
            table.add_row(*first, *report.generation_cells(r))
            continue
        reason = r.unavailable_reason()
        table.add_row(
            *first,
            r.title,
            ", ".join(r.dtypes),
            ", ".join(sorted(r.needs)),
            "yes" if reason is None else f"no: {reason}",
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


def _measure_all(
    cases: list[tuple[str, tuple[int, ...], str]],
    pick: dict[str, list[Rung]],
    repeats: int | None,
    console: Any,
) -> list[dict[str, Any]]:
    """Measure every rung on every case, with a progress bar; returns result dicts."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    total = sum(len(pick[p]) for p, _, _ in cases)
    results = []
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        console=console,
        transient=True,
    ) as progress:
        task = progress.add_task("measuring", total=total)
        for problem_name, size, dtype in cases:
            problem = get_problem(problem_name)
            label = f"{problem_name} {dtype} {size}"
            progress.update(task, description=f"{label}: reference (float64)")
            case = timing.prepare(problem, size, dtype)
            for r in pick[problem_name]:
                if dtype not in r.dtypes:
                    progress.advance(task)
                    continue
                progress.update(task, description=f"{label}: {r.name}")
                m = timing.measure(case, r, repeats=repeats)
                results.append(m.to_dict())
                progress.advance(task)
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


def cmd_run(args: argparse.Namespace) -> int:
    console = _console()
    problem = get_problem(args.problem)
    if args.dtype not in problem.dtypes:
        raise ValueError(f"{args.problem} has no dtype {args.dtype}; it has {problem.dtypes}")
    if args.size:
        size = args.size  # checked by problem.parse_size in main
    elif device.simulator():
        size = problem.simulator_sizes(args.dtype)[0]
    else:
        size = problem.standard_sizes(args.dtype)[-1]
    selected = _select(args.problem, args.rungs)
    if args.rungs:
        for r in selected:
            if args.dtype not in r.dtypes:
                raise ValueError(f"rung {r.name} does not take {args.dtype} ({r.dtypes})")
    files = _user_rungs(args.problem, args.rung_files or [], args.dtype, selected)
    ceilings = roofline.ceilings()
    runs = _measure_all(
        [(args.problem, size, args.dtype)],
        {args.problem: selected + list(files)},
        args.repeats,
        console,
    )
    paths = {r.name: path for r, path in files.items()}
    for run in runs:  # a failure of a user's kernel names its file
        path = paths.get(run["rung"])
        if path is not None and run["error"]:
            run["error"] = f"{path}: {run['error']}"
            console.print(f"[red]{run['error']}[/]")
    _print_groups(console, runs, ceilings, device.facts().name)
    _simulator_banner(console)
    if args.json:
        path = report.write_results(report.results_document(runs, ceilings), args.json)
        console.print(f"wrote {path}")
    return _exit_code(runs)


def cmd_bench(args: argparse.Namespace) -> int:
    console = _console()
    names = args.problems or list(problems())
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
    if not cases:
        raise ValueError("nothing to measure: no problem has the dtypes asked for")
    ceilings = roofline.ceilings(remeasure=True)
    runs = _measure_all(cases, {n: rungs(n) for n in names}, args.repeats, console)
    out = Path(args.out or f"results/{device.gpu_slug()}.json")
    if args.merge and out.is_file():  # keep the earlier runs of every (problem, dtype) not redone
        earlier = report.read_results(out)
        if earlier["gpu"] != device.facts().name:
            raise ValueError(f"{out} was measured on {earlier['gpu']}: cannot merge runs")
        redone = {(r["problem"], r["dtype"]) for r in runs}
        runs = [r for r in earlier["runs"] if (r["problem"], r["dtype"]) not in redone] + runs
    doc = report.results_document(runs, ceilings)
    report.write_results(doc, out)
    _print_groups(console, runs, ceilings, doc["gpu"])
    _simulator_banner(console)
    console.print(f"wrote {out}")
    return _exit_code(runs)


def cmd_plot(args: argparse.Namespace) -> int:
    console = _console()
    doc = report.read_results(args.results)
    out = Path(args.out or Path(args.results).with_suffix(".png"))
    names = list(dict.fromkeys(key[0] for key in derived.groups(doc["runs"])))
    unknown = set(args.problems or ()) - set(names)
    if unknown:
        raise ValueError(f"{args.results} has no runs of {sorted(unknown)}; it has {names}")
    report.plot_overview(doc, out)
    console.print(f"wrote {out}")
    figures = {}
    for name in args.problems or names:
        path = out.with_name(f"{out.stem}-{name}.png")
        report.plot(doc, path, [name])
        figures[name] = path.as_posix()
        console.print(f"wrote {path}")
    if args.readme:
        report.update_readme(args.readme, doc, out.as_posix(), figures)
        console.print(f"updated the results block of {args.readme}")
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    import json
    import os
    import subprocess

    if device.simulator():
        # Numba compiles kernels only outside its simulator; compile_ptx needs no GPU
        if os.environ.get("LADDER_CHECK_CHILD"):
            raise RuntimeError("ladder check: NUMBA_ENABLE_CUDASIM=0 did not take effect")
        env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0", LADDER_CHECK_CHILD="1")
        return subprocess.call([sys.executable, "-m", "ladder", *args.argv], env=env)
    from ladder.core.check import check

    console = _console()
    console.width = max(console.width, 120)
    selected = _select(args.problem, args.rungs) if args.problem else rungs()
    reports = check(selected, tuple(args.archs))
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
    problem = get_problem(args.problem)
    if args.dtype not in problem.dtypes:
        raise ValueError(f"{args.problem} has no dtype {args.dtype}; it has {problem.dtypes}")
    size = args.size or problem.standard_sizes(args.dtype)[-1]  # checked by parse_size
    if args.rung == "all":
        targets = [r for r in rungs(args.problem) if args.dtype in r.dtypes and not r.on_cpu]
    else:
        target = get_rung(args.problem, args.rung)
        below = None if args.no_below else tools.rung_below(target, args.dtype)
        targets = [r for r in (below, target) if r is not None]
    found = []
    for r in targets:
        console.print(f"profiling {r.name} ({args.dtype}, {' x '.join(map(str, size))}) ...")
        found.append(tools.profile_rung(r, size, args.dtype))
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
    names = [args.problem] if args.problem else list(problems())
    found = []
    for name in names:
        console.print(f"{name}: every rung under compute-sanitizer {', '.join(args.tools)} ...")
        found += tools.sanitize(name, args.tools)
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


def cmd_transfer(args: argparse.Namespace) -> int:
    from ladder.transfer import bench

    return bench.main(args.rest)


def cmd_child(args: argparse.Namespace) -> int:
    from ladder.core import tools

    return tools.child(args.rest)


SIZE_HELP = "the problem's size; per problem:"


class _SizeHelp(argparse.HelpFormatter):
    """Help that lists what --size means for each problem (``Problem.size_help``), read from
    the registry only when help is shown, so that parsing never imports the rungs."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.help != SIZE_HELP:
            return action.help
        return "\n".join([SIZE_HELP, *(f"{p.name}: {p.size_help}" for p in problems().values())])

    def _split_lines(self, text: str, width: int) -> list[str]:
        lines = []
        for line in text.splitlines():
            lines += super()._split_lines(line, width)
        return lines


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ladder", description="An optimization ladder for GPU kernels in Python."
    )
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("list", help="list every rung and whether it can run here")
    p.add_argument("problem", nargs="?", help="only this problem")
    p.add_argument("--gpus", action="store_true", help="which GPU generations each rung runs on")
    p.add_argument("--readme", help="write the --gpus table into this README's gpus block")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("info", help="device facts, library versions and measured ceilings")
    p.add_argument("--remeasure", action="store_true", help="measure the ceilings again")
    p.set_defaults(func=cmd_info)

    p = sub.add_parser(
        "run", help="validate and time the rungs of one problem", formatter_class=_SizeHelp
    )
    p.add_argument("problem", help="e.g. gemm")
    p.add_argument("--size", type=int, nargs="+", metavar="N", help=SIZE_HELP)
    p.add_argument("--rungs", nargs="+", metavar="RUNG", help="names or numbers (default: all)")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--repeats", type=int, help="timed repeats (default: as many as fit in 1 s)")
    p.add_argument("--json", help="also write the results to this file")
    p.add_argument(
        "--rung-file",
        action="append",
        dest="rung_files",
        metavar="PATH",
        help="also run the launcher `launch` that this Python file defines, as rung 80+ of "
        "the problem (repeatable; README: Bring your own kernel)",
    )
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("bench", help="every problem at its standard sizes -> results/<gpu>.json")
    p.add_argument("--problems", nargs="+", metavar="PROBLEM")
    p.add_argument("--dtypes", nargs="+", metavar="DTYPE", help="only these dtypes")
    p.add_argument("--repeats", type=int)
    p.add_argument("--out", help="results file (default: results/<gpu>.json)")
    p.add_argument(
        "--merge",
        action="store_true",
        help="keep the runs already in the results file for problems and dtypes not measured now",
    )
    p.set_defaults(func=cmd_bench)

    p = sub.add_parser(
        "check", help="compile every rung without a GPU: registers, shared memory, spills"
    )
    p.add_argument("problem", nargs="?", help="only this problem")
    p.add_argument("--rungs", nargs="+", metavar="RUNG", help="only these rungs (with PROBLEM)")
    p.add_argument("--archs", nargs="+", default=[g.arch for g in GENERATIONS], metavar="SM")
    p.add_argument("--json", help="also write the reports to this file")
    p.set_defaults(func=cmd_check)

    p = sub.add_parser(
        "profile",
        help="Nsight Compute on one launch of a rung (and of the rung below)",
        formatter_class=_SizeHelp,
    )
    p.add_argument("problem", help="e.g. gemm")
    p.add_argument("rung", help="a rung's name or number, or 'all'")
    p.add_argument("--size", type=int, nargs="+", metavar="N", help=SIZE_HELP)
    p.add_argument("--dtype", default="float32")
    p.add_argument("--no-below", action="store_true", help="do not profile the rung below")
    p.add_argument("--json", help="also write the profiles to this file")
    p.set_defaults(func=cmd_profile)

    p = sub.add_parser("sanitize", help="every rung under compute-sanitizer, at small odd sizes")
    p.add_argument("problem", nargs="?", help="only this problem")
    p.add_argument("--tools", nargs="+", default=["memcheck", "racecheck"])
    p.add_argument("--json", help="also write the results to this file")
    p.set_defaults(func=cmd_sanitize)

    p = sub.add_parser(
        "transfer",
        help="data movement: transfers, overlap, launch costs -> results/<gpu>-transfer.json",
    )
    p.add_argument("rest", nargs=argparse.REMAINDER, help="options of python -m ladder.transfer")
    p.set_defaults(func=cmd_transfer)

    p = sub.add_parser("_child")  # what profile and sanitize run under the NVIDIA tools
    p.add_argument("rest", nargs=argparse.REMAINDER)
    p.set_defaults(func=cmd_child)

    p = sub.add_parser(
        "plot", help="figures (PNG) of a results file: an overview, and one per problem"
    )
    p.add_argument("results", help="results/<gpu>.json")
    p.add_argument(
        "--out",
        help="the overview's PNG path (default: beside the results file); each problem's "
        "figure goes beside it, named <stem>-<problem>.png",
    )
    p.add_argument("--problems", nargs="+", metavar="PROBLEM", help="figures of these only")
    p.add_argument("--readme", help="also regenerate this README's results block")
    p.set_defaults(func=cmd_plot)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser().parse_args(argv)
    args.argv = argv
    try:
        if getattr(args, "size", None) is not None:
            args.size = get_problem(args.problem).parse_size(args.size)
    except (KeyError, ValueError) as err:  # one line, as argparse words its own errors
        print(f"ladder: error: {err.args[0] if err.args else err}", file=sys.stderr)
        return 2
    try:
        return args.func(args)
    except (KeyError, ValueError, FileNotFoundError) as err:
        print(f"ladder: {err.args[0] if err.args else err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
