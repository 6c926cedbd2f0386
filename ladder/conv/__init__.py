"""Convolution ladder: the ECE408 CNN layers, from a direct convolution to tensor cores.

Rung modules are named ``rNN_<name>.py``; ``problem.py`` defines the problem and the layer shapes,
``references.py`` the libraries (cuDNN through PyTorch in each configuration, ``torch.compile``,
im2col + cuBLAS through CuPy).
"""

from ladder.conv import problem, references  # noqa: F401  (registers the problem, libraries)
from ladder.core.rung import import_rungs

# The ladder, in order: each rung's number is its place here (the baseline is rung 0).
LADDER = (
    "naive",
    "shared-tiles",
    "unroll-gemm",
    "implicit-gemm",
    "register-tiled",
    "tuned",
    "fp16-staging",
    "tensor-core",
    "wgmma",
    "wgmma-blocks",
    "wgmma-one-group",
    "wgmma-bulk",
    "filters-on-m",
)

import_rungs(__name__, __path__, LADDER, baseline="cpu-numpy")
