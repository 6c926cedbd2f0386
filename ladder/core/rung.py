"""The Rung record, the Problem interface, and the registries for both.

A rung module registers its launcher with the ``@rung`` decorator; the module's docstring
becomes the rung's story. A problem package registers one ``Problem`` and imports its rung
modules with ``import_rungs`` so that adding a file ``rNN_name.py`` adds a rung.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import pkgutil
import re
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from ladder.core import device

PROBLEM_PACKAGES = (
    "ladder.gemm",
    "ladder.conv",
    "ladder.fused",
    "ladder.attention",
    "ladder.moe",
)

Launcher = Callable[..., Any]

# What a rung computes on: "tensor" (tensor cores), "fp32" (the FP32 lanes of the CUDA cores),
# "memory" (a memory-bound problem, where the arithmetic units do not set the time).
UNITS = ("tensor", "fp32", "memory")
Units = str | Callable[[str], str]  # one of UNITS, or a function of the dtype that returns one


class NotApplicable(Exception):
    """Raised by a launcher for an input it was not built for (an SDPA backend pinned to a
    dtype or shape it does not take): the harness reports the case as unavailable, with this
    message, not as a failure."""


@dataclass(frozen=True)
class Prepared:
    """What a library's best configuration keeps ready before it is called, as a user whose
    data stay in that form would (a channels_last tensor, say): the arguments and the output
    the launcher is timed on, and ``read_back`` (no arguments), which writes that output into
    the problem's own output for the check. Made once, outside the time."""

    args: tuple[Any, ...]
    out: Any
    read_back: Callable[[], Any]


