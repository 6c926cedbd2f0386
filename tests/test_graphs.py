"""Graph capture of any launcher (``ladder.core.graphs.capture_call``): every GPU rung's call is
captured once and replayed, and the replay's output is checked like a launch's.

On the GPU every rung is captured (the rungs launch on ``fastcall.current_stream()``, which the
capture points at its stream); in the simulator a graph replays the call itself, which checks
the wiring only.
"""

import functools

import numpy as np
import pytest
from conftest import ON_GPU, gpu_only
from numba import cuda

from ladder.core import fastcall, graphs, timing
from ladder.core.dtypes import resolve
from ladder.core.rung import rungs

GPU_RUNGS = [r for r in rungs() if not r.on_cpu and not r.reference]
NOT_CAPTURABLE = {
    "conv/shared-tiles": "cannot be captured: conv rung 2 compiles the weights",
    "moe-top2/expert-loop": "cannot be captured: moe rung 1 reads the experts' ids on the host",
    "moe-top8/expert-loop": "cannot be captured: moe rung 1 reads the experts' ids on the host",
    "moe-top2/sorted-tokens": "cannot be captured: moe rung 2 reads the offsets on the host",
    "moe-top8/sorted-tokens": "cannot be captured: moe rung 2 reads the offsets on the host",
}


def test_capture_call_points_every_launch_at_the_capture_stream_and_restores_it():
    seen = []
    graph = graphs.capture_call(lambda: seen.append(fastcall.current_stream()))
    graph.replay()
    cuda.synchronize()
    assert len(seen) == 2 and fastcall.current_stream() == 0
    if ON_GPU:  # inside the capture (the warm-up too), the capture stream's handle
        assert seen[0] == fastcall.stream_handle(graph.stream) and seen[0] not in (0, 1, 2)
    graph.close()


def test_a_launcher_that_refuses_capture_says_why():
    """``fastcall.refuse_capture`` raises only while a graph records (never at warm-up)."""

    def call():
        fastcall.refuse_capture("host work between launches")

    call()  # outside capture: nothing to refuse
    if ON_GPU:
        with pytest.raises(graphs.CaptureError, match="cannot be captured: host work"):
            graphs.capture_call(call)
    with fastcall.capturing(), pytest.raises(fastcall.CaptureRefused, match="host work"):
        call()


def _small_case(rung):
    from ladder.core.rung import get_problem

    problem = get_problem(rung.problem)
    dtype = rung.dtypes[0]
    size = min(problem.test_sizes(dtype), key=lambda s: problem.flops(s) or np.prod(s))
    if problem.flops(size) == 0:  # a trivial size (an empty output) replays nothing
        size = sorted(problem.test_sizes(dtype), key=problem.flops)[-1]
    return timing.prepare(problem, size, dtype)


@gpu_only
@pytest.mark.parametrize("rung", GPU_RUNGS, ids=lambda r: r.key)
def test_every_rung_replays_from_a_graph(rung):
    """One call captured, the output poisoned, the graph replayed: the right answer again."""
    reason = rung.unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    case = _small_case(rung)
    args = case.device_inputs()
    shape = case.problem.output_shape(case.size)
    out = cuda.device_array(shape, dtype=resolve(case.problem.output_dtype(case.dtype)))
    if rung.key in NOT_CAPTURABLE:  # host work between launches: refused, and says why
        with pytest.raises(graphs.CaptureError, match=NOT_CAPTURABLE[rung.key]):
            graphs.capture_call(functools.partial(rung.launch, *args, out))
        return
    with graphs.capture_call(functools.partial(rung.launch, *args, out)) as graph:
        assert graph.nodes >= 1
        for _ in range(2):
            timing.poison(out)
            cuda.synchronize()
            graph.replay()
            graph.stream.synchronize()
            err = timing.relative_error(out.copy_to_host(), case.ref)
            assert err <= case.problem.tolerance(case.dtype), (rung.key, case.size, err)
