"""Fusion ladders: elementwise chains, row softmax, layer norm, and GEMM epilogues.

Memory-bound kernels, where the win is reading and writing each byte once. Each ladder is its own
package (``elementwise``, ``softmax``, ``layernorm``, ``gemm_epilogue``) of ``rNN_<name>.py``
rung modules and a ``references.py``; ``problem.py`` here defines the four problems and the
input checks they share.
"""

from ladder.fused import (  # noqa: F401  (registers the problems, their rungs and libraries)
    elementwise,
    gemm_epilogue,
    layernorm,
    problem,
    softmax,
)