class Holder:
    """A prepared output (``Prepared.out``) for a library that returns a new tensor on every call
    instead of writing into one it is given (``F.conv2d``): the launcher stores its result in
    ``value`` and ``read_back`` copies it into the problem's output, so the timed call makes no
    copy that a user of the library would not make. ``timing.poison`` clears it (``value``
    None): a call that stores nothing leaves nothing to read back, and the check fails on the
    poisoned output instead of passing on the result of an earlier call."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value: Any = None

    def clear(self) -> None:
        self.value = None


@dataclass(frozen=True)
class Generation:
    """A GPU generation that learners have: the name tables use, its architecture, the GPUs."""

    name: str  # a column header: "T4", "RTX 30"
    arch: str  # what ``ladder check`` compiles for: "sm_75"
    gpus: str  # the GPUs of this architecture, in words

    @property
    def cc(self) -> tuple[int, int]:
        return arch_cc(self.arch)


# What ``ladder check`` compiles every rung for, and the columns of ``ladder list --gpus``.
GENERATIONS = (
    Generation("T4", "sm_75", "Turing: T4, RTX 20 and GTX 16 series"),
    Generation("A100", "sm_80", "Ampere: A100, A30"),
    Generation("RTX 30", "sm_86", "Ampere: RTX 30 series, A10, A40, RTX A6000"),
    Generation("RTX 40", "sm_89", "Ada: RTX 40 series, L4, L40"),
    Generation("H100", "sm_90", "Hopper: H100, H200, GH200"),
)


def arch_cc(arch: str) -> tuple[int, int]:
    """The compute capability of an architecture name: 'sm_86' is (8, 6), 'sm_90a' (9, 0) and
    'sm_100' (10, 0); ValueError naming the architecture for anything else."""
    found = re.fullmatch(r"sm_(\d+)(\d)[af]?", arch)
    if found is None:
        raise ValueError(f"architecture {arch!r}: expected sm_<major><minor>, e.g. sm_86")
    return int(found.group(1)), int(found.group(2))


def _cc_text(cc: tuple[int, int]) -> str:
    return f"{cc[0]}.{cc[1]}"


def tensor_cores_below_fp32(dtype: str) -> str:
    """The units of a library call that runs 16-bit inputs on tensor cores and float32 on the
    FP32 lanes (cuBLAS, cuDNN and PyTorch with TF32 off): ``units=tensor_cores_below_fp32``."""
    return "fp32" if dtype == "float32" else "tensor"


@dataclass(frozen=True, repr=False)
class Rung:
    """One rung of a ladder, or a library reference registered beside the rungs.

    A rung's identity is ``key``, ``problem/name``: results, tests and prose refer to it by
    that. Its ``number`` is display order, derived from its package's declared ladder
    (``import_rungs``), so inserting a rung renumbers the ones above it and changes no data.
    ``parent`` names the rung it changes (``ladder diff`` shows the difference), None for the
    first rung of a ladder and for references."""

    problem: str
    number: int
    name: str
    title: str
    dtypes: tuple[str, ...]
    launch: Launcher
    needs: frozenset[str] = frozenset({"numba"})
    min_cc: tuple[int, int] | None = None
    max_cc: tuple[int, int] | None = None  # arch-specific code (sm_90a) runs on one arch only
    # the instructions that set min_cc and max_cc ("cp.async"), said in every reason they give
    cc_needs: str = ""
    reference: bool = False
    # a peer (a Triton kernel written in this project): shown beside the rungs and the
    # libraries, never the library that "x library" is measured against
    peer: bool = False
    doc: str = ""
    units: Units = "fp32"  # what it computes on (see UNITS); ``units_for`` resolves a function
    # bytes this rung reads and writes in device memory for (size, dtype), when it moves more
    # than the problem's minimum (several kernels, intermediates); None: the minimum
    bytes_moved: Callable[[tuple[int, ...], str], float] | None = None
    # (args, out) -> Prepared: the inputs and output in the library's preferred form, made
    # once before the check and the timing (see Prepared); None: the problem's own arrays
    prepare: Callable[[tuple[Any, ...], Any], Prepared] | None = None
    # (args, out) -> str: the configuration the call ran in, for the results (the backend
    # SDPA picked, say); None: nothing to record
    describe: Callable[[tuple[Any, ...], Any], str] | None = None
    # GEMM only: (A, B, C, layout) -> C, C = Aᵀ·B ("tn", A given K x M) or A·Bᵀ ("nt", B given
    # N x K), the transposed operand read where it lies (``ladder.ops``' backward); ValueError
    # for inputs it does not take. None: the rung takes row-major operands only
    transposed: Callable[[Any, Any, Any, str], Any] | None = None
    parent: str | None = None  # the name of the rung this one changes, in the same ladder
    package: str = ""  # the Python package whose ladder numbers it ("ladder.gemm")

    @property
    def key(self) -> str:
        return f"{self.problem}/{self.name}"

    def __repr__(self) -> str:  # the docstring (the story) is too long for a repr
        kind = "peer" if self.peer else "reference" if self.reference else f"rung {self.number}"
        return f"<Rung {self.key} ({kind})>"

    def units_for(self, dtype: str) -> str:
        """What this rung computes on for inputs of ``dtype``: one of UNITS."""
        return self.units(dtype) if callable(self.units) else self.units

    @property
    def on_cpu(self) -> bool:
        """True for the CPU baseline, which takes host arrays and is timed with a host clock."""
        return "cpu" in self.needs

    def unavailable_reason(self) -> str | None:
        """Why this rung cannot run here, or None when it can."""
        if "cupy" in self.needs or "torch" in self.needs or "gpu" in self.needs:
            if not device.gpu_available():
                return "needs a real CUDA GPU (not available in the simulator)"
        if "cupy" in self.needs and not device.cupy_available():
            return "needs CuPy: pip install 'numba-ladder[cuda13]' (or [cuda12])"
        if "torch" in self.needs and not device.torch_cuda_available():
            return "needs PyTorch with CUDA: pip install 'numba-ladder[peers]'"
        if "triton" in self.needs:
            reason = device.triton_reason()
            if reason is not None:
                return reason
        if (self.min_cc or self.max_cc) and device.gpu_available():
            cc = device.facts().compute_capability
            reason = None if cc is None else self.reason_for_cc(tuple(cc))
            if reason is not None:
                return f"{reason}; this GPU is {_cc_text(tuple(cc))}"
        return None

    def cc_reason(self) -> str | None:
        """Why this rung runs only on some GPUs: its compute-capability range and the
        instructions that set it, or None when it declares no range. ``ladder list`` and
        ``ladder check`` both say it, for every GPU outside the range."""
        low, high = self.min_cc, self.max_cc
        if low is None and high is None:
            return None
        if high is None:
            span = f"{_cc_text(low)} or later"
        elif low == high:
            span = f"{_cc_text(low)} exactly"
        elif low is None:
            span = f"up to {_cc_text(high)}"
        else:
            span = f"{_cc_text(low)} to {_cc_text(high)}"
        return f"needs compute capability {span}" + (f": {self.cc_needs}" if self.cc_needs else "")

    def reason_for_cc(self, cc: tuple[int, int]) -> str | None:
        """Why this rung cannot run on a GPU of compute capability ``cc``, or None when it can."""
        if (self.min_cc is not None and cc < self.min_cc) or (
            self.max_cc is not None and cc > self.max_cc
        ):
            return self.cc_reason()
        return None

    def summary(self) -> str:
        """The first paragraph of the rung's docstring, on one line."""
        first = self.doc.strip().split("\n\n")[0]
        return " ".join(first.split())


