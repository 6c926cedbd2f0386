"""The machine's ceilings, measured on the machine at hand, and a rung's place under them.

Three ceilings are measured (``ladder info``), never taken from a datasheet:

- device-to-device copy bandwidth, counting bytes read + written: the fastest of a 1 GiB
  ``cuMemcpyDtoD``, a CuPy elementwise copy kernel and, when installed, PyTorch's ``copy_``
  (the driver's copy is not always the fastest way to copy on the device),
- cuBLAS FP32 throughput (SGEMM at 8192^3 through CuPy),
- cuBLAS FP16 throughput (HGEMM with FP32 accumulation at 8192^3 through CuPy).

One is computed from the device's attributes: the FP32 peak, SMs x FP32 lanes per SM x 2
(a fused multiply-add counts as two operations) x the boost clock the driver reports. The
lanes per SM are an architecture fact from NVIDIA's tuning guides, not a measurement.

Measured ceilings are cached per GPU under ``~/.cache/ladder`` (``LADDER_CACHE_DIR``).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from ladder.core import device

# FP32 lanes per SM, by compute capability (CUDA C++ Programming Guide, arithmetic throughput)
FP32_LANES_PER_SM = {
    (7, 0): 64,
    (7, 5): 64,
    (8, 0): 64,
    (8, 6): 128,
    (8, 7): 128,
    (8, 9): 128,
    (9, 0): 128,
    (10, 0): 128,
    (12, 0): 128,
}

COPY_BYTES = 1 << 30
GEMM_SIZE = 8192


def fp32_peak_tflops() -> float | None:
    """Theoretical FP32 peak from the device's attributes, or None without a GPU."""
    if not device.gpu_available():
        return None
    from numba import cuda

    dev = cuda.get_current_device()
    lanes = FP32_LANES_PER_SM.get(tuple(dev.compute_capability))
    if lanes is None:
        return None
    clock_hz = dev.CLOCK_RATE * 1e3  # the driver reports kHz
    return dev.MULTIPROCESSOR_COUNT * lanes * 2 * clock_hz / 1e12


def _event_median_ms(fn: Any, repeats: int = 10) -> float:
    from numba import cuda

    from ladder.core.timing import _Scratch

    fn()
    cuda.synchronize()
    start, end = cuda.event(), cuda.event()
    samples = []
    for _ in range(repeats):
        _Scratch.head_start()  # the host's work for fn is queued before the start event fires
        start.record()
        fn()
        end.record()
        end.synchronize()
        samples.append(cuda.event_elapsed_time(start, end))
    return float(np.median(samples))


def measure_copies_tbps() -> dict[str, float]:
    """Device-to-device copy bandwidth by each available method (bytes read + written)."""
    from numba import cuda

    found = {}
    src = cuda.device_array(COPY_BYTES, dtype=np.uint8)
    dst = cuda.device_array(COPY_BYTES, dtype=np.uint8)
    cuda.driver.device_memset(src, 1, COPY_BYTES)
    found["cuMemcpyDtoD"] = _event_median_ms(lambda: dst.copy_to_device(src))
    if device.cupy_available():
        import cupy

        copy = cupy.ElementwiseKernel("T x", "T y", "y = x", "ladder_copy")
        a, b = cupy.asarray(src).view(cupy.float32), cupy.asarray(dst).view(cupy.float32)
        found["cupy kernel"] = _event_median_ms(lambda: copy(a, b))
    if device.torch_cuda_available():
        import torch

        ta, tb = torch.as_tensor(src, device="cuda"), torch.as_tensor(dst, device="cuda")
        found["torch copy_"] = _event_median_ms(lambda: tb.copy_(ta))
    return {name: 2 * COPY_BYTES / (ms * 1e-3) / 1e12 for name, ms in found.items()}


def measure_cublas_tflops(dtype: str) -> float:
    import cupy

    rng = cupy.random.default_rng(0)
    a = rng.uniform(-1, 1, (GEMM_SIZE, GEMM_SIZE), dtype=cupy.float32).astype(dtype)
    b = rng.uniform(-1, 1, (GEMM_SIZE, GEMM_SIZE), dtype=cupy.float32).astype(dtype)
    c = cupy.empty_like(a)
    ms = _event_median_ms(lambda: cupy.matmul(a, b, out=c))
    return 2 * GEMM_SIZE**3 / (ms * 1e-3) / 1e12


def _cache_path() -> Path:
    root = Path(os.environ.get("LADDER_CACHE_DIR", Path.home() / ".cache" / "ladder"))
    return root / f"ceilings-{device.gpu_slug()}.json"


def measure_ceilings() -> dict[str, Any]:
    """Measure every ceiling on this GPU (about ten seconds)."""
    copies = measure_copies_tbps()
    ceilings: dict[str, Any] = {
        "gpu": device.facts().name,
        "measured": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "fp32_peak_tflops": fp32_peak_tflops(),
        "copy_tbps": max(copies.values()),
        "copy_methods_tbps": copies,
        "cublas_fp32_tflops": None,
        "cublas_fp16_tflops": None,
    }
    if device.cupy_available():
        ceilings["cublas_fp32_tflops"] = measure_cublas_tflops("float32")
        ceilings["cublas_fp16_tflops"] = measure_cublas_tflops("float16")
    return ceilings


def ceilings(remeasure: bool = False) -> dict[str, Any] | None:
    """Cached ceilings for this GPU, measured on first use; None in the simulator."""
    if not device.gpu_available():
        return None
    path = _cache_path()
    if path.exists() and not remeasure:
        return json.loads(path.read_text())
    found = measure_ceilings()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(found, indent=2))
    return found


def percent_of(value: float | None, ceiling: float | None) -> float | None:
    if value is None or not ceiling:
        return None
    return 100.0 * value / ceiling
