"""A convolution layer from host memory to host memory: sequential, or chunked over streams.

The whole batch starts in host memory and its result must end in host memory: 296 MB in and
1,024 MB out for conv1 at B = 10,000 images, 256 MB in and 740 MB out for conv2 (float32). Three
stages, each using its own part of the GPU: the copy engine that moves data in (H2D), the SMs
that run the kernel, the copy engine that moves data out (D2H).

**Sequential** (``Sequential``): copy the batch in, run the layer, copy the result out, on one
stream. Each stage waits for the one before, so the time is the sum of the three.

**Pipelined** (``Pipelined``): the batch is cut into chunks of images, chunk i goes to stream
i mod S, and each stream copies its chunk in, runs the layer on it and copies it out. Work on
different streams may run at the same time, so while chunk i is being computed, chunk i + 1 is
copied in and chunk i - 1 copied out. The best it can do is the time of its largest stage;
the overlap efficiency is that ideal over the time taken (``Run.efficiency``).

Copies overlap only when the host memory is pinned (``transfers.py``). Two cases:

- ``host_memory="pageable"``: the batch is an ordinary NumPy array, as it usually is. Each
  stream has two pinned staging buffers for its input chunks and two for its output chunks
  (double buffering): the CPU copies chunk i + S into one buffer while the copy engine reads
  chunk i from the other. Those CPU copies are real work and part of the pipeline here: a
  pool of ``copy_threads`` host threads does them (NumPy releases the GIL while it copies), as
  a fourth stage, ``host copies``, whose time is the threads' total busy time divided by
  their number. The wall time runs from the first byte of the NumPy input to the last byte of
  the NumPy output.

  The efficiency is still the issue's: the largest of the three GPU stages over the wall
  time. That is the right question (does the staging hide behind the copy engines?) and on
  the H200's host the answer is no, first for a reason outside the pipeline: every byte in and
  out must also cross the CPU's memory once more, and the host copies more slowly than the
  link moves data. ``host_copy_rate`` measures the CPU's copy rate between pinned and pageable
  memory on its own, with 1, ``copy_threads`` and all the cores; the layer's bytes over the
  best of those rates (``compare`` records it as ``host_copy``) estimates the shortest time in
  which the host can stage the layer, and the largest GPU stage over that time the best
  efficiency the host allows (an estimate: other piece sizes or thread counts may copy a little
  faster). Two designs tried on the H200 (``lab/transfer/2026-11-22-copy-threads/nvidia-h200-
  transfer-copy-threads.json``, ``lab/transfer/2026-11-22-pieces/nvidia-h200-transfer-
  pieces.json``): more copy threads (12, 15) shrink the host stage but the wall time hardly; cutting
  each chunk's copy into one piece per thread, so a staging buffer empties sooner, made it slower
  (conv1 at best 51.2 ms, against 46.0 to 48.1 ms unsplit with 8 threads, on other machines of the
  same kind), and a third staging buffer per stream, tried only together with the split, did not
  help; deeper staging on its own is untested. The copies also compete with the copy engines for the
  same memory: with the engines moving data both ways, 8 or 15 threads copied a seventh to a third
  less (``lab/transfer/2026-11-22-host-copy/nvidia-h200-host-copy.json``).
- ``host_memory="pinned"``: the batch was allocated pinned in the first place
  (``cuda.pinned_array``; ``pinned_copy`` makes one), so the copy engines read and write it
  directly and there is nothing to stage. This is what a program that owns its buffers
  should do; it shows the GPU side of the pipeline alone.

The device holds one input and one output buffer per stream (a stream runs its own work in
order, so it never overwrites a buffer that it still reads); the weights are uploaded once,
before the runs, like a model's parameters.

Timing: CUDA events (``clock.Stamp``) before and after every copy and kernel, so the
timeline (``plot.timeline``) is drawn from what the GPU did. Each engine takes the chunks in
order: the copy in of chunk i waits (``cuStreamWaitEvent``) for the copy in of chunk i - 1,
and likewise for kernels and copies out. The hardware queues would mostly do this anyway; the
waits make it certain, so that each bar starts when its engine began the work rather than
when its stream asked for it, and a stage's total time is the sum of its bars. The host
copies are timed with the host clock, from the same origin (the host clock is read as the
origin event is recorded, on an idle GPU). Every enqueue and every host copy is inside an
NVTX range (``ladder:transfer/chunk 7/h2d``, ...), so Nsight Systems shows the same picture:
``nsys profile -t cuda,nvtx python -m ladder.transfer --only overlap``.

Results: each chunk goes through the same rung's kernel as the whole batch, and a direct
convolution computes every output element the same way whatever the batch size, so the
pipelined result is compared bit for bit with the sequential one (``compare``).

In the simulator streams, events and copies are synchronous, so nothing overlaps and the times
mean nothing; the runs check that the chunking, the staging and the results are right.
"""

