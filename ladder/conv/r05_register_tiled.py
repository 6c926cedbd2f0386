"""Register tiling with the filter loops unrolled: K is a compile-time constant.

What changes: each thread computes a block of outputs, ``mg`` output channels x ``th`` rows x
``tw`` columns, in registers (rungs `shared-tiles` and `implicit-gemm`: one output). The block
stages an input tile (``cc`` channels at a time) and its ``mg`` channels' weights in shared memory,
then runs fully unrolled loops: a factory builds the kernel for one (K, config), so the loop bounds
are Python constants when Numba compiles it and the ``mg * th * tw`` accumulators stay in registers
(a ``cuda.local.array`` indexed only by unrolled counters). C and M stay run-time values (zero
padding at the ends), so any shape works. Columns are assigned with a stride: thread ``tx`` of a
row of ``bw`` threads owns columns ``tx, tx + bw, ...``, so consecutive lanes read consecutive
shared words (no bank conflicts) and store to consecutive addresses (coalesced).
Why: every loaded value is reused. An input value from shared memory feeds all ``mg`` channels,
a weight (the same for the whole warp, a broadcast) feeds the thread's ``tw`` columns and
``th`` rows, so the shared loads stop being one per multiply-add.
Prediction: per (c, p, q) a thread loads mg weights and th tw inputs for mg th tw multiply-adds:
loads per multiply-add fall from about 2 to 1/(th tw) + 1/mg, 0.35 for conv1's tiles (mg 4, th 2,
tw 5) and 0.31 for conv2's (mg 16, th 2, tw 2). A large step over `implicit-gemm`, towards the FP32
peak. The tile sizes are a reasoned guess per layer; `tuned` measures instead.
Measured: on an NVIDIA H200 by ``ladder bench`` (results/nvidia-h200.json): conv1 2.071 ms and
conv2 4.101 ms in float32 (24.16x and 8.76x over `implicit-gemm`; 5.471x and 1.624x cuDNN FP32),
12.11 and 17.68 TFLOP/s, 18.1% and 26.4% of the 66.9 TFLOP/s FP32 peak.
Verdict: the large step held, and the rung beats cuDNN FP32 on both layers, but it stays far
from the peak. Likely the instructions around the FMAs are still the limit: about one shared
load per three multiply-adds, and in every block a staging phase with integer divisions per
element between two barriers. This rung has no profile; which of these dominates is not yet
measured.

Lab notes: docs/notes/conv.md#rung-5-register-tiled
"""

import dataclasses
import functools
from typing import Any

import numpy as np
from numba import cuda, float32, uint32
from numba.types import float16

from ladder.conv.layers import CONV1, CONV2
from ladder.conv.problem import by_images, conv_launcher, conv_rung, size_of

SHARED_FLOATS = 12 * 1024  # 48 KB of static shared memory
# ptxas keeps 64 accumulators in registers; at 128 (16 x 4 x 2) `ladder check` showed a
# 512-byte stack frame: the loops were no longer fully unrolled
MAX_OUTPUTS = 64


@dataclasses.dataclass(frozen=True)
class Config:
    """Tile sizes: threads per block bw x bh, outputs per thread mg x th x tw, cc channels of
    input staged at a time."""

    bw: int = 32
    bh: int = 4
    tw: int = 2
    th: int = 2
    mg: int = 8
    cc: int = 4

    def __post_init__(self) -> None:
        if min(self.bw, self.bh, self.tw, self.th, self.mg, self.cc) < 1:
            raise ValueError(f"every tile size must be at least 1: {self}")
        if self.bw * self.bh > 1024:
            raise ValueError(f"{self.bw} x {self.bh} threads: a block has at most 1024")
        if self.outputs > MAX_OUTPUTS:
            raise ValueError(
                f"{self.outputs} outputs per thread: beyond {MAX_OUTPUTS} the compiler stops "
                "unrolling the loops and the accumulators move to local memory"
            )

    @property
    def outputs(self) -> int:
        return self.mg * self.th * self.tw

    @property
    def tile_w(self) -> int:
        return self.bw * self.tw

    @property
    def tile_h(self) -> int:
        return self.bh * self.th

    def shared_floats(self, k: int, staged: int = 4) -> int:
        """Floats of shared memory (staged: bytes per staged input element, 4 or 2)."""
        tile = self.cc * (self.tile_h + k - 1) * (self.tile_w + k - 1)
        return tile * staged // 4 + self.mg * self.cc * k * k

    def fits(self, k: int, staged: int = 4) -> bool:
        return self.shared_floats(k, staged) <= SHARED_FLOATS


