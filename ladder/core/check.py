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
same ``.cu``) is built once per architecture.

Numba compiles kernels only outside its simulator, so without a GPU ``ladder check`` runs
itself in a child process with ``NUMBA_ENABLE_CUDASIM=0``; ``compile_ptx`` needs no GPU.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from ladder.core import cuda_cpp
from ladder.core.rung import GENERATIONS, Rung, arch_cc, get_problem

ARCHS = tuple(g.arch for g in GENERATIONS)

# numba-cuda lowers a kernel to LLVM IR the same way for every compute capability from 7.5 on
# (below it, it picks other code for tanh under fastmath and for float64 atomic adds), so the
# architectures at or above it share one lowering and only NVVM and ptxas run per architecture;
# tests/test_tools.py checks that the PTX is compile_ptx's for each.
SAME_LOWERING_FROM = (7, 5)


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


def _nvjitlink_report(ptx: str, arch: str) -> dict[str, dict[str, int]]:
    """Assemble PTX for ``arch`` with nvJitLink and return ptxas's per-function figures."""
    from cuda.bindings import nvjitlink

    options = [f"-arch={arch}", "-verbose"]
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
    return parse_ptxas(info.decode(errors="replace"))


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


class Builds:
    """What one ``ladder check`` has built: Numba kernels lowered to LLVM IR (per kernel,
    signature and lowering) and the ptxas figures per architecture, for Numba kernels and
    CUDA C++ sources alike, so a kernel two rungs share is built once per architecture."""

    def __init__(self) -> None:
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

    def numba(self, kernel: Any, signature: tuple[Any, ...], arch: str) -> dict[str, int]:
        """ptxas's figures for one Numba kernel on ``arch``, with static shared memory read
        from the PTX."""
        key = (kernel.py_func, signature, bool(kernel.targetoptions.get("fastmath")), arch)
        if key not in self._numba:
            ptx = self.numba_ptx(kernel, signature, arch)
            figures = _nvjitlink_report(ptx, arch)
            if len(figures) != 1:
                raise RuntimeError(f"expected one kernel in the PTX, found {len(figures)}")
            (values,) = figures.values()
            values["smem_bytes"] = ptx_static_smem(ptx)
            self._numba[key] = values
        return dict(self._numba[key])

    def cuda(self, source: cuda_cpp.CudaSource, arch: str) -> dict[str, dict[str, int]]:
        """ptxas's figures per kernel of a CUDA C++ source built by NVRTC for ``arch``."""
        key = (source.path, source.options, arch)
        if key not in self._cuda:
            build = cuda_cpp.compile_source(
                source.text(), source.name, arch, [*source.options, "--ptxas-options=-v"],
                cache=False,
            )  # fmt: skip
            self._cuda[key] = parse_ptxas(build.log)
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
    for dtype in rung.dtypes:
        for name, kernel in kernels.items():
            signature = _numba_signature(rung, dtype, module, name)
            for arch in archs:
                report = KernelReport(rung.problem, rung.name, rung.number, name, dtype, arch)
                try:
                    for key, value in builds.numba(kernel, signature, arch).items():
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


def check(
    rungs_to_check: list[Rung],
    archs: tuple[str, ...] = ARCHS,
    progress: Callable[[Rung], None] | None = None,
) -> list[KernelReport]:
    """Compile each rung's kernels for each of ``archs`` in its range and collect the reports,
    with one saying why for each architecture outside it (CPU rungs and libraries skipped);
    ``progress`` is called with each rung before its kernels are compiled."""
    for arch in archs:
        arch_cc(arch)  # a misspelt architecture fails before anything is built
    builds = Builds()
    reports: list[KernelReport] = []
    for rung in rungs_to_check:
        if rung.on_cpu or rung.reference:
            continue
        if progress is not None:
            progress(rung)
        module = sys.modules[rung.launch.__module__]
        source = getattr(module, "SOURCE", None)
        fits = tuple(a for a in archs if rung.reason_for_cc(arch_cc(a)) is None)
        if isinstance(source, cuda_cpp.CudaSource):
            reports += check_cuda(rung, source, fits, builds)
        else:
            reports += check_numba(rung, module, fits, builds)
        reports += not_for(rung, archs)
    return reports
