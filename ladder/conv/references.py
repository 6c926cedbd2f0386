"""The libraries the convolution ladder is measured against, registered as references, each in
the configurations a user can choose, all measured in the same run: × library is against the
fastest of them, and the table names it.

cuDNN, through ``torch.nn.functional.conv2d`` when PyTorch with CUDA is installed (optional,
never required). PyTorch reads the Numba arrays without a copy. Each call runs inside
``torch.backends.cudnn.flags(enabled=True, benchmark=..., deterministic=False,
allow_tf32=False)``: TF32 off, so that FP32 means FP32, and PyTorch's global flags as they were
afterwards. ``F.conv2d`` returns a new tensor on every call; the harness keeps it in a
``Holder`` and copies it into the problem's output for each check only, so every cuDNN row times
the convolution alone, the way a model that uses its result in place would see it. (Called
directly with the problem's arrays, a launcher converts them per call and copies the result
into the output it is given.)

- ``cudnn``: NCHW, benchmark off, PyTorch's default: cuDNN's heuristics pick an algorithm from
  the shapes without trying any. The course's view of the library: the conv summary's
  "× cuDNN FP32" column is against this row in float32.
- ``cudnn-benchmark``: NCHW, ``benchmark=True``: at the first call of each shape PyTorch times
  cuDNN's candidate algorithms on the GPU and keeps the fastest for that shape (the first call
  is the harness's check, outside the time). The heuristics' pick is not always the fastest.
- ``cudnn-channels-last`` and ``cudnn-channels-last-benchmark``: x and w in channels_last
  (NHWC) memory, as in a model that stays channels_last (made once, outside the time; the
  output comes back channels_last too). With the channels innermost, the C values that one
  filter tap multiplies are contiguous (one wide load each), and cuDNN runs its NHWC
  implicit-GEMM kernels, which in FP16 feed the tensor cores directly; on NCHW data it must
  pick NCHW kernels or transpose the data around an NHWC one. With one input channel (conv1)
  the two layouts are the same memory.
- ``cudnn-fp32`` (float16 data only): the FP16 inputs cast to FP32 on every call, the
  convolution in FP32 (TF32 off, NCHW, benchmark on), the result cast back into the FP16
  output, all three inside the timed call: what a user does where cuDNN has no fast FP16 kernel
  for the shape (conv1, with one input channel, is the case this row is for; why cuDNN's FP16
  kernels are slow there is not measured here). Its inputs are the FP16-rounded ones, like
  every float16 row's.
- ``torch-compile``: ``F.conv2d`` on NCHW data compiled by ``torch.compile`` (Inductor, one
  graph per shape, ``ladder.core.compiled``), cuDNN's flags as for ``cudnn``. Inductor may run
  the convolution in channels_last itself (its layout optimization), converting x and w before
  and the result back to NCHW after, inside the call.
- ``im2col-cublas``: the course's "unroll + GEMM" with library parts, through CuPy. A CuPy
  kernel unrolls a slice of images into a (C K²) x (images Ho Wo) matrix, ``cupy.matmul``
  multiplies the M x (C K²) weights by it, and a transpose writes the NCHW output. Slices are
  bounded to about 256 MB of unrolled matrix, since unrolling all of conv2 would take 9 GB.
"""

from __future__ import annotations

import functools
from typing import Any

from ladder.conv.problem import check_arrays, size_of
from ladder.core import compiled
from ladder.core.dtypes import name_of
from ladder.core.rung import Holder, Prepared, rung, tensor_cores_below_fp32
from ladder.core.torch_views import read_back, tensors

UNROLL_BYTES = 256 * 2**20  # the largest unrolled slice
DTYPES = ("float32", "float16")


def _flags(benchmark: bool) -> Any:
    """cuDNN on, TF32 off, ``benchmark`` as given, for one call; the global flags restored."""
    import torch

    return torch.backends.cudnn.flags(
        enabled=True, benchmark=benchmark, deterministic=False, allow_tf32=False
    )


def _short(dtype: Any) -> str:
    return name_of(dtype).replace("float", "fp")


