"""``ladder check``: compile every rung without a GPU and read the compiler's report.

For each rung and each of its dtypes, for each GPU generation of ``rung.GENERATIONS`` (sm_75,
sm_80, sm_86, sm_89, sm_90) the rung can run on:

- Numba rungs: every ``@cuda.jit`` kernel defined at the top level of the rung's module (or
  listed in its ``KERNELS``) is compiled to PTX as ``numba.cuda.compile_ptx`` does, for the
  argument types of the problem's inputs and output (or those its ``KERNEL_ARGS`` gives), then
  assembled by nvJitLink with ``-verbose``;
- CUDA C++ rungs: their ``.cu`` file is compiled by NVRTC for each architecture, with
  ``--ptxas-options=-v`` (``sm_90a`` for a source with architecture-specific instructions).

An architecture outside a rung's ``min_cc``/``max_cc`` is not compiled: its report says "not
for this GPU" and why, in the words of ``Rung.cc_reason`` (which ``ladder list --gpus`` shows).

From ptxas's report it takes registers per thread, the stack frame (local memory per thread:
register arrays that did not fit, and spills) and the spill stores and loads; static shared
memory comes from ptxas for C++ and from the ``.shared`` declarations of Numba's PTX. A rung
that does not compile is reported with the compiler's message and makes the command fail.

So that five architectures stay cheap, Numba lowers a kernel to LLVM IR once and only NVVM
and ptxas run per architecture (see ``SAME_LOWERING_FROM``), and a kernel that two rungs
share (attention and attention-causal launch the same kernels; attention rungs 5 and 6 the
same ``.cu``) is built once per architecture. Groups of rungs that share no build compile in
parallel processes (``--jobs``). The figures of each build are kept on disk (``cache_dir()``)
under a fingerprint of every file of the ladder package and of the compilers' versions
(``fingerprint``): a change to any of them builds everything again; a failed build is never
kept. Only the package's own kernels are kept: a user's rung is built each time.

Numba compiles kernels only outside its simulator, so without a GPU ``ladder check`` runs
itself in a child process with ``NUMBA_ENABLE_CUDASIM=0``; ``compile_ptx`` needs no GPU.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

import ladder
from ladder.core import cuda_cpp
from ladder.core.rung import GENERATIONS, Rung, arch_cc, get_problem

ARCHS = tuple(g.arch for g in GENERATIONS)

# numba-cuda lowers a kernel to LLVM IR the same way for every compute capability from 7.5 on
# (below it, it picks other code for tanh under fastmath and for float64 atomic adds), so the
# architectures at or above it share one lowering and only NVVM and ptxas run per architecture;
# tests/test_tools.py checks that the PTX is compile_ptx's for each.
SAME_LOWERING_FROM = (7, 5)

KEPT_FINGERPRINTS = 4  # the cache keeps the builds of this many recent fingerprints
PACKAGE = Path(ladder.__file__).resolve().parent
# what a build depends on besides the package's files (and Numba's settings, NUMBA_*)
COMPILERS = ("numpy", "numba", "numba-cuda", "llvmlite", "cuda-bindings", "cuda-python")


@dataclass
class KernelReport:
    """The compiler's figures for one kernel of one rung, for one dtype and architecture."""

    problem: str
    rung: str
    number: int
    kernel: str
    dtype: str
    arch: str
    registers: int | None = None
    smem_bytes: int | None = None  # static shared memory per block (dynamic is set at launch)
    stack_bytes: int | None = None  # local memory per thread
    spill_stores: int | None = None
    spill_loads: int | None = None
    error: str | None = None
    skipped: str | None = None  # "not for this GPU: <why>": outside the rung's range, not built

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


_PTXAS_FUNC = re.compile(r"Function properties for '?([\w$.]+)'?\s*$")
_STACK = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers(?:.*?(\d+) bytes smem)?")


