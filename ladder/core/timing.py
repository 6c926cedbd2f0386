"""Validate and time one rung on one case, the same way for every rung and every library.

The recipe (docs/design.md, "Measuring"):

1. fresh random inputs and a float64 reference (``prepare``);
2. the output is poisoned with NaN (all bits set) before every run, so an element the kernel
   never wrote fails the check instead of passing on a stale value;
3. a first run is checked against the reference; it also compiles, so compilation is never
   timed; then a few warm-up runs;
4. each timed repeat: poison the output, flush L2 by writing a buffer twice its size, then
   CUDA events around the launch alone; report the median, min and max of the repeats.
   Before the poison and the flush, a one-thread kernel keeps the GPU busy for
   ``HEAD_START_US`` plus twice a warm-up call's host time, the median, and at least
   ``COMMON_HEAD_START_US`` (``head_start_us``): the launcher's host-side work (argument
   checks, wrapping arrays, building the launch) is then done before the start event fires,
   so the events time the GPU's work, not the Python in front of it, for every rung and
   library alike, however heavy its launcher, and every contestant short of the heaviest
   gets the same head start;
5. what a call costs the program that makes it, measured apart (``time_calls``): the host
   time of one call with the GPU idle before it (median of ``host_calls_for``), the time per
   call of many calls in a row with no wait between them (back-to-back), and the same for
   replays of a CUDA graph that captured one call (``graphs.capture_call``);
6. the output of one more call, poisoned before it, is checked again, so a kernel that is
   only right when it runs slowly (a race) is caught.

In the simulator, step 4 uses a host clock, step 5 is left out (a CPU's call costs mean
nothing there) and every result is marked ``simulated``.

Every measurement has a ``status``: ``ok``, ``failed`` (a wrong answer, before or after timing,
or an exception from the launcher) or ``unavailable`` (the rung cannot run here: a missing
library or GPU, a dtype it does not take, or a size whose buffers do not fit, which launchers
report by raising ``MemoryError``). Callers decide success from it, never from error text.
"""

from __future__ import annotations

import contextlib
import enum
import functools
import math
import os
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from ladder.core import device
from ladder.core.dtypes import resolve, to_device, to_host
from ladder.core.rung import Holder, NotApplicable, Problem, Rung

HEAD_START_US = 200  # queued beyond twice the host time (and alone, by roofline and transfers)
COMMON_HEAD_START_US = 1000  # the head start every launcher gets at least (``head_start_us``)
TIME_BUDGET_S = 1.0  # timed repeats stop once they have run this long (and MIN_REPEATS are done)
MIN_REPEATS = 5
MAX_REPEATS = 100
WARMUP = 3
HOST_CALLS = 30  # calls timed on the host, each after the GPU has finished the one before
HOST_CALLS_S = 0.5  # ... fewer where they would wait longer than this for the GPU in all,
MIN_HOST_CALLS = 5  # ... but never fewer than this (a slow FP32 rung at a large size)
BACK_TO_BACK_S = 0.05  # calls in a row for the back-to-back time: about this long on the GPU
BACK_TO_BACK_CALLS = (3, 1000)  # ... but at least and at most this many


def relative_error(out: np.ndarray, ref: np.ndarray) -> float:
    """||out - ref|| / ||ref|| in float64; infinite if any element is NaN or inf."""
    out64 = np.asarray(out, dtype=np.float64)
    if not np.all(np.isfinite(out64)):
        return float("inf")
    ref64 = np.asarray(ref, dtype=np.float64)
    denom = np.linalg.norm(ref64)
    diff = np.linalg.norm(out64 - ref64)
    return float(diff / denom) if denom > 0 else float(diff)


# output elements from which a check runs on the GPU, in float64 through PyTorch, where it
# can: on the host a check copies the output over PCIe and makes float64 copies of it in
# NumPy on one core, twice per measurement (a convolution's output is 185 million elements)
DEVICE_CHECK_FROM = 1 << 22
CHECK_CHUNK = 1 << 24  # elements per step of the GPU check: 128 MB of float64 at a time


