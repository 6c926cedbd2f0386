"""PyTorch views of the ladder's arrays, without a copy: what every library reference, every
``torch.compile`` row and every Triton peer hands to PyTorch or Triton.

On a GPU ``tensor`` reads ``__cuda_array_interface__`` (Numba and CuPy arrays) or takes a
PyTorch tensor as it is. In Numba's CUDA simulator a device array wraps a NumPy array, and
``tensor`` gives a CPU tensor on that memory, so what a kernel (Triton's interpreter) writes
into it lands in the rung's output. ``fp32_means_fp32`` switches PyTorch's TF32 off, so that a
float32 library row is FP32 arithmetic like the float32 rungs.
"""

from __future__ import annotations

from typing import Any

from ladder.core import device


def tensor(arr: Any) -> Any:
    """A PyTorch tensor on ``arr``'s memory (no copy): CUDA on a GPU, CPU in the simulator."""
    import torch

    if isinstance(arr, torch.Tensor):
        return arr
    if device.simulator():
        from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

        host = arr._ary if isinstance(arr, FakeCUDAArray) else arr
        return torch.from_numpy(host)
    return torch.as_tensor(arr, device="cuda")


def tensors(*arrays: Any) -> list[Any]:
    """``tensor`` of each array, in order."""
    return [tensor(a) for a in arrays]


def fp32_means_fp32() -> None:
    """Switch TF32 off for PyTorch's matmuls and convolutions (cuBLAS and cuDNN)."""
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
