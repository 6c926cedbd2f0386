"""Every private name of numba-cuda that the fast launch reads, in one place.

The raw launch of a Numba kernel (``fastcall.NumbaLaunch``) packs the kernel's parameters
once, the way Numba's own launch packs them, and then calls ``cuLaunchKernel`` itself. Numba
offers no public way to get either the packed parameters or the kernel's CUfunction, so this
module reads them from numba-cuda's internals. These are the names, and why each is read:

``CUDADispatcher.typeof_pyval(value)`` (``numba/cuda/dispatcher.py``)
    the Numba type of each argument, as a launch types it: the key of the compiled overload.
``_DispatcherBase.overloads`` (a dict set in ``__init__``)
    the compiled ``_Kernel`` for those types, which the first (ordinary) launch compiled.
``CUDADispatcher.extensions`` and ``CUDADispatcher._launch_config_sensitive``
    refused when set: argument extensions rewrite the arguments per call, and a kernel
    specialized by its launch configuration is another kernel per configuration.
``_Kernel.argument_types``, ``.debug``, ``.cooperative``, ``.launch_config_sensitive``
    the parameters' types in order; the last three refused (a debug kernel's exception
    flag, a cooperative launch and a per-configuration kernel need Numba's own launch).
``_Kernel._prepare_args(ty, val, stream, retr, kernelargs)``
    the packing itself: Numba's values for one argument, appended to ``kernelargs``. An
    array is (meminfo, parent, nitems, itemsize, data, shape..., strides... in bytes): the
    data pointer is the fifth value, which a call rewrites (checked on every build).
``_Kernel._codelibrary`` and ``CUDACodeLibrary.get_cufunc().handle`` (``codegen.py``)
    the loaded kernel: a CUkernel (or CUfunction) handle for ``cuLaunchKernel``.
``FakeCUDAArray._ary`` (``numba/cuda/simulator/cudadrv/devicearray.py``)
    the NumPy array behind a simulator's device array: its address and strides for
    ``fastcall.intake`` (in the simulator only, where no raw launch is made).

``pack`` uses them; ``missing()`` checks that each is still there, with the signature the
code expects, in the installed numba-cuda's sources (without importing them: the simulator
replaces ``numba.cuda.dispatcher`` when it runs), so CI without a GPU names a change before a
GPU run meets it. Where a name is missing or changed at run time, ``pack`` raises and the
launch stays on Numba's dispatcher, the public path (``NumbaLaunch.mode`` says why, with the
numba-cuda version).
"""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
from pathlib import Path
from typing import Any

# (file under numba/cuda, class, member, what the code needs of it):
# "method a, b, ...": a method with these parameters after self; "attribute": assigned to
# self in some method (or a property); "property": a property
PRIVATE = (
    ("dispatcher.py", "CUDADispatcher", "typeof_pyval", "method val"),
    ("dispatcher.py", "_DispatcherBase", "overloads", "attribute"),
    ("dispatcher.py", "CUDADispatcher", "extensions", "property"),
    ("dispatcher.py", "CUDADispatcher", "_launch_config_sensitive", "attribute"),
    ("dispatcher.py", "_Kernel", "argument_types", "property"),
    ("dispatcher.py", "_Kernel", "debug", "attribute"),
    ("dispatcher.py", "_Kernel", "cooperative", "attribute"),
    ("dispatcher.py", "_Kernel", "launch_config_sensitive", "attribute"),
    ("dispatcher.py", "_Kernel", "_prepare_args", "method ty, val, stream, retr, kernelargs"),
    ("dispatcher.py", "_Kernel", "_codelibrary", "attribute"),
    ("codegen.py", "CUDACodeLibrary", "get_cufunc", "method"),
    ("simulator/cudadrv/devicearray.py", "FakeCUDAArray", "_ary", "attribute"),
)
ARRAY_VALUES = 5  # meminfo, parent, nitems, itemsize, data: then shape and strides
DATA = 4  # the data pointer's place among an array's values


def version() -> str:
    """The installed numba-cuda's version ("not installed" without it)."""
    try:
        return importlib.metadata.version("numba-cuda")
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _sources() -> Path | None:
    """The installed ``numba/cuda`` package's folder, found without importing it."""
    spec = importlib.util.find_spec("numba.cuda")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _members(tree: ast.Module, name: str) -> dict[str, str] | None:
    """What class ``name`` of a parsed module defines: member -> "method a, b",
    "property" or "attribute" (assigned to ``self.<member>``); None without the class."""
    found = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name), None)
    if found is None:
        return None
    members: dict[str, str] = {}
    for node in found.body:
        if not isinstance(node, ast.FunctionDef):
            continue
        decorators = {getattr(d, "id", getattr(d, "attr", "")) for d in node.decorator_list}
        if "property" in decorators:
            members[node.name] = "property"
        else:
            params = [a.arg for a in node.args.args[1:]]
            members[node.name] = " ".join(["method", ", ".join(params)]).strip()
        for inner in ast.walk(node):
            targets = inner.targets if isinstance(inner, ast.Assign) else []
            if isinstance(inner, ast.AnnAssign | ast.AugAssign):
                targets = [inner.target]
            for target in targets:
                if (
                    isinstance(target, ast.Attribute)
                    and isinstance(target.value, ast.Name)
                    and target.value.id == "self"
                ):
                    members.setdefault(target.attr, "attribute")
    return members


