"""The row in registers: one read and one write of every element, the problem's minimum.

What changes: `online` still reads the row twice. A row of 8192 float32 is 32 KB and an SM has 256
KB of registers, so a block of 256 threads holds the whole row at 32 values per thread, in a
``cuda.local.array`` of compile-time size (``ELEMS = 32``) whose loops all unroll, so it lives in
registers (ptxas: no stack frame). Then, from registers: the max (xor shuffles in the warp, one
shared exchange when a row spans warps: `warp-shuffle`'s scheme), ``e = exp(v - max)`` in place and
its sum, reduced the same way, and ``e * (1 / sum)`` written out. Bytes: ``2 * rows * cols *
itemsize``, 537 MB at 8192 x 8192 float32, down from `online`'s 805 MB. The rest is shaped for
memory-level parallelism:
- wide loads: ``load4_f32`` (``ladder.core.intrinsics``: ``load4`` widened to float32) is
  one 16-byte ``ld.global.v4.f32`` (float16: 8-byte ``ld.global.v4.u16``), converted to float32
  in registers (``store4`` out). Thread ``t`` of a row reads quads ``t, t + G, ...`` (``G``
  threads per row): a warp covers 512 consecutive bytes. Rows not a multiple of 4 or arrays not
  aligned to a quad get the same kernel with scalar accesses (``make_kernel``'s ``wide``);
- all loads in flight at once: the loads are unconditional, a slot past the end of the row
  reading the row's last element (clamped column, an L1 hit) and set to -inf afterwards (its
  ``exp`` is 0, and it is not stored), so no predicate must live until its load returns; the
  SASS shows the 8 ``LDG.E.128`` (float16: ``LDG.E.64``) back to back before the first use;
- block shapes by row length: the smallest group of ``G`` = 32 to 512 threads with
  ``32 G >= cols``; 8192 columns get 256 threads, one row per block, 59 registers, 4 blocks
  (128 KB of loads) per SM; rows of up to 1024 columns one warp each, 8 rows per block, with no
  shared memory and no barrier. Rows longer than ``MAX_COLS = 16384`` fall back to `online`'s
  kernel (a 1024-thread group would need every variant at 64 registers or fewer).
ptxas (sm_90): 59 registers (wide, float32), 55 (wide, float16), 56 to 63 (scalar); 128 bytes of
shared memory; no stack and no spills in any of the 10 variants.
Why: `online`'s profile shows DRAM at 55% of peak with more traffic than the minimum; the fix is
the minimum bytes and all of a thread's loads issued before the first is used.
Prediction: at 8192 x 8192 float32, 0.9 or more of the device-to-device copy, which moves the
same bytes with no arithmetic; float16 halves the bytes and keeps the arithmetic (plus the
conversions), so its ratio to the copy may come out lower.
Measured: on an NVIDIA H200 (results/nvidia-h200.json, ``ladder bench``, 8192 x 8192): 0.134 ms
in float32, 4.002 TB/s, 0.94 of the 4.269 TB/s copy (`online`: 0.250 ms); 0.070 ms in float16,
3.821 TB/s, 0.90 of the copy (`online`: 0.232 ms). Nsight Compute
(lab/fused/2026-11-22-profiles/nvidia-h200-profile-softmax.json, float32): 128.448 µs at 82.69% of
peak DRAM throughput. PyTorch's ``torch.softmax``: 0.278 ms in float32, 0.255 ms in float16.
Verdict: held: 0.94 of the copy, 1.86x `online` (3.31x in float16), float16 lower at 0.90 as
predicted. PyTorch is 2.07x slower in float32 and 3.64x in float16 with the same bytes in one
kernel; ``references.py`` says what the profile shows of it.

Lab notes: docs/notes/fused.md
"""

import math
from typing import Any

import numpy as np
from numba import cuda, float32, uint32

from ladder.core.dtypes import resolve
from ladder.core.intrinsics import FULL_MASK, load4_f32, shfl_xor_sync, store4
from ladder.fused.problem import SOFTMAX, fused_rung
from ladder.fused.softmax import r04_online

ELEMS = 32  # values of the row per thread, in registers (a Python int: array shapes must be)
QUADS = ELEMS // 4
GROUPS = (32, 64, 128, 256, 512)  # threads per row, by row length
MIN_BLOCK = 256  # groups smaller than this share a block (several rows per block)
MAX_WARPS = GROUPS[-1] // 32  # shared slots for the per-warp partial results
MAX_COLS = GROUPS[-1] * ELEMS  # 16384: longer rows fall back to rung 4

U_FOUR = np.uint32(4)
U_LANE_MASK = np.uint32(31)
U_FIVE = np.uint32(5)
U_ZERO, U_ONE = np.uint32(0), np.uint32(1)
NEG_INF = np.float32(-np.inf)


def block_threads(group: int) -> int:
    return max(group, MIN_BLOCK)