def _cudnn_row(name: str, title: str, *, channels_last: bool, benchmark: bool) -> None:
    """Register one cuDNN configuration: its layout, its benchmark flag."""
    layout = "channels_last" if channels_last else "NCHW"

    def in_layout(x: Any, w: Any) -> tuple[Any, Any]:
        import torch

        if not channels_last:
            return x, w
        return tuple(t.contiguous(memory_format=torch.channels_last) for t in (x, w))

    def prepare(args: tuple[Any, ...], out: Any) -> Prepared:
        held = Holder()
        return Prepared(in_layout(*tensors(*args)), held, read_back(held, out))

    def describe(args: tuple[Any, ...], out: Any) -> str:
        return f"cuDNN {_short(args[0].dtype)} {layout}" + (", benchmark" if benchmark else "")

    def launch(x: Any, w: Any, out: Any = None, *, stream: Any = 0) -> Any:
        import torch.nn.functional as F

        if type(out) is Holder:  # the prepared form: x and w are tensors in the layout already
            with _flags(benchmark):
                out.value = F.conv2d(x, w)
            return out
        x, w, out, _ = check_arrays(x, w, out, DTYPES)
        if out.size:
            tx, tw, ty = tensors(x, w, out)
            with _flags(benchmark):
                ty.copy_(F.conv2d(*in_layout(tx, tw)))
        return out

    launch.__name__ = launch.__qualname__ = name.replace("-", "_")
    rung(
        name=name,
        title=title,
        dtypes=DTYPES,
        needs=("torch",),
        reference=True,
        units=tensor_cores_below_fp32,
        prepare=prepare,
        describe=describe,
    )(launch)


_cudnn_row("cudnn", "cuDNN (torch conv2d): NCHW", channels_last=False, benchmark=False)
_cudnn_row(
    "cudnn-benchmark", "cuDNN (torch conv2d): NCHW, benchmark", channels_last=False, benchmark=True
)
_cudnn_row(
    "cudnn-channels-last",
    "cuDNN (torch conv2d): channels_last",
    channels_last=True,
    benchmark=False,
)
_cudnn_row(
    "cudnn-channels-last-benchmark",
    "cuDNN (torch conv2d): channels_last, benchmark",
    channels_last=True,
    benchmark=True,
)


@rung(
    name="cudnn-fp32",
    title="cuDNN (torch conv2d) in FP32: FP16 cast per call, NCHW, benchmark",
    dtypes=("float16",),
    needs=("torch",),
    reference=True,
    units="fp32",
    describe=lambda args, out: "cuDNN fp32 NCHW, benchmark (fp16 cast per call)",
)
def cudnn_fp32(x: Any, w: Any, out: Any = None, *, stream: Any = 0) -> Any:
    import torch.nn.functional as F

    x, w, out, _ = check_arrays(x, w, out, ("float16",))
    if out.size:
        tx, tw, ty = tensors(x, w, out)
        with _flags(benchmark=True):
            ty.copy_(F.conv2d(tx.float(), tw.float()))  # copy_ casts back to FP16
    return out


def _conv2d(x: Any, w: Any, out: Any) -> None:
    import torch.nn.functional as F

    out.copy_(F.conv2d(x, w))


@rung(
    name="torch-compile",
    title="torch.compile (Inductor) of conv2d, NCHW",
    dtypes=DTYPES,
    needs=("torch", "triton"),
    reference=True,
    units=tensor_cores_below_fp32,
)
def torch_compile(x: Any, w: Any, out: Any = None, *, stream: Any = 0) -> Any:
    x, w, out, _ = check_arrays(x, w, out, DTYPES)
    if out.size:
        with _flags(benchmark=False):
            compiled.run(_conv2d, x, w, out)
    return out


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
    name="im2col-cublas",
    title="im2col (CuPy) + cuBLAS GEMM, in slices",
    dtypes=DTYPES,
    needs=("cupy",),
    reference=True,
    units=tensor_cores_below_fp32,
)
def im2col_cublas(x: Any, w: Any, out: Any = None, *, stream: Any = 0) -> Any:
    import cupy

    x, w, out, _ = check_arrays(x, w, out, DTYPES)
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