def parse_ptxas(log: str) -> dict[str, dict[str, int]]:
    """Per-function figures from ``ptxas -v`` output (also as nvJitLink relays it)."""
    found: dict[str, dict[str, int]] = {}
    current: str | None = None
    for line in log.splitlines():
        if line.startswith("info"):  # nvJitLink's own summary repeats the figures; skip it
            current = None
            continue
        match = _PTXAS_FUNC.search(line)
        if match:
            current = match.group(1)
            found.setdefault(current, {})
            continue
        if current is None:
            continue
        match = _STACK.search(line)
        if match:
            stack, stores, loads = (int(x) for x in match.groups())
            found[current].update(stack_bytes=stack, spill_stores=stores, spill_loads=loads)
        match = _USED.search(line)
        if match:
            found[current]["registers"] = int(match.group(1))
            found[current]["smem_bytes"] = int(match.group(2) or 0)
    return found


_SHARED_DECL = re.compile(
    r"^\s*(?:\.visible\s+|\.weak\s+)?\.shared\s+(?:\.align\s+\d+\s+)?\.\w+\s+[\w$]+\[(\d+)\]", re.M
)


def ptx_static_smem(ptx: str) -> int:
    """Bytes of statically sized ``.shared`` arrays declared in a PTX module (one kernel)."""
    return sum(int(n) for n in _SHARED_DECL.findall(ptx))


def _link_log(ptx: str, arch: str) -> str:
    """nvJitLink's info log for assembling ``ptx`` for ``arch``."""
    from cuda.bindings import nvjitlink

    options = [f"-arch={arch}", "-verbose", "-Xptxas=-v"]
    handle = nvjitlink.create(len(options), options)
    try:
        data = ptx.encode()
        nvjitlink.add_data(handle, nvjitlink.InputType.PTX, data, len(data), "kernel.ptx")
        try:
            nvjitlink.complete(handle)
        except Exception as err:
            log = bytearray(nvjitlink.get_error_log_size(handle))
            nvjitlink.get_error_log(handle, log)
            message = log.decode(errors="replace").strip("\x00 \n")
            raise RuntimeError(f"nvJitLink failed for {arch}: {message or err}") from err
        info = bytearray(nvjitlink.get_info_log_size(handle))
        nvjitlink.get_info_log(handle, info)
    finally:
        nvjitlink.destroy(handle)
    return info.decode(errors="replace")


def _lacking(found: dict[str, dict[str, int]]) -> bool:
    """Whether a ptxas log gave no figures, or a kernel without its registers: what a build
    served from CUDA's compute cache logs (``_nvjitlink_report``, ``_nvrtc_report``)."""
    return not found or any("registers" not in f for f in found.values())


def _nvjitlink_report(ptx: str, arch: str) -> dict[str, dict[str, int]]:
    """Assemble PTX for ``arch`` with nvJitLink and return ptxas's per-function figures.

    Where a GPU driver is installed, nvJitLink 13.0 keeps what it assembled in CUDA's
    compute cache (``~/.nv/ComputeCache``); a PTX it has seen before is not assembled again,
    and its log then holds only nvJitLink's own summary, which lacks the spills. So when the
    log has no ptxas figures, the PTX is assembled again with a comment that no earlier PTX
    had (``CUDA_CACHE_DISABLE`` is read once, when the driver loads, too late to set here)."""
    found = parse_ptxas(_link_log(ptx, arch))
    if _lacking(found):
        fresh = f"{ptx}\n// ladder check {os.getpid()} {time.time_ns()}\n"
        found = parse_ptxas(_link_log(fresh, arch))
    return found


NONCE_KERNEL = "ladder_check_nonce"  # the empty kernel ``_nvrtc_report`` may add: not reported