# reasoned guesses for the two layers (rung 6 replaces them with measured choices)
DEFAULTS = {
    CONV1: Config(bw=16, bh=8, tw=5, th=2, mg=4, cc=1),  # a block: 16 x 80 outputs, 4 channels
    CONV2: Config(bw=17, bh=9, tw=2, th=2, mg=16, cc=4),  # a block: 18 x 34 outputs, 16 ch.
}


def choose(size: tuple[int, ...], table: dict | None = None, staged: int = 4) -> Config:
    """The config for ``size``: the table's entry for the layer, else one sized to the shape,
    shrunk until its tiles fit in shared memory."""
    table = DEFAULTS if table is None else table
    _, c, m, h, w, k = size
    found = table.get(tuple(size)) or table.get((10000, *size[1:]))
    if found is not None and found.fits(k, staged):
        return found
    ho, wo = h - k + 1, w - k + 1
    tw = 2 if wo > 32 else 1
    bw = min(32, -(-wo // tw))
    th = 2 if ho > 8 else 1
    bh = max(1, min(128 // bw, -(-ho // th), 8))
    config = Config(bw=bw, bh=bh, tw=tw, th=th, mg=min(m, 8), cc=max(1, min(c, 4)))
    for smaller in (
        config,
        dataclasses.replace(config, cc=1),
        dataclasses.replace(config, cc=1, th=1, bh=max(1, config.bh // 2)),
        Config(bw=32, bh=1, tw=1, th=1, mg=1, cc=1),
    ):
        if smaller.fits(k, staged):
            return smaller
    raise ValueError(
        f"a {k}x{k} filter needs more than {SHARED_FLOATS * 4} bytes of shared memory for even "
        "the smallest tile of this rung; rungs 1, 3 and 4 take any filter size"
    )


@functools.cache
def make_kernel(k: int, config: Config, staged: Any = float32) -> Any:
    """The register-tiled kernel for filter size ``k`` and ``config``; ``staged`` is the type
    the input tile is kept in shared memory (float32 here, float16 in rung 7)."""
    bw, bh, tw, th, mg, cc = (
        config.bw,
        config.bh,
        config.tw,
        config.th,
        config.mg,
        config.cc,
    )
    tile_w, tile_h = bw * tw, bh * th
    span_h, span_w = tile_h + k - 1, tile_w + k - 1
    threads = bw * bh
    staged_count = cc * span_h * span_w
    weight_count = mg * cc * k * k
    outputs = mg * th * tw  # accumulators per thread
    # the loop bounds and strides of the inner loops as unsigned numbers: Numba adds a
    # wrap-around check (for negative values) to every signed index (see `gemm/unsigned-indices`)
    u_cc, u_k, u_th, u_tw, u_mg = (np.uint32(n) for n in (cc, k, th, tw, mg))
    u_bw, u_th1 = np.uint32(bw), np.uint32(th)

    @cuda.jit
    def kernel(x, w, y, b0):
        tile = cuda.shared.array((cc, span_h, span_w), staged)
        ws = cuda.shared.array((mg, cc, k, k), float32)
        acc = cuda.local.array(outputs, float32)
        v = cuda.local.array(tw, float32)
        wv = cuda.local.array(mg, float32)
        for i in range(outputs):
            acc[i] = float32(0.0)
        c_count, m_count = x.shape[1], w.shape[0]
        h, wd = x.shape[2], x.shape[3]
        ho, wo = y.shape[2], y.shape[3]
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        tid = ty * bw + tx
        tiles_w = (wo + tile_w - 1) // tile_w
        row0 = (cuda.blockIdx.x // tiles_w) * tile_h
        col0 = (cuda.blockIdx.x % tiles_w) * tile_w
        m0 = cuda.blockIdx.y * mg
        b = cuda.blockIdx.z + b0
        for c0 in range(0, c_count, cc):
            cuda.syncthreads()  # the previous group's tiles are no longer read
            for i in range(tid, staged_count, threads):
                ci = i // (span_h * span_w)
                r = (i // span_w) % span_h
                s = i % span_w
                gy, gx, c = row0 + r, col0 + s, c0 + ci
                if c < c_count and gy < h and gx < wd:
                    tile[ci, r, s] = x[b, c, gy, gx]
                else:
                    tile[ci, r, s] = 0
            for i in range(tid, weight_count, threads):
                mi = i // (cc * k * k)
                ci = (i // (k * k)) % cc
                p = (i // k) % k
                q = i % k
                if m0 + mi < m_count and c0 + ci < c_count:
                    ws[mi, ci, p, q] = float32(w[m0 + mi, c0 + ci, p, q])
                else:
                    ws[mi, ci, p, q] = float32(0.0)
            cuda.syncthreads()
            utx, uty = uint32(tx), uint32(ty)
            for ci in range(u_cc):
                for p in range(u_k):
                    for q in range(u_k):
                        for mi in range(u_mg):  # the group's weights at (ci, p, q): broadcasts
                            wv[mi] = ws[mi, ci, p, q]
                        for t in range(u_th):
                            for j in range(u_tw):
                                v[j] = float32(tile[ci, uty * u_th1 + t + p, utx + j * u_bw + q])
                            for mi in range(mg):
                                for j in range(tw):
                                    acc[(mi * th + t) * tw + j] += v[j] * wv[mi]
        for mi in range(mg):
            for t in range(th):
                for j in range(tw):
                    oy = row0 + ty * th + t
                    ox = col0 + tx + j * bw
                    if m0 + mi < m_count and oy < ho and ox < wo:
                        y[b, m0 + mi, oy, ox] = acc[(mi * th + t) * tw + j]

    return kernel


def config_plan(x: Any, w: Any, out: Any, config: Config, staged: Any) -> Any:
    """The register-tiled kernel for ``config`` with the input tile staged as ``staged``, a
    block of bw x bh threads per output tile and group of mg filters, launched per MAX_GRID_Z
    images (``by_images``): the geometry of rungs 5 to 7 for a config."""
    b, _, m, _, _, k = size_of(x, w)
    if not config.fits(k, 2 if staged is float16 else 4):
        raise ValueError(f"{config} needs more than {SHARED_FLOATS * 4} bytes of shared memory")
    kernel = make_kernel(k, config, staged)
    ho, wo = out.shape[2], out.shape[3]
    tiles = (-(-ho // config.tile_h)) * (-(-wo // config.tile_w))
    groups = -(-m // config.mg)
    return by_images(kernel, (tiles, groups), (config.bw, config.bh), b)


@functools.cache
def config_launcher(config: Config, staged: Any) -> Any:
    """A launcher of the register-tiled kernel with ``config`` (``launch_config``'s, kept per
    config and staged type for the sweeps)."""
    return conv_launcher(
        functools.partial(config_plan, config=config, staged=staged), ("float32", "float16")
    )


def launch_config(
    config: Config, x: Any, w: Any, out: Any = None, *, stream: Any = 0, staged: Any = None
) -> Any:
    """The register-tiled kernel with ``config``; ``staged`` defaults to float32."""
    staged = float32 if staged is None else staged
    return config_launcher(config, staged)(x, w, out, stream=stream)


@conv_rung(
    name="register-tiled",
    parent="implicit-gemm",
    title="Register tiling, filter loops unrolled (K constant)",
    dtypes=("float32",),
)
def geometry(x: Any, w: Any, out: Any) -> Any:
    """``choose``'s config for this size, staged as float32."""
    return config_plan(x, w, out, choose(size_of(x, w)), float32)


# the kernels at the layers' configs, named for `ladder check`
conv1_kernel = make_kernel(CONV1[5], DEFAULTS[CONV1])
conv2_kernel = make_kernel(CONV2[5], DEFAULTS[CONV2])

# `ladder check` compiles each kernel for example arguments made from the problem's arrays
KERNEL_ARGS = {
    name: lambda x, w, out: (x, w, out, np.int64(0)) for name in ("conv1_kernel", "conv2_kernel")
}
