"""GPU or simulator: which backend runs the rungs, the facts of the device, and array intake.

The backend is chosen once, when ``ladder`` is imported: a real GPU when the CUDA driver
reports one, otherwise Numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``), which runs the
Numba kernels on the CPU with correct answers and meaningless times. Numba reads the variable
into its config when ``numba`` is imported (ladder has it read again) and picks the backend
when ``numba.cuda`` is imported, for good: ``ladder`` must come before ``numba.cuda``, and says
so if it did not. A user who sets ``NUMBA_ENABLE_CUDASIM`` themselves is obeyed.
"""

from __future__ import annotations

import ctypes
import functools
import importlib.util
import os
import platform
import sys
from dataclasses import asdict, dataclass
from importlib import metadata
from typing import Any

import numpy as np

SIMULATOR_NOTE = "CUDA simulator: answers are checked, but times are CPU times, not GPU times"


def _driver_gpu_count() -> int:
    """Ask the CUDA driver (libcuda) how many GPUs it sees, without importing numba.cuda."""
    names = ["nvcuda.dll"] if sys.platform == "win32" else ["libcuda.so.1", "libcuda.so"]
    for name in names:
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        count = ctypes.c_int(0)
        if lib.cuInit(0) != 0 or lib.cuDeviceGetCount(ctypes.byref(count)) != 0:
            return 0
        return count.value
    return 0


class BackendOrderError(RuntimeError):
    """``numba.cuda`` was imported before ``ladder`` on a machine without a GPU."""


IMPORT_ORDER_FIX = (
    "numba.cuda was imported before ladder on a machine without a CUDA GPU, so Numba chose "
    "its real CUDA backend and every kernel launch would fail. Import ladder before numba.cuda "
    "(`import ladder` first), or set NUMBA_ENABLE_CUDASIM=1 in the environment before Python "
    "starts to use Numba's CUDA simulator."
)


def choose_backend() -> None:
    """Pick the simulator when no GPU is present, unless the user already decided.

    Numba reads ``NUMBA_ENABLE_CUDASIM`` once, when ``numba.cuda`` is first imported, and
    cannot switch afterwards. So when ``numba.cuda`` came first, on a machine without a GPU,
    this raises ``BackendOrderError`` with the fix instead of letting the first launch fail.
    """
    if "NUMBA_ENABLE_CUDASIM" in os.environ:
        _interpret_triton()
        return
    if "numba.cuda" in sys.modules:  # already imported: its choice stands, if it can work
        from numba.cuda.core import config

        if not config.ENABLE_CUDASIM and _driver_gpu_count() == 0:
            raise BackendOrderError(IMPORT_ORDER_FIX)
        return
    if _driver_gpu_count() == 0:
        os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
        config = sys.modules.get("numba.core.config")
        if config is not None:  # numba read the environment already (``import numba`` does)
            config.reload_config()
        _interpret_triton()


def _interpret_triton() -> None:
    """In the simulator, Triton's interpreter for the Triton peers (``TRITON_INTERPRET=1``,
    unless the user set it): now, not at a peer's first call, because ``triton.language``
    decorates its own library functions (``tl.sum``'s combine function, say) when it is first
    imported, and PyTorch imports it without being asked (``torch.profiler`` does); compiled
    for a GPU there, they cannot be called from an interpreted kernel."""
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        os.environ.setdefault("TRITON_INTERPRET", "1")


def simulator() -> bool:
    """True when Numba kernels run in the CUDA simulator."""
    from numba.cuda.core import config

    return bool(config.ENABLE_CUDASIM)


def gpu_available() -> bool:
    """True when a real CUDA GPU runs the kernels."""
    if simulator():
        return False
    from numba import cuda

    return bool(cuda.is_available())


def cupy_available() -> bool:
    """True when CuPy is installed and a real GPU is there for it."""
    if not gpu_available():
        return False
    try:
        import cupy  # noqa: F401
    except ImportError:
        return False
    return True


def torch_cuda_available() -> bool:
    """True when PyTorch is installed with CUDA and sees the GPU."""
    if not gpu_available():
        return False
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def triton_reason() -> str | None:
    """Why a Triton kernel cannot run here, or None when it can: on a GPU it needs Triton and
    PyTorch with CUDA (Triton launches on PyTorch's tensors and streams); in the simulator it
    runs in Triton's interpreter (TRITON_INTERPRET=1), which needs Triton and PyTorch (CPU is
    enough)."""
    if importlib.util.find_spec("triton") is None:
        return "needs Triton: pip install 'numba-ladder[triton]'"
    if simulator():
        if importlib.util.find_spec("torch") is None:
            return "needs PyTorch (a CPU build is enough) for Triton's interpreter"
        return None
    if not torch_cuda_available():
        return "needs PyTorch with CUDA: pip install 'numba-ladder[triton]'"
    return None


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def library_versions() -> dict[str, str | None]:
    """Versions of everything that shapes a measurement."""
    cupy = _version("cupy-cuda13x") or _version("cupy-cuda12x") or _version("cupy")
    return {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "numba": _version("numba"),
        "numba-cuda": _version("numba-cuda"),
        "cupy": cupy,
        "torch": _version("torch"),
        "cudnn": _cudnn_version(),
        "triton": _version("triton"),
        "ladder": _version("numba-ladder"),
    }