def _nvrtc_report(
    source: cuda_cpp.CudaSource, arch: str, options: list[str]
) -> dict[str, dict[str, int]]:
    """Build a CUDA C++ source for ``arch`` with NVRTC and return ptxas's per-kernel figures.

    NVRTC 13.0 behaves as nvJitLink does (``_nvjitlink_report``): on a machine with a GPU
    driver, ptxas's step is kept in CUDA's compute cache under the PTX, and a PTX assembled
    before (in any process) comes back with an empty log. A comment would not help (the
    preprocessor drops it before the PTX is made), so when the log has no figures the source
    is built again with an empty kernel of a name no earlier build had, which changes none of
    the others and is left out of the report."""
    text = source.text()
    found = parse_ptxas(cuda_cpp.compile_source(text, source.name, arch, options, cache=False).log)
    if _lacking(found):
        nonce = f"{NONCE_KERNEL}_{os.getpid()}_{time.time_ns()}"
        fresh = f'{text}\nextern "C" __global__ void {nonce}() {{}}\n'
        log = cuda_cpp.compile_source(fresh, source.name, arch, options, cache=False).log
        found = {k: v for k, v in parse_ptxas(log).items() if not k.startswith(NONCE_KERNEL)}
    return found


def numba_kernels(module: Any) -> dict[str, Any]:
    """The ``@cuda.jit`` kernels of a rung module: its ``KERNELS`` dict, or every kernel
    dispatcher defined at its top level (device functions excluded)."""
    from numba.cuda.dispatcher import CUDADispatcher

    listed = getattr(module, "KERNELS", None)
    if listed is not None:
        return dict(listed)
    return {
        name: obj
        for name, obj in vars(module).items()
        if isinstance(obj, CUDADispatcher) and not obj.targetoptions.get("device")
    }


def _numba_signature(rung: Rung, dtype: str, module: Any, kernel: str) -> tuple[Any, ...]:
    """Argument types of a kernel: by default the problem's inputs then its output, all
    C-contiguous; a module whose kernels take other arguments maps the example arrays to them
    in ``KERNEL_ARGS = {kernel name: function(*inputs, out) -> example arguments}``."""
    import numba

    problem = get_problem(rung.problem)
    size = problem.simulator_sizes(dtype)[0]
    inputs = problem.make_inputs(size, dtype, 0)
    out = np.empty(problem.output_shape(size), dtype=inputs[0].dtype)
    arrange = getattr(module, "KERNEL_ARGS", {}).get(kernel)
    arguments = arrange(*inputs, out) if arrange else (*inputs, out)
    return tuple(numba.typeof(x) for x in arguments)


@functools.cache
def fingerprint() -> str:
    """A hash of what every kept build depends on besides its own name: the bytes of each
    ``.py``, ``.cu`` and ``.cuh`` file of the ladder package; Python's version and those of
    ``COMPILERS`` and of every installed ``nvidia-*`` and ``cuda-*`` package; NVRTC's version
    and include directories; NVVM's and nvJitLink's versions; Numba's settings in the
    environment (``NUMBA_*``)."""
    from importlib import metadata

    digest = hashlib.sha256()
    for path in sorted(PACKAGE.rglob("*")):
        if path.suffix in (".py", ".cu", ".cuh") and path.is_file():
            digest.update(f"{path.relative_to(PACKAGE)}\0".encode() + path.read_bytes() + b"\0")
    facts = [sys.version]
    for dist in metadata.distributions():
        name = (dist.metadata["Name"] or "").lower()
        if name in COMPILERS or name.startswith(("nvidia-", "cuda-")):
            facts.append(f"{name}=={dist.version}")
    for fact in (
        cuda_cpp.nvrtc_version, cuda_cpp.include_dirs, _nvvm_version, _nvjitlink_version
    ):  # fmt: skip
        try:
            facts.append(repr(fact()))
        except Exception as err:  # a compiler that is missing fails its builds, not this
            facts.append(f"{fact.__name__}: {type(err).__name__}")
    # (the simulator's switch aside: a check compiles outside the simulator whatever it says)
    numba = [k for k in os.environ if k.startswith("NUMBA_") and k != "NUMBA_ENABLE_CUDASIM"]
    facts += sorted(f"{k}={os.environ[k]}" for k in numba)
    digest.update("\0".join(sorted(facts)).encode())
    return digest.hexdigest()[:16]