class Problem(Protocol):
    """What a problem package provides to the harness: everything ``cli``, ``timing`` and the
    reports call, so none of them names a problem.

    A problem class subclasses ``Problem`` to inherit the defaults below (the output in the
    inputs' dtype, test sizes from the simulator's, no README summary, the generic floor,
    ``--size`` checked against ``size_names``) and overrides those that say more about it.
    """

    name: str
    bound: str  # "compute" or "memory": which figure (TFLOP/s or TB/s) leads in reports
    dtypes: tuple[str, ...]
    size_names: tuple[str, ...]  # one name per --size value, e.g. ("M", "N", "K")
    size_help: str  # what --size means, one line starting with size_names (ladder run --help)

    def standard_sizes(self, dtype: str) -> list[tuple[int, ...]]: ...
    def simulator_sizes(self, dtype: str) -> list[tuple[int, ...]]: ...
    def make_inputs(
        self, size: tuple[int, ...], dtype: str, seed: int
    ) -> tuple[np.ndarray, ...]: ...
    def reference(self, inputs: tuple[np.ndarray, ...]) -> np.ndarray: ...
    def output_shape(self, size: tuple[int, ...]) -> tuple[int, ...]: ...
    def flops(self, size: tuple[int, ...]) -> float: ...
    def min_bytes(self, size: tuple[int, ...], dtype: str) -> float: ...
    def tolerance(self, dtype: str) -> float: ...
    def ceiling_key(self, dtype: str) -> str: ...

    def output_dtype(self, dtype: str) -> str:
        """The output's dtype for inputs of ``dtype``: by default the same."""
        return dtype

    def test_sizes(self, dtype: str) -> list[tuple[int, ...]]:
        """The sizes the registry-parametrized tests run every rung at on a GPU (odd ones, off
        every tile); by default the simulator's sizes."""
        return self.simulator_sizes(dtype)

    def sanitize_sizes(self) -> list[tuple[int, ...]]:
        """The sizes ``ladder sanitize`` runs every rung at under compute-sanitizer: small, odd,
        and reaching each kernel path; by default the simulator's sizes."""
        return self.simulator_sizes("float32")

    def readme_summary(self, runs: list[dict[str, Any]], ceilings: dict[str, Any]) -> str:
        """Markdown the README shows above the problem's tables (its runs of a results file);
        empty by default."""
        return ""

    def floor_ms(
        self,
        size: tuple[int, ...],
        dtype: str,
        ceilings: dict[str, Any],
        tensor_cores: bool | None = None,
    ) -> float | None:
        """The fewest ms the case can take: the larger of its fewest bytes at the measured copy
        bandwidth and its FLOPs at the peak of the arithmetic used (the FP32 peak, or cuBLAS
        HGEMM's measured rate on tensor cores, by default for every dtype but float32); None
        without measured ceilings."""
        if tensor_cores is None:
            tensor_cores = dtype != "float32"
        copy = ceilings.get("copy_tbps")
        peak = ceilings.get("cublas_fp16_tflops" if tensor_cores else "fp32_peak_tflops")
        flops = self.flops(size)
        if not copy or (flops and not peak):
            return None
        memory_s = self.min_bytes(size, dtype) / (copy * 1e12)
        return max(memory_s, flops / (peak * 1e12) if flops else 0.0) * 1e3

    def parse_size(self, values: list[int]) -> tuple[int, ...]:
        """``--size`` as a size tuple; ValueError naming --size and what is valid when the count
        is not ``len(size_names)`` or a value is below 1. Problems add their own rules."""
        names = self.size_names
        if len(values) != len(names):
            raise ValueError(
                f"--size for {self.name} takes {len(names)} values {' '.join(names)}, "
                f"got {len(values)}"
            )
        small = [f"{n}={v}" for n, v in zip(names, values, strict=True) if v < 1]
        if small:
            raise ValueError(
                f"--size for {self.name}: every value must be at least 1, got {', '.join(small)}"
            )
        return tuple(int(v) for v in values)


