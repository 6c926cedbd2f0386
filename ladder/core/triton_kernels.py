"""Triton for the peers: the one place that imports it, and what every Triton peer shares.

The peers (``triton_peer.py`` beside a problem's rungs) are Triton kernels written the way a
Triton user writes them, registered with ``peer=True`` and checked and timed like any rung.
Triton is optional (``pip install 'numba-ladder[triton]'``) and importing ``ladder`` never
imports it, nor PyTorch: a peer module builds its kernels in a ``builder``, at its first call,
after ``load()``:

- ``load()`` imports Triton. In Numba's CUDA simulator (no GPU) ``TRITON_INTERPRET=1`` is set
  (by ``import ladder``, ``device.choose_backend``, and again here for a user who chose the
  simulator after), which Triton reads when ``@triton.jit`` decorates a function: the
  kernels then run in Triton's interpreter, on PyTorch CPU tensors over the simulator's memory
  (``ladder.core.torch_views``), with NumPy doing each block operation. The answers are
  checked; the times mean nothing, as for the simulator's.
- ``Tuned`` is a kernel with the configurations a Triton user autotunes it over
  (``triton.autotune``, keyed on the sizes). The interpreter cannot time a configuration, so
  there the kernel runs with one of them, named by the peer.

Triton looks up ``tl`` in the kernel function's module globals (the interpreter insists on it),
so a peer module declares ``triton`` and ``tl`` as globals (None), which ``builder`` binds.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from ladder.core import device

VALUES_PER_THREAD = 32  # a row-per-program peer's values per thread (``row_block``)
MAX_WARPS = 16
Built = TypeVar("Built")


@functools.cache
def load() -> tuple[Any, Any]:
    """``(triton, triton.language)``, imported at the first call: for Triton's interpreter in
    the simulator, for the GPU otherwise."""
    if device.simulator():
        os.environ["TRITON_INTERPRET"] = "1"  # before any @triton.jit decorates a kernel
    import triton
    import triton.language as tl

    if device.simulator():
        _index_scalars_under_numpy_2_4()
    return triton, tl


def builder(build: Callable[[], Built]) -> Callable[[], Built]:
    """A peer's function that makes its kernels, run once, at its first call: Triton imported
    (``load``) and bound to the names ``triton`` and ``tl`` of the function's module, where
    Triton looks up what a kernel uses, then ``build()``, whose result is kept."""

    @functools.cache
    @functools.wraps(build)
    def built() -> Built:
        build.__globals__["triton"], build.__globals__["tl"] = load()
        return build()

    return built


def _index_scalars_under_numpy_2_4() -> None:
    """Triton 3.6's interpreter turns a scalar into a Python int with ``int(array)`` on its
    one-element array (``range(0, K, BLOCK)`` over an argument does), which NumPy 2.4 refuses
    ("only 0-dimensional arrays can be converted to Python scalars"; triton-lang/triton#9171).
    Its patch of ``tl.tensor`` is wrapped once here so that ``__index__`` reads the element."""
    from triton.runtime import interpreter

    patch = getattr(interpreter, "_patch_lang_tensor", None)
    if patch is None or getattr(patch, "indexes_one_element", False):
        return  # another Triton, or wrapped already

    def patched(tensor: Any, scope: Any) -> None:
        patch(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.reshape(-1)[0]))

    patched.indexes_one_element = True  # type: ignore[attr-defined]
    interpreter._patch_lang_tensor = patched


def next_power_of_2(n: int) -> int:
    """The smallest power of two at least ``n`` (Triton's blocks have power-of-two sizes):
    ``triton.next_power_of_2`` without importing Triton."""
    return 1 << (n - 1).bit_length() if n > 1 else 1


def row_block(cols: int, max_block: int, tile: int) -> tuple[int, bool, int]:
    """``(BLOCK, ONE_BLOCK, num_warps)`` for a program per row of ``cols`` columns: the row as
    one block (its next power of two, at least 16) when it has at most ``max_block`` columns,
    else tiles of ``tile`` (``ONE_BLOCK`` False); warps so that a thread holds at most
    ``VALUES_PER_THREAD`` values of a block, 1 to ``MAX_WARPS``."""
    one_block = cols <= max_block
    block = max(next_power_of_2(cols), 16) if one_block else tile
    warps = min(MAX_WARPS, max(1, block // (32 * VALUES_PER_THREAD)))
    return block, one_block, warps


def interpreted() -> bool:
    """True when the peers run in Triton's interpreter (the simulator), not on a GPU."""
    return device.simulator()


class Tuned:
    """A ``@triton.jit`` kernel and the configurations (``triton.Config``) it is autotuned
    over, keyed on the argument names in ``key``: ``tuned[grid](*args)`` launches it as an
    autotuned kernel is launched (``grid`` a function of the chosen meta-parameters). On a GPU
    that is ``triton.autotune``: the first call of each key (sizes and dtypes) times every
    configuration and keeps the fastest; a configuration that does not fit the GPU (shared
    memory, registers) is timed as infinite and never chosen. In the interpreter, which has no
    clock to tune by, it is ``configs[interpreted]``."""

    def __init__(self, kernel: Any, configs: Sequence[Any], key: Sequence[str], interpreted: int):
        triton, _ = load()
        self.configs = list(configs)
        self.fixed = self.configs[interpreted] if device.simulator() else None
        if self.fixed is None:
            self.kernel = triton.autotune(configs=self.configs, key=list(key))(kernel)
        else:
            self.kernel = kernel

    def __getitem__(self, grid: Any) -> Any:
        if self.fixed is None:
            return self.kernel[grid]
        return functools.partial(self.kernel[grid], **self.fixed.all_kwargs())

    def chosen(self) -> str:
        """The configuration of the last call, for the results (``Rung.describe``)."""
        config = self.fixed or getattr(self.kernel, "best_config", None)
        if config is None:
            return "not called yet"
        how = "the interpreter's configuration" if self.fixed else "autotuned"
        return f"{config_text(config)} ({how})"


def config_text(config: Any) -> str:
    """A ``triton.Config`` on one line: its meta-parameters, warps and stages."""
    parts = [f"{name}={value}" for name, value in config.kwargs.items()]
    parts += [f"num_warps={config.num_warps}", f"num_stages={config.num_stages}"]
    return ", ".join(parts)
