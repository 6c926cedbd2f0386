"""Exercises for notebook 04 (data movement: streams and CUDA graphs).

- ``check_pipeline_time(dict)``: copies and kernels of a batch, sequential and split into
  chunks on streams (each copy engine and the SMs do one chunk at a time).
- ``check_graph_launches(dict)``: a chain of short kernels, launched one by one from Python
  or replayed as a CUDA graph (which the GPU issues one kernel at a time, at most one every
  REPLAY_US).
- ``check_call_costs(dict)``: one rung called in a loop, directly and as a replayed graph.
"""

from __future__ import annotations

from typing import Any

from ladder.exercises._common import as_dict, close, require

STAGES_MS = (4.0, 3.0, 2.0)  # the whole batch: host -> device, kernel, device -> host
CHUNKS = 8
KERNELS = 100
KERNEL_US = 2.0  # GPU time of each kernel of the chain
LAUNCH_US = 20.0  # host time to launch one Numba kernel
REPLAY_US = 1.1  # a replayed graph: the GPU issues its next kernel at most this often
CALL_HOST_US = 15.0  # a rung's host time per call: reading its arrays, its plan, the launch
CALL_GPU_US = 6.0  # the GPU time of the rung's one kernel
GRAPH_LAUNCH_US = 3.0  # the host time of one graph replay (cuGraphLaunch)


def _pipelined(stages: tuple[float, ...], chunks: int) -> float:
    """Finish time when chunk i's stage s starts after its stage s - 1 and after chunk
    i - 1's stage s (one engine per stage)."""
    done = [0.0] * len(stages)
    for _ in range(chunks):
        ready = 0.0
        for s, total in enumerate(stages):
            done[s] = max(done[s], ready) + total / chunks
            ready = done[s]
    return done[-1]


def check_pipeline_time(answer: Any) -> str:
    """STAGES_MS gives the batch's three stages. Keys: sequential_ms (one after the other),
    pipelined_ms (CHUNKS chunks, each stage on its own engine, overlapped), efficiency (the
    largest stage over pipelined_ms: the figure the README's overlap target is stated in)."""
    found = as_dict(answer, ("sequential_ms", "pipelined_ms", "efficiency"), "check_pipeline_time")
    sequential = sum(STAGES_MS)
    pipelined = _pipelined(STAGES_MS, CHUNKS)
    require(close(found["sequential_ms"], sequential), "sequential_ms: the stages add up")
    if close(found["pipelined_ms"], max(STAGES_MS)):
        raise AssertionError(
            "pipelined_ms: the slowest stage sets the pace, but the first chunk must come in "
            "before a kernel starts and the last must still go out: add the fill and drain"
        )
    require(
        close(found["pipelined_ms"], pipelined),
        "pipelined_ms: draw the three engines as rows of chunk boxes (each 1/8 of its stage) "
        "and find when the last box ends",
    )
    require(
        close(found["efficiency"], max(STAGES_MS) / pipelined),
        "efficiency: the largest stage's time over the pipelined time",
    )
    efficiency = max(STAGES_MS) / pipelined
    return (
        f"right: {sequential} ms sequential, {pipelined:.3f} ms pipelined, "
        f"efficiency {efficiency:.3f}"
    )


def check_graph_launches(answer: Any) -> str:
    """A chain of KERNELS kernels, each running KERNEL_US on the GPU. Launched one by one from
    Python, each launch takes the host LAUNCH_US, and the GPU cannot start a kernel the host has
    not launched yet. Replayed as a graph, the host launches the whole chain at once and the
    GPU issues the kernels itself, at most one every REPLAY_US; like the host, it prepares
    kernel i + 1 while kernel i runs (the REPLAY_US are not added to the KERNEL_US). How long
    does the whole chain take each way? Keys: direct_us, graph_us."""
    found = as_dict(answer, ("direct_us", "graph_us"), "check_graph_launches")
    direct = KERNELS * max(LAUNCH_US, KERNEL_US)
    graph = KERNELS * max(REPLAY_US, KERNEL_US)
    if close(found["direct_us"], KERNELS * (LAUNCH_US + KERNEL_US)):
        raise AssertionError(
            "direct_us: launches are asynchronous; the GPU runs kernel i while the host "
            "launches kernel i + 1, so the slower of the two sets the pace, not their sum"
        )
    require(close(found["direct_us"], direct), "direct_us: per kernel, the slower of host and GPU")
    if close(found["graph_us"], KERNELS * (REPLAY_US + KERNEL_US)):
        raise AssertionError(
            "graph_us: the GPU issues kernel i + 1 while kernel i runs, so per kernel the larger "
            "of the issue interval and the kernel sets the pace, not their sum"
        )
    require(
        close(found["graph_us"], graph),
        "graph_us: the host is out of the way; per kernel, the larger of the replay cost and the "
        "kernel",
    )
    return (
        f"right: {direct:.0f} us launched one by one, {graph:.0f} us as a graph: "
        "launch-bound becomes GPU-bound"
    )


def check_call_costs(answer: Any) -> str:
    """A rung called 1000 times in a loop: each call costs the host CALL_HOST_US and its kernel
    runs CALL_GPU_US on the GPU. Then the same call captured once as a graph and replayed 1000
    times: each replay costs the host GRAPH_LAUNCH_US. Keys: loop_us, graph_us (per call)."""
    found = as_dict(answer, ("loop_us", "graph_us"), "check_call_costs")
    loop = max(CALL_HOST_US, CALL_GPU_US)
    graph = max(GRAPH_LAUNCH_US, CALL_GPU_US)
    if close(found["loop_us"], CALL_HOST_US + CALL_GPU_US):
        raise AssertionError(
            "loop_us: a call returns once its kernel is queued, not when it has run; the host "
            "prepares call i + 1 while the GPU runs call i, so the slower of the two sets the pace"
        )
    require(close(found["loop_us"], loop), "loop_us: per call, the slower of host and GPU")
    if close(found["graph_us"], GRAPH_LAUNCH_US):
        raise AssertionError(
            "graph_us: a replay is cheap for the host, but the GPU still runs the kernel: the "
            "slower of the two sets the pace"
        )
    require(close(found["graph_us"], graph), "graph_us: per replay, the slower of host and GPU")
    return (
        f"right: {loop:.0f} us per call in a loop (host-bound), {graph:.0f} us per replay "
        "(GPU-bound): the graph takes the launcher's Python out of the loop"
    )
