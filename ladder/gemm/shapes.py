"""The GEMM shapes a model calls: ``ladder bench --problems gemm-shapes``.

The GEMM ladder is tuned and benched on squares (4096³ and 8192³), where the tile grid fills
the GPU evenly and K is long. A model calls other shapes: a projection with N = 768, a decode
step with 1 to 128 rows, a fully connected layer with N = 128 and K = 4624. There a kernel
with one tile shape leaves SMs idle or spends its time in the epilogue, and cuBLAS, which
picks a kernel per shape, pulls ahead. This benchmark measures the best tensor-core rungs
against ``torch.matmul`` (cuBLAS), cuBLAS called directly and the Triton peer at each of
``SHAPES``, in float16 and bfloat16, and reports per shape the fastest rung against the
fastest library, and over all shapes the geometric mean and the worst case.

The runs are kept in a section of the GPU's canonical file (``sections["gemm-shapes"]``), not
among the ladder's runs, so the square benchmark's headline and completeness stay as they are.
In the simulator the shapes are tiny and every tensor-core rung is unavailable.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from ladder.core import derived, device, report, timing
from ladder.core.rung import get_rung

# (what it is, (M, N, K)): C (M × N) = A (M × K) @ B (K × N); the token counts are a batch of
# 8 sequences of 1024 (GPT-2) or 4096 tokens (Llama-3-8B, Mixtral)
SHAPES: tuple[tuple[str, tuple[int, int, int]], ...] = (
    ("GPT-2 small qkv", (8192, 2304, 768)),
    ("GPT-2 small attention projection", (8192, 768, 768)),
    ("GPT-2 small fc1", (8192, 3072, 768)),
    ("GPT-2 small fc2", (8192, 768, 3072)),
    ("GPT-2 medium qkv", (8192, 3072, 1024)),
    ("GPT-2 medium attention projection", (8192, 1024, 1024)),
    ("GPT-2 medium fc1", (8192, 4096, 1024)),
    ("GPT-2 medium fc2", (8192, 1024, 4096)),
    ("Llama-3-8B qkv (GQA)", (4096, 6144, 4096)),
    ("Llama-3-8B attention output", (4096, 4096, 4096)),
    ("Llama-3-8B gate and up", (4096, 28672, 4096)),
    ("Llama-3-8B down", (4096, 4096, 14336)),
    ("Mixtral expert w1, 1024 tokens", (1024, 14336, 4096)),
    ("Mixtral expert w2, 1024 tokens", (1024, 4096, 14336)),
    ("decode, 1 row", (1, 4096, 4096)),
    ("decode, 8 rows", (8, 4096, 4096)),
    ("decode, 32 rows", (32, 4096, 4096)),
    ("decode, 128 rows", (128, 4096, 4096)),
    ("decode, 128 rows, Llama gate and up", (128, 28672, 4096)),
    ("LeNet fc1, batch 10,000", (10000, 128, 4624)),
    ("LeNet fc2, batch 10,000", (10000, 10, 128)),
    ("off every tile", (1000, 1000, 1000)),
    ("off every tile, long K", (3001, 2999, 8000)),
    ("off every tile, few rows", (77, 5000, 2048)),
)
SIMULATOR_SHAPES = (("tiny, off every tile", (17, 33, 24)),)
DTYPES = ("float16", "bfloat16")
# the tensor-core rungs that were fastest somewhere on the squares, then the libraries and peer
RUNGS = ("warp-tile-64", "wgmma", "smem-epilogue", "persistent", "split-k")
LIBRARIES = ("cublas", "torch-matmul")
PEERS = ("triton",)


def shapes() -> tuple[tuple[str, tuple[int, int, int]], ...]:
    """The shapes this machine measures: ``SHAPES``, or tiny ones in the simulator."""
    return SIMULATOR_SHAPES if device.simulator() else SHAPES


def checked(dtypes: tuple[str, ...] | None) -> tuple[str, ...]:
    """``dtypes`` (default ``DTYPES``), each one this benchmark takes, or a clear error."""
    for dtype in dtypes or ():
        if dtype not in DTYPES:
            raise ValueError(f"--dtypes {dtype}: gemm-shapes takes {', '.join(DTYPES)}")
    return tuple(dtypes or DTYPES)


def contenders() -> list[Any]:
    """The rungs, libraries and peer measured at every shape."""
    return [get_rung("gemm", name) for name in (*RUNGS, *LIBRARIES, *PEERS)]


def document(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The section's document from the bench's runs (``ladder bench --problems gemm-shapes``
    measures ``shapes()`` × the dtypes with ``contenders()``): each run labelled with what
    its shape is."""
    label = {size: name for name, size in shapes()}
    doc = report.results_document([r | {"label": label[tuple(r["shape"])]} for r in runs], None)
    doc["kind"] = "gemm-shapes"
    doc["runs_by_dtype"] = True  # a bench of one dtype keeps the file's runs of the other
    return doc


