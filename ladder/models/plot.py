"""Figures of a ``ladder models`` results file, named for the GPU that wrote it: LeNet's time
per layer, the block's forward and forward + backward per contender, which path each of the
block's operators took per dtype, and the block's ``torch.profiler`` breakdown before and
after the ladder's operators."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ladder.core import report

COLORS = {
    "ladder": "#4c72b0",
    "ladder+graph": "#8fa9d6",
    "torch": "#dd8452",
    "torch+graph": "#f0b58c",
    "torch.compile": "#55a868",
    "torch.compile+graph": "#9ccfa9",
}
MIXED = "#8172b3"  # an operator that ran on a rung for some shapes and on PyTorch for others


def _gpu(doc: dict[str, Any]) -> str:
    return doc.get("gpu") or "the CUDA simulator"


def lenet_layers(doc: dict[str, Any], path: str | Path) -> Path:
    """Each layer's ms on the ladder's operators and on PyTorch's, per dtype (log scale)."""
    import matplotlib.pyplot as plt

    cases = doc["lenet"]
    fig, axes = plt.subplots(1, len(cases), figsize=(6 * len(cases), 4), squeeze=False)
    for ax, (dtype, case) in zip(axes[0], cases.items(), strict=True):
        layered = {n: e["layers"] for n, e in case["contenders"].items() if "layers" in e}
        names = list(next(iter(layered.values())))
        width = 0.8 / len(layered)
        for i, (contender, layers) in enumerate(layered.items()):
            xs = [j + i * width for j in range(len(names))]
            ax.bar(xs, [layers[n] for n in names], width, label=contender, color=COLORS[contender])
        ax.set_xticks([j + width * (len(layered) - 1) / 2 for j in range(len(names))])
        ax.set_xticklabels(names, rotation=30, ha="right")
        ax.set_yscale("log")
        ax.set_ylabel("ms per layer (median)")
        ax.set_title(f"LeNet, batch {case['batch']}, {dtype}, {_gpu(doc)}")
        ax.legend()
    return report._save(fig, path, doc)


def block_times(doc: dict[str, Any], path: str | Path) -> Path:
    """The block's forward and forward + backward ms per contender, per dtype."""
    import matplotlib.pyplot as plt

    cases = doc["block"]
    fig, axes = plt.subplots(1, len(cases), figsize=(6 * len(cases), 4), squeeze=False)
    for ax, (dtype, case) in zip(axes[0], cases.items(), strict=True):
        contenders = {n: e for n, e in case["contenders"].items() if "error" not in e}
        for i, part in enumerate(("forward", "forward_backward")):
            for j, (name, entry) in enumerate(contenders.items()):
                x = i + j * 0.8 / len(contenders)
                ms = entry[part]["median_ms"]
                label = name if i == 0 else None
                ax.bar(x, ms, 0.8 / len(contenders), color=COLORS[name], label=label)
                ax.annotate(f"{ms:.3g}", (x, ms), ha="center", va="bottom", fontsize=8)
        ax.set_xticks([0.3, 1.3])
        ax.set_xticklabels(["forward", "forward + backward"])
        ax.set_ylabel("ms (median)")
        shape = f"{case['batch']} x {case['sequence']} x {case['channels']}"
        ax.set_title(f"GPT-2 block {shape}, {dtype}, {_gpu(doc)}")
        ax.legend()
    return report._save(fig, path, doc)


