"""Device memory of the attention rungs: what each allocates, its peak, and whether it fits.

Attention's intermediates are what separate its rungs: the materialized rung holds the N x N
scores of every head in device memory, B·H·N²·4 bytes (4.3 GB at the SDPA shape, 275 GB at
N = 32768), while the flash rungs keep them on chip and need nothing beyond their inputs and
output. To report that from real allocations rather than from formulas:

- every device array a rung allocates (its output when none is given, its workspaces) comes
  from ``empty``, which asks the driver how much memory is free first and raises
  ``AttentionMemoryError`` naming the bytes needed and the bytes free, instead of letting the
  allocation fail deep inside the driver (or, with unified memory, crawl);
- ``TRACKER`` counts the bytes of the arrays made by ``empty`` and ``to_device`` while they
  live (a finalizer subtracts them when Python frees the array) and keeps the peak;
- ``memory_vs_n`` runs one rung at growing N and returns, per N, the peak of inputs, output
  and workspaces, or the error it raised: the table behind the notebook's memory plot.
  Library references allocate through PyTorch's caching allocator, so for them the peak is
  read from ``torch.cuda.max_memory_allocated`` instead.

``device_limit`` pretends the device has only so many bytes, so that the clear error can be
shown (and tested) in the simulator, whose device has unlimited memory.
"""

from __future__ import annotations

import contextlib
import math
import sys
import time
import weakref
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from ladder.core import device
from ladder.core.dtypes import resolve
from ladder.core.rung import get_problem


def human(nbytes: float) -> str:
    """Bytes in the largest unit that keeps the number at or above 1 (KB = 1000 bytes)."""
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(nbytes) >= size:
            return f"{nbytes / size:.3g} {unit}"
    return f"{int(nbytes)} bytes"


class AttentionMemoryError(MemoryError):
    """A buffer does not fit in the memory it must live in; says how much it needed."""

    def __init__(
        self, what: str, needed: int, available: int, where: str = "device memory"
    ) -> None:
        self.what, self.needed, self.available, self.where = what, needed, available, where
        super().__init__(
            f"{what} needs {human(needed)} ({needed:,} bytes) of {where}, but only "
            f"{human(available)} is available"
        )


@dataclass
class MemoryTracker:
    """Bytes held by the tracked device arrays now, and the most held at once."""

    current: int = 0
    peak: int = 0

    def add(self, arr: Any, nbytes: int) -> Any:
        self.current += nbytes
        self.peak = max(self.peak, self.current)
        weakref.finalize(arr, self._release, nbytes)
        return arr

    def _release(self, nbytes: int) -> None:
        self.current -= nbytes

    def reset_peak(self) -> None:
        self.peak = self.current


TRACKER = MemoryTracker()
_limit: list[int] = []  # the innermost device_limit, if any


@contextlib.contextmanager
def device_limit(nbytes: int) -> Iterator[None]:
    """Within this block, behave as if the device had ``nbytes`` in all (tracked arrays
    count against it): how a test or a notebook in the simulator meets a full device."""
    _limit.append(int(nbytes))
    try:
        yield
    finally:
        _limit.pop()


def free_bytes() -> int | float:
    """Free device memory in bytes (infinite in the simulator, unless ``device_limit``)."""
    if _limit:
        return max(_limit[-1] - TRACKER.current, 0)
    if device.simulator():
        return math.inf
    from numba import cuda

    context = cuda.current_context()
    context.deallocations.clear()  # Numba frees lazily: return what is already released
    return int(context.get_memory_info().free)


def _release_library_caches() -> None:
    """Hand back what PyTorch's and CuPy's caching allocators hold but do not use."""
    if "torch" in sys.modules:
        import torch

        if torch.cuda.is_initialized():
            torch.cuda.empty_cache()
    if "cupy" in sys.modules:
        import cupy

        cupy.get_default_memory_pool().free_all_blocks()


def ensure_fits(nbytes: int, what: str) -> None:
    """Raise ``AttentionMemoryError`` now if ``nbytes`` more will not fit on the device
    (after the library caches of this process have given back what they hold unused)."""
    free = free_bytes()
    if nbytes > free and not _limit and not device.simulator():
        _release_library_caches()
        free = free_bytes()
    if nbytes > free:
        raise AttentionMemoryError(what, nbytes, int(free))