_RUNGS: dict[str, Rung] = {}
_PROBLEMS: dict[str, Problem] = {}
_LADDERS: dict[str, Ladder] = {}  # by package ("ladder.gemm")
_UNSET: Any = object()  # ``parent`` not given


@dataclass(frozen=True)
class Ladder:
    """A package's ladder, declared in its ``__init__`` (``import_rungs``): the rung names in
    order, and the CPU baseline, if there is one, which is rung 0. Every problem of the package
    (``gemm`` and ``gemm-fp8``; ``attention`` and ``attention-causal``) numbers its rungs by
    their place here, so a rung keeps its number in each problem it solves."""

    package: str
    names: tuple[str, ...]
    baseline: str | None = None

    def number(self, name: str) -> int | None:
        """The display number of ``name``: 0 for the baseline, then 1, 2, ... in order; None
        for a name not in the ladder."""
        if name == self.baseline:
            return 0
        return self.names.index(name) + 1 if name in self.names else None

    @property
    def every(self) -> tuple[str, ...]:
        """Every name, the baseline first."""
        return ((self.baseline,) if self.baseline else ()) + self.names


def register_problem(problem: Problem) -> Problem:
    _PROBLEMS[problem.name] = problem
    return problem


def _package_problem(module: str) -> str:
    """The problem a module's package is the ladder of: its name with '_' as '-'
    (``ladder.fused.gemm_epilogue.r02_fused`` is a rung of ``gemm-epilogue``)."""
    return module.rsplit(".", 2)[-2].replace("_", "-")


def _ladder_place(where: str, name: str, module: str, parent: Any) -> tuple[str, int, str | None]:
    """(package, number, parent) of a rung ``name`` registered from ``module``: its number from
    its package's declared ladder, its parent checked to come before it there. ValueError
    naming what to declare otherwise."""
    package = module.rsplit(".", 1)[0]
    declared = _LADDERS.get(package)
    if declared is None:
        raise ValueError(
            f"rung {where}/{name}: package {package} declares no ladder; its __init__ calls "
            f"import_rungs(__name__, __path__, LADDER) with the rung names in order"
        )
    number = declared.number(name)
    if number is None:
        raise ValueError(
            f"rung {where}/{name}: not in {package}'s LADDER ({', '.join(declared.every)}); "
            f"add it where it belongs in the ladder"
        )
    if parent is _UNSET:
        raise ValueError(
            f"rung {where}/{name}: declare parent=, the rung it changes (None for the first "
            f"rung of a ladder): ladder diff shows the rung against it"
        )
    if parent is not None:
        place = declared.number(parent)
        if place is None or place >= number:
            raise ValueError(
                f"rung {where}/{name}: parent {parent!r} must be a rung before it in "
                f"{package}'s LADDER ({', '.join(declared.every)})"
            )
    return package, number, parent