from __future__ import annotations

import contextlib
import os
import queue
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from numba import cuda

from ladder.conv.layers import LAYERS
from ladder.conv.problem import CONV, conv_numpy
from ladder.core import device
from ladder.core.rung import Launcher, Rung, rungs
from ladder.core.timing import nvtx_range, relative_error
from ladder.transfer.clock import Stamp

HOST_MEMORIES = ("pageable", "pinned")
CHUNKS = 32
STREAMS = 4
COPY_THREADS = 8
SLOTS = 2  # pinned staging buffers per stream and direction: fill one while the other drains
GPU_CONFIGS = [(chunks, streams) for chunks in (8, 16, 32, 64) for streams in (2, 3, 4)]
SIMULATOR_CONFIGS = [(3, 2)]
# the simulator runs every thread of a block as a Python thread: a few small images
SIMULATOR_LAYERS = {"conv1": (3, 1, 2, 9, 8, 3), "conv2": (2, 2, 3, 8, 7, 3)}
REFERENCE_IMAGES = 4  # images checked against the float64 reference (all of them: too slow)
STAGES = ("h2d", "kernel", "d2h")
HOST_STAGE = "host copies"
_STAMPS = [f"{stage}_{end}" for stage in STAGES for end in ("start", "end")]


def gpu_ideal_ms(stages: dict[str, float]) -> float:
    """The largest of the three GPU stages' totals (``Run.stage_ms``): the issue's ideal time,
    which the overlap efficiency divides by the wall time."""
    return max(stages[stage] for stage in STAGES)


@dataclass(frozen=True)
class Op:
    """One bar of the timeline: a copy or a kernel of one chunk, in ms from the run's start."""

    lane: str  # "stream 2", "host copies 0", "default stream"
    kind: str  # "h2d", "kernel", "d2h", "host in", "host out"
    chunk: int
    start_ms: float
    end_ms: float


@dataclass
class Run:
    """One pass of a layer from host memory to host memory, with every operation's times."""

    mode: str  # "sequential" or "pipelined"
    host_memory: str
    chunks: int
    streams: int
    copy_threads: int
    wall_ms: float
    ops: list[Op]
    simulated: bool
    walls_ms: list[float] = field(default_factory=list)  # every repeat, when summarised

    def stage_ms(self) -> dict[str, float]:
        """Total time of each stage: the sum of its bars; the host copies' busy time is
        divided by the number of threads that share them (shown, but not one of the three
        stages that ``ideal_ms`` and the efficiency count)."""
        totals = {stage: 0.0 for stage in STAGES}
        host = 0.0
        for op in self.ops:
            if op.kind in totals:
                totals[op.kind] += op.end_ms - op.start_ms
            else:
                host += op.end_ms - op.start_ms
        if host:
            totals[HOST_STAGE] = host / max(1, self.copy_threads)
        return totals

    @property
    def ideal_ms(self) -> float:
        """The time of the largest of the three GPU stages (copy in, kernel, copy out): no
        overlap can finish sooner."""
        return gpu_ideal_ms(self.stage_ms())

    @property
    def bottleneck(self) -> str:
        """The largest of the three GPU stages."""
        stages = self.stage_ms()
        return max(STAGES, key=lambda s: stages[s])

    @property
    def efficiency(self) -> float:
        """Overlap efficiency, as the issue defines it: the largest GPU stage / the wall
        time."""
        return self.ideal_ms / self.wall_ms if self.wall_ms > 0 else float("nan")

    def to_dict(self, with_ops: bool = True) -> dict[str, Any]:
        found = asdict(self)
        if not with_ops:
            del found["ops"]
        found.update(
            stage_ms=self.stage_ms(),
            ideal_ms=self.ideal_ms,
            efficiency=self.efficiency,
            bottleneck=self.bottleneck,
        )
        return found