def device_relative_error(out: Any, ref: Any) -> float:
    """``relative_error`` of a device array ``out`` (any dtype ``to_device`` makes, bfloat16
    and 8-bit floats as their bits) against ``ref``, a float64 CUDA tensor of as many elements
    on ``out``'s GPU: the same float64 norms, computed there by PyTorch, CHECK_CHUNK elements
    at a time so that the check holds little memory of its own."""
    import torch
    from numba import cuda

    from ladder.core import torch_views

    cuda.synchronize()  # the launch that wrote ``out`` may run on another stream
    found = torch_views.tensor(out).reshape(-1)
    expected = ref.reshape(-1)
    diff2 = denom2 = 0.0
    for start in range(0, found.numel(), CHECK_CHUNK):
        part = found[start : start + CHECK_CHUNK].double()
        if not bool(torch.isfinite(part).all()):
            return float("inf")
        want = expected[start : start + CHECK_CHUNK]
        diff2 += float(torch.linalg.vector_norm(part - want)) ** 2
        denom2 += float(torch.linalg.vector_norm(want)) ** 2
    denom, diff = math.sqrt(denom2), math.sqrt(diff2)
    return diff / denom if denom > 0 else diff


@dataclass
class Case:
    """One problem instance: host inputs, the float64 reference, and device copies on demand."""

    problem: Problem
    size: tuple[int, ...]
    dtype: str
    seed: int
    inputs: tuple[np.ndarray, ...]
    ref: np.ndarray
    _device_inputs: tuple[Any, ...] | None = field(default=None, repr=False)
    _device_ref: Any = field(default=None, repr=False)

    def device_inputs(self) -> tuple[Any, ...]:
        if self._device_inputs is None:
            self._device_inputs = tuple(to_device(x) for x in self.inputs)
        return self._device_inputs

    def error_of(self, out: Any) -> float:
        """``relative_error`` of a rung's output against the reference: on the GPU for a
        device output of DEVICE_CHECK_FROM elements or more where PyTorch has CUDA (the
        reference copied there once per case), on the host otherwise."""
        if (
            isinstance(out, np.ndarray)
            or out.size < DEVICE_CHECK_FROM
            or not device.torch_cuda_available()
        ):
            return relative_error(_to_host(out), self.ref)
        if self._device_ref is None:  # on the GPU the outputs are on (Numba's current one)
            import torch
            from numba import cuda

            where = torch.device("cuda", cuda.get_current_device().id)
            self._device_ref = torch.from_numpy(np.asarray(self.ref, np.float64)).to(where)
        return device_relative_error(out, self._device_ref)


# The CUDA simulator runs every GPU thread of a block as a Python thread. Measured on a 2-core
# CPU, no rung ran faster than 2.5 µs per step of its inner loop (a multiply-add, or an element
# moved) and 20 µs per output element; so estimates from these figures are lower bounds. Whole
# ladders took 5 to 70 times that bound (the most at tiny sizes, where the idle threads of
# padded tiles dominate; the slowest rungs are tiled ones that wait at barriers).
SIMULATOR_S_PER_STEP = 2.5e-6
SIMULATOR_S_PER_OUTPUT = 2e-5
SIMULATOR_TYPICAL = 10  # how many times the lower bound a ladder takes, roughly
SIMULATOR_LAUNCHES = 2  # measure() runs a simulated rung twice: the first check and one repeat


def simulator_steps(problem: Problem, size: tuple[int, ...], dtype: str) -> tuple[float, float]:
    """(inner-loop steps, output elements) of one launch in the simulator, from the problem: a
    step is a multiply-add (two FLOPs) or an element moved, whichever count is larger."""
    elements = problem.min_bytes(size, dtype) / resolve(dtype).itemsize
    return max(problem.flops(size) / 2, elements), float(math.prod(problem.output_shape(size)))


def simulator_seconds(problem: Problem, size: tuple[int, ...], dtype: str, count: int) -> float:
    """About the fewest seconds ``count`` GPU rungs take on ``size`` in the CUDA simulator
    (``measure`` launches each twice); a lower bound: see SIMULATOR_S_PER_STEP."""
    steps, outputs = simulator_steps(problem, size, dtype)
    per_launch = steps * SIMULATOR_S_PER_STEP + outputs * SIMULATOR_S_PER_OUTPUT
    return count * SIMULATOR_LAUNCHES * per_launch


