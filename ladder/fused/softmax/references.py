"""The libraries the softmax ladder is measured against, registered as references: the kernel
behind PyTorch's ``torch.softmax`` (``aten._softmax``, in its ``out=`` form so that the result
lands in our output without a copy), when PyTorch with CUDA is installed (optional, never
required). PyTorch reads the Numba arrays without a copy (``torch.as_tensor`` on
``__cuda_array_interface__``).

It is not a straw man: one call, one kernel, no cast (``half_to_float=False``: float16 in,
float16 out, float32 inside, as every rung). The profile on an NVIDIA H200
(lab/fused/2026-11-22-profiles/nvidia-h200-profile-softmax.json, float32, 8192 x 8192) shows a
single kernel, ``cunn_SoftMaxForwardReg`` (the row held in registers, as rung 5), 274.432 µs at
39.13% of peak DRAM throughput, where rung 5 takes 128.448 µs at 82.69%. DRAM % x duration is 1.01x
rung 5's: the same bytes, the minimum (one read and one write, 537 MB), drawn at under half the
rate. So the 2.07x (float32) and 3.64x (float16) by which rung 5 is faster in
results/nvidia-h200.json do not come from extra passes, kernels or casts. What holds PyTorch's
kernel to that rate is not yet measured (its occupancy, 49.13%, is rung 5's 47.5%, so it is not
fewer resident warps); the float16 kernel was not profiled.

``torch-compile``: ``torch.softmax(x, dim=1)`` compiled by ``torch.compile`` (Inductor, one
graph per shape, ``ladder.core.compiled``) into a generated kernel of its own (the row held in
registers where it fits, else read twice) that stores into our output; measured beside
``torch-softmax`` in the same run, × library is against the faster.
"""

from __future__ import annotations

from typing import Any

from ladder.core import compiled
from ladder.core.rung import rung
from ladder.core.torch_views import tensor as torch_tensor
from ladder.fused.problem import SOFTMAX, check_arrays


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


def _softmax_torch(x: Any, out: Any) -> None:
    import torch

    out.copy_(torch.softmax(x, dim=1))


@rung(
    name="torch-compile",
    title="torch.compile (Inductor) of torch.softmax",
    dtypes=("float32", "float16"),
    needs=("torch", "triton"),
    reference=True,
)
def torch_compile(x: Any, out: Any = None) -> Any:
    (x,), out, _ = check_arrays(SOFTMAX, (x,), out, ("float32", "float16"))
    if out.size:
        compiled.run(_softmax_torch, x, out)
    return out
