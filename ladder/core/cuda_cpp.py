"""CUDA C++ rungs: find the headers, compile ``.cu`` files with NVRTC, load them through CuPy.

Numba has no tensor-core API, so the tensor-core rungs are CUDA C++ in ``.cu`` files beside
their Python loader. One path serves the GPU run, the test suite and ``ladder check``:

- ``include_dirs()`` finds CUDA headers that hold both ``mma.h`` and ``crt/mma.h``:
  ``$CUDA_PATH``/``$CUDA_HOME``, then the headers pip wheels install (``nvidia/cu13/include``
  needs the ``nvidia-cuda-crt`` wheel for ``crt/``, which the ``cuda13`` extra brings), then
  the active conda environment's (``$CONDA_PREFIX``), then ``/usr/local/cuda``. When none is
  complete the error lists every place it looked and the three ways to provide them.
- ``compile_source()`` runs NVRTC (from ``cuda.bindings``, a dependency of numba-cuda) for one
  architecture, with no GPU needed, and caches the cubin on disk by a hash of the source, the
  options, the library's headers and the NVRTC version.
- ``LIBRARY``, ``ladder/core/cuda``, is the one library of PTX wrappers (mbarriers, TMA, wgmma,
  mma.sync, ldmatrix, cp.async, fast division) that every tensor-core rung includes as
  ``#include "ladder/core/cuda/<header>.cuh"``: the folder above the package is on NVRTC's
  include path.
- ``CudaSource.kernel()`` compiles for the GPU at hand and loads the cubin with CuPy
  (``cupy.RawModule(path=...)``), once per process.

Kernels are launched with raw device pointers (``pointer()``), so the launch costs what a CuPy
``RawKernel`` launch costs and no array is wrapped on the timed path.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import sysconfig
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

CACHE_DIR = Path(os.environ.get("LADDER_CACHE", Path.home() / ".cache" / "ladder")) / "cubin"
LIBRARY = Path(__file__).with_name("cuda")  # the PTX wrappers: ladder/core/cuda/*.cuh
INCLUDE_ROOT = LIBRARY.parents[2]  # holds ladder/: `#include "ladder/core/cuda/..."` finds them
HEADER_FIXES = (
    "pip install 'numba-ladder[cuda13]' (or [cuda12]): the CUDA wheels with their headers",
    "conda install -c conda-forge cuda-cudart-dev cuda-crt: into the active conda environment "
    "(environment.yml lists them)",
    "set CUDA_PATH to a CUDA toolkit: the folder whose include/ holds mma.h and crt/mma.h",
)


class CudaBuildError(RuntimeError):
    """NVRTC rejected a source; the message carries its log."""


def _places() -> list[tuple[Path, ...]]:
    """Where headers may be, in order, each place one or more folders that hold them together:
    the toolkit the user named, then the pip wheels, the conda environment and the system's,
    the order in which cuda.bindings looks for NVRTC, so that the headers come from the CUDA
    that compiles them."""
    places: list[tuple[Path, ...]] = []
    for var in ("CUDA_PATH", "CUDA_HOME"):
        if os.environ.get(var):
            places.append((Path(os.environ[var]) / "include",))
    for site in dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]):
        nvidia = Path(site) / "nvidia"
        places += [(nvidia / "cu13" / "include",), (nvidia / "cu12" / "include",)]
        # the CUDA 12 wheels split them: mma.h in nvidia-cuda-runtime-cu12, crt/ in -nvcc-cu12
        places.append((nvidia / "cuda_runtime" / "include", nvidia / "cuda_nvcc" / "include"))
    if os.environ.get("CONDA_PREFIX"):
        # conda-forge's cuda-cudart-dev and cuda-crt put them under targets/<platform>/include;
        # other packagings under the prefix's include/
        prefix = Path(os.environ["CONDA_PREFIX"])
        places.append((*sorted(prefix.glob("targets/*/include")), prefix / "include"))
    places.append((Path("/usr/local/cuda/include"),))
    return list(dict.fromkeys(places))


def _holds(d: Path) -> str:
    if not d.is_dir():
        return "no such folder"
    have = [h for h in ("mma.h", "crt/mma.h") if (d / h).is_file()]
    return f"has {' and '.join(have)}" if have else "neither"


@functools.cache
def include_dirs() -> tuple[str, ...]:
    """Include directories for NVRTC that provide mma.h and crt/mma.h (and cuda_fp16.h): those
    of the first place in ``_places()`` that has both, never a mix of two CUDA installs."""
    places = _places()
    for place in places:
        top = next((d for d in place if (d / "mma.h").is_file()), None)
        crt = next((d for d in place if (d / "crt" / "mma.h").is_file()), None)
        if top is not None and crt is not None:
            return tuple(dict.fromkeys([str(top), str(crt)]))
    lines = ["CUDA headers with mma.h and crt/mma.h were not found. Looked in:"]
    lines += [f"  {d} ({_holds(d)})" for place in places for d in place]
    lines += ["Any one of these provides them:", *(f"  {fix}" for fix in HEADER_FIXES)]
    raise CudaBuildError("\n".join(lines))


def _nvrtc() -> Any:
    try:
        from cuda.bindings import nvrtc
    except ImportError as err:  # pragma: no cover - numba-cuda[cu12/cu13] brings it
        raise CudaBuildError(
            "NVRTC bindings (cuda.bindings) are missing: pip install 'numba-ladder[cuda13]'"
        ) from err
    return nvrtc


def supported_archs() -> list[str]:
    """The architectures NVRTC here builds for (``sm_75``, ...); empty where NVRTC is missing.
    Numba's kernels go through NVVM and nvJitLink of the same CUDA release, which build the
    same set."""
    try:
        return [f"sm_{n}" for n in _check(_nvrtc().nvrtcGetSupportedArchs(), "list archs")]
    except (CudaBuildError, RuntimeError, OSError):
        return []


def _check(result: tuple[Any, ...], what: str) -> Any:
    status, *rest = result
    if int(status) != 0:
        raise CudaBuildError(f"{what} failed: {status}")
    return rest[0] if len(rest) == 1 else rest


def nvrtc_version() -> tuple[int, int]:
    nvrtc = _nvrtc()
    major, minor = _check(nvrtc.nvrtcVersion(), "nvrtcVersion")
    return int(major), int(minor)


@dataclass(frozen=True)
class Build:
    """A compiled source: the cubin, NVRTC's log and where the cubin is cached."""

    cubin: bytes
    log: str
    path: Path


