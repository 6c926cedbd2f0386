"""``python -m ladder.transfer``: the data movement benchmark, written to a results file.

Three parts, each a module of this package:

- ``transfers``: H2D and D2H bandwidth of pageable, pinned and mapped host memory, 4 KiB to
  1 GiB, and the peak per direction;
- ``overlap``: the convolution layers conv1 and conv2 at B = 10,000, from host memory to host
  memory, sequential and pipelined over streams, for pageable and pinned host arrays, over a
  grid of (chunks, streams); overlap efficiency, timelines, and the bit-for-bit check;
- ``launch``: host time per kernel launch, several ways, and a CUDA graph's replay.

The results go to ``--out`` (``ladder bench --problems transfer`` keeps them in the GPU's
canonical file instead; in the simulator only to an
``--out`` given) with the header every ladder results file has (GPU, driver, library
versions, date), and the figures beside it (``--figures``): ``<stem>-bandwidth.png``,
``<stem>-timeline-conv1.png``, ``<stem>-timeline-conv2.png``, ``<stem>-launch.png``. The
notebook and the README read that file; no number in their prose is typed in.

The targets are checked and printed: overlap efficiency of the best pipelined configuration at
least ``TARGETS["overlap_efficiency"]``, graph replay at most
``TARGETS["graph_us_per_kernel"]`` µs per kernel.

To see the pipeline in Nsight Systems (every copy, kernel and host copy is in an NVTX range):
``nsys profile -t cuda,nvtx -o transfer python -m ladder.transfer --only overlap
--out /tmp/overlap.json``. In the simulator everything runs at tiny sizes and the times mean
nothing.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ladder.core import device, report
from ladder.core.rung import get_rung
from ladder.transfer import launch, pipeline, plot, transfers
from ladder.transfer.options import PARTS, add_arguments

TARGETS = {"overlap_efficiency": 0.90, "graph_us_per_kernel": 2.0}


def run(
    parts: tuple[str, ...] = PARTS,
    *,
    rung: str | None = None,
    layer_names: tuple[str, ...] | None = None,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Measure ``parts`` and return the results document (see the module docstring)."""
    for part in parts:
        if part not in PARTS:
            raise ValueError(f"unknown part {part!r}; known: {', '.join(PARTS)}")
    doc = report.results_document([], None)
    doc["kind"] = "transfer"
    doc["targets"] = dict(TARGETS)
    if "transfers" in parts:
        log("transfers: bandwidth sweep")
        records = transfers.sweep()
        doc["transfers"] = {
            "records": [r.to_dict() for r in records],
            "peak": transfers.peak(records),
            "link": transfers.link_info(),
        }
    if "overlap" in parts:
        chosen = get_rung("conv", rung) if rung else pipeline.default_rung()
        sizes = pipeline.layers()
        unknown = set(layer_names or ()) - set(sizes)
        if unknown:
            raise ValueError(f"unknown layers {sorted(unknown)}; known: {', '.join(sizes)}")
        doc["overlap"] = {}
        for name in layer_names or tuple(sizes):
            log(f"overlap: {name} {sizes[name]} with conv rung {chosen.name}")
            doc["overlap"][name] = pipeline.compare(sizes[name], chosen)
    if "launch" in parts:
        log("launch: overhead per launch and CUDA graph replay")
        doc["launch"] = launch.measure()
    doc["checks"] = checks(doc)
    return doc


def efficiency(run: dict[str, Any]) -> float:
    """The issue's overlap efficiency of a stored run, from its stage totals (so that a results
    file written by an older version is judged as this one judges)."""
    return pipeline.gpu_ideal_ms(run["stage_ms"]) / run["wall_ms"]


def host_bound(run: dict[str, Any], host_copy: dict[str, Any]) -> float:
    """The best efficiency a staged run can reach on this host, estimated: its largest GPU
    stage over the larger of that stage and the time the host needs to copy the layer's bytes
    at its best measured rates (``pipeline.host_copy_bound``)."""
    ideal = pipeline.gpu_ideal_ms(run["stage_ms"])
    return ideal / max(ideal, host_copy["bound_ms"])


