"""Welford: one pass, the row held in registers, statistics and normalization fused.

What changes: `two-pass` reads x three times in two kernels; this rung reads it once and writes y
once, the minimum: 8 bytes per element in float32, 537 MB at 8192 x 8192 instead of 1.07 GB.
1. Welford's algorithm: mean and variance in one pass without the cancellation of E[x^2] -
   E[x]^2. Each thread keeps (count, mean, M2), M2 the sum of squared deviations from the
   current mean: d = x - mean, mean += d / count, M2 += d * (x - mean). A thread's real values
   are a prefix of its list, so the count after value k is k + 1, a constant once the loop is
   unrolled: the division becomes a multiply. Two states merge by Chan, Golub and LeVeque:
   n = na + nb, d = mean_b - mean_a, mean = mean_a + d * nb / n, M2 = M2_a + M2_b + d^2 na nb / n.
   Threads merge across the warp in five ``shfl.sync.down`` steps, lane 0 of each warp writes
   its state to shared memory, one barrier, then every warp merges the row's warp states again
   with shuffles and takes lane 0's result (``shfl.sync.idx``): var = M2 / cols.
2. The row stays in registers: up to 32 values per thread in a ``cuda.local.array`` indexed by
   constants after unrolling (ptxas: no stack). A row gets the power of two of threads, a warp
   to 256, that leaves each at most 32 values: 256 at 8192 columns; shorter rows share a block
   of 256 threads. gamma and beta are applied in the same kernel.
3. With ``cols % 4 == 0`` and 16-byte-aligned arrays, a thread's 32 values are 8 ``load4``
   (``ld.global.v4.f32``), all issued before the first is used: 128 bytes in flight per thread;
   gamma and beta come as vectors too and y goes out by ``store4``. Otherwise the same kernel
   with scalar accesses, each warp on 32 consecutive columns.
Any cols works (masked values are not counted). Rows longer than 256 x 32 = 8192 do not fit;
they fall back to a kernel that reads the row twice (512 threads per row, a streaming Welford
pass with a true division, the same merge, a second read to normalize: 12 bytes per element).
The simulator has no shuffles; ``shfl_down3`` and ``shfl_first2`` stand in through shared
memory. ptxas (sm_90): 66 registers (wide), 117 (scalar), 42 and 40 for the two-read fallback.
Why: at 66 registers a 256-thread block takes 18 K of an SM's 64 K registers, so 3 blocks (3
rows) run per SM with 128 bytes of loads in flight per thread: 96 KB per SM, 12.7 MB across
132 SMs, well above the ~5 MB that 4.8 TB/s x 1 µs of latency asks for, so one block can
reduce and store while the others load.
Prediction: close to the copy bandwidth at 8192 x 8192, at least 0.9 of the measured
device-to-device copy; about twice `two-pass` (half the bytes, one launch).
Measured: on an NVIDIA H200 (results/nvidia-h200.json, ``ladder bench``, 8192 x 8192,
float32): 0.138 ms, 3.888 TB/s, 0.91 of the 4.269 TB/s copy; `two-pass` 0.370 ms; PyTorch's
``layer_norm`` 0.351 ms, ``torch.compile`` of it 0.131 ms. Nsight Compute
(lab/fused/2026-11-22-profiles/nvidia-h200-profile-layernorm.json): 131.616 µs at 80.71% of peak
DRAM throughput, 47.59% occupancy.
Verdict: held: 0.91 of the copy; 2.68x `two-pass` rather than 2x, because `two-pass`'s normalization
kernel also fell short of the copy on its own bytes. PyTorch's ``layer_norm`` is 2.54x slower: its
kernel reads x twice (``references.py`` counts it), and part of its time is not yet accounted for.
``torch.compile`` (0.131 ms) is 1.05x faster than this rung; why is not yet measured.

Lab notes: docs/notes/fused.md
"""

import math
from typing import Any

import numpy as np
from numba import cuda, float32, uint32

from ladder.core import device
from ladder.core.intrinsics import FULL_MASK, load4, load4_1d, store4, vector_aligned
from ladder.fused.problem import LAYERNORM, LAYERNORM_EPS, fused_rung

