"""PyTorch views of the ladder's arrays, without a copy: what every library reference, every
``torch.compile`` row and every Triton peer hands to PyTorch or Triton.

On a GPU ``tensor`` reads ``__cuda_array_interface__`` (Numba and CuPy arrays) or takes a
PyTorch tensor as it is. In Numba's CUDA simulator a device array wraps a NumPy array, and
``tensor`` gives a CPU tensor on that memory, so what a kernel (Triton's interpreter) writes
into it lands in the rung's output. A bfloat16 array (which neither the interface nor NumPy can
name) is read as int16 and viewed as bfloat16, an 8-bit float one as uint8 viewed as its type.
``fp32_means_fp32`` switches PyTorch's TF32 off and its reduced-precision FP16/BF16 GEMM
reductions with it, so that a library row computes the way the rungs do: FP32 arithmetic in
float32, FP32 accumulation for 16-bit inputs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ladder.core import device
from ladder.core.dtypes import name_of
from ladder.core.rung import Holder


def tensor(arr: Any) -> Any:
    """A PyTorch tensor on ``arr``'s memory (no copy): CUDA on a GPU, CPU in the simulator."""
    import torch

    if isinstance(arr, torch.Tensor):
        return arr
    name = name_of(getattr(arr, "dtype", ""))
    if name == "bfloat16":
        return tensor(arr.view(np.int16)).view(torch.bfloat16)
    if name.startswith("float8"):  # the 8-bit floats likewise, as uint8
        return tensor(arr.view(np.uint8)).view(getattr(torch, name))
    if device.simulator():
        from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

        host = arr._ary if isinstance(arr, FakeCUDAArray) else arr
        return torch.from_numpy(host)
    return torch.as_tensor(arr, device="cuda")


def tensors(*arrays: Any) -> list[Any]:
    """``tensor`` of each array, in order."""
    return [tensor(a) for a in arrays]


def fp32_means_fp32() -> None:
    """Switch TF32 off for PyTorch's matmuls and convolutions (cuBLAS and cuDNN), and the
    reduced-precision reductions of its FP16 and BF16 matmuls (cuBLAS may otherwise add the
    partial sums of a split K in 16 bits): every rung accumulates in FP32 end to end."""
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False


def read_back(held: Holder, out: Any) -> Callable[[], None]:
    """The ``Prepared.read_back`` of a ``Holder``: copy the tensor a call stored into the
    problem's output ``out`` (any layout into its own), or, when the holder is empty (poisoned
    and no call since), fill ``out`` with NaN so that the check fails."""
    target = tensor(out)

    def copy() -> None:
        if held.value is None:
            target.fill_(float("nan"))
        else:
            target.copy_(held.value)

    return copy
