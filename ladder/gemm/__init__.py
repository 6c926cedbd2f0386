"""The FP32 GEMM ladder: C = A @ B, from a NumPy baseline to a tuned register-blocked kernel."""

from ladder.core.rung import import_rungs
from ladder.gemm import (  # noqa: F401  (registers the problems, cuBLAS through CuPy and PyTorch, cuBLASLt FP8, and the Triton peer)
    problem,
    problem_fp8,
    reference_cublas,
    reference_fp8,
    reference_torch,
    triton_peer,
)

import_rungs(__name__, __path__)
