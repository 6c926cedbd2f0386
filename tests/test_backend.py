"""The backend is right in any import order, or the import says what to do.

Numba reads NUMBA_ENABLE_CUDASIM once, when numba.cuda is first imported. Each case runs in a
fresh interpreter started in the environment the test session started in (without the
variable, unless the person running the tests set it).
"""

import subprocess
import sys

import pytest
from conftest import ON_GPU, USER_BACKEND, clean_environment

# Which backend numba.cuda really has: the simulator's to_device lives in numba.cuda.simulator.
SAYS = "\nprint('simulator' in cuda.to_device.__module__, ladder.core.device.simulator())"
LADDER_FIRST = "import ladder\nfrom numba import cuda" + SAYS
NUMBA_FIRST = "from numba import cuda\nimport ladder" + SAYS
# numba's own config (which numba.cuda's is) reads the environment when numba is imported
NUMBA_CORE_FIRST = [
    "import numba",
    "from numba.core.errors import NumbaPerformanceWarning",  # what notebook 02 imports first
]


def _python(code: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code],
        env={**clean_environment(), **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("before", ["", *NUMBA_CORE_FIRST])
def test_ladder_first_chooses_the_backend(before):
    """ladder before numba.cuda, whether or not numba itself came earlier."""
    done = _python(f"{before}\n{LADDER_FIRST}")
    assert done.returncode == 0, done.stderr
    expected = (not ON_GPU) if USER_BACKEND is None else USER_BACKEND == "1"
    assert done.stdout.split()[-2:] == [str(expected)] * 2


def test_numba_first_works_or_says_what_to_do():
    done = _python(NUMBA_FIRST)
    if ON_GPU or USER_BACKEND is not None:  # Numba's own choice is right: nothing to say
        assert done.returncode == 0, done.stderr
        return
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("ladder.core.device.BackendOrderError: numba.cuda was imported")
    assert "import ladder before numba.cuda" in last.lower()
    assert "NUMBA_ENABLE_CUDASIM=1" in last


def test_a_users_own_choice_is_obeyed_in_any_order():
    done = _python(NUMBA_FIRST, NUMBA_ENABLE_CUDASIM="1")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[-2:] == ["True", "True"]
