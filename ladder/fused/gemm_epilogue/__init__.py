"""GEMM epilogue ladder: C = gelu(A @ B + bias) for float32 A, B and bias.

The GEMM is `gemm/double-buffered`, unchanged: rung 1 stores C and applies bias + GELU in a second
kernel, rung 2 applies them in the GEMM kernel's own store, so that C goes to memory once; against
cuBLAS SGEMM followed by a CuPy bias + GELU kernel, and ``torch.compile`` of ``gelu(A @ B + bias)``
(``references.py``). The problem is ``GEMM_EPILOGUE`` in ``ladder.fused.problem``.
"""

from ladder.core.rung import import_rungs
from ladder.fused.gemm_epilogue import references  # noqa: F401  (registers the libraries)

LADDER = ("gemm-then-epilogue", "fused-epilogue")

import_rungs(__name__, __path__, LADDER)
