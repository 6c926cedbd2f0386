"""Which kernel an operator runs: the best rung that takes the input here, else PyTorch.

An operator of ``ladder.ops`` names a problem (``softmax``, ``gemm``, ...). Its *route* for an
input is found once per signature (dtype, shapes, device) and kept: the problem's rungs are
tried from the top of the ladder down, and the first that is available here
(``Rung.unavailable_reason``) and takes the input (its launcher raises no ``ValueError`` or
``NotApplicable``, which it does before launching anything) is the route. When none takes it,
the route is PyTorch's own operator, with the reasons kept. The top rung is the fastest at the
sizes its ladder is measured at; where it is not for this GPU (wgmma on an A100) or this shape
(a head dimension past a tile), a lower one runs, and ``Operator.skip`` passes over a rung
that takes an input a lower one is known to do faster.

With ``benchmark(True)`` (``torch.backends.cudnn.benchmark``'s idea) the first call of a
signature instead runs every rung that takes the input, times each on the call's own tensors
(``timing.time_ms``, the median of ``BENCHMARK_REPEATS``), and keeps the fastest; its route says by
how much it beat the top rung. ``Operator.skip`` does not apply there: the times decide. In
the simulator the times are the host's and mean nothing; the path is the same.

``routes()`` records the route of every call made inside it, in any thread (autograd runs a
CUDA backward in threads of its own), so a user can see which path ran. On a GPU the rungs get
the CUDA tensors themselves, on PyTorch's current stream, so ``torch.cuda.graph`` captures
them; a signature must be called once before a capture (its route is chosen, its kernels
compiled, by running them). In Numba's CUDA simulator the rungs get the CPU tensors' memory
(zero-copy): answers are checked there, and times mean nothing.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass
from typing import Any

from ladder.core import device, fastcall
from ladder.core.rung import NotApplicable, Rung, rungs

TORCH = "torch"  # the path of a call that PyTorch's own operator ran
BENCHMARK_REPEATS = 5  # timed calls per rung when choosing by time


class _Settings:
    benchmark = False  # choose each signature's route by timing every rung that takes it


SETTINGS = _Settings()


@dataclass(frozen=True)
class Route:
    """The path one call took: ``op`` (``ladder::softmax``), ``path`` (a rung's key such as
    ``softmax/rows-in-registers``, or ``torch``) and ``why``: for PyTorch, why no rung took
    it; for a rung chosen by time (``benchmark``), its time and the top rung's."""

    op: str
    path: str
    why: str = ""

    @property
    def rung(self) -> bool:
        return self.path != TORCH

    def __str__(self) -> str:
        return f"{self.op}: {self.path}" + (f" ({self.why})" if self.why else "")


_LOCK = threading.Lock()
_RECORDS: list[list[Route]] = []  # the lists of the ``routes()`` blocks open now


@contextlib.contextmanager
def routes() -> Iterator[list[Route]]:
    """Inside, every operator call appends its ``Route`` to the list this yields, whichever
    thread makes it: ``with ladder.ops.routes() as ran: model(x).sum().backward()`` then
    ``ran`` says which kernels ran, the backward's too."""
    found: list[Route] = []
    with _LOCK:
        _RECORDS.append(found)
    try:
        yield found
    finally:
        with _LOCK:
            _RECORDS.remove(found)


def _note(route: Route) -> None:
    if _RECORDS:
        with _LOCK:
            for record in _RECORDS:
                record.append(route)


def views(*tensors: Any) -> list[Any]:
    """What a launcher takes for each tensor: the tensor on a GPU (detached where it needs a
    gradient, which the launchers refuse); in the simulator, a simulator device array over the
    CPU tensor's memory (so a rung's writes land in it)."""
    if not device.simulator():
        return [t.detach() if t.requires_grad else t for t in tensors]
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

    return [FakeCUDAArray(t.detach().numpy()) for t in tensors]


def _stream(tensor: Any) -> int:
    """PyTorch's current stream on ``tensor``'s device (0 in the simulator), as a handle:
    through ``torch._C._cuda_getCurrentRawStream`` where this PyTorch has it (what Inductor's
    generated code calls; ``torch.cuda.current_stream`` builds a Stream object each call,
    some µs of host time), else the public call."""
    if device.simulator():
        return 0
    raw = _raw_stream()
    if raw is not None:
        return raw(tensor.get_device())
    import torch

    return torch.cuda.current_stream(tensor.device).cuda_stream


@functools.cache
def _raw_stream() -> Callable[[int], int] | None:
    import torch

    return getattr(torch._C, "_cuda_getCurrentRawStream", None)