DTYPES = ("float32",)
WARP = 32
ROW_VALUES = 32  # values of a row each thread holds in registers
ROW_VECTORS = ROW_VALUES // 4
MAX_ROW_THREADS = 256  # 256 threads launch whatever ptxas does with registers (<= 255)
RESIDENT_COLS = ROW_VALUES * MAX_ROW_THREADS  # 8192: longer rows are read twice
SHARED_BLOCK = 256  # short rows: several rows per block, this many threads in all
TWO_READ_THREADS = 512  # the fallback's block, one row each (40 to 42 registers)
MAX_BLOCK = max(SHARED_BLOCK, MAX_ROW_THREADS, TWO_READ_THREADS)  # threads in any block
MAX_WARPS = MAX_BLOCK // WARP  # 16 warp states in shared memory

U_ROW_VALUES = np.uint32(ROW_VALUES)
U_WARP, U_HALF_WARP = np.uint32(WARP), np.uint32(WARP // 2)
U_ZERO, U_ONE, U_FOUR = np.uint32(0), np.uint32(1), np.uint32(4)
EPS = np.float32(LAYERNORM_EPS)

if device.simulator():
    # The simulator has no warp shuffles: the same semantics through shared memory, between
    # barriers (every thread of the block calls these, as every thread does in the kernel).
    def _exchange(values: tuple[Any, ...], lane_of: Any) -> tuple[Any, ...]:
        buf = cuda.shared.array((3, MAX_BLOCK), float32)
        tid = cuda.threadIdx.y * cuda.blockDim.x + cuda.threadIdx.x
        cuda.syncthreads()
        for i, value in enumerate(values):
            buf[i, tid] = value
        cuda.syncthreads()
        src = tid - tid % WARP + lane_of(tid % WARP)
        return tuple(buf[i, src] for i in range(len(values)))

    def shfl_down3(n: Any, mean: Any, m2: Any, delta: Any) -> tuple[Any, Any, Any]:
        return _exchange((n, mean, m2), lambda lane: lane + delta if lane + delta < WARP else lane)

    def shfl_first2(mean: Any, m2: Any) -> tuple[Any, Any]:
        return _exchange((mean, m2), lambda lane: 0)

else:

    @cuda.jit(device=True, inline="always")
    def shfl_down3(n, mean, m2, delta):
        """A Welford state from the lane ``delta`` above (``shfl.sync.down``)."""
        return (
            cuda.shfl_down_sync(FULL_MASK, n, delta),
            cuda.shfl_down_sync(FULL_MASK, mean, delta),
            cuda.shfl_down_sync(FULL_MASK, m2, delta),
        )

    @cuda.jit(device=True, inline="always")
    def shfl_first2(mean, m2):
        """Lane 0's mean and M2, for every lane (``shfl.sync.idx``)."""
        return cuda.shfl_sync(FULL_MASK, mean, 0), cuda.shfl_sync(FULL_MASK, m2, 0)


@cuda.jit(device=True, inline="always")
def combine(n_a, mean_a, m2_a, n_b, mean_b, m2_b):
    """Two Welford states (count, mean, M2) as one: Chan et al.'s parallel combination."""
    n = n_a + n_b
    w = n_b / n if n > float32(0.0) else float32(0.0)  # b's share; two empty states stay empty
    d = mean_b - mean_a
    return n, mean_a + d * w, m2_a + m2_b + d * d * n_a * w


@cuda.jit(device=True, inline="always")
def welford(vals, count):
    """Welford's running update over ``vals[:count]``; the state (count, mean, M2)."""
    mean = float32(0.0)
    m2 = float32(0.0)
    for k in range(ROW_VALUES):
        if uint32(k) < count:
            v = vals[k]
            d = v - mean
            mean += d * (float32(1.0) / float32(k + 1))  # a constant once unrolled
            m2 += d * (v - mean)
    return float32(count), mean, m2


@cuda.jit(device=True, inline="always")
def load_values(x, row, live, c0, cols, tx, threads, vals, wide):
    """A thread's values of columns ``c0 ..`` of its row into ``vals``; how many are real."""
    count = U_ZERO
    if wide:
        for v in range(ROW_VECTORS):
            col = c0 + (tx + uint32(v) * threads) * U_FOUR  # a warp: 512 contiguous bytes
            if live and col < cols:  # cols % 4 == 0: the whole vector is inside the row
                vals[4 * v], vals[4 * v + 1], vals[4 * v + 2], vals[4 * v + 3] = load4(x, row, col)
                count = uint32(4 * v + 4)
    else:
        for k in range(ROW_VALUES):
            col = c0 + tx + uint32(k) * threads  # a warp: 32 consecutive columns
            if live and col < cols:
                vals[k] = x[row, col]
                count = uint32(k + 1)
    return count


@cuda.jit(device=True, inline="always")
def store_values(out, gamma, beta, row, live, c0, cols, tx, threads, vals, mean, rstd, wide):
    """y = (x - mean) * rstd * gamma + beta for the columns ``load_values`` read."""
    if wide:
        for v in range(ROW_VECTORS):
            col = c0 + (tx + uint32(v) * threads) * U_FOUR
            if live and col < cols:
                g0, g1, g2, g3 = load4_1d(gamma, col)
                b0, b1, b2, b3 = load4_1d(beta, col)
                store4(
                    out, row, col,
                    (vals[4 * v] - mean) * rstd * g0 + b0,
                    (vals[4 * v + 1] - mean) * rstd * g1 + b1,
                    (vals[4 * v + 2] - mean) * rstd * g2 + b2,
                    (vals[4 * v + 3] - mean) * rstd * g3 + b3,
                )  # fmt: skip
    else:
        for k in range(ROW_VALUES):
            col = c0 + tx + uint32(k) * threads
            if live and col < cols:
                out[row, col] = (vals[k] - mean) * rstd * gamma[col] + beta[col]


@cuda.jit(device=True, inline="always")
def welford_step(n, mean, m2, v):
    """One value into a running Welford state (the two-read kernel's streaming form)."""
    n += float32(1.0)
    d = v - mean
    mean += d / n
    return n, mean, m2 + d * (v - mean)


@cuda.jit(device=True, inline="always")
def row_stats(n, mean, m2, warp_n, warp_mean, warp_m2, tx, ty, threads, cols):
    """The row's mean and rstd from each thread's Welford state: merged across the warp with
    shuffles, then across the row's warps through shared memory (one barrier)."""
    for s in range(5):  # lane 0 ends with the warp's state
        on, omean, om2 = shfl_down3(n, mean, m2, U_HALF_WARP >> uint32(s))
        n, mean, m2 = combine(n, mean, m2, on, omean, om2)
    tid = ty * threads + tx
    lane, warp = tid % U_WARP, tid // U_WARP
    if lane == U_ZERO:
        warp_n[warp] = n
        warp_mean[warp] = mean
        warp_m2[warp] = m2
    cuda.syncthreads()
    # every warp of the row merges the row's warp states, one per lane (lanes 0 .. warps - 1)
    warps = threads // U_WARP
    n = float32(0.0)
    mean = float32(0.0)
    m2 = float32(0.0)
    if lane < warps:
        first = ty * warps
        n, mean, m2 = warp_n[first + lane], warp_mean[first + lane], warp_m2[first + lane]
    delta = warps >> U_ONE
    while delta > U_ZERO:
        on, omean, om2 = shfl_down3(n, mean, m2, delta)
        n, mean, m2 = combine(n, mean, m2, on, omean, om2)
        delta >>= U_ONE
    mean, m2 = shfl_first2(mean, m2)  # lane 0's, so the whole row uses the same values
    return mean, float32(1.0) / float32(math.sqrt(m2 / float32(cols) + EPS))


def make_kernel(wide: bool):
    """The one-read kernel, with 16-byte (``wide``) or scalar accesses."""

    @cuda.jit
    def welford_kernel(x, gamma, beta, out):
        warp_n = cuda.shared.array(MAX_WARPS, float32)
        warp_mean = cuda.shared.array(MAX_WARPS, float32)
        warp_m2 = cuda.shared.array(MAX_WARPS, float32)
        vals = cuda.local.array(ROW_VALUES, float32)  # the thread's part of the row
        rows, cols = uint32(x.shape[0]), uint32(x.shape[1])
        tx, ty = uint32(cuda.threadIdx.x), uint32(cuda.threadIdx.y)
        threads = uint32(cuda.blockDim.x)  # threads per row: a power of two, 32 to 256
        row = uint32(cuda.blockIdx.x) * uint32(cuda.blockDim.y) + ty
        live = row < rows  # threads of a missing last row still reach the barrier
        count = load_values(x, row, live, U_ZERO, cols, tx, threads, vals, wide)
        n, mean, m2 = welford(vals, count)
        mean, rstd = row_stats(n, mean, m2, warp_n, warp_mean, warp_m2, tx, ty, threads, cols)
        store_values(out, gamma, beta, row, live, U_ZERO, cols, tx, threads, vals, mean, rstd,
                     wide)  # fmt: skip

    return welford_kernel


def make_two_read_kernel(wide: bool):
    """The fallback for rows longer than the registers hold: a streaming Welford pass over
    the row, then a second read to normalize. One row per block."""

    @cuda.jit
    def welford_two_read_kernel(x, gamma, beta, out):
        warp_n = cuda.shared.array(MAX_WARPS, float32)
        warp_mean = cuda.shared.array(MAX_WARPS, float32)
        warp_m2 = cuda.shared.array(MAX_WARPS, float32)
        cols = uint32(x.shape[1])
        tx, ty = uint32(cuda.threadIdx.x), uint32(cuda.threadIdx.y)
        threads = uint32(cuda.blockDim.x)
        row = uint32(cuda.blockIdx.x)
        n = float32(0.0)
        mean = float32(0.0)
        m2 = float32(0.0)
        if wide:
            for col in range(tx * U_FOUR, cols, threads * U_FOUR):
                v0, v1, v2, v3 = load4(x, row, col)
                n, mean, m2 = welford_step(n, mean, m2, v0)
                n, mean, m2 = welford_step(n, mean, m2, v1)
                n, mean, m2 = welford_step(n, mean, m2, v2)
                n, mean, m2 = welford_step(n, mean, m2, v3)
        else:
            for col in range(tx, cols, threads):
                n, mean, m2 = welford_step(n, mean, m2, x[row, col])
        mean, rstd = row_stats(n, mean, m2, warp_n, warp_mean, warp_m2, tx, ty, threads, cols)
        if wide:
            for col in range(tx * U_FOUR, cols, threads * U_FOUR):
                v0, v1, v2, v3 = load4(x, row, col)
                g0, g1, g2, g3 = load4_1d(gamma, col)
                b0, b1, b2, b3 = load4_1d(beta, col)
                store4(
                    out, row, col,
                    (v0 - mean) * rstd * g0 + b0,
                    (v1 - mean) * rstd * g1 + b1,
                    (v2 - mean) * rstd * g2 + b2,
                    (v3 - mean) * rstd * g3 + b3,
                )  # fmt: skip
        else:
            for col in range(tx, cols, threads):
                out[row, col] = (x[row, col] - mean) * rstd * gamma[col] + beta[col]

    return welford_two_read_kernel


wide_kernel = make_kernel(wide=True)
scalar_kernel = make_kernel(wide=False)
wide_two_read_kernel = make_two_read_kernel(wide=True)
scalar_two_read_kernel = make_two_read_kernel(wide=False)


def row_threads(cols: int) -> int:
    """Threads per row: the power of two that gives each at most ROW_VALUES values (32..256)."""
    need = -(-cols // ROW_VALUES)
    return min(MAX_ROW_THREADS, max(WARP, 1 << (need - 1).bit_length()))


def _bytes(size: tuple[int, ...], dtype: str) -> float:
    rows, cols = size
    reads = 1 if cols <= RESIDENT_COLS else 2  # a row too long for registers is read twice
    return float(((reads + 1) * rows * cols + 2 * cols) * 4)


@fused_rung(
    LAYERNORM,
    name="welford",
    parent="two-pass",
    title="One pass: Welford, row in registers, 16-byte loads",
    dtypes=DTYPES,
    bytes_moved=_bytes,
)
def geometry(x: Any, gamma: Any, beta: Any, out: Any) -> tuple:
    """The one-read kernel (rows that fit in registers, several a block when short) or the
    two-read one (a row a block), 16-byte accesses where every array allows them."""
    rows, cols = x.shape
    wide = vector_aligned(x, gamma, beta, out)
    if cols <= RESIDENT_COLS:
        kernel = wide_kernel if wide else scalar_kernel
        threads = row_threads(cols)
        rows_per_block = SHARED_BLOCK // threads
    else:  # too long for the registers: read twice, one row per block
        kernel = wide_two_read_kernel if wide else scalar_two_read_kernel
        threads, rows_per_block = TWO_READ_THREADS, 1
    return kernel, -(-rows // rows_per_block), (threads, rows_per_block)