def missing() -> list[str]:
    """Each private name of ``PRIVATE`` that the installed numba-cuda's sources lack or define
    otherwise than the code expects, said with the version and the file; empty when all are
    as expected."""
    root = _sources()
    if root is None:
        return [f"numba-cuda {version()}: the numba.cuda package is not installed"]
    problems = []
    trees: dict[str, ast.Module | None] = {}
    for file, cls, member, expected in PRIVATE:
        if file not in trees:
            path = root / file
            trees[file] = ast.parse(path.read_text()) if path.is_file() else None
        tree = trees[file]
        where = f"numba-cuda {version()}, numba/cuda/{file}"
        members = None if tree is None else _members(tree, cls)
        found = None if members is None else members.get(member)
        if members is None:
            problems.append(f"{where}: no class {cls} (the raw launch reads {cls}.{member})")
        elif found is None:
            problems.append(f"{where}: {cls}.{member} is gone (the raw launch reads it)")
        elif expected.startswith("method") and found != expected:
            problems.append(f"{where}: {cls}.{member} is '{found}', expected '{expected}'")
        elif not expected.startswith("method") and found.startswith("method"):
            problems.append(f"{where}: {cls}.{member} is now a method, expected a value")
    return problems


def host_array(simulated: Any) -> Any:
    """The NumPy array behind a simulator's device array (``FakeCUDAArray._ary``)."""
    return simulated._ary


class Packed:
    """What ``pack`` reads of one compiled kernel: its launch handle (``handle``: a CUkernel
    or CUfunction), the parameter values Numba packs for the arguments, in order, the index
    of each array's data pointer among them, and the compiled kernel (kept alive with the
    launch: its module holds the function)."""

    __slots__ = ("handle", "kernel", "pointer_slots", "values")

    def __init__(self, handle: Any, values: list[Any], pointer_slots: list[int], kernel: Any):
        self.handle, self.values, self.kernel = handle, values, kernel
        self.pointer_slots = pointer_slots


def pack(
    dispatcher: Any, arrays: list[Any], scalars: tuple[Any, ...], operands: list[Any]
) -> Packed:
    """Numba's own packing of a launch of ``dispatcher`` on ``arrays`` (Numba device arrays
    over ``operands``, whose ``ptr`` and ``shape`` they have) then ``scalars``, after one
    ordinary launch with the same argument types compiled it. Raises AttributeError, KeyError,
    TypeError or ValueError (saying what, with the numba-cuda version) where Numba's internals
    are not as this module expects: the caller then stays on the dispatcher."""
    try:
        if getattr(dispatcher, "_launch_config_sensitive", False):
            raise ValueError("the kernel is specialized by its launch configuration")
        if dispatcher.extensions:
            raise ValueError("the dispatcher has argument extensions")
        types = tuple(dispatcher.typeof_pyval(a) for a in (*arrays, *scalars))
        kernel = dispatcher.overloads[types]
        if kernel.debug or kernel.cooperative or getattr(kernel, "launch_config_sensitive", 0):
            raise ValueError("debug, cooperative or launch-config-sensitive kernel")
        values: list[Any] = []
        slots = []
        array_types = kernel.argument_types[: len(arrays)]
        for ty, arr, op in zip(array_types, arrays, operands, strict=True):
            start = len(values)
            kernel._prepare_args(ty, arr, 0, [], values)
            count, ptr = len(values) - start, op.ptr
            if count != ARRAY_VALUES + 2 * len(op.shape) or int(values[start + DATA] or 0) != ptr:
                raise ValueError(
                    "Numba's array arguments are not (meminfo, parent, nitems, itemsize, data, "
                    "shape..., strides...): the raw launch does not know this numba-cuda"
                )
            slots.append(start + DATA)
        for ty, value in zip(kernel.argument_types[len(arrays) :], scalars, strict=True):
            kernel._prepare_args(ty, value, 0, [], values)
        handle = kernel._codelibrary.get_cufunc().handle
    except (AttributeError, KeyError, TypeError, ValueError) as err:
        raise type(err)(f"numba-cuda {version()}: {err}") from err
    return Packed(handle, values, slots, kernel)
