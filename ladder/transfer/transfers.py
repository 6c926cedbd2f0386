"""Host-to-device and device-to-host bandwidth for pageable, pinned and mapped host memory.

Three kinds of host memory, each moved in both directions over sizes from 4 KiB to 1 GiB:

- **pageable**: an ordinary NumPy array. The GPU's copy engines can only read and write
  page-locked memory, so the driver copies through a small pinned buffer of its own, a piece
  at a time, with the CPU copying each piece; the call returns only when the data is safe.
- **pinned** (``cuda.pinned_array``): page-locked memory, which the copy engine reads and
  writes directly (DMA). Copies are asynchronous and can overlap kernels (``pipeline.py``).
- **mapped** (``cuda.mapped_array``), zero-copy: pinned memory mapped into the GPU's address
  space. There is no copy call at all: a kernel reads or writes host memory across the link.
  Here a copy kernel moves 8-byte words between the mapped array and a device array, so the
  figure is what a kernel achieves over the link when its data stays on the host.

Timing follows the CUDA samples' ``bandwidthTest``: pinned copies and the mapped kernel are
timed with CUDA events (behind a head-start kernel, so the host's work to issue them is not
counted, as in ``ladder.core.timing``); pageable copies are synchronous for the host, so they
are timed with the host clock from the call until the device is idle again, which is the
time a program waits for them. Each point is the median of several repeats, and every
transfer's data is checked after its repeats. Small transfers are bound by the fixed cost of a
transfer (a few microseconds), large ones by the link; the peak reported is the best median
over all sizes and kinds, per direction.

In the simulator every kind is a NumPy array, copies are host copies and the times mean
nothing; the records only show that the sweep runs.
"""

from __future__ import annotations

import functools
import os
import time
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from numba import cuda

from ladder.core import device
from ladder.core.timing import _Scratch

KINDS = ("pageable", "pinned", "mapped")
DIRECTIONS = ("h2d", "d2h")
GPU_SIZES = [4096 << i for i in range(19)]  # 4 KiB, 8 KiB, ..., 1 GiB
SIMULATOR_SIZES = [4096, 16384]
WORD = np.uint64  # the mapped copy kernel moves 8-byte words
THREADS = 256
BLOCKS_PER_SM = 32  # enough 8-byte loads in flight to cover the link's latency
MIN_REPEATS = 5
MAX_REPEATS = 30
POINT_BUDGET_S = 0.3  # repeats of one point stop after this long (once MIN_REPEATS are done)


@cuda.jit
def copy_words(src, dst, n):
    """dst[:n] = src[:n], a grid-stride loop over 8-byte words."""
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    for i in range(start, n, stride):
        dst[i] = src[i]


@dataclass
class Transfer:
    """One point of the sweep: a kind of host memory, a direction and a size, all repeats."""

    kind: str
    direction: str
    bytes: int
    samples_ms: list[float]
    clock: str  # "events" (GPU) or "host"
    simulated: bool

    @property
    def median_ms(self) -> float:
        return float(np.median(self.samples_ms))

    @property
    def gbps(self) -> float:
        """Bandwidth in GB/s (10^9 bytes per second) at the median time."""
        return self.bytes / (self.median_ms * 1e-3) / 1e9

    def to_dict(self) -> dict[str, Any]:
        found = asdict(self)
        found["median_ms"] = self.median_ms
        found["gbps"] = self.gbps
        return found


def _host_buffer(kind: str, words: int) -> Any:
    """Host memory of ``kind`` holding ``words`` 8-byte words."""
    if kind == "pinned":
        return cuda.pinned_array(words, dtype=WORD)
    if kind == "mapped" and not device.simulator():
        return cuda.mapped_array(words, dtype=WORD)
    # pageable; and mapped in the simulator, whose mapped_array is a device array with no
    # host side: a NumPy array handed to a simulated kernel is copied in and back, which is
    # what zero-copy looks like from the host
    return np.empty(words, dtype=WORD)


