"""The library the layer norm ladder is measured against, registered as a reference: the kernel
behind PyTorch's ``torch.nn.functional.layer_norm`` (``aten.native_layer_norm``, in its ``out=``
form so that the result lands in our output without a copy), when PyTorch with CUDA is installed
(optional, never required). PyTorch reads the Numba arrays without a copy (``torch.as_tensor`` on
``__cuda_array_interface__``).
"""

from __future__ import annotations

from typing import Any

from ladder.core.rung import rung
from ladder.fused.problem import LAYERNORM, LAYERNORM_EPS, check_arrays
from ladder.fused.softmax.references import torch_tensor


@rung(
    name="torch-layer-norm",
    title="PyTorch layer_norm",
    dtypes=("float32",),
    needs=("torch",),
    reference=True,
)
def layer_norm(x: Any, gamma: Any, beta: Any, out: Any = None) -> Any:
    import torch

    (x, gamma, beta), out, _ = check_arrays(LAYERNORM, (x, gamma, beta), out, ("float32",))
    if out.size:  # the kernel behind layer_norm, in its out= form: no extra copy
        rows, cols = x.shape
        stats = torch.empty((2, rows, 1), dtype=torch.float32, device="cuda")
        torch.ops.aten.native_layer_norm.out(
            torch_tensor(x), [cols], torch_tensor(gamma), torch_tensor(beta), LAYERNORM_EPS,
            out0=torch_tensor(out), out1=stats[0], out2=stats[1],
        )  # fmt: skip
    return out
