"""Reference: cuBLASLt's FP8 GEMM through PyTorch (``torch._scaled_mm``), the call a PyTorch
user makes for an FP8 linear layer: A row-major, B column-major, per-tensor float32 scales on
the device, ``out_dtype=torch.bfloat16``, C written in place (``out=``).

Two rows, both measured in the same run, × library against the faster:

- ``torch-scaled-mm``: ``use_fast_accum=False``, PyTorch's default: cuBLASLt adds the tensor
  cores' partial sums into FP32 registers now and then, which costs time and keeps FP32's
  accuracy over a long K.
- ``torch-scaled-mm-fast``: ``use_fast_accum=True``: the tensor cores' own accumulation
  throughout, as the rung `fp8` does. This is the library's best configuration for the same
  computation.

cuBLASLt takes sizes that are multiples of 16 only, and no e5m2 x e5m2 product; there the rows
are not applicable (``NotApplicable``, with PyTorch's own message), not failed.
"""

from __future__ import annotations

from typing import Any

from ladder.core.rung import NotApplicable, rung
from ladder.core.torch_views import tensors
from ladder.gemm.problem_fp8 import DTYPES, operands


def _scaled_mm(fast: bool) -> Any:
    def launch(A: Any, B: Any, scale_a: Any, scale_b: Any, C: Any = None) -> Any:
        import torch

        a, b, sa, sb, c, m, n, k = operands(A, B, scale_a, scale_b, C)
        if m and n:
            if m % 16 or n % 16 or k % 16:
                raise NotApplicable(
                    f"torch._scaled_mm takes M, N and K in multiples of 16, got {m}, {n}, {k}"
                )
            ta, tb, tsa, tsb, tc = tensors(a.obj, b.obj, sa.obj, sb.obj, c.obj)
            try:
                torch._scaled_mm(
                    ta,
                    tb,
                    tsa.reshape(()),
                    tsb.reshape(()),
                    out_dtype=torch.bfloat16,
                    use_fast_accum=fast,
                    out=tc,
                )
            except (RuntimeError, ValueError) as err:  # PyTorch raises either
                text = str(err).splitlines()[0]
                raise NotApplicable(f"torch._scaled_mm refuses this input: {text}") from err
        return c.obj

    launch.__name__ = launch.__qualname__ = "scaled_mm_fast" if fast else "scaled_mm"
    return launch


for _name, _fast, _how in (
    ("torch-scaled-mm", False, "FP32 partial sums"),
    ("torch-scaled-mm-fast", True, "use_fast_accum=True"),
):
    rung(
        name=_name,
        title=f"cuBLASLt FP8 (torch._scaled_mm, {_how})",
        problem="gemm-fp8",
        dtypes=DTYPES,
        needs=("torch",),
        reference=True,
        units="tensor",
        min_cc=(8, 9),
        cc_needs="FP8 tensor cores (Ada and Hopper)",
    )(_scaled_mm(fast=_fast))
