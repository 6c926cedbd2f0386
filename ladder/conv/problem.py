"""Forward convolution on the ECE408 CNN layer shapes (a modified LeNet-5 on Fashion-MNIST).

NCHW input ``x`` (B x C x H x W), weights ``w`` (M x C x K x K), stride 1, no padding:

    y[b, m, h, w] = sum over c, p, q of x[b, c, h + p, w + q] * w[m, c, p, q]

for an output of B x M x (H - K + 1) x (W - K + 1). A size is the tuple (B, C, M, H, W, K).
The two canonical layers, each with a batch of 10,000 images:

- conv1: (10000, 1, 4, 86, 86, 7): one input channel, four filters;
- conv2: (10000, 4, 16, 40, 40, 7): four channels in, sixteen out.

Every launcher takes device arrays ``x``, ``w`` and an optional output, plus a keyword
``stream`` (a Numba stream, or 0 for the current stream, ``fastcall.current_stream()``) so that
the pipelines of the data movement ladder can run a rung on their own streams. ``operands``
validates them the same way for every rung. A rung declares its launch geometry and registers
it with ``conv_rung``, whose launcher runs the plan for the operands' signature
(``fastcall.PlanCache``): a plan is called ``plan(x, w, out, stream)``.

The floor of a layer is the larger of its memory time (the problem's fewest bytes over the
measured copy bandwidth) and its arithmetic time (its FLOPs over the peak of the arithmetic the
rung uses: the FP32 peak for CUDA-core rungs, cuBLAS HGEMM's measured rate for tensor cores).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ladder.conv.layers import CONV1, CONV2
from ladder.core import device
from ladder.core.dtypes import resolve
from ladder.core.fastcall import (
    PLANS_PER_CACHE,
    NumbaLaunch,
    Operand,
    PlanCache,
    Steps,
    intake,
    launch_stream,
    numba_array,
    output,
    refuse_capture,
)
from ladder.core.geometry import plan_of, reshaped, rung_launcher
from ladder.core.rung import Problem, register_problem, rung

GPU_REFERENCE_FLOPS = 2e9  # above this, the float64 reference is computed on the GPU
MAX_GRID_Z = 65535  # images per launch where the grid's z dimension counts them

# odd shapes for the GPU tests: C=1, M=1, K=1, K=5, H != W, B=1, and a few canonical images
TEST_SIZES = [
    (1, 1, 1, 1, 1, 1),
    (1, 1, 1, 7, 7, 7),
    (2, 1, 4, 13, 17, 5),
    (3, 3, 5, 11, 9, 1),
    (1, 4, 16, 40, 33, 7),
    (5, 2, 1, 20, 22, 3),
    (3, 1, 4, 86, 86, 7),
    (2, 4, 16, 40, 40, 7),
    (7, 6, 9, 19, 23, 5),
]
# the simulator runs every thread of a block as a Python thread: few and small images
SIMULATOR_SIZES = [(1, 1, 1, 1, 1, 1), (2, 1, 3, 9, 11, 5), (1, 2, 1, 6, 5, 3), (1, 3, 2, 8, 7, 7)]


def output_hw(size: tuple[int, ...]) -> tuple[int, int]:
    _, _, _, h, w, k = size
    return h - k + 1, w - k + 1


class LayerShape:
    """Ho and Wo of a launch plan's ``size`` (B, C, M, H, W, K), for the planners' dataclasses."""

    size: tuple[int, int, int, int, int, int]

    @property
    def Ho(self) -> int:
        return output_hw(self.size)[0]

    @property
    def Wo(self) -> int:
        return output_hw(self.size)[1]


class ConvProblem(Problem):
    """y = conv2d(x, w): NCHW, stride 1, no padding; FP32 accumulation for every dtype."""

    name = "conv"
    bound = "compute"
    dtypes: tuple[str, ...] = ("float32", "float16")
    size_names = ("B", "C", "M", "H", "W", "K")
    size_help = "B C M H W K: B images of C x H x W, M filters of C x K x K (K <= H, K <= W)"

    def sanitize_sizes(self) -> list[tuple[int, ...]]:
        """M = 3 runs the tensor-core rungs' packed kernels (odd Wo), M = 16 their 16-filter
        ones (rung 13: odd Wo, the threads' copies), conv2's shape rung 13's bulk copies and
        pairs, and 600 small images more than one per block (rung 13's slots used again)."""
        return [
            (2, 3, 3, 13, 17, 5),
            (3, 4, 16, 40, 33, 7),
            (3, 4, 16, 40, 40, 7),
            (600, 4, 16, 8, 8, 7),
        ]

    def standard_sizes(self, dtype: str = "float32") -> list[tuple[int, ...]]:
        return [CONV1, CONV2]

    def simulator_sizes(self, dtype: str = "float32") -> list[tuple[int, ...]]:
        return [(2, 1, 3, 9, 11, 5)]

    def test_sizes(self, dtype: str = "float32") -> list[tuple[int, ...]]:
        return list(TEST_SIZES)

    def make_inputs(self, size: tuple[int, ...], dtype: str = "float32", seed: int = 0):
        b, c, m, h, w, k = size
        rng = np.random.default_rng(seed)
        x = rng.uniform(-1.0, 1.0, size=(b, c, h, w)).astype(resolve(dtype))
        wt = rng.uniform(-1.0, 1.0, size=(m, c, k, k)).astype(resolve(dtype))
        return x, wt

    def reference(self, inputs: tuple[np.ndarray, ...]) -> np.ndarray:
        """The float64 result: NumPy, or for large problems on a GPU the direct loop in
        float64 on the GPU (NumPy takes tens of seconds per layer at B = 10,000)."""
        x, w = (v.astype(np.float64) for v in inputs)
        size = (x.shape[0], x.shape[1], w.shape[0], x.shape[2], x.shape[3], w.shape[2])
        if self.flops(size) > GPU_REFERENCE_FLOPS and device.gpu_available():
            return conv_float64_gpu(x, w)
        return conv_numpy(x, w)

    def output_shape(self, size: tuple[int, ...]) -> tuple[int, ...]:
        b, _, m, _, _, _ = size
        return (b, m, *output_hw(size))

    def flops(self, size: tuple[int, ...]) -> float:
        b, c, m, _, _, k = size
        ho, wo = output_hw(size)
        return 2.0 * b * m * c * k * k * ho * wo

    def min_bytes(self, size: tuple[int, ...], dtype: str) -> float:
        b, c, m, h, w, k = size
        ho, wo = output_hw(size)
        return float((b * c * h * w + m * c * k * k + b * m * ho * wo) * resolve(dtype).itemsize)

    def tolerance(self, dtype: str) -> float:
        return {"float32": 1e-5, "float16": 2e-3}[dtype]

    def ceiling_key(self, dtype: str) -> str:
        return "fp32_peak_tflops" if dtype == "float32" else "cublas_fp16_tflops"

    def readme_summary(self, runs: list[dict[str, Any]], ceilings: dict[str, Any]) -> str:
        """The layers as the course reports them, for the README: ms per layer, their sum, the
        sum against cuDNN FP32's and against the best library configuration's of the same dtype
        in the same run, and each layer's time over its floor."""
        from ladder.conv import summary

        rows = summary.layer_table(runs, ceilings)
        if not rows:
            return ""
        return (
            "Per layer, as the course reports it: op time of conv1 and conv2, their sum, cuDNN "
            "FP32's sum over the rung's (same run: the course's view of the library), the sum of "
            "the fastest library configuration of the rung's dtype over the rung's (cuDNN NCHW "
            "or channels_last, benchmark or not, FP16 cast to FP32, torch.compile, im2col + "
            "cuBLAS), and each layer's time over its floor (the larger of its fewest bytes at "
            "the copy bandwidth and its FLOPs at the peak of the arithmetic the rung uses).\n\n"
            + summary.markdown(rows)
        )

    def parse_size(self, values: list[int]) -> tuple[int, ...]:
        size = super().parse_size(values)
        _, _, _, h, w, k = size
        if k > h or k > w:
            raise ValueError(
                f"--size for conv: the filter K={k} must fit the image (K <= H and K <= W; "
                f"stride 1, no padding), got H={h} W={w}"
            )
        return size


def conv_float64_gpu(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The convolution in float64 on the GPU: the direct loop, one thread per output, with
    float64 products and sums (tests check it against ``conv_numpy``)."""
    from numba import cuda

    kernel = _float64_kernel()
    b, _, h, wd = x.shape
    m, _, k, _ = w.shape
    y = cuda.device_array((b, m, h - k + 1, wd - k + 1), dtype=np.float64)
    if y.size:
        kernel[(y.size + 255) // 256, 256](cuda.to_device(x), cuda.to_device(w), y)
    return y.copy_to_host()


@functools.cache
def _float64_kernel():
    from numba import cuda, float64

    @cuda.jit
    def direct_float64(x, w, y):
        i = cuda.grid(1)
        if i >= y.size:
            return
        wo, ho, m_count = y.shape[3], y.shape[2], y.shape[1]
        col, row = i % wo, (i // wo) % ho
        m, b = (i // (wo * ho)) % m_count, i // (wo * ho * m_count)
        acc = float64(0.0)
        for c in range(x.shape[1]):
            for p in range(w.shape[2]):
                for q in range(w.shape[3]):
                    acc += x[b, c, row + p, col + q] * w[m, c, p, q]
        y[b, m, row, col] = acc

    return direct_float64


def conv_numpy(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The convolution in numpy, in the inputs' dtype: a sliding-window view contracted with
    the weights over (c, p, q), one output channel block at a time to bound the memory."""
    b, c, h, wd = x.shape
    m, _, k, _ = w.shape
    ho, wo = h - k + 1, wd - k + 1
    out = np.empty((b, m, ho, wo), dtype=np.result_type(x, w))
    if out.size == 0:
        return out
    windows = np.lib.stride_tricks.sliding_window_view(x, (k, k), axis=(2, 3))  # b c ho wo p q
    step = max(1, int(2**22 // max(1, c * ho * wo * k * k)))  # images per slice
    for start in range(0, b, step):
        part = windows[start : start + step]
        out[start : start + step] = np.einsum("bchwpq,mcpq->bmhw", part, w, optimize=True)
    return out


CONV = register_problem(ConvProblem())


def operands(
    x: Any, w: Any, out: Any, dtypes: tuple[str, ...]
) -> tuple[Operand, Operand, Operand, str]:
    """Validate a launcher's device arrays; allocate the output if None.

    Returns x, w and the output as ``Operand`` records (``ladder.core.fastcall``) and the dtype
    name. Every rung validates through this, so every rung refuses bad input with the same
    messages.
    """
    x = intake(x, "x")
    w = intake(w, "w")
    dtype = x.dtype
    if dtype not in dtypes:
        raise TypeError(f"x must be {' or '.join(dtypes)} for this rung, got {dtype}")
    if w.dtype != dtype:
        raise TypeError(f"w must be {dtype} like x, got {w.dtype}")
    if x.ndim != 4:
        raise ValueError(f"x must be 4-D (B, C, H, W), got shape {x.shape}")
    if w.ndim != 4:
        raise ValueError(f"w must be 4-D (M, C, K, K), got shape {w.shape}")
    b, c, h, wd = x.shape
    m, cw, k, k2 = w.shape
    if k != k2:
        raise ValueError(f"filters must be square (M, C, K, K), got shape {w.shape}")
    if cw != c:
        raise ValueError(f"w has {cw} input channels but x has {c}")
    if k < 1 or k > min(h, wd):
        raise ValueError(f"a {k}x{k} filter does not fit a {h}x{wd} image (stride 1, no padding)")
    for arr in (x, w):
        if not arr.contiguous:
            raise ValueError(f"{arr.name} must be C-contiguous (NCHW); copy it first")
    shape = (b, m, h - k + 1, wd - k + 1)
    return x, w, output(out, shape, dtype, layout="NCHW"), dtype


def check_arrays(x: Any, w: Any, out: Any, dtypes: tuple[str, ...]) -> tuple[Any, Any, Any, str]:
    """``operands``, returning Numba device arrays (the caller's own when they are): for the
    library references, which hand the arrays to PyTorch and CuPy."""
    x, w, out, dtype = operands(x, w, out, dtypes)
    return numba_array(x), numba_array(w), numba_array(out), dtype


Geometry = Callable[..., Any]
Launcher = Callable[..., Any]
KERNELS_PER_PLAN = 16  # a ``by_weights`` plan's launches kept, one set per weights' kernel


def conv_launcher(
    geometry: Geometry, dtypes: Sequence[str], plans_kept: int = PLANS_PER_CACHE
) -> Launcher:
    """A launcher ``launch(x, w, out=None, *, stream=0)`` from a ``geometry`` (see ``conv_rung``),
    not registered: validate (``operands``), find the plan for the operands' signature (a
    ``PlanCache``, ``launch.plans``) and run it on ``stream`` (``fastcall.launch_stream``).
    Returns ``out`` as given (a PyTorch tensor stays one), or the Numba device array allocated
    when it is None. An empty output needs no plan and no launch."""

    def plan(x: Operand, w: Operand, out: Operand) -> Any:
        return plan_of(geometry(x, w, out), (x, w, out), streamed=True)

    plans = PlanCache(plan, size=plans_kept)
    dtypes = tuple(dtypes)

    def launch(x: Any, w: Any, out: Any = None, *, stream: Any = 0) -> Any:
        x, w, out, _ = operands(x, w, out, dtypes)
        if 0 not in out.shape:
            plans(x, w, out)(x, w, out, launch_stream(stream))
        return out.obj

    return rung_launcher(launch, geometry, plans)


def conv_rung(
    *,
    dtypes: Sequence[str] = ("float32", "float16"),
    plans_kept: int = PLANS_PER_CACHE,
    **options: Any,
) -> Callable[[Geometry], Geometry]:
    """Register a convolution rung from its launch geometry, with ``rung``'s options (name,
    parent, title, needs, units, min_cc, ...), and return the geometry as it is.

    ``geometry(x, w, out)`` takes the validated operands, once per signature of them, and
    returns ``(kernel, grid, block)``, a launch of ``kernel(x, w, y)``; a list of steps
    ``(kernel, grid, block, args)`` for a rung of several kernels (``geometry.steps``: the
    arguments name x, w and out, the plan's own ``workspace`` matrices and ``as_matrix``
    views); or a plan of this module's (``by_images``, ``by_weights``) or of ``tc.plan``'s.
    ``plans_kept``: how many signatures' plans to keep (fewer where each holds large buffers).
    The launcher registered is ``conv_launcher``'s."""

    def decorate(geometry: Geometry) -> Geometry:
        rung(dtypes=tuple(dtypes), **options)(conv_launcher(geometry, dtypes, plans_kept))
        return geometry

    return decorate


def by_images(
    kernel: Any, grid: tuple[int, int], block: tuple[int, int], images: int, weights: bool = True
) -> Steps:
    """A plan of one ``NumbaLaunch`` of ``kernel(x, w, y, b0)`` (``weights`` False:
    ``kernel(x, y, b0)``) per MAX_GRID_Z images, the grid's z dimension; ``b0``, the first
    image of each, is fixed in its launch."""
    launches = [
        NumbaLaunch(kernel, (*grid, min(MAX_GRID_Z, images - b0)), block, scalars=(b0,))
        for b0 in range(0, images, MAX_GRID_Z)
    ]

    def run(x: Operand, w: Operand, out: Operand, stream: int) -> None:
        for launch in launches:
            launch(x, w, out, stream=stream)

    def run_without_w(x: Operand, w: Operand, out: Operand, stream: int) -> None:
        for launch in launches:
            launch(x, out, stream=stream)

    return Steps(run if weights else run_without_w, *launches)


def by_weights(
    kernel_of: Callable[[Operand], Any],
    grid: tuple[int, int],
    block: tuple[int, int],
    images: int,
    not_in_a_graph: str,
) -> Steps:
    """A plan whose kernel depends on the weights' values, ``kernel_of(w)`` (one compiled with
    them in constant memory, ``kernel(x, y, b0)``): each call finds its w's kernel and runs its
    launches per MAX_GRID_Z images (``by_images``, kept per kernel, KERNELS_PER_PLAN of them). A
    graph can hold neither the choice nor the read of w it takes: capture is refused with
    ``not_in_a_graph``."""
    launches = PlanCache(
        lambda kernel: by_images(kernel, grid, block, images, weights=False),
        size=KERNELS_PER_PLAN,
    )

    def run(x: Operand, w: Operand, out: Operand, stream: int) -> None:
        refuse_capture(not_in_a_graph)
        launches(kernel_of(w))(x, w, out, stream)

    return Steps(run)


def workspace(count: int, dtype: str) -> Any:
    """A flat device buffer of a plan's own (allocated once per plan, never per call): slices
    of it are the plan's matrices (``matrix``)."""
    from numba import cuda

    return cuda.device_array(max(count, 1), dtype=resolve(dtype))


def matrix(buffer: Any, rows: int, cols: int, name: str) -> Operand:
    """The first rows x cols elements of a plan's ``workspace`` as a matrix operand."""
    return intake(buffer[: rows * cols].reshape(rows, cols), name)


def as_matrix(op: Operand, rows: int, cols: int) -> Operand:
    """A C-contiguous ``op`` as a rows x cols matrix (the same memory): the weights as the
    GEMM's M x (C K²) operand (``geometry.reshaped``: a plan's steps make it again per call)."""
    return reshaped(op, (rows, cols))


def size_of(x: Any, w: Any) -> tuple[int, int, int, int, int, int]:
    """(B, C, M, H, W, K) of validated arrays or ``Operand`` records."""
    b, c, h, wd = (int(v) for v in x.shape)
    return b, c, int(w.shape[0]), h, wd, int(w.shape[2])
