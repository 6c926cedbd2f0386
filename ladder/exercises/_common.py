"""What the exercises share: lane models of memory accesses, the compile report of one small
kernel, and running a learner's kernel (Numba's simulator without a GPU)."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from collections.abc import Iterable
from typing import Any

import numpy as np

BANKS = 32  # shared memory: 32 banks, each 4 bytes wide
WORD = 4
SECTOR = 32  # global memory moves in 32-byte sectors


def sectors(byte_addresses: Iterable[int], access_bytes: int = 4) -> int:
    """32-byte sectors one warp-wide load touches (each lane reads ``access_bytes``)."""
    touched = set()
    for a in byte_addresses:
        touched.update(range(a // SECTOR, (a + access_bytes - 1) // SECTOR + 1))
    return len(touched)


def bank_ways(byte_addresses: Iterable[int], access_bytes: int = 4) -> int:
    """The worst bank conflict of one warp-wide shared-memory access: the most distinct 4-byte
    words any bank must serve in one phase (1: conflict-free). A warp's request is served in
    phases of 128 bytes: 32 lanes of 4 bytes, 16 of 8, or 8 lanes of 16 bytes (ldmatrix rows).
    Lanes reading the same word share it (broadcast)."""
    addresses = list(byte_addresses)
    per_phase = 128 // access_bytes
    worst = 0
    for start in range(0, len(addresses), per_phase):
        words: dict[int, set[int]] = {}
        for a in addresses[start : start + per_phase]:
            for w in range(a // WORD, (a + access_bytes) // WORD):
                words.setdefault(w % BANKS, set()).add(w)
        worst = max(worst, max(len(v) for v in words.values()))
    return worst


def close(answer: Any, right: float, rel: float = 0.03) -> bool:
    try:
        return abs(float(answer) - right) <= rel * abs(right)
    except (TypeError, ValueError):
        return False


def same_word(answer: Any, right: str) -> bool:
    """Whether ``answer`` is the word ``right``, whatever its case and surrounding spaces."""
    return isinstance(answer, str) and answer.strip().casefold() == right.casefold()


def as_dict(answer: Any, keys: Iterable[str], exercise: str) -> dict[str, Any]:
    """The answer as a dict with ``keys``, or AssertionError saying what shape it must have."""
    keys = list(keys)
    require(isinstance(answer, dict), f"{exercise}: answer with a dict with the keys {keys}")
    missing = [k for k in keys if k not in answer]
    require(not missing, f"{exercise}: the answer lacks {missing}; give a dict with keys {keys}")
    return answer


_CHILD = """
import importlib, json, re, sys
import ladder
from numba import cuda
from ladder.core.check import Builds
module = importlib.import_module(sys.argv[1])
builds, found = Builds(), {}
try:
    for name, signature in module.compile_signatures().items():
        kernel = cuda.jit(getattr(module, name))
        figures = builds.numba(kernel, signature, "sm_80")  # as ladder check builds it
        figures["f64"] = ".f64" in builds.numba_ptx(kernel, signature, "sm_80")
        found[name] = figures
except Exception as err:
    text = f"{type(err).__name__}: {err}"
    library = re.search(r"nvrtc|nvvm|libdevice|nvjitlink", text, re.IGNORECASE)
    if library is None or not re.search(r"not ?found|not available|find|open", text, re.I):
        raise
    print(json.dumps({"missing": library.group().lower(), "why": text.splitlines()[0]}))
    sys.exit(3)
print(json.dumps(found))
"""
# what each library a missing one names is called where NVIDIA's wheels ship it
LIBRARIES = {
    "nvrtc": "NVRTC",
    "nvvm": "NVVM",
    "libdevice": "NVVM's libdevice",
    "nvjitlink": "nvJitLink",
}


class MissingCompiler(AssertionError):
    """An exercise that compiles kernels cannot run here: a CUDA compiler library is missing.
    An AssertionError, so that a notebook's ``exercise`` cell prints its one line as it prints
    a hint, instead of a traceback."""


@functools.cache
def compile_report(module: str) -> dict[str, dict[str, Any]]:
    """ptxas's figures (registers, stack_bytes, spill_stores, spill_loads) for sm_80 of each
    kernel that ``module.compile_signatures()`` names, as ``ladder check`` reads them; no GPU
    needed. Numba compiles only outside its simulator, so this runs in a child process with
    ``NUMBA_ENABLE_CUDASIM=0`` (a few seconds, once per module). ``MissingCompiler`` (one
    line) when NVRTC, NVVM or nvJitLink is not installed (the ``cuda13``/``cuda12`` extras)."""
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0", LADDER_CHECK_CHILD="1")
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, module], env=env, capture_output=True, text=True
    )
    if done.returncode == 3:  # a compiler library is missing: say which, and what brings it
        missing = json.loads(done.stdout.strip().splitlines()[-1])
        raise MissingCompiler(
            f"this check compiles its kernels with {LIBRARIES[missing['missing']]}, which is not "
            f"installed here ({missing['why'][:120]}); a plain install runs the simulator only: "
            "pip install 'numba-ladder[cuda13]' (or [cuda12]) brings the compiler, no GPU needed"
        )
    if done.returncode != 0:
        raise RuntimeError(f"compiling {module}'s kernels failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def run_kernel(kernel: Any, grid: tuple[int, ...], block: tuple[int, ...], *arrays: np.ndarray):
    """Launch a learner's ``@cuda.jit`` kernel on host arrays (copied to the device, or to the
    simulator's); returns the last array, the output, copied back."""
    from numba import cuda

    require(hasattr(kernel, "py_func"), "pass the @cuda.jit kernel itself, not a plain function")
    on_device = [_guarded(cuda, a) for a in arrays]
    try:
        kernel[grid, block](*on_device)
        cuda.synchronize()
    except Exception as err:
        raise AssertionError(
            f"your kernel raised {type(err).__name__}: {err}. An index past an array's end "
            "(an edge tile not masked) raises IndexError in the simulator"
        ) from err
    return on_device[-1].copy_to_host()


def _guarded(cuda: Any, a: np.ndarray) -> Any:
    """``a`` on the device followed by as many NaNs (floats): a read past its end, which a GPU
    does not check, finds NaN instead of whatever memory lies there (zeros, often, which could
    let a kernel without edge masks pass). The simulator raises IndexError there anyway."""
    if a.dtype.kind != "f":
        return cuda.to_device(a)
    flat = np.full(2 * a.size + 1024, np.nan, a.dtype)
    flat[: a.size] = a.ravel()
    return cuda.to_device(flat)[: a.size].reshape(a.shape)


def require(condition: bool, message: str) -> None:
    """An exercise's check: AssertionError with a hint when ``condition`` is false (not an
    ``assert``, which ``python -O`` would remove)."""
    if not condition:
        raise AssertionError(message)
