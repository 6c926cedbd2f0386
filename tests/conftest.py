"""Shared fixtures. Importing ladder first chooses GPU or simulator for the whole session."""

import os
import sys

import numpy as np
import pytest

# Whether the person running the tests chose the backend themselves; read before importing
# ladder, which sets NUMBA_ENABLE_CUDASIM=1 when there is no GPU. The notebook tests start
# their kernels with the environment as it was (a clean one), so that each notebook chooses
# its backend itself, as it does for a user.
USER_BACKEND = os.environ.get("NUMBA_ENABLE_CUDASIM")
# the same for Triton's interpreter, which ladder turns on when it chooses the simulator
USER_TRITON_INTERPRET = os.environ.get("TRITON_INTERPRET")

import ladder  # noqa: E402, F401
from ladder.core import device, timing  # noqa: E402
from ladder.core.dtypes import resolve, to_device, to_host  # noqa: E402
from ladder.core.rung import NotApplicable, get_problem  # noqa: E402

ON_GPU = device.gpu_available()
gpu_only = pytest.mark.skipif(not ON_GPU, reason="needs a CUDA GPU; runs on the GPU machine")


def swept(rung) -> bool:
    """Whether the registry-parametrized tests run ``rung`` at every test size: not the
    ``torch.compile`` rows, which Inductor compiles once per shape (seconds each on a GPU);
    tests/test_libraries.py runs those at a few odd sizes."""
    return rung.name != "torch-compile"


def quick_unless(slow: bool) -> tuple:
    """The marks of a test case: ``slow`` for a case the fast path (``-m "not slow"``) leaves
    out. Only the simulator is slow: on a GPU every case is quick."""
    return (pytest.mark.slow,) if slow and not ON_GPU else ()


def run_poisoned(rung, inputs, shape, dtype, **kwargs):
    """``rung`` on device copies of ``inputs`` into an output of ``shape`` filled with NaN
    first (an element it never writes stays NaN), which it must return; read back to the host."""
    out = to_device(np.full(shape, np.nan, resolve(dtype)))
    returned = rung.launch(*[to_device(x) for x in inputs], out, **kwargs)
    assert returned is out
    return to_host(out)


def bad_input_cases(rungs, bad_inputs) -> list:
    """The bad-input test's cases: ``(rung, arrays, error, message)`` for each rung and each
    ``(name, arrays, error, message)`` that ``bad_inputs(rung)`` yields, id'd ``<key>-<name>``."""
    return [
        pytest.param(rung, arrays, error, message, id=f"{rung.key}-{name}")
        for rung in rungs
        for name, arrays, error, message in bad_inputs(rung)
    ]


def launch_refuses(rung, arrays, error, message) -> None:
    """``rung`` on device copies of ``arrays`` raises ``error``, its text matching ``message``."""
    with pytest.raises(error, match=message):
        rung.launch(*[to_device(np.ascontiguousarray(x)) for x in arrays])


@pytest.fixture(scope="module")
def quick_thread_switches():
    """The simulator's threads of a block meet at every barrier; letting Python switch threads
    every 0.2 ms instead of every 5 ms makes those meetings several times faster."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(2e-4)
    yield
    sys.setswitchinterval(before)


def twin_cases(rungs, problems, simulator_sizes):
    """The registry test's cases over a problem and its causal twin (``problems``, the causal
    one second): on a GPU every dtype at the problem's test sizes; in the simulator each rung
    once per problem at ``simulator_sizes`` (the twin without the first), alternating dtypes;
    the fast path keeps the plain problem's first size and the twin's sizes."""
    for rung in filter(swept, rungs):
        problem = get_problem(rung.problem)
        causal = rung.problem == problems[1]
        for dtype in rung.dtypes:
            if ON_GPU:
                sizes = problem.test_sizes(dtype)
            else:
                if dtype != rung.dtypes[-1 if causal else 0]:
                    continue
                sizes = simulator_sizes[1:] if causal else simulator_sizes
            for size in sizes:
                marks = quick_unless(not causal and size != simulator_sizes[0])
                yield pytest.param(rung, dtype, size, id=f"{rung.key}-{dtype}-{size}", marks=marks)


def check_against_reference(rung, dtype, size, run) -> None:
    """The registry test: ``run(rung, inputs, dtype)`` on the problem's inputs of ``size``
    (seeded by it) gives ``dtype``, every element written and finite, within the problem's
    tolerance of its float64 reference. A library that refuses the inputs (``NotApplicable``:
    an SDPA backend pinned to inputs it does not take) is skipped; a rung takes every input."""
    problem = get_problem(rung.problem)
    inputs = problem.make_inputs(size, dtype, seed=sum(size))
    try:
        out = run(rung, inputs, dtype)
    except NotApplicable as err:
        assert rung.reference, f"{rung.key} is not a library: it must take every input"
        pytest.skip(str(err))
    assert out.dtype == resolve(dtype)
    assert np.all(np.isfinite(out)), "an element was never written (still NaN) or overflowed"
    assert timing.relative_error(out, problem.reference(inputs)) <= problem.tolerance(dtype)


def pytest_collection_modifyitems(items: list) -> None:
    """Executing a notebook is slow too: ``-m "not slow"`` leaves the notebooks out.

    The cases run longest first: the notebooks, then the other slow cases, then the rest,
    each in the order collected. With ``pytest -n N --dist worksteal`` each worker starts on
    a run of the list (the first N-th, the second...) and one that runs dry takes half of
    another's queue: the list is dealt so that each run starts with its share of the longest
    (case 0, N, 2N... first, then 1, N+1...), and the last to finish are short."""
    for item in items:
        if item.get_closest_marker("notebook"):
            item.add_marker(pytest.mark.slow)
    items.sort(
        key=lambda i: (not i.get_closest_marker("notebook"), not i.get_closest_marker("slow"))
    )
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))  # set in xdist's workers
    items[:] = [item for start in range(workers) for item in items[start::workers]]


def clean_environment() -> dict[str, str]:
    """``os.environ`` as it was before ladder chose the backends (Numba's, Triton's) for this
    test session."""
    env = dict(os.environ)
    for name, chosen in (
        ("NUMBA_ENABLE_CUDASIM", USER_BACKEND),
        ("TRITON_INTERPRET", USER_TRITON_INTERPRET),
    ):
        env.pop(name, None)
        if chosen is not None:
            env[name] = chosen
    return env


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(12345)