def host_copy_line(layer: dict[str, Any]) -> str | None:
    """One sentence on the host's copy rate and the time it needs for the layer, or None."""
    found = layer.get("host_copy")
    if not found:
        return None
    rates = ", ".join(
        f"{n} thread{'s' * (n != '1')} {r['in']:.1f} / {r['out']:.1f}"
        for n, r in found["gbps"].items()
    )
    return (
        f"host copies (pageable→pinned / pinned→pageable, GB/s): {rates}; the layer's bytes at "
        f"the best rates take {found['bound_ms']:.2f} ms, the shortest staging these rates allow"
    )


def checks(doc: dict[str, Any]) -> dict[str, Any]:
    """Each target and correctness check, with its figure and whether it is met (None for a
    time target in the simulator, where times mean nothing)."""
    timed = not doc.get("simulated")
    found: dict[str, Any] = {}
    for name, layer in (doc.get("overlap") or {}).items():
        found[f"{name} identical to sequential"] = {
            "value": layer["identical"],
            "met": layer["identical"],
        }
        found[f"{name} first images match the float64 reference"] = {
            "value": layer["reference_rel_err"],
            "met": layer["reference_rel_err"] <= layer["tolerance"],
        }
        # Both ways in are checked against the target, with the efficiency: the
        # largest of the three GPU stages over the wall time. From pageable arrays each chunk
        # also goes through host copies into and out of pinned staging buffers (the issue's
        # pipeline); the host's measured copy rate bounds how close that path can come.
        labels = {"pinned": "pinned host memory", "pageable": "pageable, staged through pinned"}
        for host_memory, label in labels.items():
            best = layer["best"].get(host_memory)
            if best is not None:
                value = efficiency(best)
                check = {
                    "value": value,
                    "target": TARGETS["overlap_efficiency"],
                    "met": value >= TARGETS["overlap_efficiency"] if timed else None,
                }
                bound = layer.get("host_copy") if host_memory == "pageable" else None
                if bound is not None:
                    check["host_bound"] = host_bound(best, bound)
                found[f"{name} overlap efficiency, {label}"] = check
    graph = (doc.get("launch") or {}).get("graph")
    if graph:
        found["graph replay µs per kernel"] = {
            "value": graph["replay_us_per_kernel"],
            "target": TARGETS["graph_us_per_kernel"],
            "met": graph["replay_us_per_kernel"] <= TARGETS["graph_us_per_kernel"]
            if timed
            else None,
        }
    return found


def figures(doc: dict[str, Any], folder: str | Path, stem: str) -> list[Path]:
    """Draw every figure of the document into ``folder``; return their paths."""
    folder = Path(folder)
    gpu = doc["gpu"]
    drawn = []
    if doc.get("transfers"):
        drawn.append(
            plot.bandwidth(
                doc["transfers"],
                folder / f"{stem}-bandwidth.png",
                f"host-device bandwidth, {gpu}",
            )
        )
    for name, layer in (doc.get("overlap") or {}).items():
        runs = [layer["sequential"]["pageable"]] if "pageable" in layer["sequential"] else []
        runs += [layer["best"][h] for h in pipeline.HOST_MEMORIES if h in layer["best"]]
        size = " × ".join(map(str, layer["size"]))
        drawn.append(
            plot.timeline(
                runs,
                folder / f"{stem}-timeline-{name}.png",
                f"{name} ({size}), rung {layer['rung']}, host memory to host memory, {gpu}",
            )
        )
    if doc.get("launch"):
        drawn.append(
            plot.launch_costs(
                doc["launch"], folder / f"{stem}-launch.png", f"cost of a kernel launch, {gpu}"
            )
        )
    return drawn


def _gb(n: float) -> str:
    return f"{n / 1e9:.3f} GB"