def _nvvm_version() -> Any:
    from numba.cuda.cudadrv import nvvm

    return nvvm.NVVM().get_version()


def _nvjitlink_version() -> Any:
    from cuda.bindings import nvjitlink

    return nvjitlink.version()


def cache_dir() -> Path:
    """Where kept figures live, beside cuda_cpp's cubins: ``$LADDER_CACHE/check``, by default
    ``~/.cache/ladder/check``; read at each check, so setting ``LADDER_CACHE`` after ``ladder``
    was imported still takes effect (a check with one job runs in this process)."""
    root = os.environ.get("LADDER_CACHE") or Path.home() / ".cache" / "ladder"
    return Path(root) / "check"


def _in_package(path: str | Path) -> bool:
    """Whether a file is the ladder package's own, so that ``fingerprint`` covers it."""
    return Path(path).resolve().is_relative_to(PACKAGE)


class Cache:
    """The figures of earlier builds on disk, one JSON file per build under the current
    ``fingerprint``; reading or writing it never fails a check (a file that cannot be read
    is built again)."""

    def __init__(self, root: Path | None = None) -> None:
        self.folder = (root or cache_dir()) / fingerprint()

    def _path(self, name: str) -> Path:
        return self.folder / f"{hashlib.sha256(name.encode()).hexdigest()[:32]}.json"

    def get(self, name: str) -> Any:
        try:
            doc = json.loads(self._path(name).read_text())
        except (OSError, ValueError):
            return None
        return doc["figures"] if doc.get("build") == name else None

    def put(self, name: str, figures: Any) -> None:
        path = self._path(name)
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps({"build": name, "figures": figures}))
            tmp.replace(path)
        except OSError:
            pass

    def prune(self, keep: int = KEPT_FINGERPRINTS) -> None:
        """Remove the builds of all but the ``keep`` most recent fingerprints (this one
        included)."""
        try:
            others = [p for p in self.folder.parent.iterdir() if p.is_dir() and p != self.folder]
            others.sort(key=lambda p: p.stat().st_mtime, reverse=True)
        except OSError:
            return
        for old in others[keep - 1 :]:
            shutil.rmtree(old, ignore_errors=True)


class NotKept(BaseException):
    """A build that ``Builds(kept_only=True)`` would have to make (not an ``Exception``:
    ``check_numba`` and ``check_cuda`` report those as the build's error)."""