def empty(shape: Iterable[int], dtype: Any, what: str) -> Any:
    """A tracked device array, after checking that it fits; ``what`` names it in errors."""
    from numba import cuda

    shape = tuple(int(x) for x in shape)
    dtype = np.dtype(dtype)
    nbytes = math.prod(shape) * dtype.itemsize
    ensure_fits(nbytes, what)
    try:
        arr = cuda.device_array(shape, dtype=dtype)
    except Exception as err:  # the driver's out-of-memory, e.g. from fragmentation
        if "OUT_OF_MEMORY" not in str(err).upper():
            raise
        raise AttentionMemoryError(what, nbytes, int(free_bytes())) from err
    return TRACKER.add(arr, nbytes)


def to_device(x: np.ndarray, what: str = "an input") -> Any:
    """``cuda.to_device``, tracked and checked like ``empty``."""
    arr = empty(x.shape, x.dtype, what)
    arr.copy_to_device(np.ascontiguousarray(x))
    return arr


def _torch_peak_bytes(run: Any) -> int:
    """Peak bytes PyTorch's allocator held above its level before ``run()``."""
    import torch

    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    run()
    torch.cuda.synchronize()
    return int(torch.cuda.max_memory_allocated() - before)


def memory_vs_n(
    rung: Any,
    ns: Iterable[int],
    *,
    batch: int = 1,
    heads: int = 1,
    kv_heads: int | None = None,
    d: int = 64,
    dtype: str = "float16",
    seed: int = 0,
) -> list[dict[str, Any]]:
    """Run ``rung`` once at each N and return its peak device memory there.

    Each row: ``n``, ``size``, ``io_bytes`` (q, k, v and the output), ``workspace_bytes`` (the
    peak above them while the rung ran), ``peak_bytes`` (their sum), ``seconds`` (the one
    run, compilation included at the first N), and ``error`` when the rung raised (for
    instance ``AttentionMemoryError`` when its N x N buffers do not fit). Results are not
    checked here (an N x N float64 reference at N = 32768 is beyond any host): the tests and
    the benchmark do that.
    """
    problem = get_problem(rung.problem)
    kv_heads = heads if kv_heads is None else kv_heads
    rows = []
    for n in ns:
        size = (batch, heads, kv_heads, int(n), d)
        row: dict[str, Any] = {
            "rung": rung.name,
            "problem": rung.problem,
            "n": int(n),
            "size": list(size),
            "dtype": dtype,
            "io_bytes": None,
            "workspace_bytes": None,
            "peak_bytes": None,
            "seconds": None,
            "error": None,
        }
        rows.append(row)
        if rung.unavailable_reason() is not None:
            row["error"] = rung.unavailable_reason()
            continue
        try:
            inputs = problem.make_inputs(size, dtype, seed)
            args = [to_device(x) for x in inputs]
            out = empty(problem.output_shape(size), resolve(dtype), "the output")
        except AttentionMemoryError as err:
            row["error"] = f"inputs: {err}"
            continue
        io_bytes = sum(x.nbytes for x in inputs) + out.nbytes
        _drop_plans(rung)  # a plan's workspaces (rung 1's scores) are this N's, made anew
        base = TRACKER.current
        TRACKER.reset_peak()
        start = time.perf_counter()
        try:
            if "torch" in rung.needs:
                workspace = _torch_peak_bytes(lambda a=args, o=out: rung.launch(*a, o))
            else:
                rung.launch(*args, out)
                _synchronize()
                workspace = TRACKER.peak - base
        except Exception as err:  # recorded per N: the table shows where a rung stops
            row["error"] = f"{type(err).__name__}: {err}"
            continue
        finally:
            del args, out
        row["seconds"] = time.perf_counter() - start
        row["io_bytes"] = io_bytes
        row["workspace_bytes"] = workspace
        row["peak_bytes"] = io_bytes + workspace
    return rows


def _drop_plans(rung: Any) -> None:
    """Forget the plans of ``rung``'s launcher (``launch.plans``, kept by its registration),
    and the memory they hold."""
    plans = getattr(rung.launch, "plans", None)
    if plans is not None:
        plans.clear()
    _synchronize()


def _synchronize() -> None:
    from numba import cuda

    cuda.synchronize()