def _library_text() -> str:
    """The library's headers, each under its name: a cubin cached before one of them changed is
    not reused (NVRTC reads them from the include path, not from the source that is hashed)."""
    return "\0".join(f"{p.name}\0{p.read_text()}" for p in sorted(LIBRARY.glob("*.cuh")))


def compile_source(
    source: str, name: str, arch: str, options: Iterable[str] = (), cache: bool = True
) -> Build:
    """Compile CUDA C++ ``source`` for ``arch`` (e.g. 'sm_90a') to a cubin with NVRTC."""
    nvrtc = _nvrtc()
    opts = [
        f"--gpu-architecture={arch}",
        "--std=c++17",
        "--use_fast_math",
        "--extra-device-vectorization",
        "-lineinfo",
        *[f"-I{d}" for d in include_dirs()],
        f"-I{INCLUDE_ROOT}",
        *options,
    ]
    key = hashlib.sha256(
        "\0".join([source, name, *opts, _library_text(), repr(nvrtc_version())]).encode()
    ).hexdigest()[:24]
    path = CACHE_DIR / f"{Path(name).stem}-{arch}-{key}.cubin"
    if cache and path.is_file():
        return Build(path.read_bytes(), "", path)
    prog = _check(nvrtc.nvrtcCreateProgram(source.encode(), name.encode(), 0, [], []), "create")
    try:
        encoded = [o.encode() for o in opts]
        status = nvrtc.nvrtcCompileProgram(prog, len(encoded), encoded)[0]
        # bytearray, not b" " * size: NVRTC writes into the buffer, and a one-byte bytes
        # object is CPython's shared b" ", which every later encode of " " would return
        size = _check(nvrtc.nvrtcGetProgramLogSize(prog), "log size")
        buf = bytearray(size)
        nvrtc.nvrtcGetProgramLog(prog, buf)
        log = buf.decode(errors="replace").rstrip("\x00").strip()
        if int(status) != 0:
            raise CudaBuildError(f"NVRTC could not compile {name} for {arch}:\n{log}")
        size = _check(nvrtc.nvrtcGetCUBINSize(prog), "cubin size")
        out = bytearray(size)
        _check((nvrtc.nvrtcGetCUBIN(prog, out)[0], None), "cubin")
        cubin = bytes(out)
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
    if cache:
        CACHE_DIR.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(cubin)
        tmp.replace(path)
    return Build(cubin, log, path)