class Builds:
    """What one ``ladder check`` has built: Numba kernels lowered to LLVM IR (per kernel,
    signature and lowering) and the ptxas figures per architecture, for Numba kernels and
    CUDA C++ sources alike, so a kernel two rungs share is built once per architecture; with
    a ``cache``, the figures of the package's own kernels are kept across runs."""

    def __init__(self, cache: Cache | None = None, kept_only: bool = False) -> None:
        self.cache = cache
        self.kept_only = kept_only  # raise NotKept rather than build
        self._lowered: dict[tuple[Any, ...], Any] = {}
        self._numba: dict[tuple[Any, ...], dict[str, int]] = {}
        self._cuda: dict[tuple[Any, ...], dict[str, dict[str, int]]] = {}

    def numba_ptx(self, kernel: Any, signature: tuple[Any, ...], arch: str) -> str:
        """The PTX ``compile_ptx`` makes of a Numba kernel (a ``@cuda.jit`` dispatcher) for
        ``arch``, from a lowering shared with every architecture that lowers the same."""
        fastmath = bool(kernel.targetoptions.get("fastmath"))
        cc = arch_cc(arch)
        key = (kernel.py_func, signature, fastmath, min(cc, SAME_LOWERING_FROM))
        if key not in self._lowered:
            from numba.cuda.compiler import _compile_pyfunc_with_fixup  # compile_ptx's first half

            self._lowered[key], _ = _compile_pyfunc_with_fixup(
                kernel.py_func, signature, device=False, fastmath=fastmath, cc=cc, abi="numba"
            )
        ptx = self._lowered[key].get_asm_strs(cc=cc)  # NVVM, for this architecture
        if len(ptx) != 1:
            raise RuntimeError(f"expected one PTX module, NVVM returned {len(ptx)}")
        return ptx[0]

    def _kept(self, name: str | None, build: Callable[[], Any]) -> Any:
        """``build()``, or its figures kept under ``name`` (None: not kept)."""
        found = None if self.cache is None or name is None else self.cache.get(name)
        if found is None:
            if self.kept_only:
                raise NotKept(name)
            found = build()
            if self.cache is not None and name is not None:
                self.cache.put(name, found)
        return found

    def numba(
        self, kernel: Any, signature: tuple[Any, ...], arch: str, where: str | None = None
    ) -> dict[str, int]:
        """ptxas's figures for one Numba kernel on ``arch``, with static shared memory read
        from the PTX; ``where`` names the kernel in the package (``module:name``, the name
        ``numba_kernels`` gives it), under which its figures are kept (None: not kept)."""
        fastmath = bool(kernel.targetoptions.get("fastmath"))
        key = (kernel.py_func, signature, fastmath, arch)

        def build() -> dict[str, int]:
            ptx = self.numba_ptx(kernel, signature, arch)
            figures = _nvjitlink_report(ptx, arch)
            if len(figures) != 1:
                raise RuntimeError(f"expected one kernel in the PTX, found {len(figures)}")
            (values,) = figures.values()
            values["smem_bytes"] = ptx_static_smem(ptx)
            return values

        if key not in self._numba:
            name = where and f"numba {where} {signature!r} {fastmath} {arch}"
            self._numba[key] = self._kept(name, build)
        return dict(self._numba[key])

    def cuda(self, source: cuda_cpp.CudaSource, arch: str) -> dict[str, dict[str, int]]:
        """ptxas's figures per kernel of a CUDA C++ source built by NVRTC for ``arch``."""
        key = (source.path, source.options, arch)
        options = [*source.options, "--ptxas-options=-v"]

        def build() -> dict[str, dict[str, int]]:
            return _nvrtc_report(source, arch, options)

        if key not in self._cuda:
            name = None
            if _in_package(source.path):
                name = f"cuda {Path(source.path).resolve().relative_to(PACKAGE)} {options} {arch}"
            self._cuda[key] = self._kept(name, build)
        return {kernel: dict(values) for kernel, values in self._cuda[key].items()}


def check_numba(
    rung: Rung, module: Any, archs: tuple[str, ...] = ARCHS, builds: Builds | None = None
) -> list[KernelReport]:
    builds = builds or Builds()
    kernels = numba_kernels(module)
    reports = []
    if not kernels:
        return [
            KernelReport(
                rung.problem, rung.name, rung.number, "—", ",".join(rung.dtypes), "—",
                error="no @cuda.jit kernel found in the module (define one or list KERNELS)",
            )
        ]  # fmt: skip
    # a kernel is kept under its module and name, which the package's files fix (two kernels
    # a factory makes share one function name, but not their names in KERNELS)
    in_package = _in_package(getattr(module, "__file__", None) or "/")
    for dtype in rung.dtypes:
        for name, kernel in kernels.items():
            where = f"{module.__name__}:{name}" if in_package else None
            signature = _numba_signature(rung, dtype, module, name)
            for arch in archs:
                report = KernelReport(rung.problem, rung.name, rung.number, name, dtype, arch)
                try:
                    for key, value in builds.numba(kernel, signature, arch, where).items():
                        setattr(report, key, value)
                except Exception as err:  # reported per kernel; the command fails at the end
                    report.error = f"{type(err).__name__}: {str(err).strip().splitlines()[-1]}"
                reports.append(report)
    return reports