def default_rung() -> Rung:
    """The highest rung of the convolution ladder that runs here in float32 on the GPU (or in
    the simulator): the CPU baseline and the library references are left out."""
    found = [
        r
        for r in rungs("conv", references=False)
        if not r.on_cpu and "float32" in r.dtypes and r.unavailable_reason() is None
    ]
    if not found:
        raise LookupError("no convolution rung runs here")
    return found[-1]


def layers() -> dict[str, tuple[int, ...]]:
    """The layer sizes measured here: the ECE408 layers at B = 10,000 on a GPU, a few small
    images in the simulator."""
    return dict(SIMULATOR_LAYERS if device.simulator() else LAYERS)


def pinned_copy(a: np.ndarray) -> np.ndarray:
    """A copy of ``a`` in pinned host memory (``cuda.pinned_array``)."""
    found = cuda.pinned_array(a.shape, dtype=a.dtype)
    found[...] = a
    return found


def _is_pinned(a: np.ndarray) -> bool:
    """True when ``a`` lies in memory from ``cuda.pinned_array`` (always, in the simulator)."""
    if device.simulator():
        return True
    from cuda.bindings import driver as cu

    status, _ = cu.cuMemHostGetFlags(a.ctypes.data)
    return status == cu.CUresult.CUDA_SUCCESS


def _output_shape(x_shape: tuple[int, ...], w: np.ndarray) -> tuple[int, int, int, int]:
    b, _, h, wd = x_shape
    m, _, k, _ = w.shape
    return b, m, h - k + 1, wd - k + 1


def _check_host(x: np.ndarray, out: np.ndarray, x_shape: tuple, out_shape: tuple, dtype) -> None:
    for arr, name, shape in ((x, "x", x_shape), (out, "out", out_shape)):
        if not isinstance(arr, np.ndarray):
            raise TypeError(f"{name} must be a host (NumPy) array, got {type(arr).__name__}")
        if tuple(arr.shape) != tuple(shape) or arr.dtype != dtype:
            raise ValueError(f"{name} must be {dtype} {shape}, got {arr.dtype} {arr.shape}")
        if not arr.flags.c_contiguous:
            raise ValueError(f"{name} must be C-contiguous")


class Sequential:
    """Copy the batch in, run the layer, copy the result out: one stream, nothing overlaps.

    Device buffers for the whole batch are allocated once, here; ``run`` does the three
    stages, with the driver's synchronous copies (pageable memory goes through the driver's
    own staging, pinned memory straight to the copy engine). A run is labelled with the kind
    of host memory it found; in the simulator, which has no pinned memory, "pageable"."""

    def __init__(self, x_shape: tuple[int, ...], w: np.ndarray, launch: Launcher) -> None:
        self.x_shape = tuple(x_shape)
        self.out_shape = _output_shape(self.x_shape, w)
        self.dtype = w.dtype
        self.launch = launch
        self.d_w = cuda.to_device(w)
        self.d_x = cuda.device_array(self.x_shape, dtype=w.dtype)
        self.d_y = cuda.device_array(self.out_shape, dtype=w.dtype)
        self.stamps = [Stamp() for _ in range(4)]

    def run(self, x: np.ndarray, out: np.ndarray) -> Run:
        _check_host(x, out, self.x_shape, self.out_shape, self.dtype)
        begin, copied_in, computed, copied_out = self.stamps
        cuda.synchronize()
        with nvtx_range("transfer/sequential"):
            started = time.perf_counter()
            begin.record()
            with nvtx_range("transfer/sequential/h2d"):
                self.d_x.copy_to_device(x)
            copied_in.record()
            with nvtx_range("transfer/sequential/kernel"):
                self.launch(self.d_x, self.d_w, self.d_y)
            computed.record()
            with nvtx_range("transfer/sequential/d2h"):
                self.d_y.copy_to_host(out)
            copied_out.record()
            copied_out.synchronize()
            wall = (time.perf_counter() - started) * 1e3
        marks = [0.0] + [s.ms_since(begin) for s in (copied_in, computed, copied_out)]
        ops = [
            Op("default stream", kind, 0, marks[i], marks[i + 1]) for i, kind in enumerate(STAGES)
        ]
        simulated = device.simulator()
        host_memory = "pinned" if not simulated and _is_pinned(x) else "pageable"
        return Run("sequential", host_memory, 1, 1, 0, wall, ops, simulated)