def block_profile(doc: dict[str, Any], dtype: str, path: str | Path) -> Path:
    """The forward + backward's operators by self GPU time, PyTorch eager beside the ladder's."""
    import matplotlib.pyplot as plt

    profiles = doc["block"][dtype]["profile"]
    fig, axes = plt.subplots(
        1, len(profiles), figsize=(7 * len(profiles), 4.5), squeeze=False, sharex=True
    )
    unit = "CPU" if doc.get("simulated") else "GPU"
    for ax, (name, rows) in zip(axes[0], profiles.items(), strict=True):
        rows = sorted(rows, key=lambda r: r["self_us"])
        # positions, not labels: two kernels may share the first 48 characters of a name
        ax.barh(range(len(rows)), [r["self_us"] / 1e3 for r in rows], color=COLORS[name])
        ax.set_yticks(range(len(rows)), [r["name"][:48] for r in rows])
        ax.set_xlabel(f"self {unit} ms, one forward + backward (operators, kernels)")
        ax.set_title(f"{name}: the block, {dtype}, {_gpu(doc)}")
        ax.tick_params(axis="y", labelsize=7)
    return report._save(fig, path, doc)


def figures(doc: dict[str, Any], folder: str | Path, stem: str) -> list[Path]:
    """Every figure of ``doc`` into ``folder``, named ``<stem>-<figure>.png``."""
    folder = Path(folder)
    made = []
    if doc.get("lenet"):
        made.append(lenet_layers(doc, folder / f"{stem}-lenet.png"))
    if doc.get("block"):
        made.append(block_times(doc, folder / f"{stem}-block.png"))
        routes = {dtype: case["routes"] for dtype, case in doc["block"].items()}
        title = f"the block's operators, forward + backward, {_gpu(doc)}"
        made.append(routes_table(routes, folder / f"{stem}-block-routes.png", title))
        for dtype in doc["block"]:
            made.append(block_profile(doc, dtype, folder / f"{stem}-block-profile-{dtype}.png"))
    return made


def routes_table(routes: dict[str, list[str]], path: str | Path, title: str) -> Path:
    """Which path each operator took, per dtype (``routes``: dtype -> the ``str(Route)``s of
    one run, as ``ladder models`` records them): a grid coloured by whether a rung or one of
    ``ladder.ops``' kernels ran (blue), PyTorch did (orange) or each did for some shapes
    (purple), the paths written in each cell."""
    import matplotlib.pyplot as plt

    table: dict[str, dict[str, set[str]]] = {}
    for dtype, found in routes.items():
        for line in found:
            op, _, rest = line.partition(": ")
            if not rest.startswith("torch"):  # a rung's path; its "why" (times) left out
                rest = rest.split(" (")[0]
            table.setdefault(op.removeprefix("ladder::"), {}).setdefault(dtype, set()).add(rest)
    ops, dtypes = sorted(table), list(routes)
    fig, ax = plt.subplots(figsize=(3.2 + 3.6 * len(dtypes), 0.9 + 0.5 * len(ops)))
    for i, op in enumerate(ops):
        for j, dtype in enumerate(dtypes):
            paths = sorted(table[op].get(dtype, ()))
            if not paths:
                continue
            by_torch = [p.startswith("torch") for p in paths]
            color = COLORS["torch"] if all(by_torch) else COLORS["ladder"]
            if any(by_torch) and not all(by_torch):
                color = MIXED
            ax.add_patch(plt.Rectangle((j, i), 0.96, 0.9, color=color, alpha=0.35))
            text = "\n".join(p if len(p) <= 46 else p[:45] + "…" for p in paths[:2])
            if len(paths) > 2:
                text += f" (+{len(paths) - 2})"
            ax.text(j + 0.48, i + 0.45, text, ha="center", va="center", fontsize=7)
    ax.set_xlim(0, len(dtypes))
    ax.set_ylim(len(ops), 0)
    ax.set_xticks([j + 0.48 for j in range(len(dtypes))])
    ax.set_xticklabels(dtypes)
    ax.xaxis.tick_top()
    ax.set_yticks([i + 0.45 for i in range(len(ops))])
    ax.set_yticklabels(ops)
    ax.set_title(
        title + "\n(blue: a rung or a ladder.ops kernel; orange: PyTorch; purple: both, by shape)",
        fontsize=9,
    )
    for side in ("right", "bottom"):
        ax.spines[side].set_visible(False)
    return report._save(fig, path, {})