def check_cuda(
    rung: Rung,
    source: cuda_cpp.CudaSource,
    archs: tuple[str, ...] | None = None,
    builds: Builds | None = None,
) -> list[KernelReport]:
    """Build a rung's ``.cu`` for ``archs`` (default: the source's own ``archs``); an
    architecture-specific source is built for the ``a`` variant of each (sm_90 as sm_90a)."""
    builds = builds or Builds()
    reports = []
    dtypes = ",".join(rung.dtypes)
    for arch in source.archs if archs is None else archs:
        if source.arch_specific and not arch.endswith("a"):
            arch += "a"
        try:
            found = builds.cuda(source, arch)
        except Exception as err:
            reports.append(
                KernelReport(
                    rung.problem, rung.name, rung.number, source.name, dtypes, arch,
                    error=f"{type(err).__name__}: {err}",
                )
            )  # fmt: skip
            continue
        for kernel, values in sorted(found.items()):
            reports.append(
                KernelReport(rung.problem, rung.name, rung.number, kernel, dtypes, arch, **values)
            )
    return reports


def not_for(rung: Rung, archs: tuple[str, ...]) -> list[KernelReport]:
    """A report for each of ``archs`` outside the rung's range, saying why it is not built."""
    dtypes = ",".join(rung.dtypes)
    return [
        KernelReport(
            rung.problem, rung.name, rung.number, "—", dtypes, arch,
            skipped=f"not for this GPU: {rung.reason_for_cc(arch_cc(arch))}",
        )
        for arch in archs
        if rung.reason_for_cc(arch_cc(arch)) is not None
    ]  # fmt: skip


def _check_rung(rung: Rung, archs: tuple[str, ...], builds: Builds) -> list[KernelReport]:
    """One rung's reports: its kernels built for each of ``archs`` in its range, and a report
    saying why for each outside it."""
    module = sys.modules[rung.launch.__module__]
    source = getattr(module, "SOURCE", None)
    fits = tuple(a for a in archs if rung.reason_for_cc(arch_cc(a)) is None)
    if isinstance(source, cuda_cpp.CudaSource):
        reports = check_cuda(rung, source, fits, builds)
    else:
        reports = check_numba(rung, module, fits, builds)
    return reports + not_for(rung, archs)


def _builds_of(rung: Rung) -> set[Any]:
    """What a rung builds, by identity: its ``.cu`` file, or its Numba kernels' functions (two
    rungs that share one are compiled in the same process, so it is built once)."""
    module = sys.modules[rung.launch.__module__]
    source = getattr(module, "SOURCE", None)
    if isinstance(source, cuda_cpp.CudaSource):
        return {source.path}
    return {kernel.py_func for kernel in numba_kernels(module).values()} or {rung.key}


def _work(rung: Rung, archs: tuple[str, ...]) -> float:
    """A rough cost of checking a rung, to hand out the largest groups first: NVRTC takes
    about 1.5 s per architecture; a Numba kernel about 0.4 s to lower per dtype and 0.15 s
    per architecture (a 2-core machine, 2026)."""
    module = sys.modules[rung.launch.__module__]
    fits = sum(rung.reason_for_cc(arch_cc(a)) is None for a in archs)
    if isinstance(getattr(module, "SOURCE", None), cuda_cpp.CudaSource):
        return 1.5 * fits
    return len(numba_kernels(module)) * len(rung.dtypes) * (0.4 + 0.15 * fits)


def groups(rungs_to_check: list[Rung], archs: tuple[str, ...] = ARCHS) -> list[list[Rung]]:
    """The rungs in groups that share no build (attention and attention-causal share their
    kernels, so they go together), the costliest group first, each in the given order."""
    group_of: dict[Any, int] = {}  # a build's identity -> the group that holds it
    members: dict[int, list[Rung]] = {}
    for index, rung in enumerate(rungs_to_check):
        joined = sorted({group_of[b] for b in _builds_of(rung) if b in group_of})
        target = joined[0] if joined else index
        members[target] = [m for g in joined for m in members.pop(g)] + [rung]
        for member in members[target]:
            for build in _builds_of(member):
                group_of[build] = target
    found = [sorted(g, key=rungs_to_check.index) for g in members.values()]
    return sorted(found, key=lambda g: -sum(_work(r, archs) for r in g))


