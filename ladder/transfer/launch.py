"""What a kernel launch costs on the host, and what a CUDA graph saves.

A small kernel (32 threads adding one to 32 floats) takes a couple of microseconds on the
GPU; launching it takes longer on the host. Measured here, each as host time per launch over
many launches in a row (``time.perf_counter`` from after a synchronize to after the last
launch's work is done; the GPU is never the bottleneck except for the graph):

- **Numba, Numba device arrays**: ``kernel[1, 32, stream](x, y)``: the dispatcher types each
  argument, finds the compiled kernel, packs the arguments and launches through cuda.core;
- **Numba, CuPy arrays passed directly**: the same launch with CuPy arrays, which Numba
  wraps at every launch through ``__cuda_array_interface__``, synchronizing the stream the
  CuPy array names (CuPy's current stream), as the interface asks;
- **Numba, CuPy arrays wrapped once** with ``cuda.as_cuda_array(..., sync=False)`` before the
  loop: the cost of the wrapping goes, the launch is the first case again;
- **CuPy RawKernel**: the same kernel in CUDA C++, launched by CuPy's Cython launcher, with
  raw pointers and no typing on the way;
- **a chain of Numba launches, directly** and **captured into a CUDA graph and replayed**
  (``graphs.py``): the same chain of ``CHAIN`` dependent kernels (x -> y -> x ...); per kernel
  of the chain. The replay is one driver call for the whole chain, and the GPU starts each
  kernel right after the one before, so here the GPU's pace is what is measured. The graph's
  GPU time per kernel (CUDA events around the replays) is reported beside it.

CuPy's cases need CuPy and a GPU, and say so otherwise. In the simulator the Numba cases run
and their times mean nothing.
"""

from __future__ import annotations

import functools
import time
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from numba import cuda

from ladder.core import device, graphs

THREADS = 32  # one warp: the smallest launch that is still a kernel
CHAIN = 100
WARMUP = 20
GPU_LAUNCHES, GPU_REPEATS, GPU_REPLAYS = 2000, 7, 50
SIMULATOR_LAUNCHES, SIMULATOR_REPEATS, SIMULATOR_CHAIN = 2, 1, 4

ADD_ONE_SOURCE = r"""
extern "C" __global__ void add_one(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] + 1.0f;
}
"""


@cuda.jit
def add_one(x, y):
    i = cuda.grid(1)
    if i < x.size:
        y[i] = x[i] + 1.0


@dataclass
class LaunchCost:
    """Host time per kernel launch for one way of launching, every repeat."""

    name: str
    title: str
    samples_us: list[float]
    launches: int  # kernels launched per repeat
    error: str | None = None

    @property
    def median_us(self) -> float | None:
        return float(np.median(self.samples_us)) if self.samples_us else None

    def to_dict(self) -> dict[str, Any]:
        found = asdict(self)
        found["median_us"] = self.median_us
        return found


def _per_launch_us(
    launch_once: Callable[[], None], sync: Callable[[], None], calls: int, repeats: int, per: int
) -> list[float]:
    """Host microseconds per kernel: ``calls`` calls of ``launch_once`` (each launching
    ``per`` kernels) timed from a synchronized start until their work is done."""
    for _ in range(min(WARMUP, calls)):
        launch_once()
    sync()
    samples = []
    for _ in range(repeats):
        began = time.perf_counter()
        for _ in range(calls):
            launch_once()
        sync()
        samples.append((time.perf_counter() - began) / (calls * per) * 1e6)
    return samples


@functools.cache
def _raw_kernel() -> Any:
    import cupy

    return cupy.RawKernel(ADD_ONE_SOURCE, "add_one")


def _chain(x: Any, y: Any, length: int) -> Callable[[Any], None]:
    """Issue ``length`` dependent launches on a stream: x -> y, y -> x, ..."""

    def issue(stream: Any) -> None:
        for step in range(length):
            src, dst = (x, y) if step % 2 == 0 else (y, x)
            add_one[1, THREADS, stream](src, dst)

    return issue


