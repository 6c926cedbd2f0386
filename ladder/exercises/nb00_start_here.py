"""Exercises for notebook 00 (start here): a memory-bound kernel's time, and the roofline.

- ``check_copy_time(ms)``: the fewest milliseconds the fused elementwise kernel
  y = relu(a * x + b) can take on ``COPY_SIZE`` float32 at ``COPY_TBPS`` TB/s.
- ``check_roofline({"intensity": ..., "bound": ..., "floor_ms": ...})``: the arithmetic
  intensity (FLOP per byte) of the GEMM ``GEMM_SIZE`` in float32, whether it is bound by
  memory or by compute on a GPU with ``PEAK_TFLOPS`` and ``COPY_TBPS``, and its floor.
"""

from __future__ import annotations

from typing import Any

from ladder.core.rung import get_problem
from ladder.exercises._common import as_dict, close, require, same_word

COPY_SIZE = (8192, 8192)  # rows x cols of x; a and b are per-column vectors
COPY_TBPS = 4.0  # device-to-device copy bandwidth, TB/s (about an H200's)
GEMM_SIZE = (4096, 4096, 16)  # M, N, K: a thin K, as in a low-rank update
PEAK_TFLOPS = 60.0  # FP32 peak, TFLOP/s


def check_copy_time(answer: Any) -> str:
    """y = relu(a * x + b), one fused kernel: it must read x (and a, b) and write y at least
    once. How many ms at the copy bandwidth, at best? (Within 3%.)"""
    problem = get_problem("elementwise")
    moved = problem.min_bytes(COPY_SIZE, "float32")
    right = moved / (COPY_TBPS * 1e12) * 1e3
    rows, cols = COPY_SIZE
    if close(answer, right * 1e3) or close(answer, right * 1e-3):
        raise AssertionError(
            "right figure, wrong unit: give milliseconds (bytes / (TB/s x 1e12) s)"
        )
    if close(answer, right / 2, 0.05):
        raise AssertionError(
            "that counts the reads only: y is written to memory too (8 bytes each)"
        )
    if close(answer, right * 3, 0.05):
        raise AssertionError(
            "that is the three-kernel version's bytes; the fused kernel keeps t, u in registers"
        )
    require(
        close(answer, right),
        f"not quite: count the bytes (x: {rows} x {cols} float32 read, y written, a and b read "
        "once), then divide by the bandwidth in bytes per second",
    )
    return f"right: {moved / 1e6:.0f} MB at {COPY_TBPS} TB/s is {right:.4f} ms, the kernel's floor"


def check_roofline(answer: Any) -> str:
    """For C = A @ B with (M, N, K) = GEMM_SIZE in float32: FLOPs over the fewest bytes
    (read A and B, write C once), "memory" or "compute" for the ceiling that binds (any case),
    and the floor in ms, the larger of bytes at COPY_TBPS and FLOPs at PEAK_TFLOPS."""
    found = as_dict(answer, ("intensity", "bound", "floor_ms"), "check_roofline")
    problem = get_problem("gemm")
    intensity = problem.flops(GEMM_SIZE) / problem.min_bytes(GEMM_SIZE, "float32")
    balance = PEAK_TFLOPS / COPY_TBPS
    bound = "memory" if intensity < balance else "compute"
    ceilings = {"copy_tbps": COPY_TBPS, "fp32_peak_tflops": PEAK_TFLOPS}
    floor = problem.floor_ms(GEMM_SIZE, "float32", ceilings, tensor_cores=False)
    require(
        close(found["intensity"], intensity, 0.05),
        "intensity: FLOPs are 2 M N K (a multiply and an add); the fewest bytes read A (M K), "
        "B (K N) and write C (M N) once, 4 bytes each",
    )
    require(
        same_word(found["bound"], bound),
        f"bound: the GPU's balance point is {balance:.0f} FLOP/byte (peak / bandwidth); "
        "below it memory binds, above it compute",
    )
    require(
        close(found["floor_ms"], floor, 0.05),
        "floor_ms: the larger of bytes / bandwidth and FLOPs / peak, in ms",
    )
    return (
        f"right: {intensity:.1f} FLOP/byte, below the balance point of {balance:.0f}: "
        f"{bound}-bound, floor {floor:.4f} ms. At K = 4096 it would be about 680 FLOP/byte"
    )