def summary(doc: dict[str, Any]) -> list[str]:
    """The results in a few lines of text."""
    lines = [f"device: {doc['gpu']} (driver {doc.get('driver')}, {doc['date'][:10]})"]
    if doc.get("simulated"):
        lines.append(device.SIMULATOR_NOTE)
    moved = doc.get("transfers")
    if moved:
        peaks = ", ".join(
            f"{d.upper()} {p['gbps']:.1f} GB/s ({p['kind']}, {p['bytes']} B)"
            for d, p in moved["peak"].items()
        )
        lines.append(f"transfers: peak {peaks}")
        link = moved.get("link")
        if link and link.get("raw_gbps_per_direction"):
            lines.append(
                f"  link: PCIe Gen{link['pcie_gen_max']} x{link['pcie_width_max']}, raw rate "
                f"{link['raw_gbps_per_direction']:.1f} GB/s per direction"
            )
        largest = max(r["bytes"] for r in moved["records"])
        at_largest = ", ".join(
            f"{r['kind']} {r['direction'].upper()} {r['gbps']:.1f}"
            for r in moved["records"]
            if r["bytes"] == largest
        )
        lines.append(f"  at {largest} B (GB/s): {at_largest}")
    for name, layer in (doc.get("overlap") or {}).items():
        lines.append(
            f"overlap {name} {tuple(layer['size'])}, rung {layer['rung']}: "
            f"{_gb(layer['bytes_in'])} in, {_gb(layer['bytes_out'])} out; identical to "
            f"sequential: {layer['identical']}; first images vs float64: rel err "
            f"{layer['reference_rel_err']:.1e}"
        )
        host_line = host_copy_line(layer)
        if host_line:
            lines.append(f"  {host_line}")
        for host_memory, run in layer["sequential"].items():
            stages = ", ".join(f"{k} {v:.2f}" for k, v in run["stage_ms"].items())
            lines.append(
                f"  sequential, {host_memory}: {run['wall_ms']:.2f} ms ({stages} ms), "
                f"efficiency {run['efficiency']:.2f}"
            )
        for host_memory, run in layer["best"].items():
            stages = ", ".join(f"{k} {v:.2f}" for k, v in run["stage_ms"].items())
            tried = sum(r["host_memory"] == host_memory for r in layer["pipelined"])
            lines.append(
                f"  pipelined, {host_memory}, best of {tried} configurations "
                f"({run['chunks']} chunks, {run['streams']} streams): "
                f"{run['wall_ms']:.2f} ms ({stages} ms), efficiency {run['efficiency']:.2f}, "
                f"{layer['sequential'][host_memory]['wall_ms'] / run['wall_ms']:.2f}x "
                "the sequential"
            )
    measured = doc.get("launch")
    if measured:
        for cost in measured["costs"]:
            figure = f"{cost['median_us']:.2f} µs" if cost["median_us"] else cost["error"]
            lines.append(f"launch: {cost['title']}: {figure}")
        graph = measured["graph"]
        gpu_us = graph["replay_gpu_us_per_kernel"]
        lines.append(
            f"  graph: {graph['nodes']} nodes, captured in {graph['capture_ms']:.1f} ms; GPU "
            f"time per kernel in a replay: {'—' if gpu_us is None else f'{gpu_us:.2f} µs'}"
        )
    for name, check in doc.get("checks", {}).items():
        target = f" (target {check['target']})" if "target" in check else ""
        value = check["value"]
        shown = f"{value:.3g}" if isinstance(value, float) else str(value)
        verdict = {True: "met", False: "NOT met", None: "not judged in the simulator"}
        bound = (
            f" (at most {check['host_bound']:.3g} on this host)" if "host_bound" in check else ""
        )
        lines.append(f"check: {name}: {shown}{target}: {verdict[check['met']]}{bound}")
    return lines


README_START = "<!-- transfer:start -->"
README_END = "<!-- transfer:end -->"


