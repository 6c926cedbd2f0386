"""Mixture-of-experts ladder: from a loop over experts driven by the host to one grouped
tensor-core kernel per expert GEMM.

``problem`` registers three problems: ``moe-top2`` and ``moe-top8`` (the whole layer, k = 2 and
k = 8) and ``grouped-gemm`` (the expert GEMM alone); every rung module ``rNN_<name>.py``
registers its launcher for the problems it solves. ``common`` holds the kernels rungs share.
"""

from ladder.core.rung import import_rungs
from ladder.moe import problem, references  # noqa: F401  (registers problems, libraries)

# The ladder, in order: each rung's number is its place here, in moe-top2, moe-top8 and
# grouped-gemm alike (grouped-gemm takes rungs 3 and 5, the expert GEMM alone).
LADDER = (
    "expert-loop",
    "sorted-tokens",
    "grouped",
    "fused-gather-scatter",
    "wgmma-grouped",
    "wide-gather",
)

import_rungs(__name__, __path__, LADDER)
