"""Layer norm ladder: y = (x - mean) / sqrt(var + eps) * gamma + beta along each row.

From the textbook two kernels (row statistics, then normalization) to one kernel that computes
Welford statistics with the row held in registers and 16-byte loads, against PyTorch's
``layer_norm`` and ``torch.compile`` of it (``references.py``). The problem is ``LAYERNORM`` in
``ladder.fused.problem``.
"""

from ladder.core.rung import import_rungs
from ladder.fused.layernorm import (  # noqa: F401  (registers the libraries and the peer)
    references,
    triton_peer,
)

LADDER = ("two-pass", "welford")

import_rungs(__name__, __path__, LADDER)
