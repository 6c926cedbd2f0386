"""ladder: an optimization ladder for GPU kernels in Python.

Importing ``ladder`` chooses the backend once (a real GPU, or Numba's CUDA simulator when
there is none) and applies the numpy compatibility shim, before anything imports
``numba.cuda``.
"""

from ladder.core import compat as _compat
from ladder.core import device as _device

_compat.apply()
_device.choose_backend()

__version__ = "0.1.0"
