"""Time stamps on the GPU's clock: CUDA events on a GPU, host clock readings in the simulator.

A ``Stamp`` is recorded on a stream, like an event; ``ms_since`` gives the time from another
stamp. On a GPU it is a CUDA event: it is stamped when the stream reaches it, so two stamps
around a copy or a kernel bracket the GPU's work, not the Python that issued it, and
``wait`` makes another stream wait for it. The simulator runs every copy and kernel when it is
issued, so reading the host clock at the same place gives the same intervals there (and
``wait`` has nothing to wait for).
"""

from __future__ import annotations

import time
from typing import Any

from ladder.core import device


class Stamp:
    """A CUDA event on a GPU; a host clock reading in the simulator."""

    def __init__(self) -> None:
        from numba import cuda

        self.event = None if device.simulator() else cuda.event()
        self.host_s: float | None = None

    def record(self, stream: Any = 0) -> None:
        if self.event is None:
            self.host_s = time.perf_counter()
        else:
            self.event.record(stream)

    def wait(self, stream: Any) -> None:
        """Make ``stream`` wait until this stamp is reached (on a GPU)."""
        if self.event is not None:
            self.event.wait(stream)

    def synchronize(self) -> None:
        """Block the host until the GPU has reached this stamp."""
        if self.event is not None:
            self.event.synchronize()

    def ms_since(self, origin: Stamp) -> float:
        """Milliseconds from ``origin`` to this stamp (both recorded and reached)."""
        if self.event is None:
            if self.host_s is None or origin.host_s is None:
                raise RuntimeError("a stamp was read before it was recorded")
            return (self.host_s - origin.host_s) * 1e3
        from numba import cuda

        return float(cuda.event_elapsed_time(origin.event, self.event))