def markdown(doc: dict[str, Any], figures: list[str]) -> str:
    """The README's data-movement block: link peaks, the overlap of each layer, launch costs
    and the checked targets, as Markdown, with the figures."""
    lines = [
        f"Measured on **{doc['gpu']}** (driver {doc.get('driver')}, {doc['date'][:10]}) by "
        "`python -m ladder.transfer`.",
        "",
    ]
    moved = doc.get("transfers")
    if moved:
        peaks = "; ".join(
            f"{d.upper()} {p['gbps']:.1f} GB/s ({p['kind']}, {p['bytes']:,} bytes)"
            for d, p in moved["peak"].items()
        )
        lines += [f"**Link.** Peak {peaks}.", ""]
    for name, layer in (doc.get("overlap") or {}).items():
        lines += [
            f"**Overlap, {name}** ({' × '.join(map(str, layer['size']))}, rung "
            f"{layer['rung']}): {_gb(layer['bytes_in'])} in, {_gb(layer['bytes_out'])} out; "
            f"identical to sequential: {layer['identical']}.",
            "",
        ]
        host_line = host_copy_line(layer)
        if host_line:
            lines += [f"{host_line[0].upper()}{host_line[1:]}.", ""]
        lines += [
            "| run | host memory | chunks × streams | ms | largest GPU stage | host copies "
            "| efficiency |",
            "|---|---|---|---:|---|---:|---:|",
        ]
        shown = [("sequential", r) for r in layer["sequential"].values()]
        shown += [("pipelined, best", r) for r in layer["best"].values()]
        for label, run in shown:
            grid = f"{run['chunks']} × {run['streams']}" if label != "sequential" else "—"
            largest = f"{run['bottleneck']} {run['ideal_ms']:.2f} ms"
            host = run["stage_ms"].get("host copies")
            host_ms = f"{host:.2f} ms" if host else "—"
            lines.append(
                f"| {label} | {run['host_memory']} | {grid} | {run['wall_ms']:.2f} | {largest} "
                f"| {host_ms} | {run['efficiency']:.2f} |"
            )
        lines.append("")
    measured = doc.get("launch")
    if measured:
        lines += ["**Launch cost per kernel.**", "", "| how | µs |", "|---|---:|"]
        for cost in measured["costs"]:
            figure = f"{cost['median_us']:.2f}" if cost["median_us"] else cost["error"]
            lines.append(f"| {cost['title']} | {figure} |")
        lines.append("")
    if doc.get("checks"):
        lines += [
            "| check | value | target | met | best this host allows |",
            "|---|---:|---:|---|---:|",
        ]
        for name, check in doc["checks"].items():
            value = check["value"]
            shown_value = f"{value:.3g}" if isinstance(value, float) else str(value)
            verdict = {True: "yes", False: "**no**", None: "not judged (simulator)"}
            bound = f"{check['host_bound']:.3g}" if "host_bound" in check else "—"
            lines.append(
                f"| {name} | {shown_value} | {check.get('target', '—')} | "
                f"{verdict[check['met']]} | {bound} |"
            )
        lines.append("")
    lines += [f"![{Path(f).stem}]({f})" for f in figures]
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ladder.transfer",
        description="Data movement: transfer bandwidth, copy/compute overlap, launch costs.",
    )
    add_arguments(parser)
    return run_args(parser.parse_args(sys.argv[1:] if argv is None else argv))


def run_args(args: argparse.Namespace) -> int:
    """The benchmark for parsed options (``options.add_arguments``): ``python -m
    ladder.transfer`` and ``ladder transfer``; 1 when a target is not met."""
    if args.from_results:
        out: Path | None = Path(args.from_results)
        doc = report.read_results(out)
        if doc.get("kind") != "transfer":
            raise ValueError(f"{out} is not a results file of python -m ladder.transfer")
        doc["checks"] = checks(doc)  # from the measured figures, as this version checks them
    else:
        doc = run(tuple(args.only or PARTS), rung=args.rung, layer_names=args.layers)
        out = report.results_path(args.out, None)  # the canonical file: ladder bench
        if out is not None:
            report.write_results(doc, out)
    folder = Path(args.figures) if args.figures else out.parent if out else None
    stem = out.stem if out else f"{device.gpu_slug()}-transfer"
    drawn = figures(doc, folder, stem) if folder else []
    for line in summary(doc):
        print(line)
    if out is None:
        print(report.NOT_WRITTEN)
    else:
        print(("read " if args.from_results else "wrote ") + str(out))
    print("".join(f"wrote {p}\n" for p in drawn), end="")
    if args.readme:
        report.replace_block(
            args.readme, README_START, README_END, markdown(doc, [p.as_posix() for p in drawn])
        )
        print(f"updated the data-movement block of {args.readme}")
    return 0 if all(c["met"] is not False for c in doc["checks"].values()) else 1
