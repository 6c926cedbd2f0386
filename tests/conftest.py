"""Shared fixtures. Importing ladder first chooses GPU or simulator for the whole session."""

import os

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
from ladder.core import device  # noqa: E402

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