def measure(
    launches: int | None = None,
    repeats: int | None = None,
    chain: int | None = None,
    replays: int | None = None,
) -> dict[str, Any]:
    """Every launch cost (``LaunchCost`` dicts) and the graph's own figures.

    ``launches`` per repeat for the single launches, ``repeats`` repeats of each, a chain of
    ``chain`` kernels replayed ``replays`` times per repeat; defaults by GPU or simulator."""
    with warnings.catch_warnings():  # a one-block grid is the point here, not a mistake
        warnings.filterwarnings("ignore", message="Grid size")
        return _measure(launches, repeats, chain, replays)


def _measure(
    launches: int | None, repeats: int | None, chain: int | None, replays: int | None
) -> dict[str, Any]:
    simulated = device.simulator()
    launches = launches or (SIMULATOR_LAUNCHES if simulated else GPU_LAUNCHES)
    repeats = repeats or (SIMULATOR_REPEATS if simulated else GPU_REPEATS)
    chain = chain or (SIMULATOR_CHAIN if simulated else CHAIN)
    replays = replays or (1 if simulated else GPU_REPLAYS)
    stream = cuda.stream()
    x = cuda.to_device(np.zeros(THREADS, dtype=np.float32))
    y = cuda.device_array(THREADS, dtype=np.float32)

    def numba_launch(a: Any, b: Any) -> Callable[[], None]:
        return lambda: add_one[1, THREADS, stream](a, b)

    samples = _per_launch_us(numba_launch(x, y), stream.synchronize, launches, repeats, 1)
    costs = [LaunchCost("numba-device-arrays", "Numba, Numba device arrays", samples, launches)]
    cupy_cases = [
        ("numba-cupy-arrays", "Numba, CuPy arrays passed directly"),
        ("numba-wrapped-once", "Numba, CuPy arrays wrapped once"),
        ("cupy-rawkernel", "CuPy RawKernel"),
    ]
    if device.cupy_available():
        import cupy

        # made on CuPy's default stream, which their __cuda_array_interface__ then names
        cx, cy = cupy.zeros(THREADS, dtype=cupy.float32), cupy.zeros(THREADS, dtype=cupy.float32)
        wx, wy = cuda.as_cuda_array(cx, sync=False), cuda.as_cuda_array(cy, sync=False)
        raw, count = _raw_kernel(), np.int32(THREADS)
        for (name, title), case in zip(
            cupy_cases[:2], [numba_launch(cx, cy), numba_launch(wx, wy)], strict=True
        ):
            samples = _per_launch_us(case, stream.synchronize, launches, repeats, 1)
            costs.append(LaunchCost(name, title, samples, launches))
        with cupy.cuda.ExternalStream(int(stream.handle)):  # CuPy launches on `stream`
            samples = _per_launch_us(
                lambda: raw((1,), (THREADS,), (cx, cy, count)),
                stream.synchronize,
                launches,
                repeats,
                1,
            )
        costs.append(LaunchCost(*cupy_cases[2], samples, launches))
    else:
        reason = "needs CuPy and a GPU"
        costs += [LaunchCost(name, title, [], 0, reason) for name, title in cupy_cases]

    issue = _chain(x, y, chain)
    direct = _per_launch_us(lambda: issue(stream), stream.synchronize, 1, repeats, chain)
    costs.append(
        LaunchCost(
            "numba-chain-direct",
            f"Numba, chain of {chain} launched directly",
            direct,
            chain,
        )
    )
    began = time.perf_counter()
    # the chain has run (and compiled) above, so capture needs no warm-up of its own
    with graphs.capture(issue, stream, warm_up=False) as graph:
        capture_ms = (time.perf_counter() - began) * 1e3
        replayed = _per_launch_us(graph.replay, stream.synchronize, replays, repeats, chain)
        costs.append(
            LaunchCost(
                "graph-replay",
                f"CUDA graph of the {chain} launches, replayed",
                replayed,
                replays * chain,
            )
        )
        gpu_us = None
        if not simulated:
            start, end = cuda.event(), cuda.event()
            start.record(stream)
            for _ in range(replays):
                graph.replay()
            end.record(stream)
            end.synchronize()
            gpu_us = cuda.event_elapsed_time(start, end) * 1e3 / (replays * chain)
        nodes = graph.nodes
    return {
        "simulated": simulated,
        "threads": THREADS,
        "chain": chain,
        "costs": [c.to_dict() for c in costs],
        "graph": {
            "nodes": nodes,
            "capture_ms": capture_ms,
            "replay_us_per_kernel": float(np.median(replayed)),
            "replay_gpu_us_per_kernel": gpu_us,
            "direct_us_per_kernel": float(np.median(direct)),
            "replays_per_repeat": replays,
        },
    }