def simulator_size(
    problem: Problem, size: tuple[int, ...], dtype: str, count: int, seconds: float = 60.0
) -> tuple[int, ...]:
    """A size below ``size`` that takes about ``seconds`` or less in the simulator, roughly
    (SIMULATOR_TYPICAL times the lower bound): the largest value halved, again and again,
    skipping a halving the problem's ``parse_size`` refuses."""
    size = tuple(size)
    while SIMULATOR_TYPICAL * simulator_seconds(problem, size, dtype, count) > seconds:
        for i in sorted(range(len(size)), key=lambda i: -size[i]):
            if size[i] < 2:
                continue
            smaller = (*size[:i], size[i] // 2, *size[i + 1 :])
            try:
                size = problem.parse_size(list(smaller))
            except ValueError:
                continue
            break
        else:
            return size  # nothing can shrink further
    return size


def host_memory_bytes() -> int | None:
    """Bytes of host memory available now (Linux: MemAvailable), else the total; None when the
    platform tells neither."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, OSError, ValueError):
        return None


def case_bytes(problem: Problem, size: tuple[int, ...], dtype: str) -> tuple[float, float]:
    """(host, device) bytes a case of ``size`` needs, estimated before anything is allocated.
    The device holds the inputs and the output (the problem's fewest bytes); the host holds
    them too, and float64 copies of them for the reference. In the simulator the device is the
    host. A rung's own buffers (attention's N x N scores) are not counted: a rung that cannot
    allocate them is reported unavailable."""
    moved = problem.min_bytes(size, dtype)
    host = moved * (1 + 8 / resolve(dtype).itemsize)
    return host, moved


def check_memory(problem: Problem, size: tuple[int, ...], dtype: str) -> None:
    """ValueError naming --size, the bytes the case needs and the memory there is, when the
    case cannot fit in host memory or (on a GPU) in device memory."""
    host, on_device = case_bytes(problem, size, dtype)
    if device.simulator():
        host += on_device
    shown = f"--size {' '.join(map(str, size))} for {problem.name} {dtype}"

    def gb(n: float) -> str:
        return f"{n / 1e9:,.0f} GB" if n >= 1e10 else f"{n / 1e9:.2g} GB"

    available = host_memory_bytes()
    if available is not None and host > available:
        raise ValueError(
            f"{shown} needs about {gb(host)} of host memory (inputs, output and their float64 "
            f"copies for the reference); this machine has {gb(available)} available"
        )
    total = device.facts().memory_bytes
    if total is not None and on_device > total:
        raise ValueError(
            f"{shown} needs about {gb(on_device)} of device memory (inputs and output); "
            f"{device.facts().name} has {gb(total)}"
        )


def prepare(problem: Problem, size: tuple[int, ...], dtype: str = "float32", seed: int = 0) -> Case:
    """Draw inputs for ``size`` and compute the float64 reference once, for every rung."""
    inputs = problem.make_inputs(tuple(size), dtype, seed)
    return Case(problem, tuple(size), dtype, seed, inputs, problem.reference(inputs))


class Status(enum.StrEnum):
    """How a measurement ended; written into results files as ``"status"``."""

    OK = "ok"
    FAILED = "failed"
    UNAVAILABLE = "unavailable"


def run_status(run: dict[str, Any]) -> Status:
    """The status of a run record (``Measurement.to_dict()`` or a results file's run). Files
    written before runs carried a status have ``ok`` and ``error``: a run that did not pass is
    unavailable when its error says the rung could not run here, failed otherwise."""
    if "status" in run:
        return Status(run["status"])
    if run.get("ok"):
        return Status.OK
    error = run.get("error") or ""
    if error.startswith(("needs", "does not support")) or "MemoryError" in error:
        return Status.UNAVAILABLE
    return Status.FAILED


@dataclass
class Measurement:
    """One rung on one case: correctness before and after timing, and the repeat times."""

    problem: str
    rung: str
    number: int
    reference: bool
    dtype: str
    shape: list[int]
    status: Status
    rel_err: float
    rel_err_after: float | None
    tolerance: float
    samples_ms: list[float]
    flops: float
    min_bytes: float
    simulated: bool
    error: str | None = None
    bytes_moved: float | None = None  # what the rung actually reads and writes, if declared
    host_us: float | None = None  # median host time of one call, the GPU idle before it
    back_to_back_us: float | None = None  # time per call of many calls in a row
    graph_us: float | None = None  # time per replay of many replays of a captured call
    graph_error: str | None = None  # why the call could not be captured, when it could not
    head_start_us: int | None = None  # GPU work queued ahead of each timed repeat (step 4)
    peer: bool = False  # a peer (a Triton kernel), not a library: see Rung.peer
    config: str | None = None  # the configuration the call ran in (Rung.describe)

    @property
    def ok(self) -> bool:
        return self.status is Status.OK

    @property
    def median_ms(self) -> float | None:
        return float(np.median(self.samples_ms)) if self.samples_ms else None

    @property
    def min_ms(self) -> float | None:
        return min(self.samples_ms) if self.samples_ms else None

    @property
    def max_ms(self) -> float | None:
        return max(self.samples_ms) if self.samples_ms else None

    @property
    def tflops(self) -> float | None:
        ms = self.median_ms
        return self.flops / (ms * 1e-3) / 1e12 if ms and self.flops else None

    @property
    def tbps(self) -> float | None:
        """Effective bandwidth: the problem's fewest bytes over the time."""
        ms = self.median_ms
        return self.min_bytes / (ms * 1e-3) / 1e12 if ms and self.min_bytes else None

    @property
    def tbps_moved(self) -> float | None:
        """Achieved bandwidth: the bytes the rung really moves over the time."""
        ms = self.median_ms
        moved = self.bytes_moved or self.min_bytes
        return moved / (ms * 1e-3) / 1e12 if ms and moved else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "problem": self.problem,
            "rung": self.rung,
            "number": self.number,
            "reference": self.reference,
            "peer": self.peer,
            "config": self.config,
            "dtype": self.dtype,
            "shape": self.shape,
            "status": str(self.status),
            "ok": self.ok,
            "median_ms": self.median_ms,
            "min_ms": self.min_ms,
            "max_ms": self.max_ms,
            "tflops": self.tflops,
            "tbps": self.tbps,
            "tbps_moved": self.tbps_moved,
            "flops": self.flops,
            "min_bytes": self.min_bytes,
            "bytes_moved": self.bytes_moved or self.min_bytes,
            "rel_err": self.rel_err,
            "rel_err_after": self.rel_err_after,
            "tolerance": self.tolerance,
            "simulated": self.simulated,
            "samples_ms": self.samples_ms,
            "host_us": self.host_us,
            "back_to_back_us": self.back_to_back_us,
            "graph_us": self.graph_us,
            "graph_error": self.graph_error,
            "head_start_us": self.head_start_us,
            "error": self.error,
        }


@contextlib.contextmanager
def nvtx_range(name: str) -> Iterator[None]:
    """An NVTX range (``ladder:<problem>/<rung>``) around GPU work, so Nsight Systems and
    Nsight Compute name it after the rung; a no-op where CuPy's NVTX is unavailable."""
    nvtx = _nvtx()
    if nvtx is None:
        yield
        return
    nvtx.RangePush(f"ladder:{name}")
    try:
        yield
    finally:
        nvtx.RangePop()


@functools.cache
def _nvtx() -> Any:
    if not device.gpu_available():
        return None
    try:
        from cupy.cuda import nvtx

        nvtx.RangePush("ladder:probe")
        nvtx.RangePop()
        return nvtx
    except Exception:
        return None


class _Scratch:
    """The L2 flush buffer (twice the L2 size) and the head-start kernel, made once."""

    buffer: Any = None
    sleeper: Any = None

    @classmethod
    def head_start(cls, us: int = HEAD_START_US) -> None:
        """Queue about ``us`` of GPU time (one thread sleeping) on the default stream."""
        from numba import cuda

        if cls.sleeper is None:

            @cuda.jit
            def sleep(steps):
                for _ in range(steps):
                    cuda.nanosleep(1000)  # about 1 microsecond a call (PTX allows 0 to 2)

            cls.sleeper = sleep
        with warnings.catch_warnings():  # one thread on purpose: no low-occupancy warning
            warnings.simplefilter("ignore")
            cls.sleeper[1, 1](us)

    @classmethod
    def flush_l2(cls) -> None:
        from numba import cuda

        if cls.buffer is None:
            l2 = device.facts().l2_bytes or 64 << 20
            cls.buffer = cuda.device_array(2 * l2, dtype=np.uint8)
        cuda.driver.device_memset(cls.buffer, 0, cls.buffer.nbytes)


def poison(out: Any) -> None:
    """Fill an output with NaN (every bit set: NaN in float16, float32 and float64); empty a
    ``Holder`` (a library's prepared output), so that no earlier result is left to read back."""
    if isinstance(out, Holder):
        out.clear()
    elif isinstance(out, np.ndarray):
        out.fill(np.nan)
    elif hasattr(out, "fill_"):  # a PyTorch tensor a library keeps its output in (Prepared)
        out.fill_(float("nan"))
    elif device.simulator():
        out.copy_to_device(np.full(out.shape, np.nan, dtype=out.dtype))
    else:
        from numba import cuda

        cuda.driver.device_memset(out, 0xFF, out.nbytes)


def _to_host(out: Any) -> np.ndarray:
    return out if isinstance(out, np.ndarray) else to_host(out)


def new_output(case: Case, rung: Rung) -> Any:
    """An empty output of the case's shape and the problem's output dtype, where the rung
    writes it (host for the CPU rung, device otherwise)."""
    shape = case.problem.output_shape(case.size)
    dtype = resolve(case.problem.output_dtype(case.dtype))
    if rung.on_cpu:
        return np.empty(shape, dtype=dtype)
    from numba import cuda

    return cuda.device_array(shape, dtype=dtype)


def measure(
    case: Case,
    rung: Rung,
    *,
    repeats: int | None = None,
    warmup: int = WARMUP,
    time_budget_s: float = TIME_BUDGET_S,
) -> Measurement:
    """Check ``rung`` on ``case``, time it, and check it again."""
    problem = case.problem
    simulated = device.simulator() and not rung.on_cpu
    result = Measurement(
        problem=problem.name,
        rung=rung.name,
        number=rung.number,
        reference=rung.reference,
        peer=rung.peer,
        dtype=case.dtype,
        shape=list(case.size),
        status=Status.FAILED,  # until it passes both checks
        rel_err=float("nan"),
        rel_err_after=None,
        tolerance=problem.tolerance(case.dtype),
        samples_ms=[],
        flops=problem.flops(case.size),
        min_bytes=problem.min_bytes(case.size, case.dtype),
        simulated=simulated,
        bytes_moved=rung.bytes_moved(case.size, case.dtype) if rung.bytes_moved else None,
    )
    reason = rung.unavailable_reason()
    if reason is not None:
        result.status, result.error = Status.UNAVAILABLE, reason
        return result
    if case.dtype not in rung.dtypes:
        result.status = Status.UNAVAILABLE
        result.error = f"does not support {case.dtype} (supports {', '.join(rung.dtypes)})"
        return result

    args = case.inputs if rung.on_cpu else case.device_inputs()
    out = new_output(case, rung)
    # a library's best configuration: its inputs and output in the form it prefers, made once
    # here, outside the time; read_back writes its output into ours for each check
    held, read_back = (args, out), None
    try:
        if rung.prepare is not None:
            prepared = rung.prepare(args, out)
            held, read_back = (prepared.args, prepared.out), prepared.read_back
    except (MemoryError, NotApplicable) as err:
        result.status = Status.UNAVAILABLE
        result.error = f"{type(err).__name__}: {err}"
        return result
    args_, out_ = held

    label = f"{problem.name}/{rung.name}"

    def launch() -> None:
        with nvtx_range(label):
            rung.launch(*args_, out_)

    def error() -> float:
        if read_back is not None:
            read_back()
        return case.error_of(out)

    def poison_all() -> None:
        poison(out)
        if out_ is not out:
            poison(out_)

    poison_all()
    try:
        launch()
        if rung.describe is not None:
            result.config = rung.describe(args_, out_)
    except (MemoryError, NotApplicable) as err:  # the size does not fit, or not its input
        result.status = Status.UNAVAILABLE
        result.error = f"{type(err).__name__}: {err}"
        return result
    except Exception as err:  # a broken rung is reported as failed; the caller goes on
        result.error = f"{type(err).__name__}: {err}"
        return result
    result.rel_err = error()
    if not result.rel_err <= result.tolerance:
        result.error = f"wrong answer: relative error {result.rel_err:.3g} > {result.tolerance:g}"
        return result

    if simulated or rung.on_cpu:
        result.samples_ms = _time_host(launch, poison_all, 1 if simulated else repeats or 3)
    else:
        result.samples_ms, result.head_start_us = _time_gpu(
            launch, poison_all, repeats, warmup, time_budget_s
        )
        call = functools.partial(rung.launch, *args_, out_)
        costs = time_calls(call, result.median_ms or 0.0)
        result.host_us, result.back_to_back_us = costs.host_us, costs.back_to_back_us
        result.graph_us, result.graph_error = costs.graph_us, costs.graph_error
        poison_all()  # the check after timing sees one whole call's output
        launch()
    result.rel_err_after = error()
    if result.rel_err_after <= result.tolerance:
        result.status = Status.OK
    else:
        result.error = (
            f"wrong after timing: relative error {result.rel_err_after:.3g} "
            f"> {result.tolerance:g} (a race?)"
        )
    return result


def time_ms(
    launch: Callable[[], Any],
    *,
    before: Callable[[], None] = lambda: None,
    repeats: int | None = None,
    warmup: int = WARMUP,
    time_budget_s: float = TIME_BUDGET_S,
) -> list[float]:
    """Samples in ms of ``launch()`` timed as ``measure`` times a rung, for work that is not a
    rung (a model's forward, one of its layers): on a GPU, CUDA events after ``warmup`` calls,
    each repeat after a head start and with the L2 flushed, ``before()`` (untimed) before each
    call, the warm-up's too (a step that accumulates gradients needs them zeroed); in
    the simulator, the host clock, once."""
    if device.simulator():
        return _time_host(launch, before, 1)
    return _time_gpu(launch, before, repeats, warmup, time_budget_s)[0]


def _time_host(launch: Any, poison_all: Callable[[], None], repeats: int) -> list[float]:
    samples = []
    for _ in range(repeats):
        poison_all()
        start = time.perf_counter()
        launch()
        samples.append((time.perf_counter() - start) * 1e3)
    return samples


class CallCosts(NamedTuple):
    """What a call costs a program, in µs per call (``time_calls``)."""

    host_us: float  # the median of host_samples_us
    back_to_back_us: float
    graph_us: float | None = None  # None: not measured, or capture failed (graph_error says)
    graph_error: str | None = None
    host_samples_us: tuple[float, ...] = ()


def _in_a_row(run: Callable[[], Any], count: int) -> float:
    """Seconds per call of ``count`` calls of ``run`` in a row, then one synchronize."""
    from numba import cuda

    cuda.synchronize()
    start = time.perf_counter()
    for _ in range(count):
        run()
    cuda.synchronize()
    return (time.perf_counter() - start) / count


def host_calls_for(gpu_ms: float) -> int:
    """How many calls ``time_calls`` times on the host for a call of ``gpu_ms`` on the GPU:
    ``HOST_CALLS``, fewer where each waits long for the one before (about ``HOST_CALLS_S`` in
    all), never fewer than ``MIN_HOST_CALLS``: a 300 ms rung is timed 5 times, not 30."""
    fit = int(HOST_CALLS_S / max(gpu_ms * 1e-3, 1e-9))
    return max(MIN_HOST_CALLS, min(HOST_CALLS, fit))


def time_calls(
    call: Callable[[], Any],
    gpu_ms: float,
    *,
    graph: bool = True,
    host_calls: int | None = None,
    in_a_row: int | None = None,
) -> CallCosts:
    """What a call costs a program that makes it, in µs per call.

    Host: ``time.perf_counter`` around the call alone, the GPU synchronized before each of
    ``HOST_CALLS`` calls (steady state: the launcher's Python work, argument reading, the
    driver's launch; nothing queued waits). Back-to-back: calls in a row with no wait between
    them, then one synchronize, the wall time over the count: what a loop of calls sees, the
    larger of the host time and the GPU time of a call, about. Graph (with ``graph``): one call
    captured into a CUDA graph (``graphs.capture_call``), then replays in a row, timed like
    the back-to-back calls: what a program that replays a graph pays per call. Where capture
    fails (a launcher that allocates or synchronizes), ``graph_error`` says why. ``host_calls``
    and ``in_a_row`` set the counts (by default ``host_calls_for(gpu_ms)``, and enough calls
    in a row for about ``BACK_TO_BACK_S`` of GPU work at ``gpu_ms`` a call)."""
    from numba import cuda

    from ladder.core import graphs

    samples = []
    for _ in range(host_calls or host_calls_for(gpu_ms)):
        cuda.synchronize()
        start = time.perf_counter()
        call()
        samples.append((time.perf_counter() - start) * 1e6)
    lo, hi = BACK_TO_BACK_CALLS
    count = in_a_row or int(min(hi, max(lo, BACK_TO_BACK_S / max(gpu_ms * 1e-3, 1e-9))))
    back_to_back = _in_a_row(call, count)
    costs = CallCosts(float(np.median(samples)), back_to_back * 1e6, None, None, tuple(samples))
    if not graph:
        return costs
    try:
        with graphs.capture_call(call) as captured:
            per_replay = _in_a_row(captured.replay, count)
    except Exception as err:  # reported beside the figures, never fatal to the measurement
        cuda.synchronize()
        return costs._replace(graph_error=f"{type(err).__name__}: {err}"[:300])
    return costs._replace(graph_us=per_replay * 1e6)


def head_start_us(host_us: float) -> int:
    """The GPU time queued ahead of each timed launch, for a launcher whose warm-up calls took
    a median ``host_us`` on the host: HEAD_START_US plus twice that, so that even a library
    whose Python path runs longer than its kernel (SDPA's cuDNN call: hundreds of µs, and
    twice its median at times) has finished enqueueing before the GPU reaches the start event.
    A shorter head start lets the GPU sit idle between the events, and the host's time is
    counted as the kernel's. The median, not the slowest: a first call that compiles would
    ask for seconds.

    At least COMMON_HEAD_START_US, which covers every launcher whose median host time is
    under 400 µs (every rung, most libraries), so that the contestants of one comparison get
    the same head start, not one that grows with their host time. The head start is time the
    GPU spends nearly idle between repeats; a GPU at its power limit (an H200 on a large
    GEMM) clocks by its recent average power, so a kernel whose light launcher earned it a
    shorter head start ran at a lower clock than the library it was compared with
    (docs/notes/gemm.md, "The head start and the power limit")."""
    return max(COMMON_HEAD_START_US, HEAD_START_US + math.ceil(2 * host_us))


def _time_gpu(
    launch: Any,
    poison_all: Callable[[], None],
    repeats: int | None,
    warmup: int,
    time_budget_s: float,
) -> tuple[list[float], int]:
    """The samples in ms, and the head start (µs) each repeat was given."""
    from numba import cuda

    host_us = []
    for _ in range(warmup):
        poison_all()  # as before every timed call: a launch may need it (zeroed gradients)
        cuda.synchronize()
        began = time.perf_counter()
        launch()
        host_us.append((time.perf_counter() - began) * 1e6)
    cuda.synchronize()
    head = head_start_us(float(np.median(host_us)) if host_us else 0.0)
    start, end = cuda.event(), cuda.event()
    samples: list[float] = []
    spent = 0.0
    limit = repeats or MAX_REPEATS
    while len(samples) < limit:
        _Scratch.head_start(head)
        poison_all()
        _Scratch.flush_l2()
        start.record()
        launch()
        end.record()
        end.synchronize()
        ms = cuda.event_elapsed_time(start, end)
        samples.append(ms)
        spent += ms * 1e-3
        if repeats is None and len(samples) >= MIN_REPEATS and spent >= time_budget_s:
            break
    return samples, head
