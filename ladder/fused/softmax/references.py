"""The library the softmax ladder is measured against, registered as a reference: the kernel
behind PyTorch's ``torch.softmax`` (``aten._softmax``, in its ``out=`` form so that the result
lands in our output without a copy), when PyTorch with CUDA is installed (optional, never
required). PyTorch reads the Numba arrays without a copy (``torch.as_tensor`` on
``__cuda_array_interface__``).
"""

from __future__ import annotations

from typing import Any

from ladder.core.rung import rung
from ladder.fused.problem import SOFTMAX, check_arrays


def torch_tensor(arr: Any) -> Any:
    """A PyTorch view of a Numba device array, no copy (the layer norm reference uses it too)."""
    import torch

    return torch.as_tensor(arr, device="cuda")


@rung(
    name="torch-softmax",
    title="PyTorch torch.softmax",
    dtypes=("float32", "float16"),
    needs=("torch",),
    reference=True,
)
def softmax(x: Any, out: Any = None) -> Any:
    import torch

    (x,), out, _ = check_arrays(SOFTMAX, (x,), out, ("float32", "float16"))
    if out.size:  # aten's out= form writes straight into our output, no extra copy
        torch.ops.aten._softmax.out(torch_tensor(x), 1, False, out=torch_tensor(out))
    return out
