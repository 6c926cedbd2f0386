"""The libraries the convolution ladder is measured against, registered as references.

- cuDNN, through ``torch.nn.functional.conv2d`` when PyTorch with CUDA is installed (optional,
  never required). PyTorch reads the Numba arrays without a copy; ``torch.backends.cudnn``
  may pick any algorithm (benchmark mode off, the default), TF32 is switched off so that FP32
  means FP32, and the result is copied into our output (one extra pass over it, a few
  percent of the layer's bytes).
- im2col + cuBLAS through CuPy: the course's "unroll + GEMM" with library parts. A CuPy
  kernel unrolls a slice of images into a (C K²) x (images Ho Wo) matrix, ``cupy.matmul``
  multiplies the M x (C K²) weights by it, and a transpose writes the NCHW output. Slices are
  bounded to about 256 MB of unrolled matrix, since unrolling all of conv2 would take 9 GB.
"""

from __future__ import annotations

import functools
from typing import Any

from ladder.conv.problem import check_arrays, size_of
from ladder.core.rung import rung, tensor_cores_below_fp32

UNROLL_BYTES = 256 * 2**20  # the largest unrolled slice


@functools.cache
def _unroll_kernel() -> Any:
    import cupy

    return cupy.ElementwiseKernel(
        "raw T x, int32 C, int32 H, int32 W, int32 K, int32 HO, int32 WO, int32 NB",
        "T u",
        """
        // u is (C K K) x (NB HO WO); element i: row r = i / (NB HO WO), column j
        long long cols = (long long)NB * HO * WO;
        long long r = i / cols, j = i % cols;
        int q = r % K, p = (r / K) % K, c = r / (K * K);
        int col = j % WO, row = (j / WO) % HO, b = j / (HO * WO);
        u = x[(((long long)b * C + c) * H + row + p) * W + col + q];
        """,
        "ladder_conv_unroll",
    )


@rung(
    name="cudnn",
    title="cuDNN (torch.nn.functional.conv2d)",
    dtypes=("float32", "float16"),
    needs=("torch",),
    reference=True,
    units=tensor_cores_below_fp32,
)
def cudnn(x: Any, w: Any, out: Any = None, *, stream: Any = 0) -> Any:
    import torch

    x, w, out, _ = check_arrays(x, w, out, ("float32", "float16"))
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    if out.size:
        tx, tw, ty = (torch.as_tensor(a, device="cuda") for a in (x, w, out))
        ty.copy_(torch.nn.functional.conv2d(tx, tw))
    return out


@rung(
    name="im2col-cublas",
    title="im2col (CuPy) + cuBLAS GEMM, in slices",
    dtypes=("float32", "float16"),
    needs=("cupy",),
    reference=True,
    units=tensor_cores_below_fp32,
)
def im2col_cublas(x: Any, w: Any, out: Any = None, *, stream: Any = 0) -> Any:
    import cupy

    x, w, out, _ = check_arrays(x, w, out, ("float32", "float16"))
    b, c, m, h, wd, k = size_of(x, w)
    ho, wo = h - k + 1, wd - k + 1
    if not out.size:
        return out
    cx, cw, cy = (cupy.asarray(a) for a in (x, w, out))
    per_image = c * k * k * ho * wo * cx.itemsize
    step = max(1, min(b, UNROLL_BYTES // per_image))
    weights = cw.reshape(m, c * k * k)
    for start in range(0, b, step):
        nb = min(step, b - start)
        u = cupy.empty((c * k * k, nb * ho * wo), dtype=cx.dtype)
        _unroll_kernel()(cx[start : start + nb], c, h, wd, k, ho, wo, nb, u)
        prod = weights @ u  # M x (nb Ho Wo)
        cy[start : start + nb] = prod.reshape(m, nb, ho, wo).transpose(1, 0, 2, 3)
    return out