CALL_SIZE = (4096, 1024)  # the rung whose call is taken apart: softmax rung 5, float32
PART_CALLS = 200


def _median_us(step: Callable[[], Any], calls: int, sync: bool) -> float:
    samples = []
    for _ in range(calls):
        if sync:
            cuda.synchronize()
        start = time.perf_counter()
        step()
        samples.append((time.perf_counter() - start) * 1e6)
    return float(np.median(samples))


def call_parts(calls: int = PART_CALLS) -> dict[str, Any]:
    """One rung's call taken apart on the host: softmax rung 5 (one kernel) on Numba arrays of
    ``CALL_SIZE``, each part timed alone (median µs of ``calls``): reading the two arrays
    (``fastcall.intake``), finding the plan, the raw launch; then the whole call, the same call
    through Numba's dispatcher (``fastcall.dispatcher_launches``), and the call's costs as the
    harness reports them (``timing.time_calls``: host, back-to-back, graph replay). On a GPU
    only (the simulator has no driver to launch through): elsewhere ``{"error": why}``."""
    if not device.gpu_available():
        return {"error": "needs a GPU: the simulator launches every kernel through Numba"}
    from ladder.core import fastcall, timing
    from ladder.core.rung import get_problem, get_rung

    registered = get_rung("softmax", "rows-in-registers")
    launch = registered.launch  # the launcher its registration built (``fused_rung``)
    x = cuda.to_device(np.random.default_rng(0).random(CALL_SIZE, dtype=np.float32))
    out = cuda.device_array_like(x)
    launch(x, out)  # compiles, plans
    ops = (fastcall.intake(x, "x"), fastcall.intake(out, "out"))
    plan = launch.plans(*ops)
    parts = {
        "read x and out (intake)": _median_us(
            lambda: (fastcall.intake(x, "x"), fastcall.intake(out, "out")), calls, False
        ),
        "find the plan (PlanCache)": _median_us(lambda: launch.plans(*ops), calls, False),
        "launch (cuLaunchKernel)": _median_us(lambda: plan(*ops), calls, True),
        "the whole call": _median_us(lambda: launch(x, out), calls, True),
    }
    with fastcall.dispatcher_launches():
        launch(x, out)
        parts["the whole call, Numba's dispatcher"] = _median_us(
            lambda: launch(x, out), calls, True
        )
    gpu_ms = timing.measure(timing.prepare(get_problem("softmax"), CALL_SIZE), registered).median_ms
    costs = timing.time_calls(functools.partial(launch, x, out), gpu_ms or 0.0)
    return {
        "rung": "softmax/rows-in-registers float32 " + " x ".join(map(str, CALL_SIZE)),
        "gpu": device.facts().name,
        "parts_us": parts,
        "gpu_us": (gpu_ms or 0.0) * 1e3,
        "host_us": costs.host_us,
        "back_to_back_us": costs.back_to_back_us,
        "graph_us": costs.graph_us,
        "mode": plan.mode,
    }
