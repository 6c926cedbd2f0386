"""The GEMM ladder: C = A @ B, from a NumPy baseline through FP32 Numba rungs to tensor cores."""

from ladder.core.rung import import_rungs
from ladder.gemm import (  # noqa: F401  (registers the problems, cuBLAS through CuPy and PyTorch, cuBLASLt FP8, and the Triton peer)
    problem,
    problem_fp8,
    reference_cublas,
    reference_fp8,
    reference_torch,
    triton_peer,
)

# The ladder, in order: each rung's number is its place here (the baseline is rung 0).
LADDER = (
    "naive",
    "coalesced",
    "shared-tiling",
    "thread-tiling-1d",
    "register-blocked-2d",
    "unsigned-indices",
    "transposed-tiles",
    "interleaved-columns",
    "wide-loads",
    "warp-tiling",
    "double-buffered",
    "tuned",
    "fp16-staging",
    "wmma",
    "wmma-shared",
    "cp-async",
    "mma-sync",
    "swizzle",
    "warp-tile-64",
    "tma",
    "wgmma-descriptors",
    "wgmma",
    "smem-epilogue",
    "persistent",
    "split-k",
    "fp8",  # the problem gemm-fp8
    "bias-gelu",  # the problem gemm-epilogue
)

import_rungs(__name__, __path__, LADDER, baseline="cpu-numpy")