def rung(
    *,
    name: str,
    title: str,
    parent: str | None = _UNSET,
    dtypes: Iterable[str] = ("float32",),
    needs: Iterable[str] = ("numba",),
    min_cc: tuple[int, int] | None = None,
    max_cc: tuple[int, int] | None = None,
    cc_needs: str = "",
    sm90a: str = "",
    reference: bool = False,
    peer: bool = False,
    bytes_moved: Callable[[tuple[int, ...], str], float] | None = None,
    problem: str | None = None,
    units: Units | None = None,
    prepare: Callable[[tuple[Any, ...], Any], Prepared] | None = None,
    describe: Callable[[tuple[Any, ...], Any], str] | None = None,
    transposed: Callable[[Any, Any, Any, str], Any] | None = None,
) -> Callable[[Launcher], Launcher]:
    """Register the decorated launcher as a rung; its module docstring is the rung's story.

    A rung's name must be in its package's declared ladder (``import_rungs``), which gives its
    number; ``parent`` names the rung it changes, an earlier one of that ladder (None for the
    first). Its problem is its package's (see ``_package_problem``), so it is not typed twice;
    ``problem`` is given only where one package holds several problems (attention and
    attention-causal). A library reference (or a peer) lives outside the ladder and declares
    no parent; references are numbered 90, 91, ... in registration order, after every rung.

    ``units`` says what the rung computes on, one of UNITS or a function of the dtype that
    returns one (a library that uses tensor cores for some dtypes only:
    ``tensor_cores_below_fp32``). Left out, it is "memory" for a problem whose ``bound`` is
    "memory" and "fp32" otherwise, so only tensor-core rungs (and such libraries) name it.

    ``sm90a`` names the sm_90a-only instructions a rung issues (``"wgmma"``, ``"wgmma and
    setmaxnreg"``): such a rung runs on compute capability 9.0 exactly, built for sm_90a, and
    says so on every other GPU. It stands for ``min_cc = max_cc = (9, 0)`` and ``cc_needs``.
    """

    dtypes = tuple(dtypes)
    if sm90a:
        if min_cc or max_cc or cc_needs:
            raise ValueError(f"rung {name}: sm90a= sets min_cc, max_cc and cc_needs; give none")
        plural = " and " in sm90a or "," in sm90a
        min_cc = max_cc = (9, 0)
        cc_needs = f"{sm90a}, " + (
            "sm_90a-only instructions" if plural else "an sm_90a-only instruction"
        )

    def decorate(launch: Launcher) -> Launcher:
        if _CAPTURED:  # a user rung file is loading (capture_rungs): record, do not register
            options = dict(name=name, title=title, dtypes=dtypes, needs=tuple(needs))
            options.update(min_cc=min_cc, max_cc=max_cc, cc_needs=cc_needs)
            options.update(bytes_moved=bytes_moved, units=units)
            _CAPTURED[-1].append((launch, problem, options))
            return launch
        module = launch.__module__
        doc = sys.modules[module].__doc__ or ""
        where = problem or _package_problem(module)
        if not doc.strip():
            raise ValueError(f"rung {where}/{name}: its module needs a docstring (the story)")
        if (min_cc or max_cc) and not cc_needs:
            raise ValueError(
                f"rung {where}/{name}: min_cc and max_cc need cc_needs=, the instructions that "
                f"set them (ladder list --gpus says it for every GPU outside the range)"
            )
        found = _resolve_units(where, name, units, dtypes)
        reference_ = reference or peer
        if reference_:
            if parent is not _UNSET:
                raise ValueError(f"rung {where}/{name}: a reference or peer has no parent")
            number = 90 + sum(r.reference and r.problem == where for r in _RUNGS.values())
            package, parent_ = module.rsplit(".", 1)[0], None
        else:
            package, number, parent_ = _ladder_place(where, name, module, parent)
        entry = Rung(
            problem=where,
            number=number,
            name=name,
            title=title,
            dtypes=dtypes,
            launch=launch,
            needs=frozenset(needs),
            min_cc=min_cc,
            max_cc=max_cc,
            cc_needs=cc_needs,
            reference=reference_,
            peer=peer,
            doc=doc,
            bytes_moved=bytes_moved,
            units=found,
            prepare=prepare,
            describe=describe,
            transposed=transposed,
            parent=parent_,
            package=package,
        )
        if entry.key in _RUNGS:
            if _RUNGS[entry.key].launch is launch:
                return launch
            raise ValueError(f"rung {entry.key} is registered twice")
        _RUNGS[entry.key] = entry
        return launch

    return decorate


