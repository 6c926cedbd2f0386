"""The mixture-of-experts ladder's library: the kernels every rung shares, none a rung of its own.

- ``top_k_softmax``: one thread per token keeps its k largest logits in registers and writes
  their experts and softmax gates (T × k). Used by every rung from rung 1 on.
- ``count_experts``, ``scan_offsets``, ``permute``, ``gather_rows``, ``combine``: the routing
  pipeline that rung 2 introduces (tokens counted per expert, offsets by a scan, each (token,
  expert) pair given a row so that each expert's rows are contiguous, the rows copied, and the
  experts' outputs summed back per token). Rungs 3 to 5 reuse it.
- ``tile_dot``: the shared-memory tiled dot product of a TILE × TILE block (GEMM rung 3's loop)
  with the row of A given per thread, so a kernel may read A's rows in any order; and the two
  per-expert GEMM kernels of rungs 1 and 2 built on it.
- ``tile_expert``: which expert a block of a grouped launch works for (rungs 3 and 4).
- ``tile_starts_of`` and ``OffsetsCheck``: the grouped GEMM alone (rungs 3 and 5) takes its
  offsets from the caller: the kernel that makes its tile schedule checks them on the device,
  and the launcher reports bad ones at its next call or at ``check_offsets()``.

Every kernel accumulates in float32 and reads float32 or float16. bfloat16, which Numba cannot
type, arrives as its bits (uint16): the copies move them as they are, and ``bf16_to_float32``
and ``float32_to_bf16`` convert where a kernel computes (rungs 5 and 6 only).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numba import cuda, float32, int32, uint16, uint32

from ladder.core.device import simulator
from ladder.moe.problem import K_MAX

if not simulator():
    from numba.cuda import libdevice

TILE = 16  # rows and columns of a CUDA-core GEMM block tile (and its K step)
ELEMENTWISE = (32, 8)  # threads of a block that walks a (rows, columns) array


def grid_for(rows: int, cols: int) -> tuple[int, int]:
    """Blocks of ELEMENTWISE threads over a rows × cols array (columns along x)."""
    bx, by = ELEMENTWISE
    return (max(1, -(-cols // bx)), max(1, -(-rows // by)))


@cuda.jit(device=True, inline=True)
def silu(z: float) -> float:
    return z / (float32(1.0) + math.exp(-z))


@cuda.jit(device=True, inline=True)
def as_float32(v: Any) -> float:
    """A float32 or float16 element as float32."""
    return float32(v)


if simulator():  # the simulator runs kernels as Python, where libdevice's functions are stubs

    def _bits_as_float(u: Any) -> Any:
        return np.array(u, np.uint32).view(np.float32)[()]

    def _float_as_bits(v: Any) -> Any:
        return np.array(v, np.float32).view(np.uint32)[()]

else:

    @cuda.jit(device=True, inline=True)
    def _bits_as_float(u: Any) -> float:
        return libdevice.int_as_float(int32(u))  # the same 32 bits read as a float

    @cuda.jit(device=True, inline=True)
    def _float_as_bits(v: float) -> Any:
        return uint32(libdevice.float_as_int(v))


@cuda.jit(device=True, inline=True)
def bf16_to_float32(bits: Any) -> float:
    """A bfloat16 element, given as its 16 bits (uint16), as float32: bfloat16 is the top half
    of a float32, so the bits shift up 16 and are read as a float (exact, NaN and inf kept)."""
    return _bits_as_float(uint32(bits) << uint32(16))


@cuda.jit(device=True, inline=True)
def float32_to_bf16(v: float) -> Any:
    """The bits (uint16) of the bfloat16 nearest to a float32, ties to even, as the hardware
    converts: add 0x7FFF plus the lowest kept bit, drop the low 16. A NaN stays a NaN."""
    if v != v:
        return uint16(0x7FC0)
    b = _float_as_bits(v)
    return uint16((b + uint32(0x7FFF) + ((b >> uint32(16)) & uint32(1))) >> uint32(16))


def top_k_softmax_kernel(widen: Any) -> Any:
    """``top_k_softmax`` for logits whose elements ``widen`` turns into float32: ``as_float32``
    (float32, float16) or ``bf16_to_float32`` (bfloat16 bits)."""

    @cuda.jit
    def top_k_softmax(logits, ids, gates):
        """ids[t], gates[t] = the k largest logits of token t (ties: the lower expert first) and
        the softmax over those k. k = ids.shape[1] <= K_MAX, kept sorted in registers by insertion.
        Logits are expected finite: every comparison with a NaN is false, so a NaN logit spoils the
        token's choice (torch.topk ranks it largest), and a token whose k kept logits are all -inf
        gets NaN gates."""
        t = cuda.grid(1)
        if t >= logits.shape[0]:
            return
        k = ids.shape[1]
        best = cuda.local.array(K_MAX, float32)
        which = cuda.local.array(K_MAX, int32)
        for j in range(k):
            best[j] = -math.inf
            which[j] = -1
        for e in range(logits.shape[1]):
            v = widen(logits[t, e])
            if v > best[k - 1] or which[k - 1] < 0:  # `or`: -inf logits are still picked
                j = k - 1
                while j > 0 and (best[j - 1] < v or which[j - 1] < 0):
                    best[j] = best[j - 1]
                    which[j] = which[j - 1]
                    j -= 1
                best[j] = v
                which[j] = e
        total = float32(0.0)
        for j in range(k):
            total += math.exp(best[j] - best[0])
        for j in range(k):
            ids[t, j] = which[j]
            gates[t, j] = math.exp(best[j] - best[0]) / total

    return top_k_softmax


top_k_softmax = top_k_softmax_kernel(as_float32)
top_k_softmax_bf16 = top_k_softmax_kernel(bf16_to_float32)


@cuda.jit
def count_experts(ids, counts):
    """counts[e] += the (token, slot) pairs routed to e: one atomic add per pair. The counts
    must be zero before; ``scan_offsets`` leaves them zero for the next call."""
    i = cuda.grid(1)
    if i < ids.size:
        cuda.atomic.add(counts, ids[i // ids.shape[1], i % ids.shape[1]], 1)


@cuda.jit
def scan_offsets(counts, tile_rows, offsets, cursor, tile_starts):
    """offsets: the exclusive prefix sum of counts (expert e's rows start at offsets[e],
    offsets[E] = T·k); cursor: a copy for ``permute`` to take rows from; tile_starts: the same
    sum over each expert's tiles of ``tile_rows`` rows (a grouped launch's schedule). E is at
    most a few hundred: one thread does it, in less time than a launch; then it zeroes counts."""
    if cuda.grid(1) != 0:
        return
    rows = 0
    tiles = 0
    for e in range(counts.shape[0]):
        offsets[e] = rows
        cursor[e] = rows
        tile_starts[e] = tiles
        rows += counts[e]
        tiles += (counts[e] + tile_rows - 1) // tile_rows
        counts[e] = 0
    offsets[counts.shape[0]] = rows
    tile_starts[counts.shape[0]] = tiles


# what ``tile_starts_of`` found wrong with the offsets it was given, in ``status[0]``
OFFSETS_START, OFFSETS_ORDER, OFFSETS_END = 1, 2, 3


@cuda.jit
def tile_starts_of(offsets, rows, tile_rows, tile_starts, status):
    """tile_starts from given offsets (the grouped GEMM alone, whose rows come sorted), and the
    offsets' check, on the device: they must start at 0, never decrease and end at ``rows``
    (M). Bad offsets get an empty schedule (every tile_starts 0: each block of the GEMM returns
    before it reads an offset or a row), and their first fault goes to ``status``, host memory
    mapped for the GPU (``OffsetsCheck``): fault, index, offsets[index], and offsets[index - 1]
    or M. Good offsets write nothing there. One thread, as in scan_offsets."""
    if cuda.grid(1) != 0:
        return
    experts = offsets.size - 1
    fault = 0
    at = 0
    if offsets[0] != 0:
        fault = OFFSETS_START
    else:
        for e in range(experts):
            if offsets[e + 1] < offsets[e]:
                fault = OFFSETS_ORDER
                at = e + 1
                break
        if fault == 0 and offsets[experts] != rows:
            fault = OFFSETS_END
            at = experts
    tiles = 0
    for e in range(experts):
        tile_starts[e] = tiles
        if fault == 0:
            tiles += (offsets[e + 1] - offsets[e] + tile_rows - 1) // tile_rows
    tile_starts[experts] = tiles
    if fault != 0:
        status[1] = at
        status[2] = offsets[at]
        status[3] = offsets[at - 1] if fault == OFFSETS_ORDER else rows
        cuda.threadfence_system()  # the details reach the host before the fault it reads first
        status[0] = fault


class OffsetsCheck:
    """The report of a grouped GEMM launcher's bad offsets, without a copy or a wait in the
    call. Each call's ``tile_starts_of`` checks its offsets on the GPU and writes a fault to
    ``status``: pinned host memory mapped into the device, which the host reads as ordinary
    memory. ``raise_if_bad`` (a host read; every call starts with it) raises the ValueError
    for a fault that an earlier call's check has written by then; ``check`` waits for the GPU
    first, so it reports any call made before it. A fault is reported once."""

    def __init__(self, launcher: str) -> None:
        self.launcher = launcher
        self._status: Any = None

    @property
    def status(self) -> Any:
        """The four int32 the check kernel writes (allocated at the first call)."""
        if self._status is None:
            status = cuda.mapped_array(4, np.int32, portable=True)
            status[:] = 0
            self._status = status
        return self._status

    def raise_if_bad(self) -> None:
        status = self._status
        if status is None or status[0] == 0:
            return
        fault, at, value, bound = (int(status[i]) for i in range(4))
        status[0] = 0
        why = {
            OFFSETS_START: f"offsets[0] = {value}, but they must start at 0 (a's first row)",
            OFFSETS_ORDER: f"offsets[{at}] = {value} is less than offsets[{at - 1}] = {bound}, "
            "but they must never decrease",
            OFFSETS_END: f"offsets[{at}] = {value}, but they must end at M = {bound} (a's rows), "
            "so that every row belongs to one group",
        }[fault]
        raise ValueError(
            f"offsets: a call of {self.launcher} had bad offsets, found on the GPU: {why}. "
            "That call computed nothing (its output is undefined)"
        )

    def check(self) -> None:
        """Wait for the GPU, then ``raise_if_bad``."""
        cuda.synchronize()
        self.raise_if_bad()


@cuda.jit
def permute(ids, cursor, perm_slot, slot_row):
    """Give each (token t, slot j) pair a row of its expert: row = an atomic take from the
    expert's cursor. perm_slot[row] = t·k + j (who is there) and slot_row[t·k + j] = row (where
    it went). Rows within an expert come in any order; each row is computed alone, so the
    result does not depend on it."""
    i = cuda.grid(1)
    if i < ids.size:
        row = cuda.atomic.add(cursor, ids[i // ids.shape[1], i % ids.shape[1]], 1)
        perm_slot[row] = i
        slot_row[i] = row


@cuda.jit
def gather_rows(x, perm_slot, k, rows):
    """rows[r, c] = x[token of row r, c]: each expert's tokens copied next to each other."""
    c, r = cuda.grid(2)
    if r < perm_slot.size and c < x.shape[1]:
        rows[r, c] = x[perm_slot[r] // k, c]


@cuda.jit
def combine(rows, slot_row, gates, y):
    """y[t, c] = Σ_j gates[t, j] · rows[slot_row[t·k + j], c], the k terms in slot order, so the
    sum is the same on every call."""
    c, t = cuda.grid(2)
    if t < y.shape[0] and c < y.shape[1]:
        k = gates.shape[1]
        acc = float32(0.0)
        for j in range(k):
            acc += gates[t, j] * float32(rows[slot_row[t * k + j], c])
        y[t, c] = acc


@cuda.jit(device=True, inline=True)
def tile_dot(a, a_row, b, col, sa, sb):
    """Σ_k a[a_row, k] · b[k, col] for thread (ty, tx) of a TILE × TILE block, the block's rows
    of a and columns of b staged TILE × TILE at a time through the shared tiles sa and sb.
    a_row is the thread's own row of a (any row: a gather); a_row < 0 or col >= b's width loads
    zeros, and such a thread still loads and meets every barrier."""
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    inner = a.shape[1]
    acc = float32(0.0)
    for k0 in range(0, inner, TILE):
        sa[ty, tx] = float32(a[a_row, k0 + tx]) if a_row >= 0 and k0 + tx < inner else float32(0.0)
        sb[ty, tx] = (
            float32(b[k0 + ty, col]) if col < b.shape[1] and k0 + ty < inner else float32(0.0)
        )
        cuda.syncthreads()
        for i in range(TILE):
            acc += sa[ty, i] * sb[i, tx]
        cuda.syncthreads()  # nobody may overwrite the tiles while others still read them
    return acc


@cuda.jit
def matmul_silu(a, b, h):
    """h = silu(a @ b) for one expert: a (n × d) its rows, b (d × f) its w1."""
    sa = cuda.shared.array((TILE, TILE), float32)
    sb = cuda.shared.array((TILE, TILE), float32)
    row = cuda.blockIdx.y * TILE + cuda.threadIdx.y
    col = cuda.blockIdx.x * TILE + cuda.threadIdx.x
    acc = tile_dot(a, row if row < a.shape[0] else -1, b, col, sa, sb)
    if row < h.shape[0] and col < h.shape[1]:
        h[row, col] = silu(acc)


@cuda.jit
def matmul(a, b, y):
    """y = a @ b for one expert: a (n × f) its h, b (f × d) its w2."""
    sa = cuda.shared.array((TILE, TILE), float32)
    sb = cuda.shared.array((TILE, TILE), float32)
    row = cuda.blockIdx.y * TILE + cuda.threadIdx.y
    col = cuda.blockIdx.x * TILE + cuda.threadIdx.x
    acc = tile_dot(a, row if row < a.shape[0] else -1, b, col, sa, sb)
    if row < y.shape[0] and col < y.shape[1]:
        y[row, col] = acc


def matmul_grid(rows: int, cols: int) -> tuple[int, int]:
    """Blocks of TILE × TILE threads over a rows × cols product."""
    return (max(1, -(-cols // TILE)), max(1, -(-rows // TILE)))


@cuda.jit(device=True, inline=True)
def tile_expert(tile_starts, tile):
    """The expert whose tiles include ``tile`` of a grouped launch (tile_starts[e] <= tile <
    tile_starts[e + 1]; experts with no rows have no tiles and are passed over); -1 when the
    tile is past the last expert's (the launch has blocks for the most tiles there can be)."""
    experts = tile_starts.size - 1
    if tile >= tile_starts[experts]:
        return -1
    e = 0
    while tile_starts[e + 1] <= tile:
        e += 1
    return e


def max_tiles(rows: int, experts: int, tile_rows: int) -> int:
    """The most row tiles E experts can need for ``rows`` rows in all, whatever the routing:
    each expert's last tile may be partly empty, so one more per expert than rows / tile_rows."""
    return -(-rows // tile_rows) + min(experts, rows)


class Routing:
    """The device buffers and kernels that route T tokens to E experts, k each (rung 2's
    pipeline; rungs 3 to 5 reuse it): ``run(logits, stream)`` launches ``top_k_softmax``,
    ``count_experts``, ``scan_offsets`` (tiles of ``tile_rows``) and ``permute``, and leaves
    ids, gates (T × k), offsets and tile_starts (E + 1), perm_slot and slot_row (T·k) on the
    device. No value comes back to the host. For ``dtype`` bfloat16 the logits come as bits."""

    THREADS = 128

    def __init__(
        self, tokens: int, experts: int, k: int, tile_rows: int, dtype: str = "float32"
    ) -> None:
        # the logits' dtype picks the top-k kernel; bfloat16 logits come as their bits
        self.top_k = top_k_softmax_bf16 if dtype == "bfloat16" else top_k_softmax
        self.tile_rows = tile_rows
        self.ids = cuda.device_array((tokens, k), np.int32)
        self.gates = cuda.device_array((tokens, k), np.float32)
        self.counts = cuda.to_device(np.zeros(experts, np.int32))  # scan_offsets re-zeroes it
        self.offsets = cuda.device_array(experts + 1, np.int32)
        self.cursor = cuda.device_array(experts, np.int32)
        self.tile_starts = cuda.device_array(experts + 1, np.int32)
        self.perm_slot = cuda.device_array(tokens * k, np.int32)
        self.slot_row = cuda.device_array(tokens * k, np.int32)
        self.token_blocks = max(1, -(-tokens // self.THREADS))
        self.slot_blocks = max(1, -(-(tokens * k) // self.THREADS))

    def run(self, logits: Any, stream: Any) -> None:
        threads = self.THREADS
        self.top_k[self.token_blocks, threads, stream](logits, self.ids, self.gates)
        count_experts[self.slot_blocks, threads, stream](self.ids, self.counts)
        scan_offsets[1, 1, stream](
            self.counts, self.tile_rows, self.offsets, self.cursor, self.tile_starts
        )
        permute[self.slot_blocks, threads, stream](
            self.ids, self.cursor, self.perm_slot, self.slot_row
        )


def example_arguments(dtype: Any) -> dict[str, tuple[Any, ...]]:
    """Small host arrays typed as each kernel of the ladder takes them (x, w1 and w2 in
    ``dtype``): what ``ladder check`` compiles the kernels for (each rung module's
    ``KERNEL_ARGS``). T = 5 tokens, d = 16, f = 24, E = 4, k = 2."""
    import numpy as np

    tokens, d, f, experts, k = 5, 16, 24, 4, 2
    t = np.dtype(dtype)
    x, y = np.zeros((tokens, d), t), np.zeros((tokens, d), t)
    w1, w2 = np.zeros((experts, d, f), t), np.zeros((experts, f, d), t)
    rows, h = np.zeros((tokens * k, d), t), np.zeros((tokens * k, f), t)
    ids, gates = np.zeros((tokens, k), np.int32), np.zeros((tokens, k), np.float32)
    offsets, per_expert = np.zeros(experts + 1, np.int32), np.zeros(experts, np.int32)
    pairs, tokens_of = np.zeros(tokens * k, np.int32), np.zeros(tokens, np.int32)
    f32 = np.zeros((tokens, d), np.float32)
    words = np.zeros((tokens, d // 4), np.uint64), np.zeros((tokens * k, d // 4), np.uint64)
    return {
        "top_k_softmax": (np.zeros((tokens, experts), t), ids, gates),
        "count_experts": (ids, per_expert),
        "scan_offsets": (per_expert, TILE, offsets, per_expert, offsets),
        "tile_starts_of": (offsets, tokens * k, TILE, offsets, np.zeros(4, np.int32)),
        "permute": (ids, per_expert, pairs, pairs),
        "gather_rows": (x, pairs, k, rows),
        "gather_words": (words[0], pairs, k, words[1]),
        "combine": (rows, pairs, gates, y),
        "matmul_silu": (x, w1[0], np.zeros((tokens, f), t)),
        "matmul": (np.zeros((tokens, f), t), w2[0], f32),
        "gather": (x, tokens_of, x),
        "scatter_add": (f32, tokens_of, np.zeros(tokens, np.float32), f32),
        "cast_into": (f32, y),
        "grouped_matmul_silu": (rows, w1, offsets, offsets, h),
        "grouped_matmul": (h, w2, offsets, offsets, rows),
        "gathered_matmul_silu": (x, pairs, k, w1, offsets, offsets, h),
        "scattered_matmul": (h, w2, offsets, offsets, pairs, gates, rows),
        "combine_slots": (rows, k, y),
    }


def kernel_args(name: str, example: str | None = None) -> Any:
    """A ``KERNEL_ARGS`` entry: the problem's inputs in, ``example_arguments``' arguments of
    ``example`` (by default ``name``) in the inputs' dtype out."""
    return lambda *arrays: example_arguments(arrays[0].dtype)[example or name]
