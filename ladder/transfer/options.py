"""The options of the data-movement benchmark, for ``python -m ladder.transfer`` and
``ladder transfer`` alike. Light on purpose: building a parser imports no CUDA module."""

from __future__ import annotations

import argparse

PARTS = ("transfers", "overlap", "launch")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the benchmark's options to ``parser``."""
    parser.add_argument(
        "--out",
        help="results file (default: none; ladder bench --problems transfer keeps the results "
        "in the GPU's canonical file)",
    )
    parser.add_argument("--figures", help="folder for the PNG figures (default: beside --out)")
    parser.add_argument("--only", nargs="+", choices=PARTS, help="measure only these parts")
    parser.add_argument("--rung", help="convolution rung for the overlap (default: the highest)")
    parser.add_argument("--layers", nargs="+", help="conv1 and/or conv2 (default: both)")
    parser.add_argument(
        "--from-results",
        metavar="FILE",
        help="measure nothing: read this results file, redraw its figures beside it (or into "
        "--figures) and, with --readme, regenerate the README block",
    )
    parser.add_argument("--readme", help="also regenerate this README's data-movement block")
