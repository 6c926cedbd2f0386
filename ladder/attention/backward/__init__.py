"""Attention backward ladder: dQ, dK, dV from dO and the forward's saved log-sum-exp, from
kernels over an N x N buffer to flash backward on the tensor cores.

``problem`` registers two problems, ``attention-backward`` and ``attention-backward-causal``;
every rung module ``rNN_<name>.py`` registers its launcher for both, and ``references`` the
libraries (PyTorch's SDPA backward, each backend pinned).
"""

from ladder.attention.backward import problem, references  # noqa: F401  (registers them)
from ladder.core.rung import import_rungs

LADDER = ("materialized", "flash", "tensor-core", "wgmma")

import_rungs(__name__, __path__, LADDER)
