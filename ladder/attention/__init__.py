"""Attention ladder: softmax(Q·Kᵀ/√d)·V, from three kernels over an N x N buffer to
tensor-core flash attention, for multi-head, grouped-query and multi-query attention.

``problem`` registers two problems, ``attention`` and ``attention-causal``; every rung module
``rNN_<name>.py`` registers its launcher for both. ``memory`` tracks what the rungs allocate.
"""

from ladder.attention import (  # noqa: F401  (registers problems, libraries, the peer)
    problem,
    references,
    triton_peer,
)
from ladder.core.rung import import_rungs

# The ladder, in order: each rung's number is its place here, in attention and
# attention-causal alike.
LADDER = (
    "naive",
    "row-in-shared",
    "flash",
    "flash-fp16",
    "tensor-core-flash",
    "gqa-packed",
    "wgmma-flash",
    "overlap-flash",
    "producer-flash",
    "pingpong-flash",
    "wide-keys-flash",
)

import_rungs(__name__, __path__, LADDER)

from ladder.attention import backward  # noqa: E402, F401  (the backward ladder, after the forward's)