def device_arch() -> tuple[int, int]:
    """The compute capability of the current GPU."""
    import cupy

    return tuple(int(x) for x in cupy.cuda.Device().compute_capability)  # type: ignore[return-value]


@dataclass(frozen=True)
class CudaSource:
    """A ``.cu`` file beside its loader, the architectures it targets, and its kernels.

    ``archs`` are the NVRTC targets checked without a GPU (tests, ``ladder check``). On a GPU
    the source is built for the device's own architecture, with the ``a`` suffix when
    ``arch_specific`` (wgmma and setmaxnreg exist only on sm_90a).
    """

    path: Path
    archs: tuple[str, ...] = ("sm_80", "sm_90")
    arch_specific: bool = False
    options: tuple[str, ...] = ()
    _modules: dict[Any, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def name(self) -> str:
        return self.path.name

    def text(self) -> str:
        """The source, with ``#include "x.cu"`` of a file beside it inlined (NVRTC compiles one
        string and does not look beside the file for quoted includes)."""
        return inline_includes(self.path)

    def build(self, arch: str, cache: bool = True) -> Build:
        return compile_source(self.text(), self.name, arch, self.options, cache=cache)

    def device_target(self) -> str:
        major, minor = device_arch()
        return f"sm_{major}{minor}" + ("a" if self.arch_specific else "")

    def kernel(self, name: str) -> Any:
        """The CuPy ``RawKernel`` ``name`` (an ``extern "C"`` function), built for this GPU."""
        import cupy

        target = self.device_target()
        found = self._modules.get((target, name))
        if found is None:
            module = self._modules.get(target)
            if module is None:
                module = cupy.RawModule(path=str(self.build(target).path))
                self._modules[target] = module
            found = self._modules[(target, name)] = module.get_function(name)
        return found


_LOCAL_INCLUDE = re.compile(r'^#include "([\w./]+\.cuh?)"[^\n]*$', re.MULTILINE)


def inline_includes(path: Path) -> str:
    """``path``'s text with each ``#include "name.cu"`` (or ``.cuh``, or ``dir/name.cuh``) of a
    file beside ``path`` replaced by that file's text (recursively): other headers, the library's
    ``"ladder/core/cuda/..."`` among them, are left to NVRTC's include path. Headers guard
    themselves against being inlined twice."""
    text = path.read_text()

    def inline(match: re.Match[str]) -> str:
        found = path.parent / match.group(1)
        return inline_includes(found) if found.is_file() else match.group(0)

    return _LOCAL_INCLUDE.sub(inline, text)


SOURCES: dict[str, CudaSource] = {}


def source(
    module_file: str,
    name: str,
    archs: Iterable[str] = ("sm_80", "sm_90"),
    arch_specific: bool = False,
    options: Iterable[str] = (),
) -> CudaSource:
    """Register the ``.cu`` file ``name`` beside ``module_file`` (a loader's ``__file__``)."""
    src = CudaSource(Path(module_file).with_name(name), tuple(archs), arch_specific, tuple(options))
    if not src.path.is_file():
        raise FileNotFoundError(f"CUDA source {src.path} is missing")
    SOURCES[str(src.path)] = src
    return src


def blocks_per_sm(kernel: Any, smem: int, device: Any, threads: int) -> int:
    """Resident blocks per SM for a CuPy kernel with ``smem`` bytes of dynamic shared memory
    and ``threads`` per block (the driver's answer, or the register and shared-memory
    arithmetic when the driver call is not available)."""
    try:
        from cupy_backends.cuda.api import driver

        found = driver.occupancyMaxActiveBlocksPerMultiprocessor(kernel.kernel.ptr, threads, smem)
        if found > 0:
            return int(found)
    except Exception:  # fall back to the arithmetic below
        pass
    attrs = device.attributes
    regs = -(-int(kernel.num_regs) // 8) * 8 * threads
    by_regs = attrs["MaxRegistersPerMultiprocessor"] // max(regs, 1)
    by_smem = attrs["MaxSharedMemoryPerMultiprocessor"] // (smem + 1024)
    return max(1, min(by_regs, by_smem, attrs["MaxThreadsPerMultiProcessor"] // threads))


def pointer(arr: Any) -> np.uint64:
    """The device address of a CUDA array (Numba, CuPy, PyTorch), as a kernel argument."""
    return np.uint64(arr.__cuda_array_interface__["data"][0])