def _cudnn_version() -> str | None:
    """cuDNN's version as PyTorch loaded it, when PyTorch is in use in this process."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    try:
        found = torch.backends.cudnn.version()
    except Exception:  # a CPU-only PyTorch, or none of its CUDA libraries: no cuDNN
        return None
    return str(found) if found else None


@dataclass(frozen=True)
class DeviceFacts:
    """What a results file needs to say about the machine it was measured on."""

    name: str
    simulator: bool
    compute_capability: tuple[int, int] | None
    sm_count: int | None
    l2_bytes: int | None
    memory_bytes: int | None
    driver: str | None
    runtime: str | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _driver_version_string() -> str | None:
    try:
        out = os.popen(
            "nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null"
        ).read()
    except OSError:
        return None
    return out.strip().splitlines()[0] if out.strip() else None


@functools.cache
def facts() -> DeviceFacts:
    """Facts of the current device (or of the simulator), read once per process."""
    if not gpu_available():
        return DeviceFacts("CUDA simulator (CPU)", True, None, None, None, None, None, None)
    from numba import cuda

    dev = cuda.get_current_device()
    ctx = cuda.current_context()
    free, total = ctx.get_memory_info()
    name = dev.name.decode() if isinstance(dev.name, bytes) else str(dev.name)
    l2 = int(dev.L2_CACHE_SIZE)
    driver = _driver_version_string()
    runtime = None
    try:
        runtime = ".".join(str(v) for v in cuda.runtime.get_version())
    except Exception:  # the runtime version is a nicety, never a reason to fail
        runtime = None
    del free
    return DeviceFacts(
        name=name,
        simulator=False,
        compute_capability=tuple(dev.compute_capability),
        sm_count=int(dev.MULTIPROCESSOR_COUNT),
        l2_bytes=l2,
        memory_bytes=int(total),
        driver=driver,
        runtime=runtime,
    )


def gpu_slug(name: str | None = None) -> str:
    """A file-name-safe name for the GPU: 'NVIDIA H100 80GB HBM3' -> 'nvidia-h100-80gb-hbm3'."""
    name = name or facts().name
    keep = [c.lower() if c.isalnum() else "-" for c in name]
    return "-".join(part for part in "".join(keep).split("-") if part)


def device_array(arg: Any, name: str) -> Any:
    """Return ``arg`` as a Numba device array without copying, or raise a clear error.

    Accepts anything with ``__cuda_array_interface__`` (Numba, CuPy, PyTorch CUDA tensors) or
    ``__dlpack__`` (through CuPy). A host array is refused: silently copying it would hide a
    transfer from the timings.
    """
    from numba import cuda

    if simulator():
        from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

        if isinstance(arg, FakeCUDAArray):
            return arg
    else:
        from numba.cuda.cudadrv.devicearray import DeviceNDArray

        if isinstance(arg, DeviceNDArray):
            return arg
        if cuda.is_cuda_array(arg):
            return cuda.as_cuda_array(arg, sync=False)
    if not simulator() and hasattr(arg, "__dlpack__") and not isinstance(arg, np.ndarray):
        try:
            import cupy

            return cuda.as_cuda_array(cupy.from_dlpack(arg), sync=False)
        except (ImportError, TypeError, ValueError, RuntimeError) as err:
            raise TypeError(
                f"{name}: could not take this __dlpack__ array onto the GPU ({err}); pass a "
                "Numba, CuPy or PyTorch CUDA array"
            ) from err
    if isinstance(arg, np.ndarray):
        raise TypeError(
            f"{name} is a host array (numpy.ndarray); copy it to the GPU first, "
            f"e.g. numba.cuda.to_device({name})"
        )
    raise TypeError(
        f"{name} must be a device array (Numba, CuPy or PyTorch CUDA), got {type(arg).__name__}"
    )


def is_c_contiguous(arr: Any) -> bool:
    """C-contiguity for Numba device arrays and simulator arrays alike."""
    flags = getattr(arr, "flags", None)
    if flags is not None:
        return bool(flags["C_CONTIGUOUS"])
    return bool(arr.is_c_contiguous())
