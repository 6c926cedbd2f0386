"""Capture kernel launches into a CUDA graph, and replay the graph: a chain of Numba launches
(``capture``), or one call of any rung or library (``capture_call``).

A Numba launch costs tens of microseconds of Python and driver work on the host (``launch.py``
measures it), far more than a small kernel takes on the GPU: a chain of small kernels launched
one by one leaves the GPU idle between them. A CUDA graph records the chain once and replays
all of it with one driver call; the GPU then starts each kernel of the chain straight after
the one before.

Recording is stream capture: while a stream captures, the work issued to it is recorded into
a graph instead of being run. ``capture(issue, stream)`` calls ``issue(stream)``, which
launches kernels on ``stream`` as usual (``kernel[grid, block, stream](...)``, or a rung's
``launch(..., stream=stream)``), and returns a ``Graph``; ``graph.replay()`` enqueues the whole
recorded sequence on the stream::

    stream = cuda.stream()

    def chain(stream):
        for _ in range(50):
            add_one[1, 32, stream](a, b)
            add_one[1, 32, stream](b, a)

    with capture(chain, stream) as graph:
        for _ in range(1000):
            graph.replay()
        stream.synchronize()

What capture is sets the rules:

- every launch must go to the stream ``issue`` is given; a launch on the default stream while
  another stream captures is an error, and the capture is reported as failed;
- nothing may compile, allocate, copy synchronously or synchronize while the stream captures.
  So ``capture`` first calls ``issue`` once directly (``warm_up=True``), which compiles every
  kernel and loads it; that call does the work once, for real. Launches are then recorded,
  not run: after ``capture`` returns, the captured work has not happened yet;
- a graph holds the arguments of the launches it recorded (device pointers and scalars):
  every replay reads and writes the same arrays. Change their contents between replays, not
  the arrays;
- pass Numba device arrays. A CuPy array passed to a Numba kernel is wrapped at every launch,
  and the wrapping synchronizes the array's stream, which is illegal during capture; wrap it
  once beforehand with ``cuda.as_cuda_array(array, sync=False)``.

``capture_call(call)`` records one call of a launcher that takes no stream: every rung (each
launches on ``fastcall.current_stream()``, which ``fastcall.on_stream`` points at the capture
stream, CuPy's current stream with it) and a library call (PyTorch's current stream is pointed
there too). The harness times a rung's replay this way (``timing.time_calls``).

On a GPU this is the driver API, through ``cuda.bindings`` (which numba-cuda itself is built
on): ``cuStreamBeginCapture`` in thread-local mode, ``cuStreamEndCapture``,
``cuGraphInstantiate`` and ``cuGraphLaunch``.

In the simulator there are no graphs: it runs every launch synchronously, when it is issued.
``capture`` there records the issuing function itself, without calling it (after the warm-up
call), and ``replay`` calls it again, which runs the same launches directly. That matches the
GPU whenever ``issue`` launches the same kernels on the same arrays each time it is called,
which the rules above ask for anyway.
"""

from __future__ import annotations

import contextlib
import sys
import weakref
from collections.abc import Callable, Iterator
from typing import Any

from ladder.core import device, fastcall

Issue = Callable[[Any], None]

# Numba's handles for the default streams: 0 (default), 1 (legacy), 2 (per-thread)
_DEFAULT_STREAM_HANDLES = (0, 1, 2)


class CaptureError(RuntimeError):
    """Stream capture failed, or a graph call was refused by the driver."""


def _driver(name: str, *args: Any) -> Any:
    """Call a ``cuda.bindings`` driver function; raise ``CaptureError`` unless it succeeded.

    Returns the function's result after the status (None, one value, or a tuple)."""
    from cuda.bindings import driver as cu

    status, *values = getattr(cu, name)(*args)
    if status != cu.CUresult.CUDA_SUCCESS:
        _, text = cu.cuGetErrorName(status)
        text = text.decode() if isinstance(text, bytes) else str(status)
        raise CaptureError(f"{name} failed: {text}")
    if not values:
        return None
    return values[0] if len(values) == 1 else tuple(values)


def _destroy(graph_exec: Any, graph: Any) -> None:
    from cuda.bindings import driver as cu

    cu.cuGraphExecDestroy(graph_exec)
    cu.cuGraphDestroy(graph)