class Pipelined:
    """The layer in chunks over several streams, from host memory to host memory.

    Buffers, streams, events and the host copy threads are made once, here; ``run`` may be
    called many times. ``close`` stops the threads. See the module docstring."""

    def __init__(
        self,
        x_shape: tuple[int, ...],
        w: np.ndarray,
        launch: Launcher,
        *,
        chunks: int = CHUNKS,
        streams: int = STREAMS,
        copy_threads: int = COPY_THREADS,
        host_memory: str = "pageable",
    ) -> None:
        if host_memory not in HOST_MEMORIES:
            raise ValueError(f"host_memory must be one of {HOST_MEMORIES}, got {host_memory!r}")
        if chunks < 1 or streams < 1 or copy_threads < 1:
            raise ValueError("chunks, streams and copy_threads must be at least 1")
        self.x_shape = tuple(x_shape)
        self.out_shape = _output_shape(self.x_shape, w)
        self.dtype = w.dtype
        self.launch = launch
        self.host_memory = host_memory
        self.staging = host_memory == "pageable"
        images = self.x_shape[0]
        chunks = max(1, min(chunks, images))
        self.bounds = [images * i // chunks for i in range(chunks + 1)]
        most = max(hi - lo for lo, hi in zip(self.bounds, self.bounds[1:], strict=False))
        in_shape, out_shape = (most, *self.x_shape[1:]), (most, *self.out_shape[1:])
        self.streams = [cuda.stream() for _ in range(streams)]
        self.copy_threads = copy_threads if self.staging else 0
        self.d_w = cuda.to_device(w)
        self.d_x = [cuda.device_array(in_shape, dtype=w.dtype) for _ in self.streams]
        self.d_y = [cuda.device_array(out_shape, dtype=w.dtype) for _ in self.streams]
        self.stamps = [{name: Stamp() for name in _STAMPS} for _ in range(chunks)]
        self.origin = Stamp()
        self.pool: ThreadPoolExecutor | None = None
        if self.staging:
            self.pin_in = [
                [cuda.pinned_array(in_shape, dtype=w.dtype) for _ in range(SLOTS)]
                for _ in self.streams
            ]
            self.pin_out = [
                [cuda.pinned_array(out_shape, dtype=w.dtype) for _ in range(SLOTS)]
                for _ in self.streams
            ]
            # at most SLOTS chunks per stream wait to be copied in, and as many to be copied
            # out; a worker waiting for the GPU holds no copy slot, so none starves another.
            # Each worker makes the CUDA context current first: it waits on events
            self.pool = ThreadPoolExecutor(
                2 * SLOTS * streams, "ladder-copy", initializer=cuda.current_context
            )
            # a copy takes the lowest free slot, so the timeline uses as few lanes as it needs
            self.slots: queue.PriorityQueue[int] = queue.PriorityQueue()
            for slot in range(copy_threads):
                self.slots.put(slot)

    @property
    def chunks(self) -> int:
        return len(self.bounds) - 1

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown()
            self.pool = None

    def __enter__(self) -> Pipelined:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _place(self, i: int) -> tuple[int, int, int, int]:
        """Stream, staging slot, first image and image count of chunk i."""
        count = len(self.streams)
        lo, hi = self.bounds[i], self.bounds[i + 1]
        return i % count, (i // count) % SLOTS, lo, hi - lo

    def _host_copy(
        self, dst: np.ndarray, src: np.ndarray, kind: str, i: int, origin_s: float, ops: list
    ) -> None:
        slot = self.slots.get()
        try:
            with nvtx_range(f"transfer/chunk {i}/{kind}"):
                began = time.perf_counter()
                np.copyto(dst, src)
                ended = time.perf_counter()
        finally:
            self.slots.put(slot)
        ops.append(
            Op(f"host copies {slot}", kind, i, (began - origin_s) * 1e3, (ended - origin_s) * 1e3)
        )

    def _host_in(self, i: int, x: np.ndarray, origin_s: float, ops: list) -> None:
        """Copy chunk i of ``x`` into its pinned staging buffer, once the copy engine has
        read that buffer's previous chunk."""
        s, slot, lo, n = self._place(i)
        earlier = i - SLOTS * len(self.streams)
        if earlier >= 0:
            self.stamps[earlier]["h2d_end"].synchronize()
        self._host_copy(self.pin_in[s][slot][:n], x[lo : lo + n], "host in", i, origin_s, ops)

    def _host_out(self, i: int, out: np.ndarray, origin_s: float, ops: list) -> None:
        """Copy chunk i from its pinned staging buffer into ``out`` once it has arrived."""
        s, slot, lo, n = self._place(i)
        self.stamps[i]["d2h_end"].synchronize()
        self._host_copy(out[lo : lo + n], self.pin_out[s][slot][:n], "host out", i, origin_s, ops)

    def _enqueue(self, i: int, x: np.ndarray, out: np.ndarray) -> None:
        """Issue chunk i's copy in, kernel and copy out on its stream, each behind the same
        stage of chunk i - 1."""
        s, slot, lo, n = self._place(i)
        stream = self.streams[s]
        src = self.pin_in[s][slot][:n] if self.staging else x[lo : lo + n]
        dst = self.pin_out[s][slot][:n] if self.staging else out[lo : lo + n]
        d_x, d_y = self.d_x[s][:n], self.d_y[s][:n]
        with self._stage(i, "h2d", stream):
            d_x.copy_to_device(src, stream=stream)
        with self._stage(i, "kernel", stream):
            self.launch(d_x, self.d_w, d_y, stream=stream)
        with self._stage(i, "d2h", stream):
            d_y.copy_to_host(dst, stream=stream)

    @contextlib.contextmanager
    def _stage(self, i: int, stage: str, stream: Any) -> Iterator[None]:
        """Chunk i's ``stage`` (one of STAGES) on ``stream``, behind chunk i - 1's, between
        its start and end stamps, in an NVTX range named for it."""
        with nvtx_range(f"transfer/chunk {i}/{stage}"):
            if i:
                self.stamps[i - 1][f"{stage}_end"].wait(stream)
            self.stamps[i][f"{stage}_start"].record(stream)
            yield
            self.stamps[i][f"{stage}_end"].record(stream)

    def run(self, x: np.ndarray, out: np.ndarray) -> Run:
        """One pass: ``out`` = the layer applied to ``x``, both host arrays."""
        _check_host(x, out, self.x_shape, self.out_shape, self.dtype)
        if not self.staging and not (_is_pinned(x) and _is_pinned(out)):
            raise ValueError(
                "host_memory='pinned' needs x and out from cuda.pinned_array (see pinned_copy): "
                "copies from pageable memory are synchronous and would not overlap"
            )
        count, ahead = self.chunks, SLOTS * len(self.streams)
        host_ops: list[Op] = []
        copies_in: dict[int, Future] = {}
        copies_out: dict[int, Future] = {}
        cuda.synchronize()
        with nvtx_range(f"transfer/pipelined {count} chunks {len(self.streams)} streams"):
            origin_s = time.perf_counter()
            self.origin.record(self.streams[0])
            if self.pool is not None:
                for i in range(min(ahead, count)):
                    copies_in[i] = self.pool.submit(self._host_in, i, x, origin_s, host_ops)
            for i in range(count):
                if self.pool is not None:
                    copies_in.pop(i).result()
                    if i - ahead in copies_out:  # its staging buffer must be emptied first
                        copies_out.pop(i - ahead).result()
                self._enqueue(i, x, out)
                if self.pool is not None:
                    copies_out[i] = self.pool.submit(self._host_out, i, out, origin_s, host_ops)
                    if i + ahead < count:
                        copies_in[i + ahead] = self.pool.submit(
                            self._host_in, i + ahead, x, origin_s, host_ops
                        )
            for pending in copies_out.values():
                pending.result()
            for stream in self.streams:
                stream.synchronize()
            wall = (time.perf_counter() - origin_s) * 1e3
        ops = [
            Op(
                f"stream {i % len(self.streams)}",
                stage,
                i,
                self.stamps[i][f"{stage}_start"].ms_since(self.origin),
                self.stamps[i][f"{stage}_end"].ms_since(self.origin),
            )
            for i in range(count)
            for stage in STAGES
        ]
        ops += sorted(host_ops, key=lambda op: op.start_ms)
        return Run(
            "pipelined",
            self.host_memory,
            count,
            len(self.streams),
            self.copy_threads,
            wall,
            ops,
            device.simulator(),
        )


def host_copy_rate(
    threads: int, nbytes: int = 256 << 20, piece_bytes: int = 16 << 20, repeats: int = 5
) -> dict[str, float]:
    """The CPU's copy rate in GB/s, pageable to pinned ("in") and pinned to pageable ("out"),
    with ``threads`` threads copying pieces of ``piece_bytes`` of an ``nbytes`` buffer; the
    median of ``repeats``, on an idle GPU. Every page is touched before the clock starts."""
    if threads < 1 or nbytes < 4 or piece_bytes < 4:
        raise ValueError("threads, nbytes and piece_bytes must be positive")
    count = nbytes // 4
    piece_bytes = min(piece_bytes, max(4, nbytes // threads))  # a piece for every thread
    pinned = cuda.pinned_array(count, dtype=np.float32)
    pageable = np.empty(count, dtype=np.float32)
    pinned.fill(1.0)
    pageable.fill(2.0)
    step = max(1, piece_bytes // 4)
    spans = [(lo, min(lo + step, count)) for lo in range(0, count, step)]
    found = {}
    with ThreadPoolExecutor(threads, "ladder-copy-rate") as pool:
        for way, dst, src in (("in", pinned, pageable), ("out", pageable, pinned)):
            times = []
            for _ in range(repeats):
                began = time.perf_counter()
                for done in [pool.submit(np.copyto, dst[lo:hi], src[lo:hi]) for lo, hi in spans]:
                    done.result()
                times.append(time.perf_counter() - began)
            found[way] = count * 4 / sorted(times)[(repeats - 1) // 2] / 1e9
    return found


def host_copy_bound(
    bytes_in: int, bytes_out: int, copy_threads: int, nbytes: int = 256 << 20
) -> dict[str, Any]:
    """The fastest the host can stage a layer: ``host_copy_rate`` with 1, ``copy_threads``
    and as many threads as there are cores, and the layer's bytes in and out over the best
    rate of each way: ``bound_ms``, the shortest staging those rates allow."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    rates = {n: host_copy_rate(n, nbytes) for n in sorted({1, copy_threads, cores or 1})}
    best = {way: max(rate[way] for rate in rates.values()) for way in ("in", "out")}
    return {
        "gbps": {str(n): rate for n, rate in rates.items()},
        "best_gbps": best,
        "bound_ms": (bytes_in / best["in"] + bytes_out / best["out"]) / 1e6,
    }


def _median_run(runs: list[Run]) -> Run:
    """The run with the median wall time, carrying every repeat's wall time."""
    ordered = sorted(runs, key=lambda r: r.wall_ms)
    chosen = ordered[(len(ordered) - 1) // 2]
    chosen.walls_ms = [r.wall_ms for r in runs]
    return chosen


def _empty_output(shape: tuple[int, ...], dtype: Any, pinned: bool) -> np.ndarray:
    """An output buffer filled with NaN: every page touched (a first touch inside a timed run
    would be counted), and an element never written stays NaN."""
    out = cuda.pinned_array(shape, dtype=dtype) if pinned else np.empty(shape, dtype=dtype)
    out.fill(np.nan)
    return out


def compare(
    size: tuple[int, ...],
    rung: Rung | None = None,
    *,
    configs: list[tuple[int, int]] | None = None,
    host_memories: tuple[str, ...] = HOST_MEMORIES,
    copy_threads: int = COPY_THREADS,
    repeats: int | None = None,
    seed: int = 0,
) -> dict[str, Any]:
    """The layer ``size`` (B, C, M, H, W, K) sequentially and pipelined, from host to host.

    For each host memory kind: the sequential run, and the pipelined run for every
    (chunks, streams) in ``configs``; each the median of ``repeats`` runs after one warm-up
    run. Every pipelined output is compared bit for bit with the sequential output of the
    pageable arrays, and the first images of that output with the float64 reference.
    Returns a JSON-ready dict: the runs, the best configuration per host memory kind (the
    lowest time) with its timeline, and the checks.
    """
    rung = rung or default_rung()
    simulated = device.simulator()
    configs = list(configs or (SIMULATOR_CONFIGS if simulated else GPU_CONFIGS))
    repeats = repeats or (1 if simulated else 3)
    x, w = CONV.make_inputs(tuple(size), "float32", seed)
    out_shape = _output_shape(x.shape, w)
    found: dict[str, Any] = {
        "size": list(size),
        "rung": rung.name,
        "rung_title": rung.title,
        "bytes_in": int(x.nbytes),
        "bytes_out": int(np.prod(out_shape) * x.itemsize),
        "simulated": simulated,
        "copy_threads": copy_threads,
        "sequential": {},
        "pipelined": [],
        "best": {},
        "identical": True,
    }
    sequential = Sequential(x.shape, w, rung.launch)
    baseline = _empty_output(out_shape, x.dtype, pinned=False)
    for _ in range(2):  # the first run compiles the kernel
        sequential.run(x, baseline)
    sample = slice(0, min(REFERENCE_IMAGES, x.shape[0]))
    ref = conv_numpy(x[sample].astype(np.float64), w.astype(np.float64))
    found["reference_rel_err"] = relative_error(baseline[sample], ref)
    found["tolerance"] = CONV.tolerance("float32")
    if "pageable" in host_memories:
        buffer = (1 << 20) if simulated else 256 << 20
        found["host_copy"] = host_copy_bound(
            found["bytes_in"], found["bytes_out"], copy_threads, buffer
        )
    for host_memory in host_memories:
        pinned = host_memory == "pinned"
        xs = pinned_copy(x) if pinned else x
        out = _empty_output(out_shape, x.dtype, pinned)
        runs = [sequential.run(xs, out) for _ in range(repeats + 1)][1:]
        run = _median_run(runs)
        run.host_memory = host_memory  # the simulator's pinned arrays are NumPy arrays
        found["sequential"][host_memory] = run.to_dict()
        best: Run | None = None
        for chunks, streams in configs:
            out.fill(np.nan)
            with Pipelined(
                x.shape,
                w,
                rung.launch,
                chunks=chunks,
                streams=streams,
                copy_threads=copy_threads,
                host_memory=host_memory,
            ) as pipelined:
                runs = [pipelined.run(xs, out) for _ in range(repeats + 1)][1:]
            run = _median_run(runs)
            identical = bool(np.array_equal(out, baseline))
            found["identical"] &= identical
            summary = run.to_dict(with_ops=False)
            summary["identical"] = identical
            found["pipelined"].append(summary)
            if best is None or run.wall_ms < best.wall_ms:
                best = run
        if best is not None:
            found["best"][host_memory] = best.to_dict()
        del xs, out
    return found