def default_jobs() -> int:
    """Processes for ``ladder check``: one per CPU this process may use, at most 8 (each
    holds a compiler; past a few, the largest group bounds the time)."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(cpus or 1, 8))


_WORKER_BUILDS: Builds | None = None  # a worker process's builds, kept across its groups


def _start_worker(cache: bool) -> None:
    from ladder.core.rung import rungs

    global _WORKER_BUILDS
    _WORKER_BUILDS = Builds(Cache() if cache else None)
    rungs()  # imports every rung module


def _check_group(keys: list[tuple[str, str]], archs: tuple[str, ...]) -> list[KernelReport]:
    """A worker's part: the reports of the registered rungs ``keys`` (problem, name)."""
    from ladder.core.rung import get_rung

    builds = _WORKER_BUILDS or Builds()
    return [r for key in keys for r in _check_rung(get_rung(*key), archs, builds)]


def check(
    rungs_to_check: list[Rung],
    archs: tuple[str, ...] = ARCHS,
    progress: Callable[[Rung], None] | None = None,
    jobs: int | None = 1,
    cache: bool = True,
) -> list[KernelReport]:
    """Compile each rung's kernels for each of ``archs`` in its range and collect the reports,
    in the rungs' order, with one saying why for each architecture outside it (CPU rungs and
    libraries skipped).

    ``jobs`` processes compile (None: ``default_jobs()``), each a group of rungs that share
    no build with another group (``groups``), so nothing is compiled twice; with one job,
    or for rungs not in the registry, this process compiles. With ``cache``, figures kept
    by an earlier check of the same files and compilers are read, not built again (see the
    module's docstring). ``progress`` is called with each rung before its kernels are
    compiled, or, with several processes, as its reports come back."""
    for arch in archs:
        arch_cc(arch)  # a misspelt architecture fails before anything is built
    from ladder.core.rung import rungs

    chosen = [r for r in rungs_to_check if not (r.on_cpu or r.reference)]
    by_key: dict[str, list[KernelReport]] = {}
    to_build = chosen
    if cache:
        Cache().prune()
        kept = Builds(Cache(), kept_only=True)
        to_build = []
        for rung in chosen:
            try:
                by_key[rung.key] = _check_rung(rung, archs, kept)
            except NotKept:
                to_build.append(rung)
                continue
            if progress is not None:
                progress(rung)
    found = groups(to_build, archs)
    jobs = min(default_jobs() if jobs is None else jobs, len(found))
    registered = {id(r) for r in rungs()}
    if jobs <= 1 or any(id(r) not in registered for r in to_build):
        builds = Builds(Cache() if cache else None)
        for rung in to_build:
            if progress is not None:
                progress(rung)
            by_key[rung.key] = _check_rung(rung, archs, builds)
        return [report for rung in chosen for report in by_key[rung.key]]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    # spawn, not fork: a forked child would inherit this process's threads (a progress
    # bar's) and compiler state; each worker imports the rungs afresh (about 2 s)
    context = multiprocessing.get_context("spawn")
    start = {"initializer": _start_worker, "initargs": (cache,)}
    with ProcessPoolExecutor(jobs, mp_context=context, **start) as pool:
        pending = {
            pool.submit(_check_group, [(r.problem, r.name) for r in group], archs): group
            for group in found
        }
        for done in as_completed(pending):
            for report in done.result():
                by_key.setdefault(f"{report.problem}/{report.rung}", []).append(report)
            for rung in pending[done]:
                if progress is not None:
                    progress(rung)
    return [report for rung in chosen for report in by_key.get(rung.key, [])]