def rung_per_problem(
    variants: Iterable[tuple[str, str, dict[str, Any]]], **options: Any
) -> Callable[[Launcher], Launcher]:
    """Register ``launch`` as a rung of several problems that share one definition and differ
    only by a keyword argument of the launcher (attention's ``causal``, the mixture of experts'
    ``k``): the harness hands a launcher its arrays and nothing else. For each (problem, suffix,
    fixed) of ``variants``, a launcher that calls ``launch(*arrays, **fixed)``, named ``launch``'s
    name + suffix and documented as ``launch`` (same module), is registered with ``rung``'s
    ``options``; a ``describe`` among them is given ``fixed`` too."""
    describe = options.pop("describe", None)

    def decorate(launch: Launcher) -> Launcher:
        for problem, suffix, fixed in variants:

            @functools.wraps(launch)
            def bound(*arrays: Any, _fixed: dict[str, Any] = fixed, **kwargs: Any) -> Any:
                return launch(*arrays, **kwargs, **_fixed)

            bound.__name__ = bound.__qualname__ = launch.__name__ + suffix
            told = None if describe is None else functools.partial(describe, **fixed)
            rung(problem=problem, describe=told, **options)(bound)
        return launch

    return decorate


# launchers that ``@rung`` met while ``capture_rungs`` was open: (launch, problem, options)
_CAPTURED: list[list[tuple[Launcher, str | None, dict[str, Any]]]] = []


@contextlib.contextmanager
def capture_rungs() -> Iterator[list[tuple[Launcher, str | None, dict[str, Any]]]]:
    """While open, ``@rung(...)`` records each launcher it decorates, with its ``problem`` and
    its other options, in the list this yields, instead of registering it: the loader of a
    user's rung file (``ladder.core.user_rung``) runs the file inside it, so a file outside
    the problem packages may use the decorator. Registration outside it is unchanged."""
    found: list[tuple[Launcher, str | None, dict[str, Any]]] = []
    _CAPTURED.append(found)
    try:
        yield found
    finally:
        _CAPTURED.pop()


def _resolve_units(problem: str, name: str, units: Units | None, dtypes: Iterable[str]) -> Units:
    """``units`` checked against UNITS for every dtype, or the default of ``problem`` (which
    must be registered already: a problem package registers its problem before its rungs)."""
    if units is None:
        if problem not in _PROBLEMS:
            raise ValueError(
                f"rung {problem}/{name}: problem {problem!r} is not registered; register it "
                f"before its rungs, or give units="
            )
        return "memory" if _PROBLEMS[problem].bound == "memory" else "fp32"
    for dtype in dtypes:
        found = units(dtype) if callable(units) else units
        if found not in UNITS:
            raise ValueError(
                f"rung {problem}/{name}: units {found!r} for {dtype}; one of {', '.join(UNITS)}"
            )
    return units


