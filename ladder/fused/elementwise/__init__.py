"""Elementwise ladder: y = relu(a * x + b) over a matrix, a and b per-column vectors.

A chain of three cheap operations per element, bound by memory: from three kernels that each write
their intermediate to memory, through float16 casts around a float32 kernel, to one fused kernel
that reads x once and writes y once in 16-byte accesses, against one fused CuPy
``ElementwiseKernel`` and ``torch.compile`` of the chain (``references.py``). The problem is
``ELEMENTWISE`` in ``ladder.fused.problem``.
"""

from ladder.core.rung import import_rungs
from ladder.fused.elementwise import (  # noqa: F401  (registers the libraries and the peer)
    references,
    triton_peer,
)

LADDER = ("three-kernels", "fp16-casts", "fused")

import_rungs(__name__, __path__, LADDER)