def unsupported(tensor: Any) -> str | None:
    """Why no rung can take ``tensor`` here (a CPU tensor on a machine with a GPU, a CUDA
    tensor in the simulator, a tensor on another GPU than the current one, where Numba and
    CuPy launch), or None."""
    on_cuda = tensor.device.type == "cuda"
    if device.simulator():
        return "a CUDA tensor, but ladder runs in the CUDA simulator" if on_cuda else None
    if not on_cuda:
        return f"a tensor on {tensor.device}; the rungs run on CUDA tensors"
    import torch

    current = torch.cuda.current_device()
    if tensor.device.index not in (None, current):
        return f"a tensor on {tensor.device}; the rungs launch on the current GPU, cuda:{current}"
    return None


def capturing() -> bool:
    """True while PyTorch records a CUDA graph on the current stream."""
    if device.simulator():
        return False
    import torch

    return torch.cuda.is_current_stream_capturing()


@dataclass
class _Choice:
    rung: Rung | None
    why: str
    route: Route | None = None  # made once (``Operator._route``): every call returns it


class Operator:
    """One problem's operator: ``call(key, tensors, out, fallback, **options)`` runs the
    route for ``key`` (a hashable signature of the input) and returns the ``Route``.

    ``tensors`` and ``out`` are PyTorch tensors, contiguous, already checked; ``options`` go to
    the launcher (``causal=True``); ``fallback()`` fills ``out`` with PyTorch."""

    def __init__(
        self,
        op: str,
        problem: str,
        skip: dict[str, Callable[..., str | None]] | None = None,
    ) -> None:
        self.op = op
        self.problem = problem
        # rung name -> skip(*tensors): why that rung is not the route for these inputs although
        # it takes them (a lower rung is faster there), or None
        self.skip = skip or {}
        self._chosen: dict[Hashable, _Choice] = {}

    def candidates(self, dtype: str) -> list[Rung]:
        """The problem's GPU rungs that support ``dtype``, best (highest) first."""
        found = [r for r in rungs(self.problem, references=False) if not r.on_cpu]
        return [r for r in reversed(found) if dtype in r.dtypes]

    def call(
        self,
        key: Hashable,
        tensors: tuple[Any, ...],
        out: Any,
        fallback: Callable[[], None],
        **options: Any,
    ) -> Route:
        choice = self._chosen.get(key)
        if choice is None:
            if capturing():  # choosing runs rungs (and compiles them): never inside a graph
                raise RuntimeError(
                    f"{self.op}: first call of this signature during CUDA graph capture; call "
                    f"it once before capturing, so that its route is chosen and its kernels "
                    f"compiled"
                )
            choice = self._choose(key, tensors, out, fallback, options)
            route = self._route(choice)
        elif choice.rung is None:
            fallback()
            route = self._route(choice)
        else:
            self._run(choice.rung, tensors, out, options)
            route = self._route(choice)
        _note(route)
        return route

    def compute(
        self,
        key: Hashable,
        tensors: tuple[Any, ...],
        make_out: Callable[[], Any],
        in_torch: Callable[[], Any],
        **options: Any,
    ) -> Any:
        """The operator's answer for ``key`` as a new contiguous tensor: where an earlier call
        chose PyTorch's route, ``in_torch()``'s own result (nothing allocated and copied into);
        otherwise ``make_out()`` filled by ``call`` (the chosen rung, or on a first call the
        choice, with ``in_torch()`` copied in where PyTorch is chosen)."""
        choice = self._chosen.get(key)
        if choice is not None and choice.rung is None:
            _note(self._route(choice))
            return in_torch()
        out = make_out()
        self.call(key, tensors, out, lambda: out.copy_(in_torch()), **options)
        return out

    def forget(self) -> None:
        """Drop every chosen route (the next call of each signature chooses again)."""
        self._chosen.clear()

    def _route(self, choice: _Choice) -> Route:
        if choice.route is None:
            path = TORCH if choice.rung is None else choice.rung.key
            choice.route = Route(self.op, path, choice.why)
        return choice.route

    def _run(self, rung: Rung, tensors: tuple[Any, ...], out: Any, options: dict) -> None:
        _launch_on(_stream(out), rung.launch, views(*tensors, out), options)

    def _choose(
        self,
        key: Hashable,
        tensors: tuple[Any, ...],
        out: Any,
        fallback: Callable[[], None],
        options: dict,
    ) -> _Choice:
        reasons = [why for why in map(unsupported, (*tensors, out)) if why]
        dtype = str(out.dtype).removeprefix("torch.")
        candidates = [] if reasons else self.candidates(dtype)
        if not reasons and not candidates:
            reasons.append(f"no {self.problem} rung supports {dtype}")
        timed: list[tuple[float, int, Rung]] = []  # (ms, rank from the top, rung)
        for r in candidates:
            why = r.unavailable_reason()
            if why is None and r.name in self.skip and not SETTINGS.benchmark:
                why = self.skip[r.name](*tensors)
            if why is not None:
                reasons.append(f"{r.name}: {why}")
                continue
            try:
                self._run(r, tensors, out, options)
            except (ValueError, NotApplicable) as err:
                reasons.append(f"{r.name}: {err}")
                continue
            if not SETTINGS.benchmark:
                choice = self._chosen[key] = _Choice(r, "")
                return choice
            timed.append(
                (time_rung(lambda r=r: self._run(r, tensors, out, options)), len(timed), r)
            )
        if timed:
            ms, _, best = min(timed)
            self._run(best, tensors, out, options)  # ``out`` is the chosen rung's answer
            top_ms, _, top = timed[0]
            why = f"fastest of {len(timed)} timed: {ms:.3g} ms"
            if best is not top:
                why += f"; {top.name} {top_ms:.3g} ms"
            choice = self._chosen[key] = _Choice(best, why)
            return choice
        fallback()
        choice = self._chosen[key] = _Choice(None, "; ".join(reasons))
        return choice


