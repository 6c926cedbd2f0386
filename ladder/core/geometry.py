"""A rung's launch geometry made into the plan the harness runs (``ladder.core.fastcall``).

A rung declares what it launches, never how: each problem's registration (``gemm_rung``,
``fused_rung``, ``conv_rung``, ``attention_rung``, ``moe_rung`` in its library module) calls the
rung's geometry once per signature of the operands and turns what it returns into a plan with
``plan_of``: ``(kernel, grid, block[, shared_mem[, scalars]])`` is one ``NumbaLaunch``; a list
of ``(kernel, grid, block, args[, shared_mem])`` is ``steps``, whose arguments name the plan's
operands (the same operand of every call), ``reshaped`` views of them (made again per call),
and anything else the plan owns (workspaces, scalars). ``rung_launcher`` names the launcher the
registration builds as the rung module's own, and keeps its plans on it (``launch.plans``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from ladder.core import device
from ladder.core.fastcall import NumbaLaunch, Operand, Steps, numba_array


class _Reshaped:
    """The memory of a C-contiguous device array seen in another shape, for Numba's
    dispatcher (which ``numba_array`` reads it through); keeps the array alive."""

    def __init__(self, op: Operand, shape: tuple[int, ...]) -> None:
        self.op, self.shape = op, shape

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        from ladder.core.dtypes import resolve

        op = self.op
        return {
            "shape": self.shape,
            "strides": None,
            "typestr": resolve(op.dtype).str,
            "data": (op.ptr, op.readonly),
            "version": 3,
        }


class _View(Operand):
    """An ``Operand`` that is another one's memory in another shape (``reshaped``), with
    ``source``, the operand it views: ``steps`` makes it again from each call's operand."""

    __slots__ = ("source",)


def reshaped(
    op: Operand, shape: tuple[int, ...], strides: tuple[int, ...] | None = None
) -> Operand:
    """A C-contiguous ``op`` in ``shape`` (as many elements, the same memory): a tensor as
    the 1-D array of its elements, or as a matrix. ``strides``, in elements, are C order's
    (``steps`` works them out once per plan, not per call). Only a launch through Numba's
    dispatcher (a plan's first, or any in the simulator) makes a Numba array of it."""
    if strides is None:
        shape = tuple(shape)
        strides = tuple(math.prod(shape[i + 1 :]) for i in range(len(shape)))
    base = numba_array(op).reshape(shape) if device.simulator() else _Reshaped(op, shape)
    view = _View(
        op.name, op.obj, base, op.ptr, shape, strides, op.dtype, op.itemsize, op.readonly,
        op.stream, True,
    )  # fmt: skip
    view.source = op
    return view


def _hashable(dims: Any) -> Any:
    return tuple(dims) if isinstance(dims, list | tuple) else dims


Part = tuple[Any, ...]  # (kernel, grid, block, args) or (kernel, grid, block, args, shared_mem)


def _place(arg: Any, operands: Sequence[Operand]) -> int | None:
    """Where ``arg`` is among a plan's operands (by identity), or None."""
    return next((i for i, op in enumerate(operands) if op is arg), None)


def steps(
    parts: Sequence[Part],
    operands: Sequence[Operand],
    *,
    streamed: bool = False,
    launches: dict[Any, NumbaLaunch] | None = None,
) -> Steps:
    """The plan of a rung that runs several Numba kernels, from the launches it declares.

    Each part is ``(kernel, grid, block, args)`` or ``(..., args, shared_mem)``; ``args`` are
    the kernel's arguments, arrays first: one of ``operands`` (the arrays the plan is built
    for) stands for the same operand of every call, ``reshaped`` of one for that view of it;
    any other array (a workspace the plan owns) and the scalars after the arrays are fixed.
    The plan runs the parts in order; its ``run`` is written out for these parts (as a
    hand-written one would be), so a call costs what it would. ``streamed``: ``run`` takes the
    stream after the operands and passes it to each launch (conv's plans). ``launches``: a
    dict through which two plans of the same parts share each part's launch where its kernel,
    grid, block, shared memory and scalars are the same (attention's plans with and without
    the mask: only the scores kernel takes the mask)."""
    made = {} if launches is None else launches
    names: dict[str, Any] = {"reshaped": reshaped}
    lines, order = [], []
    for n, part in enumerate(parts):
        kernel, grid, block, args, *rest = part
        arrays = [a for a in args if isinstance(a, Operand)]
        scalars = tuple(args[len(arrays) :])
        if any(isinstance(a, Operand) for a in scalars):
            raise ValueError(f"step {n}: the arrays come first, then the scalars")
        smem = int(rest[0]) if rest else 0
        key = (n, kernel, _hashable(grid), _hashable(block), smem, scalars)
        launch = made.get(key)
        if launch is None:
            launch = made[key] = NumbaLaunch(kernel, grid, block, smem, scalars)
        if launch not in order:
            order.append(launch)
        words = []
        for j, arr in enumerate(arrays):
            i = _place(arr, operands)
            source = _place(arr.source, operands) if isinstance(arr, _View) else None
            if i is not None:
                words.append(f"o{i}")
            elif source is not None:
                names[f"s{n}_{j}"], names[f"t{n}_{j}"] = arr.shape, arr.strides
                words.append(f"reshaped(o{source}, s{n}_{j}, t{n}_{j})")
            else:
                names[f"f{n}_{j}"] = arr
                words.append(f"f{n}_{j}")
        names[f"l{n}"] = launch
        lines.append(f"    l{n}({', '.join(words)}{', stream=stream' if streamed else ''})")
    params = [f"o{i}" for i in range(len(operands))] + (["stream"] if streamed else [])
    exec(f"def run({', '.join(params)}):\n" + "\n".join(lines or ["    pass"]), names)
    return Steps(names["run"], *order)


def plan_of(found: Any, operands: Sequence[Operand], streamed: bool = False) -> Any:
    """The plan a rung's geometry describes for ``operands``: ``(kernel, grid, block)``, with
    ``shared_mem`` and a tuple of scalars after it where the kernel takes them, is one launch of
    the kernel on the operands in order (then the scalars); a list is ``steps``; anything else
    is a plan already (a library's: ``Steps``, attention's ``Masks``, a tensor-core launch)."""
    if isinstance(found, tuple):
        kernel, grid, block, *rest = found
        smem = rest[0] if rest else 0
        scalars = tuple(rest[1]) if len(rest) > 1 else ()
        if streamed:
            return steps(
                [(kernel, grid, block, (*operands, *scalars), smem)], operands, streamed=True
            )
        return NumbaLaunch(kernel, grid, block, smem, scalars)
    if isinstance(found, list):
        return steps(found, operands, streamed=streamed)
    return found


def rung_launcher(launch: Callable[..., Any], geometry: Callable[..., Any], plans: Any) -> Any:
    """``launch``, the launcher a problem's registration builds around a rung's ``geometry``,
    named and documented as the rung module's own (``ladder.core.rung.rung`` reads the module
    from it), with ``plans`` (its ``PlanCache``) and ``geometry`` kept on it for tests and
    reports: ``get_rung(...).launch.plans``."""
    launch.__module__ = geometry.__module__
    launch.__doc__ = geometry.__doc__
    launch.plans = plans  # type: ignore[attr-defined]
    launch.geometry = geometry  # type: ignore[attr-defined]
    return launch