class Graph:
    """A captured sequence of launches, replayed on a stream (see the module docstring)."""

    def __init__(
        self, issue: Issue, stream: Any, handles: tuple[Any, Any] | None, nodes: int | None
    ) -> None:
        self.stream = stream
        # number of nodes (kernels and other operations) in the graph; None in the simulator
        self.nodes = nodes
        self._issue = issue
        self._exec = handles[0] if handles else None
        self._closed = False
        self._finalizer = weakref.finalize(self, _destroy, *handles) if handles else None
        if self._finalizer is not None:
            self._finalizer.atexit = False  # at exit the context goes, and its graphs with it

    @property
    def simulated(self) -> bool:
        return self._exec is None

    def replay(self, stream: Any = None) -> None:
        """Enqueue the captured work on ``stream`` (default: the stream it was captured on).

        Asynchronous, like a launch: synchronize the stream before reading the results."""
        stream = self.stream if stream is None else stream
        if self._closed:
            raise CaptureError("this graph was closed")
        if self._exec is None:
            self._issue(stream)
        else:
            _driver("cuGraphLaunch", self._exec, _handle(stream))

    def close(self) -> None:
        """Free the graph on the GPU (after work already enqueued has finished)."""
        self._closed = True
        if self._finalizer is not None:
            self._finalizer()

    def __enter__(self) -> Graph:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _handle(stream: Any) -> Any:
    handle = getattr(stream, "handle", None)
    if handle is None or int(handle) in _DEFAULT_STREAM_HANDLES:
        raise ValueError(
            "graphs are captured and replayed on a stream of their own: pass cuda.stream() "
            "(or cuda.external_stream(ptr)), not the default stream"
        )
    return handle


def capture(issue: Issue, stream: Any = None, *, warm_up: bool = True) -> Graph:
    """Record the launches ``issue(stream)`` makes on ``stream`` into a graph.

    ``stream`` defaults to a new stream (``graph.stream``). With ``warm_up`` (the default),
    ``issue`` is first called once directly, so that every kernel is compiled and loaded
    before capture; that call runs its work. Raises ``CaptureError`` when capture fails, e.g.
    when a launch went to another stream or a call that synchronizes ran during capture.
    """
    from numba import cuda

    if stream is None:
        stream = cuda.stream()
    if isinstance(stream, int):
        raise ValueError("graphs need a stream of their own (cuda.stream()), not stream 0")
    if warm_up:
        issue(stream)
        stream.synchronize()
    if device.simulator():
        return Graph(issue, stream, None, None)

    from cuda.bindings import driver as cu

    handle = _handle(stream)
    mode = cu.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
    _driver("cuStreamBeginCapture", handle, mode)
    try:
        with fastcall.capturing():
            issue(stream)
    except Exception as err:
        status, graph = cu.cuStreamEndCapture(handle)  # leave capture mode, whatever happened
        if status == cu.CUresult.CUDA_SUCCESS and graph is not None:
            cu.cuGraphDestroy(graph)
        if isinstance(err, fastcall.CaptureRefused):
            raise CaptureError(f"this call cannot be captured: {err}") from err
        raise CaptureError(
            f"a launch failed during capture ({type(err).__name__}: {err}). Launch every "
            "kernel on the stream given to issue, with Numba device arrays, and let capture "
            "warm up first (warm_up=True) so that nothing compiles during capture"
        ) from err
    try:
        graph = _driver("cuStreamEndCapture", handle)
    except CaptureError as err:
        raise CaptureError(
            f"{err}: the capture was invalidated, usually by work issued to the default "
            "stream, or a synchronizing call, while the stream was capturing"
        ) from err
    try:
        _, nodes = _driver("cuGraphGetNodes", graph, 0)
        graph_exec = _driver("cuGraphInstantiate", graph, 0)
    except CaptureError:
        cu.cuGraphDestroy(graph)
        raise
    return Graph(issue, stream, (graph_exec, graph), int(nodes))


@contextlib.contextmanager
def _torch_on(stream: Any) -> Iterator[None]:
    """PyTorch's current stream set to ``stream`` (when PyTorch is in use and this is a GPU)."""
    torch = sys.modules.get("torch")
    if torch is None or device.simulator() or not torch.cuda.is_available():
        yield
        return
    external = torch.cuda.ExternalStream(fastcall.stream_handle(stream))
    with torch.cuda.stream(external):
        yield


def capture_call(call: Callable[[], Any], stream: Any = None, *, warm_up: bool = True) -> Graph:
    """Record what ``call()`` launches into a graph: a rung's or a library's launcher called
    with its arguments bound, for example ``functools.partial(rung.launch, x, w, out)``.

    During the call every ladder launch goes to the capture stream (``fastcall.on_stream``),
    and so do CuPy's and PyTorch's. The rules of ``capture`` hold: the call must not allocate
    or synchronize once warmed up (pass the output; a rung's plan keeps its workspaces), and
    every replay reads and writes the arrays bound into ``call``.
    """

    def issue(on: Any) -> None:
        if device.simulator():  # no streams to point at: the simulator runs launches at once
            call()
            return
        with fastcall.on_stream(on), _torch_on(on):
            call()

    return capture(issue, stream, warm_up=warm_up)
