"""Exercises for notebook 01 (the FP32 GEMM ladder).

- ``check_coalescing(dict)``: 32-byte sectors one warp's load touches in rungs 1 and 2.
- ``check_shared_tiling(kernel)``: complete rung 3 from rung 1, with ``TILE`` x ``TILE``
  tiles; run in the simulator on an odd size against float64.
- ``check_local_array(dict)``: predict the stack frame (local memory per thread) of two small
  kernels, then confirm with the compiler's report (``ladder check`` reads the same figures).

The skeleton for ``check_shared_tiling`` (block (TILE, TILE), grid (ceil(N / TILE),
ceil(M / TILE)), x picks the column as in rung 2)::

    @cuda.jit
    def tiled(A, B, C):
        As = cuda.shared.array((TILE, TILE), float32)
        Bs = cuda.shared.array((TILE, TILE), float32)
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        row = cuda.blockIdx.y * TILE + ty
        col = cuda.blockIdx.x * TILE + tx
        acc = float32(0.0)
        for k0 in range(0, A.shape[1], TILE):
            ...  # stage one tile of A and one of B (zeros past the edges), sync,
            ...  # accumulate TILE products from shared memory, sync
        if row < C.shape[0] and col < C.shape[1]:
            C[row, col] = acc
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from typing import Any

import numpy as np
from numba import cuda, float32

from ladder.core import timing
from ladder.exercises._common import as_dict, compile_report, require, run_kernel, sectors

WARP = 32
K_STRIDE = 1024  # A is M x 1024 and B 1024 x N, float32, row-major
TILE = 8  # small, so that the simulator runs it quickly
SIZE = (19, 13, 21)  # M, N, K: off every tile
ALIGNED = (16, 16, 16)  # M, N, K on the tiles: no edges, so a missing zero fill does no harm
LOCAL = 16  # floats in each kernel's register array


def check_coalescing(answer: Any) -> str:
    """At one step k of the inner loop, one warp loads A[row, k] and B[k, col] (float32,
    K = N = 1024). How many 32-byte sectors does each load touch? In rung 1 threadIdx.x picks
    the row, in rung 2 the column. Keys: naive_A, naive_B, coalesced_A, coalesced_B."""
    keys = ("naive_A", "naive_B", "coalesced_A", "coalesced_B")
    found = as_dict(answer, keys, "check_coalescing")
    k, fixed, lanes = 5, 3, range(WARP)
    right = {
        "naive_A": sectors((lane * K_STRIDE + k) * 4 for lane in lanes),  # row = lane
        "naive_B": sectors((k * K_STRIDE + fixed) * 4 for _ in lanes),
        "coalesced_A": sectors((fixed * K_STRIDE + k) * 4 for _ in lanes),
        "coalesced_B": sectors((k * K_STRIDE + lane) * 4 for lane in lanes),  # col = lane
    }
    for key in keys:
        require(
            found[key] == right[key],
            f"{key}: write each lane's byte address, (row * 1024 + column) * 4, and count the "
            "distinct 32-byte sectors; lanes that read one address share one sector",
        )
    return (
        "right: rung 1 needs 32 sectors for 32 useful floats of A, rung 2 four sectors for 32 "
        "of B; 128 bytes per warp is what coalesced means"
    )


def check_shared_tiling(kernel: Any) -> str:
    """Your ``@cuda.jit`` kernel ``(A, B, C)`` for the skeleton in this module's docstring,
    run at (M, N, K) = SIZE against the float64 product. A wrong answer is told which mistake
    it shows: a missing ``syncthreads`` (read from the kernel's source), or tiles not zeroed
    past the edges (right at ALIGNED, a size on the tiles, and wrong at SIZE)."""
    source = _source(kernel)
    require(
        "shared.array" in source,
        "stage the tiles in shared memory: cuda.shared.array((TILE, TILE), float32)",
    )
    err = _tiling_error(kernel, SIZE)
    syncs = _syncs_around_products(source)
    if err <= 1e-5:
        note = ""
        if syncs is not None and 0 in syncs:
            note = (
                ". But your loop lacks a syncthreads around the products: the simulator got "
                "lucky; on a GPU a warp can race ahead (see the skeleton)"
            )
        return (
            f"right: relative error {err:.2g} at M, N, K = {SIZE}. Rung 3 is this kernel with "
            f"TILE = 32{note}"
        )
    if syncs is not None and syncs[0] == 0:
        raise AssertionError(
            f"wrong answer (relative error {err:.3g}): sync after staging the tiles, before the "
            "products: otherwise a thread reads a tile element another thread has not stored yet"
        )
    if syncs is not None and syncs[1] == 0:
        raise AssertionError(
            f"wrong answer (relative error {err:.3g}): the second syncthreads is missing. Sync "
            "after the products too: otherwise a fast thread stores the next tile over the one "
            "slower threads are still reading"
        )
    if _tiling_error(kernel, ALIGNED) <= 1e-5:
        raise AssertionError(
            f"wrong answer (relative error {err:.3g}), though right at {ALIGNED}, a size on the "
            f"tiles: the edges. Where a tile runs past M, N or K (K = {SIZE[2]} is not a "
            "multiple of 8), store 0 into As and Bs; an element left unwritten keeps the "
            "previous tile's value and is added in again"
        )
    require(
        np.isfinite(err),
        "some outputs were never written (NaN): does every thread inside C store?",
    )
    raise AssertionError(
        f"wrong answer (relative error {err:.3g}), even at {ALIGNED}, a size on the tiles: check "
        "the indices. Thread (ty, tx) stages A[row, k0 + tx] and B[k0 + ty, col], then adds "
        "As[ty, i] * Bs[i, tx] over i"
    )


def _source(kernel: Any) -> str:
    try:
        return inspect.getsource(kernel.py_func)
    except (AttributeError, OSError, TypeError):
        return ""


def _tiling_error(kernel: Any, size: tuple[int, int, int]) -> float:
    """The relative error of ``kernel`` at (M, N, K) = ``size``; inf when it left an element
    unwritten (NaN: the output is poisoned)."""
    m, n, k = size
    rng = np.random.default_rng(1)
    a = rng.uniform(-1, 1, (m, k)).astype(np.float32)
    b = rng.uniform(-1, 1, (k, n)).astype(np.float32)
    c = np.full((m, n), np.nan, dtype=np.float32)  # poisoned: an unwritten element fails
    grid = ((n + TILE - 1) // TILE, (m + TILE - 1) // TILE)
    out = run_kernel(kernel, grid, (TILE, TILE), a, b, c)
    if not np.all(np.isfinite(out)):
        return float("inf")
    return timing.relative_error(out, a.astype(np.float64) @ b.astype(np.float64))


def _is_sync(node: ast.AST) -> bool:
    call = node.value if isinstance(node, ast.Expr) else None
    if not isinstance(call, ast.Call):
        return False
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    return name == "syncthreads"


def _syncs_around_products(source: str) -> tuple[int, int] | None:
    """In the kernel's loop over k0, the syncthreads before and after the inner loop of
    products (statements of the loop's own body); None when the source has no such loop."""
    try:
        tree = ast.parse(textwrap.dedent(source))
    except SyntaxError:
        return None
    outer = next((n for n in ast.walk(tree) if isinstance(n, ast.For)), None)
    if outer is None:
        return None
    inner = [i for i, stmt in enumerate(outer.body) if isinstance(stmt, ast.For)]
    if not inner:
        return None
    before = sum(_is_sync(stmt) for stmt in outer.body[: inner[0]])
    after = sum(_is_sync(stmt) for stmt in outer.body[inner[-1] + 1 :])
    return before, after


def constant_index(A, out):
    i = cuda.grid(1)
    if i < out.shape[0]:
        vals = cuda.local.array(LOCAL, float32)
        for j in range(LOCAL):
            vals[j] = A[i, j]
        s = float32(0.0)
        for j in range(LOCAL):
            s += vals[j] * vals[LOCAL - 1 - j]  # indices known when compiling (unrolled)
        out[i] = s


def runtime_index(A, idx, out):
    i = cuda.grid(1)
    if i < out.shape[0]:
        vals = cuda.local.array(LOCAL, float32)
        for j in range(LOCAL):
            vals[j] = A[i, j]
        s = float32(0.0)
        for j in range(LOCAL):
            s += vals[idx[j]]  # an index known only at run time
        out[i] = s


def compile_signatures() -> dict[str, tuple[Any, ...]]:
    import numba

    return {
        "constant_index": (numba.float32[:, ::1], numba.float32[::1]),
        "runtime_index": (numba.float32[:, ::1], numba.int32[::1], numba.float32[::1]),
    }


def check_local_array(answer: Any) -> str:
    """``constant_index`` and ``runtime_index`` above each keep 16 floats in
    ``cuda.local.array``. Predict each kernel's stack frame in bytes (local memory per
    thread; 0 when the array lives in registers). Keys: constant_index, runtime_index. The
    check compiles both for sm_80 (a few seconds, no GPU needed, but the compiler that the
    ``cuda13`` or ``cuda12`` extra installs: without it, ``MissingCompiler`` says so)."""
    found = as_dict(answer, ("constant_index", "runtime_index"), "check_local_array")
    report = compile_report(__name__)
    for key in ("constant_index", "runtime_index"):
        right = report[key]["stack_bytes"]
        require(
            found[key] == right,
            f"{key}: registers have no addresses, so an array stays in registers only when every "
            "index is known when compiling (loops unrolled); otherwise it lives in local memory, "
            f"{LOCAL} floats x 4 bytes per thread",
        )
    return (
        f"right: {report['constant_index']['stack_bytes']} and "
        f"{report['runtime_index']['stack_bytes']} bytes of stack "
        f"({report['constant_index']['registers']} and {report['runtime_index']['registers']} "
        "registers); look for ld.local / st.local in the PTX of your own kernels"
    )