def rows(doc: dict[str, Any], dtype: str) -> list[dict[str, Any]]:
    """Per shape of ``dtype``: the fastest rung that passed, the fastest library, the peer, the
    ratio (the library's time over the rung's) and the verdict of their repeats."""
    out = []
    runs = [r for r in doc["runs"] if r["dtype"] == dtype and timing.run_status(r) == "ok"]
    for label in dict.fromkeys(r["label"] for r in doc["runs"] if r["dtype"] == dtype):
        here = [r for r in runs if r["label"] == label]
        rung = min((r for r in here if r["rung"] in RUNGS), key=_ms, default=None)
        lib = min((r for r in here if r["rung"] in LIBRARIES), key=_ms, default=None)
        peer = min((r for r in here if r["rung"] in PEERS), key=_ms, default=None)
        shape = next(r["shape"] for r in doc["runs"] if r["label"] == label)
        ratio = lib["median_ms"] / rung["median_ms"] if rung and lib else None
        out.append(
            {
                "label": label,
                "shape": shape,
                "rung": rung,
                "library": lib,
                "peer": peer,
                "ratio": ratio,
                "peer_ratio": lib["median_ms"] / peer["median_ms"] if peer and lib else None,
                "verdict": derived.verdict(rung, lib) if rung and lib else None,
            }
        )
    return out


def _ms(run: dict[str, Any]) -> float:
    return run["median_ms"]


def geometric_mean(values: list[float]) -> float | None:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def markdown(doc: dict[str, Any], figures: list[str]) -> str:
    """The section's page: per dtype, a row per shape and the geometric mean and worst case of
    the best rung against the fastest library."""
    lines = [
        "Per shape: the fastest of the tensor-core rungs "
        + ", ".join(f"`{n}`" for n in RUNGS)
        + " against the faster of "
        + " and ".join(f"`{n}`" for n in LIBRARIES)
        + " (the library's time over the rung's: above 1, the rung is faster), and the Triton "
        "peer the same way. The rung is ahead only where its 90th-percentile time beats the "
        "library's 10th, behind only the reverse; otherwise parity.",
        "",
    ]
    lines += [f"![gemm-shapes]({link})" for link in figures]
    for dtype in dict.fromkeys(r["dtype"] for r in doc["runs"]):
        found = rows(doc, dtype)
        ratios = [row["ratio"] for row in found if row["ratio"]]
        lines += [
            f"### {dtype}",
            "",
            "| shape | M × N × K | fastest rung | ms | fastest library | ms | × library "
            "| verdict | Triton × library |",
            "|---|---|---|---:|---|---:|---:|---|---:|",
        ]
        for row in found:
            rung, lib = row["rung"], row["library"]
            lines.append(
                f"| {row['label']} | {' × '.join(map(str, row['shape']))} | "
                + (f"`{rung['rung']}` | {rung['median_ms']:.4f}" if rung else "— | —")
                + " | "
                + (f"`{lib['rung']}` | {lib['median_ms']:.4f}" if lib else "— | —")
                + f" | {_x(row['ratio'])} | {row['verdict'] or '—'} | {_x(row['peer_ratio'])} |"
            )
        lines.append("")
        if ratios:
            worst = min(found, key=lambda row: row["ratio"] or math.inf)
            lines += [
                f"Over the {len(ratios)} shapes where both ran: geometric mean "
                f"{geometric_mean(ratios):.2f}× the fastest library; the worst "
                f"{worst['ratio']:.2f}× ({worst['label']}).",
                "",
            ]
        else:
            lines += ["No shape where a rung and a library both ran.", ""]
    return "\n".join(lines).rstrip() + "\n"


def _x(value: float | None) -> str:
    return f"{value:.2f}" if value else "—"


def figures(doc: dict[str, Any], folder: str | Path, stem: str) -> list[Path]:
    """``<stem>-ratios.png`` in ``folder``: per shape, the fastest rung's and the Triton peer's
    speed as a multiple of the fastest library's, a panel per dtype, the GPU named."""
    import matplotlib.pyplot as plt

    dtypes = list(dict.fromkeys(r["dtype"] for r in doc["runs"]))
    found = {dtype: rows(doc, dtype) for dtype in dtypes}
    if not any(row["ratio"] for rows_ in found.values() for row in rows_):
        return []
    count = max(len(rows_) for rows_ in found.values())
    fig, axes = plt.subplots(
        1, len(dtypes), figsize=(6 * len(dtypes), 0.32 * count + 1.6), sharey=True, squeeze=False
    )
    for ax, dtype in zip(axes[0], dtypes, strict=True):
        table = found[dtype]
        y = range(len(table))
        ax.barh([i - 0.2 for i in y], [row["ratio"] or 0 for row in table], 0.4, label="rung")
        ax.barh([i + 0.2 for i in y], [row["peer_ratio"] or 0 for row in table], 0.4,
                label="Triton peer", color="tab:gray")  # fmt: skip
        ax.axvline(1.0, color="black", lw=0.8)
        ax.set_yticks(list(y), [row["label"] for row in table], fontsize=7)
        ax.set_xlabel("× the fastest library (its time over the contender's)")
        ax.set_title(dtype, fontsize=9)
    axes[0][0].invert_yaxis()  # the first shape on top (the axes share y: once)
    axes[0][-1].legend(fontsize=7, loc="upper right", bbox_to_anchor=(1.0, 1.0))
    fig.suptitle(f"GEMM at the shapes models call, on {doc['gpu']}", fontsize=10)
    return [report._save(fig, Path(folder) / f"{stem}-ratios.png", doc)]