def time_rung(run: Callable[[], Any], repeats: int = BENCHMARK_REPEATS) -> float:
    """The median ms of ``run()``, timed as the harness times anything (``timing.time_ms``:
    CUDA events, the L2 flushed; in the simulator one call on the host's clock, meaning
    nothing). One warm-up call: the call that chose the rung compiled it."""
    import statistics

    from ladder.core import timing

    return statistics.median(timing.time_ms(run, repeats=repeats, warmup=1))


def _launch_on(handle: int, launch: Callable[..., Any], args: list[Any], options: dict) -> None:
    """``launch(*args, **options)`` with every launch on the CUstream ``handle``; during a
    capture inside ``fastcall.capturing()``, so that a launcher that cannot be recorded
    (host work between its launches) refuses with its reason."""
    if handle == fastcall.current_stream():
        launch(*args, **options)
        return
    with (
        fastcall.on_stream(handle),
        fastcall.capturing() if capturing() else contextlib.nullcontext(),
    ):
        launch(*args, **options)


KERNEL_DTYPES = ("float32", "float16")  # what ladder.ops' own kernels take (Numba has no bf16)


def run_kernel(
    op: str, name: str, tensors: tuple[Any, ...], launch: Callable[..., None], fallback: Callable
) -> Route:
    """Run one of ``ladder.ops``' own kernels (a backward, not a rung) on ``tensors`` (inputs
    and outputs, as ``launch`` takes them; the first one's dtype is the kernel's, one of
    KERNEL_DTYPES), or ``fallback()`` where no kernel can take them; the path of a kernel is
    ``ops/<name>``."""
    dtype = str(tensors[0].dtype).removeprefix("torch.")
    why = next((w for w in map(unsupported, tensors) if w), None)
    if why is None and dtype not in KERNEL_DTYPES:
        why = f"{name} takes {' or '.join(KERNEL_DTYPES)}, not {dtype}"
    if why is None:
        _launch_on(_stream(tensors[0]), launch, views(*tensors), {})
        route = Route(op, f"ops/{name}")
    else:
        fallback()
        route = Route(op, TORCH, why)
    _note(route)
    return route


def run_entry(
    op: str,
    rung: Rung,
    launch: Callable[..., Any],
    tensors: tuple[Any, ...],
    why: str,
    **options: Any,
) -> Route:
    """Run ``launch`` (an entry point of ``rung`` other than its ``launch``, such as GEMM rung
    16's ``launch_transposed``) on ``tensors`` (inputs, then the output, on the GPU) with
    ``options``, on the output's stream, and record it as ``rung``'s route with ``why``. A
    ``ValueError`` of the launcher (it does not take these) propagates, nothing recorded."""
    _launch_on(_stream(tensors[-1]), launch, views(*tensors), options)
    route = Route(op, rung.key, why)
    _note(route)
    return route


def torch_route(op: str, why: str) -> Route:
    """Record a call that PyTorch ran before any rung was asked (an option no rung has)."""
    route = Route(op, TORCH, why)
    _note(route)
    return route
