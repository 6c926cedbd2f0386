"""Compatibility shims, all in one place.

numpy 2.5 removed ``np.row_stack`` (an alias of ``np.vstack``). numba-cuda 0.30.x still
registers an overload for it while it builds its typing tables at the first kernel compile,
so in an environment that already has numpy 2.5 with numba-cuda 0.30.4 (the GPU images ship
that pair) the first ``@cuda.jit`` compile fails with ``AttributeError: row_stack``. Putting
the alias back costs nothing and changes no numpy behaviour we use.

Remove this module once numba-cuda guards that overload (it already checks the numpy version
for other removed names) and ``pyproject.toml`` drops its ``numpy<2.5`` pin.
"""

import numpy as np


def apply() -> None:
    """Restore the numpy names that numba-cuda 0.30 still expects."""
    if not hasattr(np, "row_stack"):
        np.row_stack = np.vstack