def make_kernel(group: int, wide: bool):
    """The kernel for rows of up to ``group * ELEMS`` columns, ``group`` threads per row,
    with quad (``wide``) or scalar global accesses."""
    multi_warp = group > 32  # a row spans several warps: one shared exchange per reduction
    u_group = np.uint32(group)
    u_rows_per_block = np.uint32(block_threads(group) // group)
    u_warps_per_group = np.uint32(group // 32)

    @cuda.jit
    def kernel(x, out):
        vals = cuda.local.array(ELEMS, float32)
        warp_maxes = cuda.shared.array(MAX_WARPS, float32)
        warp_sums = cuda.shared.array(MAX_WARPS, float32)
        rows, cols = uint32(x.shape[0]), uint32(x.shape[1])
        tid = uint32(cuda.threadIdx.x)
        t = tid % u_group  # this thread's place in its row's group
        row = uint32(cuda.blockIdx.x) * u_rows_per_block + tid // u_group
        live = row < rows  # the last block may have fewer rows than it has groups
        src = min(row, rows - U_ONE)  # dead groups read the last row and store nothing
        lane, warp = tid & U_LANE_MASK, tid >> U_FIVE
        first_warp = tid // u_group * u_warps_per_group  # the row's first warp in the block

        # One read of the row. The loads are not predicated: a slot past the end of the row
        # reads the row's last element(s) again (clamped address) and is set to -inf after,
        # so no predicate has to live until its load returns and all loads issue at once.
        if wide:
            last = cols - U_FOUR  # cols % 4 == 0 here: a quad is wholly in or out
            for k in range(QUADS):
                c = (t + uint32(k) * u_group) * U_FOUR
                v0, v1, v2, v3 = load4_f32(x, src, min(c, last))
                vals[4 * k] = v0
                vals[4 * k + 1] = v1
                vals[4 * k + 2] = v2
                vals[4 * k + 3] = v3
            for k in range(QUADS):
                if (t + uint32(k) * u_group) * U_FOUR >= cols:
                    vals[4 * k] = NEG_INF
                    vals[4 * k + 1] = NEG_INF
                    vals[4 * k + 2] = NEG_INF
                    vals[4 * k + 3] = NEG_INF
        else:
            last = cols - U_ONE
            for k in range(ELEMS):
                vals[k] = float32(x[src, min(t + uint32(k) * u_group, last)])
            for k in range(ELEMS):
                if t + uint32(k) * u_group >= cols:
                    vals[k] = NEG_INF

        # the row max, from registers
        m = vals[0]
        for k in range(1, ELEMS):
            m = max(m, vals[k])
        for i in range(5):  # xor butterfly: every lane ends with the warp's max
            m = max(m, shfl_xor_sync(FULL_MASK, m, 16 >> i))
        if multi_warp:
            if lane == U_ZERO:
                warp_maxes[warp] = m
            cuda.syncthreads()
            m = warp_maxes[first_warp + lane] if lane < u_warps_per_group else NEG_INF
            for i in range(5):
                m = max(m, shfl_xor_sync(FULL_MASK, m, 16 >> i))

        # exp(v - max) in place, and the row sum
        s = float32(0.0)
        for k in range(ELEMS):
            e = math.exp(vals[k] - m)  # padding: exp(-inf) = 0
            vals[k] = e
            s += e
        for i in range(5):
            s += shfl_xor_sync(FULL_MASK, s, 16 >> i)
        if multi_warp:
            if lane == U_ZERO:
                warp_sums[warp] = s
            cuda.syncthreads()
            s = warp_sums[first_warp + lane] if lane < u_warps_per_group else float32(0.0)
            for i in range(5):
                s += shfl_xor_sync(FULL_MASK, s, 16 >> i)
        inv = float32(1.0) / s

        # one write of the row
        if live:
            if wide:
                for k in range(QUADS):
                    c = (t + uint32(k) * u_group) * U_FOUR
                    if c < cols:
                        store4(
                            out,
                            row,
                            c,
                            vals[4 * k] * inv,
                            vals[4 * k + 1] * inv,
                            vals[4 * k + 2] * inv,
                            vals[4 * k + 3] * inv,
                        )
            else:
                for k in range(ELEMS):
                    c = t + uint32(k) * u_group
                    if c < cols:
                        out[row, c] = vals[k] * inv

    return kernel


WIDE = {group: make_kernel(group, wide=True) for group in GROUPS}
SCALAR = {group: make_kernel(group, wide=False) for group in GROUPS}
# what ``ladder check`` compiles: every variant, named by its access width and group
KERNELS = {f"wide_{g}": k for g, k in WIDE.items()} | {f"scalar_{g}": k for g, k in SCALAR.items()}


def group_for(cols: int) -> int:
    """Threads per row: the fewest whose registers hold the row (cols <= MAX_COLS)."""
    return next(g for g in GROUPS if g * ELEMS >= cols)


def quads_allowed(*arrays: Any) -> bool:
    """True when every row of every array starts on a quad boundary (4 elements' bytes)."""
    return all(a.shape[1] % 4 == 0 and a.ptr % (4 * a.itemsize) == 0 for a in arrays)


def _bytes_moved(size: tuple[int, ...], dtype: str) -> float:
    rows, cols = size
    passes = 2 if cols <= MAX_COLS else 3  # longer rows: rung 4's two reads and a write
    return float(passes * rows * cols * resolve(dtype).itemsize)


@fused_rung(
    SOFTMAX,
    name="rows-in-registers",
    parent="online",
    title="The row in registers: one read, one write, 16-byte loads",
    dtypes=("float32", "float16"),
    bytes_moved=_bytes_moved,
)
def geometry(x: Any, out: Any) -> tuple:
    """The variant for this row length and alignment, ``block_threads`` a block, several rows a
    block where a row's group is smaller; rows longer than MAX_COLS: `online`'s kernel."""
    rows, cols = x.shape
    if cols > MAX_COLS:
        return r04_online.geometry(x, out)
    group = group_for(cols)
    kernel = (WIDE if quads_allowed(x, out) else SCALAR)[group]
    threads = block_threads(group)
    rows_per_block = threads // group
    return kernel, (rows + rows_per_block - 1) // rows_per_block, threads