def import_rungs(
    package: str,
    path: Iterable[str],
    ladder: Iterable[str],
    *,
    baseline: str | None = None,
) -> None:
    """Declare a package's ladder, ``ladder`` its rung names in order (``baseline``, a CPU
    baseline, is rung 0 before them), then import every ``rNN_*.py`` module of the package, in
    file order. Every declared name must be registered by one of them: ValueError otherwise."""
    declared = Ladder(package, tuple(ladder), baseline)
    if len(set(declared.every)) != len(declared.every):
        raise ValueError(f"{package}: a name appears twice in its LADDER {declared.every}")
    _LADDERS[package] = declared
    names = sorted(m.name for m in pkgutil.iter_modules(list(path)) if re.match(r"r\d\d_", m.name))
    for name in names:
        importlib.import_module(f"{package}.{name}")
    registered = {r.name for r in _RUNGS.values() if r.package == package}
    missing = [n for n in declared.every if n not in registered]
    if missing:
        raise ValueError(
            f"{package}: LADDER names {', '.join(missing)}, which no rNN_*.py module registers"
        )


def ladders() -> dict[str, Ladder]:
    """Every declared ladder, by package."""
    _load()
    return dict(_LADDERS)


def _load() -> None:
    for package in PROBLEM_PACKAGES:
        importlib.import_module(package)  # cached by Python after the first call


def _problem_order() -> dict[str, tuple[int, int]]:
    """Each problem's place: its package's in PROBLEM_PACKAGES, then its registration within
    the package, so that the order never depends on which module a program imported first."""
    order = {}
    for i, (name, problem) in enumerate(_PROBLEMS.items()):
        module = type(problem).__module__
        package = next(
            (j for j, p in enumerate(PROBLEM_PACKAGES) if module.startswith(p + ".")),
            len(PROBLEM_PACKAGES),
        )
        order[name] = (package, i)
    return order


def problems() -> dict[str, Problem]:
    """Registered problems, in PROBLEM_PACKAGES order."""
    _load()
    order = _problem_order()
    return {name: _PROBLEMS[name] for name in sorted(_PROBLEMS, key=order.__getitem__)}


def get_problem(name: str) -> Problem:
    """A registered problem by name; KeyError naming the problems there are otherwise."""
    _load()
    if name not in _PROBLEMS:
        raise KeyError(f"unknown problem {name!r}; problems: {', '.join(sorted(_PROBLEMS))}")
    return _PROBLEMS[name]


def rungs(problem: str | None = None, *, references: bool = True) -> list[Rung]:
    """Registered rungs in ladder order (references last within their problem); KeyError for
    a problem that is not registered."""
    _load()
    if problem is not None:
        get_problem(problem)
    found = [
        r
        for r in _RUNGS.values()
        if (problem is None or r.problem == problem) and (references or not r.reference)
    ]
    order = _problem_order()
    last = (len(PROBLEM_PACKAGES) + 1, 0)
    return sorted(found, key=lambda r: (order.get(r.problem, last), r.reference, r.number))


def get_rung(problem: str, name: str) -> Rung:
    """A rung by problem and short name, or by its number written as 'r05' or '5'; KeyError
    naming the problems or the problem's rungs otherwise."""
    for r in rungs(problem):
        if name in (r.name, f"r{r.number:02d}", str(r.number)) and not (
            r.reference and name != r.name
        ):
            return r
    known = ", ".join(r.name for r in rungs(problem))
    raise KeyError(f"unknown rung {name!r} for {problem}; known: {known}")


def parent_of(r: Rung) -> Rung | None:
    """The rung ``r`` changes (its declared ``parent``): the rung of that name in the same
    problem, else in another problem of the same package (GEMM's ``fp8`` changes
    ``gemm/persistent``); None for a first rung or a reference."""
    if r.parent is None:
        return None
    same = _RUNGS.get(f"{r.problem}/{r.parent}")
    if same is not None:
        return same
    for other in rungs():
        if other.package == r.package and other.name == r.parent and not other.reference:
            return other
    raise KeyError(f"rung {r.key}: its parent {r.parent!r} is not registered")
