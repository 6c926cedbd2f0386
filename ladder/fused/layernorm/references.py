"""The libraries the layer norm ladder is measured against, registered as references: the kernel
behind PyTorch's ``torch.nn.functional.layer_norm`` (``aten.native_layer_norm``, in its ``out=``
form so that the result lands in our output without a copy), when PyTorch with CUDA is installed
(optional, never required). PyTorch reads the Numba arrays without a copy (``torch.as_tensor`` on
``__cuda_array_interface__``).

It is not a straw man: one call, one kernel, float32 throughout; besides y it writes the rows'
mean and rstd (2 x 32 KB, noise) into a small tensor this wrapper allocates per call through
PyTorch's caching allocator. The profile on an NVIDIA H200
(lab/fused/2026-11-22-profiles/nvidia-h200-profile-layernorm.json, 8192 x 8192) shows a single
kernel, ``vectorized_layer_norm_kernel``, 213.152 µs at 75.66% of peak DRAM throughput, where rung 2
takes 131.616 µs at 80.71%. DRAM % x duration is 1.52x rung 2's: PyTorch's kernel reads each row
twice (``compute_stats``, then a second loop over x to normalize, in
``aten/src/ATen/native/cuda/layer_norm_kernel.cu``), 12 bytes per element against rung 2's 8, 805 MB
against 537 MB, at nearly the same rate: that accounts for the 1.62x of the profile. ``ladder
bench`` (results/nvidia-h200.json) shows a larger gap, 0.351 ms against rung 2's 0.138 ms, 2.54x:
about 0.14 ms of the library row's time is outside that kernel, and where it goes (the call's host
work, the per-call allocation) is not yet measured.

``torch-compile``: ``F.layer_norm`` compiled by ``torch.compile`` (Inductor, one graph per
shape, ``ladder.core.compiled``): Inductor decomposes it into the row's mean and variance and
the normalization, and generates one kernel that stores into our output (no mean and rstd
written); measured beside ``torch-layer-norm`` in the same run, × library is against the faster.
"""

from __future__ import annotations

from typing import Any

from ladder.core import compiled
from ladder.core.rung import rung
from ladder.core.torch_views import tensor as torch_tensor
from ladder.fused.problem import LAYERNORM, LAYERNORM_EPS, check_arrays


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


def _layer_norm_torch(x: Any, gamma: Any, beta: Any, out: Any) -> None:
    import torch.nn.functional as F

    out.copy_(F.layer_norm(x, (x.shape[1],), gamma, beta, LAYERNORM_EPS))


@rung(
    name="torch-compile",
    title="torch.compile (Inductor) of layer_norm",
    dtypes=("float32",),
    needs=("torch", "triton"),
    reference=True,
)
def torch_compile(x: Any, gamma: Any, beta: Any, out: Any = None) -> Any:
    (x, gamma, beta), out, _ = check_arrays(LAYERNORM, (x, gamma, beta), out, ("float32",))
    if out.size:
        compiled.run(_layer_norm_torch, x, gamma, beta, out)
    return out
