"""Fusion ladders: elementwise chains, row softmax, layer norm, and GEMM epilogues.

Memory-bound kernels, where the win is reading and writing each byte once. Rung modules are
named ``rNN_<problem>_<name>.py``; their numbers count within each problem.
"""

from ladder.core.rung import import_rungs
from ladder.fused import problem, references  # noqa: F401  (registers the problems, libraries)

import_rungs(__name__, __path__)
