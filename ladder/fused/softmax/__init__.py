"""Softmax ladder: y = softmax(x) along each row of a matrix, shifted by the row max.

From three kernels (max, sum, normalize) with one thread per row, through a block per row with
shared-memory tree reductions, warp-shuffle reductions, and the online softmax (max and sum in one
pass), to the row held in registers (one read and one write of every element), against PyTorch's
``torch.softmax`` and ``torch.compile`` of it (``references.py``). The problem is ``SOFTMAX`` in
``ladder.fused.problem``.
"""

from ladder.core.rung import import_rungs
from ladder.fused.softmax import (  # noqa: F401  (registers the libraries and the peer)
    references,
    triton_peer,
)

LADDER = ("three-kernels", "block-per-row", "warp-shuffle", "online", "rows-in-registers")

import_rungs(__name__, __path__, LADDER)
