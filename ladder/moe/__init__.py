"""Mixture-of-experts ladder: from a loop over experts driven by the host to one grouped
tensor-core kernel per expert GEMM.

``problem`` registers three problems: ``moe-top2`` and ``moe-top8`` (the whole layer, k = 2 and
k = 8) and ``grouped-gemm`` (the expert GEMM alone); every rung module ``rNN_<name>.py``
registers its launcher for the problems it solves. ``common`` holds the kernels rungs share.
"""

from ladder.core.rung import import_rungs
from ladder.moe import problem, references  # noqa: F401  (registers problems, libraries)

import_rungs(__name__, __path__)