def _grid(words: int) -> int:
    if device.simulator():
        return 1  # every simulated thread is a Python thread
    sms = device.facts().sm_count or 1
    return max(1, min((words + THREADS - 1) // THREADS, sms * BLOCKS_PER_SM))


def _copy(kind: str, direction: str, host: Any, dev: Any, words: int, stream: Any) -> None:
    """One transfer of ``words`` words between ``host`` and ``dev`` (asynchronous unless
    the memory is pageable)."""
    if kind == "mapped":
        src, dst = (host, dev) if direction == "h2d" else (dev, host)
        copy_words[_grid(words), THREADS, stream](src, dst, words)
        return
    on = 0 if kind == "pageable" else stream  # stream 0: Numba's synchronous copy call
    if direction == "h2d":
        dev[:words].copy_to_device(host[:words], stream=on)
    else:
        dev[:words].copy_to_host(host[:words], stream=on)


def _time_ms(run: Any, stream: Any, events: bool, start: Any, end: Any) -> float:
    if events:
        _Scratch.head_start()  # on the legacy default stream, which `stream` waits for
        start.record(stream)
        run()
        end.record(stream)
        end.synchronize()
        return float(cuda.event_elapsed_time(start, end))
    cuda.synchronize()
    began = time.perf_counter()
    run()
    cuda.synchronize()
    return (time.perf_counter() - began) * 1e3


def _host_view(host: Any, words: int) -> np.ndarray:
    """The first ``words`` words of a host buffer as a plain NumPy array (no copy)."""
    return np.asarray(host)[:words]


def sweep(
    sizes: list[int] | None = None,
    kinds: tuple[str, ...] = KINDS,
    directions: tuple[str, ...] = DIRECTIONS,
    *,
    repeats: int | None = None,
) -> list[Transfer]:
    """Measure every (kind, direction, size); sizes in bytes, multiples of 8.

    ``repeats`` fixes the number of repeats per point; by default repeats run for about
    ``POINT_BUDGET_S`` per point (at least ``MIN_REPEATS``, at most ``MAX_REPEATS``), and once
    in the simulator. Raises ``AssertionError`` if a transfer delivered wrong data.
    """
    simulated = device.simulator()
    sizes = list(sizes or (SIMULATOR_SIZES if simulated else GPU_SIZES))
    for size in sizes:
        if size <= 0 or size % np.dtype(WORD).itemsize:
            raise ValueError(f"sizes must be positive multiples of 8 bytes, got {size}")
    most = max(sizes) // np.dtype(WORD).itemsize
    pattern = np.arange(most, dtype=WORD) * WORD(0x9E3779B97F4A7C15)  # no two words alike
    stream = cuda.stream()
    start, end = cuda.event(), cuda.event()
    dev = cuda.device_array(most, dtype=WORD)
    found: list[Transfer] = []
    for kind in kinds:
        if kind not in KINDS:
            raise ValueError(f"unknown kind {kind!r}; known: {', '.join(KINDS)}")
        host = _host_buffer(kind, most)
        events = kind != "pageable" and not simulated
        for size in sizes:
            words = size // np.dtype(WORD).itemsize
            for direction in directions:
                view = _host_view(host, words)
                if direction == "h2d":
                    view[:] = pattern[:words]
                else:
                    dev[:words].copy_to_device(pattern[:words])
                    view[:] = 0
                run = functools.partial(_copy, kind, direction, host, dev, words, stream)
                run()  # first touch and first launch (compilation) are not timed
                stream.synchronize()
                samples: list[float] = []
                while len(samples) < (repeats or (1 if simulated else MAX_REPEATS)):
                    samples.append(_time_ms(run, stream, events, start, end))
                    enough = len(samples) >= MIN_REPEATS and sum(samples) * 1e-3 >= POINT_BUDGET_S
                    if repeats is None and enough:
                        break
                got = dev[:words].copy_to_host() if direction == "h2d" else view
                if not np.array_equal(got, pattern[:words]):
                    raise AssertionError(f"{kind} {direction} of {size} bytes delivered wrong data")
                clock = "events" if events else "host"
                found.append(Transfer(kind, direction, size, samples, clock, simulated))
    return found


def peak(records: list[Transfer] | list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The best median bandwidth per direction, with the kind and size that reached it."""
    best: dict[str, dict[str, Any]] = {}
    for record in records:
        r = record if isinstance(record, dict) else record.to_dict()
        if r["direction"] not in best or r["gbps"] > best[r["direction"]]["gbps"]:
            best[r["direction"]] = {"gbps": r["gbps"], "kind": r["kind"], "bytes": r["bytes"]}
    return best


# PCIe signalling rate per lane (GT/s) and line-code efficiency, by generation
_PCIE_GTS = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0}


def _pcie_encoding(gen: int) -> float:
    return 0.8 if gen <= 2 else (128 / 130 if gen <= 5 else 242 / 256)


def link_info() -> dict[str, Any] | None:
    """The GPU's PCIe link as ``nvidia-smi`` reports it, with its raw rate per direction.

    The raw rate (lanes x signalling rate x line code) is an upper bound that no transfer
    reaches: packet headers and flow control take a further 10-20%. None without a GPU or
    ``nvidia-smi``, or when the GPU is not attached by PCIe."""
    if not device.gpu_available():
        return None
    fields = "pcie.link.gen.max,pcie.link.gen.current,pcie.link.width.max,pcie.link.width.current"
    try:
        text = os.popen(f"nvidia-smi --query-gpu={fields} --format=csv,noheader,nounits").read()
        gen_max, gen_now, width_max, width_now = (int(v) for v in text.splitlines()[0].split(","))
    except (OSError, ValueError, IndexError):
        return None
    raw = width_max * _PCIE_GTS.get(gen_max, 0.0) * _pcie_encoding(gen_max) / 8
    return {
        "pcie_gen_max": gen_max,
        "pcie_gen_current": gen_now,
        "pcie_width_max": width_max,
        "pcie_width_current": width_now,
        "raw_gbps_per_direction": raw or None,
    }
