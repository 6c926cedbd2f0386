"""Exercises for notebook 05 (fusion).

- ``check_fusion_bytes(dict)``: bytes the three-kernel elementwise chain and the fused kernel
  move in float16, from each kernel's reads and writes.
- ``check_online_softmax(update)``: the running max and running sum of one pass over a row,
  as rung 4 of the softmax ladder keeps them, written by you.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ladder.core.rung import get_problem, get_rung
from ladder.exercises._common import as_dict, close, require

SIZE = (8192, 8192)
DTYPE = "float16"


def check_fusion_bytes(answer: Any) -> str:
    """y = relu(a * x + b) at SIZE in float16: three kernels (t = a x, u = t + b, y = relu(u),
    t and u stored in float16) against one fused kernel. a and b are per-column vectors,
    read once. Keys: three_kernels_mb, fused_mb (1 MB = 1e6 bytes)."""
    found = as_dict(answer, ("three_kernels_mb", "fused_mb"), "check_fusion_bytes")
    three = get_rung("elementwise", "three-kernels").bytes_moved(SIZE, DTYPE) / 1e6
    fused = get_problem("elementwise").min_bytes(SIZE, DTYPE) / 1e6
    if close(found["three_kernels_mb"], three * 2) or close(found["fused_mb"], fused * 2):
        raise AssertionError("float16 is 2 bytes an element, not 4")
    require(
        close(found["three_kernels_mb"], three),
        "three_kernels_mb: each kernel reads one matrix and writes one; count the 6 passes",
    )
    require(close(found["fused_mb"], fused), "fused_mb: read x once, write y once")
    return f"right: {three:.0f} MB against {fused:.0f} MB: fused should be about 3x faster"


def check_online_softmax(update: Callable[..., Any]) -> str:
    """Write ``update(m, s, chunk) -> (m, s)``: given the running max ``m`` and the running sum
    ``s`` of exp(x - m) over the elements seen so far (start: m = -inf, s = 0.0), fold in a
    NumPy chunk of new elements. The check feeds a row with large values in chunks and
    compares with max(x) and sum(exp(x - max(x)))."""
    rng = np.random.default_rng(5)
    x = rng.normal(0.0, 3.0, 70) + 800.0  # exp(800) overflows even float64
    m, s = -np.inf, 0.0
    with np.errstate(over="ignore", invalid="ignore"):
        for start in range(0, x.size, 16):
            m, s = update(m, s, x[start : start + 16])
    right_m = float(x.max())
    right_s = float(np.exp(x - right_m).sum())
    require(
        close(m, right_m, 1e-12), "m: the running max is the max of the old max and the chunk's"
    )
    require(
        np.isfinite(s),
        "s is inf or NaN: subtract the max before exp (exp(800) overflows)",
    )
    require(
        close(s, right_s, 1e-9),
        "s: when the max grows from m to m', every earlier term exp(x - m) must become "
        "exp(x - m'): multiply the old sum by exp(m - m') before adding the chunk's terms",
    )
    return (
        "right: one pass over the row instead of two (max, then sum); rung 4 does this per thread"
    )
