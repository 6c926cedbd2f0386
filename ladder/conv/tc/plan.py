"""Planning for the tensor-core conv rungs: the layout arithmetic and the launch they share.

A rung's plan is a small dataclass in its own file (``r08_tensor_core.Plan`` ...) built on
``Layout``: the shapes derived from the size and the tiling, and the shared-memory layout
(B entries | the input's A quads | raw input slots). Everything the kernel does not compute
itself is here, passed as kernel parameters in the order of ``PARAMS``.

``launch_plan`` makes a rung's launch plan, once per signature of its operands (what the
rung's geometry returns, kept by ``conv_rung``'s ``fastcall.PlanCache``): its kernel with the
grid and the scalars fixed, the pointers to x, w and y given per call
(``fastcall.cupy_launch``), or the rung below's plan.

One source for Python and C++: the constants below and the parameter list reach NVRTC as ``-D``
options (``defines``), which ``tc/layout.cuh`` turns into its constants, the ``Conv`` struct
and the kernels' signatures.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ladder.conv.problem import LayerShape, size_of
from ladder.core import cuda_cpp
from ladder.core.cuda_cpp import blocks_per_sm
from ladder.core.fastcall import POINTER, Operand, Steps, cupy_launch, on_stream

NWARPS = 8  # warps per block
THREADS = 32 * NWARPS
P_BLOCK = 8  # filter rows per window: PAIRS k16 steps (the last may be a k8 step)
PAIRS = P_BLOCK // 2
Q_CHUNK = 8  # filter columns per k8 half of a k16 step
FRAG_BYTES = 256  # one B block (k16 x n8): 32 lanes x (b0, b1)
QUAD_BYTES = 16  # one A quad: four 32-bit pair words
PACK_FILTERS = 4  # filters of a packed n8 tile (x 2 column shifts)
MIN_BLOCKS = 2  # blocks per SM the register budget is fitted for (__launch_bounds__)
SEGMENTS = 3  # rung 11's rewrite: segments per quad column
WARPGROUP = 4  # warps of a wgmma job
ALIGN = 16  # bytes: x is read in 16-byte chunks
SMEM_TARGET = 96 * 1024  # bytes a block tries to stay under: two blocks per SM, like registers
SMEM_LIMIT = 227 * 1024  # the opt-in maximum per block on sm_90 (sm_80: 163 KB)

# The kernel's parameters after the pointers to x, w and y: name and C++ type, in order.
PARAMS: tuple[tuple[str, str], ...] = (
    ("x_halves", "long long"),  # B C H W: the last chunk of x reads only this far
    *((name, "int") for name in ("B", "C", "M", "H", "W", "K", "Ho", "Wo")),
    ("QC", "int"),  # ceil(K / Q_CHUNK): 8-column chunks of a filter row
    ("PB", "int"),  # 8-row blocks of a filter
    ("Wn", "int"),  # columns per sub-band row: Wo, or (packed) ceil(Wo / 2) column pairs
    ("NFG", "int"),  # filter groups of NT n8 tiles
    ("NTP", "int"),  # NFG NT
    ("band_rows", "int"),  # output rows per item
    ("RIN", "int"),  # input rows per item: band_rows + K - 1
    ("bands", "int"),
    ("items", "int"),  # B bands
    ("chunk_channels", "int"),  # channels staged at once
    ("chunks", "int"),
    ("cols", "int"),  # quad columns per channel
    ("quad_stride", "int"),  # quads (16 bytes) per column: odd
    ("slot_chunks", "int"),  # 16-byte chunks per channel's raw slot
    ("quads_at", "int"),  # byte offsets in shared memory
    ("raw_at", "int"),
    *(
        (f"{div}_{part}", "unsigned" if part == "magic" else "int")
        for div in ("bands", "wn", "slot", "cols")
        for part in ("magic", "shift")
    ),  # fast_div by bands, Wn, slot_chunks and cols
    ("step_rows", "int"),  # THREADS quads of a channel's rewrite walk: rows and columns
    ("step_cols", "int"),
)
_DIVISORS = {"bands": "bands", "wn": "Wn", "slot": "slot_chunks", "cols": "cols"}


def defines(params: Iterable[tuple[str, str]] = PARAMS) -> tuple[str, ...]:
    """NVRTC options that give the .cu files the constants above and the parameter list."""
    params = tuple(params)
    constants = {
        "NWARPS": NWARPS,
        "P_BLOCK": P_BLOCK,
        "Q_CHUNK": Q_CHUNK,
        "FRAG_BYTES": FRAG_BYTES,
        "PACK_FILTERS": PACK_FILTERS,
        "MIN_BLOCKS": MIN_BLOCKS,
        "SEGMENTS": SEGMENTS,
    }
    return (
        *(f"-DCONV_{name}={value}" for name, value in constants.items()),
        "-DCONV_FIELDS=" + " ".join(f"{kind} {name};" for name, kind in params),
        "-DCONV_PARAMETERS=" + ", ".join(f"{kind} {name}" for name, kind in params),
        "-DCONV_ARGUMENTS=" + ", ".join(name for name, _ in params),
    )


def source(module_file: str, name: str, archs: tuple[str, ...], **extra: Any) -> Any:
    """A conv rung's .cu, registered with the shared -D options (``defines``)."""
    params = extra.pop("params", PARAMS)
    return cuda_cpp.source(module_file, name, archs=archs, options=defines(params), **extra)


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def fast_division(d: int) -> tuple[int, int]:
    """(magic, shift) for the kernel's ``fast_div``: n // d == (umulhi(n, magic) + n) >> shift
    for 0 <= n < 2**31, with shift = ceil(log2 d) and magic = ceil(2**(32 + shift) / d) - 2**32
    (a 33-bit multiplier whose top bit is the ``+ n``). One multiply-high replaces a run-time
    integer division, which the GPU does in software."""
    if d < 1:
        raise ValueError(f"a divisor must be at least 1, got {d}")
    shift = (d - 1).bit_length()
    return ceil_div(1 << (32 + shift), d) - (1 << 32), shift


@dataclass(frozen=True)
class Layout(LayerShape):
    """The tiling of one launch and the shared-memory layout it implies (see the module)."""

    size: tuple[int, int, int, int, int, int]  # (B, C, M, H, W, K)
    tiles: int  # T: m16 tiles stacked per job
    n_tiles: int  # NT: n8 tiles per job
    chunked: bool  # channels staged in chunks inside each round
    band_rows: int  # output rows per item, a multiple of a job's rows
    chunk_channels: int  # channels staged at once
    packed: bool = False  # an n8 tile holds 4 filters x 2 column shifts
    row_shifts: bool = False  # packed, and row shifts too: 2 x 2 output blocks (rung 10 on)
    job_warps: int = 1  # warps per job: 1 (mma.sync) or a warpgroup (wgmma)

    PARAMS: ClassVar[tuple[tuple[str, str], ...]] = PARAMS  # the kernel's, after the pointers

    @property
    def tile_rows(self) -> int:
        """Output rows of an m16 tile: two, or (row shifts) two block rows of two."""
        return 4 if self.row_shifts else 2

    @property
    def QC(self) -> int:
        """8-column chunks of a filter row; packed, the shifted copy reaches column K."""
        return ceil_div(self.size[5] + self.packed, Q_CHUNK)

    @property
    def PB(self) -> int:
        """8-row blocks of a filter; with row shifts, the shifted copy reaches row K."""
        return ceil_div(self.size[5] + self.row_shifts, P_BLOCK)

    @property
    def Wn(self) -> int:
        """Columns per sub-band row as jobs number them: output columns, or column pairs."""
        return ceil_div(self.Wo, 2) if self.packed else self.Wo

    @property
    def NFG(self) -> int:
        per_group = (PACK_FILTERS if self.packed else 8) * self.n_tiles
        return ceil_div(self.size[2], per_group // 2 if self.row_shifts else per_group)

    @property
    def NTP(self) -> int:
        return self.NFG * self.n_tiles

    @property
    def RIN(self) -> int:
        return self.band_rows + self.size[5] - 1

    @property
    def bands(self) -> int:
        return ceil_div(self.Ho, self.band_rows)

    @property
    def items(self) -> int:
        return self.size[0] * self.bands

    @property
    def chunks(self) -> int:
        return ceil_div(self.size[1], self.chunk_channels)

    @property
    def x_halves(self) -> int:
        b, c, _, h, w, _ = self.size
        return b * c * h * w

    @property
    def cols(self) -> int:
        """Quad columns per channel: one past the widest a window reads, w + 8 qc + 2t
        (packed: column pair j reads quad columns j + 4 qc + t)."""
        if self.packed:
            return self.Wn + Q_CHUNK // 2 * self.QC - 1
        return self.Wo + Q_CHUNK * self.QC - 2

    @property
    def quad_stride(self) -> int:
        """Quads per column: one per two input rows, an odd count so that the 8 columns of a
        quarter warp's 16-byte loads fall in 8 different groups of 4 banks. With row shifts a
        column holds every quad a window can read, up to quad 2T + 1 of the last window of
        the last sub-band (2T quads per sub-band, 4 per window)."""
        if self.row_shifts:
            sub_bands = self.band_rows // (self.tile_rows * self.tiles)
            return (2 * self.tiles * sub_bands + 4 * self.PB - 2) | 1
        return ceil_div(self.RIN, 2) | 1

    @property
    def slot_chunks(self) -> int:
        """16-byte chunks per channel's raw slot: its rows and up to 7 halves of skew."""
        return (self.RIN * self.size[4] + 14) // 8

    @property
    def frag_bytes(self) -> int:
        return self.chunk_channels * self.QC * self.PB * PAIRS * self.NTP * FRAG_BYTES

    @property
    def quads_at(self) -> int:
        return self.frag_bytes

    @property
    def quad_bytes(self) -> int:
        return self.chunk_channels * self.cols * self.quad_stride * QUAD_BYTES

    @property
    def raw_at(self) -> int:
        return self.quads_at + self.quad_bytes

    @property
    def raw_end(self) -> int:
        return self.raw_at + self.chunk_channels * self.slot_chunks * 16

    @property
    def smem_bytes(self) -> int:
        return self.raw_end

    @property
    def step_rows(self) -> int:
        """Rows of a channel's quads that THREADS quads span in the rewrite walk."""
        return THREADS // self.cols

    @property
    def step_cols(self) -> int:
        return THREADS % self.cols

    @property
    def rounds(self) -> int:
        """Rounds of jobs in a full band (NWARPS / job_warps jobs per round)."""
        sub_bands = ceil_div(min(self.band_rows, self.Ho), self.tile_rows * self.tiles)
        groups = ceil_div(sub_bands * self.Wn, 8)
        jobs = ceil_div(groups, self.job_warps) * self.NFG
        return ceil_div(jobs, NWARPS // self.job_warps)

    def value(self, name: str) -> int:
        """A parameter by name: the size's, a fast-division part, or a property."""
        given = dict(zip(("B", "C", "M", "H", "W", "K"), self.size, strict=True))
        if name in given:
            return given[name]
        divisor, _, part = name.rpartition("_")
        if divisor in _DIVISORS and part in ("magic", "shift"):
            return fast_division(getattr(self, _DIVISORS[divisor]))[part == "shift"]
        return getattr(self, name)

    def params(self, names: Iterable[tuple[str, str]] = PARAMS) -> dict[str, int]:
        """The kernel's parameters by name (``PARAMS`` order)."""
        return {name: self.value(name) for name, _ in names}

    def scalars(self, names: Iterable[tuple[str, str]] = PARAMS) -> tuple[Any, ...]:
        """The kernel's arguments after the pointers to x, w and y, typed as the .cu says."""
        types = {"long long": np.int64, "unsigned": np.uint32, "int": np.int32}
        return tuple(types[kind](self.value(name)) for name, kind in names)


def pick_tiles(ho: int, choices: tuple[int, ...]) -> int:
    """T for a height: fewest padded rows weighted by the per-window overhead (the window's
    2T + 7 row loads and the B fragments serve 2T rows), larger T on ties."""
    return min(choices, key=lambda t: (ceil_div(ho, 2 * t) * 2 * t * (1 + 2 / t), -t))


def pick_warpgroup_tiles(
    ho: int, wn: int, n_filter_groups: int, choices: tuple[int, ...], tile_rows: int = 2
) -> int:
    """T for warpgroup jobs on a whole image: fewest rounds of jobs (a job spans 4 groups of 8
    columns, NWARPS / 4 jobs per round) times a job's cost, taken as T + 1 (its T tiles plus
    the per-window overhead they share); ties go to the larger T for 2-row tiles and to the
    smaller for 4-row tiles (measured; docs/notes/conv.md)."""
    span, slots = 8 * WARPGROUP, NWARPS // WARPGROUP

    def cost(t: int) -> tuple[int, int]:
        jobs = ceil_div(ceil_div(ho, tile_rows * t) * wn, span) * n_filter_groups
        return ceil_div(jobs, slots) * (t + 1), t if tile_rows == 4 else -t

    return min(choices, key=cost)


def fit(
    whole: Callable[[int], Layout],
    chunked: Callable[[int], Layout] | None,
    rows: int,
    ho: int,
    channels: int,
    target: int,
    smem_limit: int,
) -> Layout | None:
    """The first layout that fits: a whole image per item (``whole(band_rows)``) when it fits
    in ``target`` bytes, else bands of ``rows``-multiples, then the same up to ``smem_limit``;
    else (up to SMEM_TARGET, then smem_limit) channels staged in chunks (``chunked(cc)``), or
    None when the rung has no chunked kernels (``chunked`` None: the rung below runs)."""
    for budget in dict.fromkeys((min(target, smem_limit), smem_limit)):
        for band in range(ceil_div(ho, rows) * rows, 0, -rows):
            found = whole(band)
            if found.smem_bytes <= budget:
                return checked(found)
    if chunked is None:
        return None
    for budget in dict.fromkeys((min(SMEM_TARGET, smem_limit), smem_limit)):
        for cc in range(channels, 0, -1):
            if chunked(cc).smem_bytes <= budget:
                return checked(chunked(cc))
    raise ValueError(
        f"conv size {whole(rows).size} is too large for this rung: one channel's input rows "
        f"and weights need {chunked(1).smem_bytes} bytes of shared memory, more than the "
        f"{smem_limit} a block can have"
    )


def checked(found: Layout) -> Layout:
    """The kernel counts items and the elements of one output plane in int32."""
    if found.items >= 2**31 or found.Ho * found.Wo >= 2**31:
        raise ValueError(f"conv size {found.size} is too large for this rung's int32 indexing")
    return found


@dataclass(frozen=True)
class Configured:
    """What a launch needs, computed once per (size, device): the plan, the kernel (opted in
    to its shared memory), the grid (resident blocks) and the scalar arguments."""

    plan: Layout
    kernel: Any
    grid: int
    scalars: tuple[Any, ...]


def configure(
    found: Layout,
    source: cuda_cpp.CudaSource,
    device_id: int,
    adjust: Callable[[Layout, Callable[[int], int]], Layout] | None = None,
) -> Configured:
    """Load ``found.kernel_name`` from ``source`` for the device; ``adjust(plan, blocks_for)``
    may change the plan once the kernel's resident blocks for a shared-memory size are known
    (rung 12's output buffer)."""
    import cupy

    device = cupy.cuda.Device(device_id)
    kernel = source.kernel(found.kernel_name)  # type: ignore[attr-defined]
    if kernel.max_dynamic_shared_size_bytes < found.smem_bytes:
        kernel.max_dynamic_shared_size_bytes = found.smem_bytes
    if adjust is not None:
        found = adjust(found, lambda smem: blocks_per_sm(kernel, smem, device, THREADS))
    per_sm = blocks_per_sm(kernel, found.smem_bytes, device, THREADS)
    grid = min(found.items, int(device.attributes["MultiProcessorCount"]) * per_sm)
    return Configured(found, kernel, grid, found.scalars(found.PARAMS))


def device_facts() -> tuple[int, int]:
    """(the current device's id, its opt-in shared memory per block)."""
    import cupy

    device_id = cupy.cuda.runtime.getDevice()
    return device_id, _smem_limit(device_id)


@functools.cache
def _smem_limit(device_id: int) -> int:
    import cupy

    return int(cupy.cuda.Device(device_id).attributes["MaxSharedMemoryPerBlockOptin"])


def _zeros(x: Operand, w: Operand, out: Operand, stream: int) -> None:
    import cupy

    with on_stream(stream):  # no channels: every sum is empty
        cupy.asarray(out.base).fill(0)


def kernel_launch(
    kernel: Any, grid: int, threads: int, smem: int, scalars: tuple[Any, ...], copy_x: bool
) -> Steps:
    """A plan of one launch of a conv kernel taking (x, w, y, scalars...): the pointers given
    per call, the rest fixed (``fastcall.cupy_launch``). ``copy_x``: the kernel reads x in
    16-byte chunks and x is not 16-byte aligned, so each call copies it first, on the same
    stream, into aligned memory the plan allocates at its first call (a captured call's graph
    replays on it)."""
    launch = cupy_launch(kernel, (grid,), (threads,), smem, (POINTER, POINTER, POINTER, *scalars))
    aligned: list[Any] = []

    def direct(x: Operand, w: Operand, out: Operand, stream: int) -> None:
        launch(x.ptr, w.ptr, out.ptr, stream=stream)

    def aligned_copy(x: Operand, w: Operand, out: Operand, stream: int) -> None:
        import cupy

        with on_stream(stream):
            source = cupy.asarray(x.base)
            if not aligned:
                aligned.append(cupy.empty_like(source))
            aligned[0][...] = source
            launch(aligned[0].data.ptr, w.ptr, out.ptr, stream=stream)

    return Steps(aligned_copy if copy_x else direct, launch)


def launch_plan(
    x: Operand,
    w: Operand,
    out: Operand,
    configured: Callable[[tuple[int, ...], int, int], Configured | None],
    fallback: Callable[[Operand, Operand, Operand], Steps] | None = None,
) -> Steps:
    """What a tensor-core rung runs for these operands, built once per signature (its geometry,
    kept by ``conv_rung``): zeros where there are no channels; ``fallback(x, w, out)`` (the rung
    below's geometry) where ``configured(size, device_id, smem_limit)``, the rung's cached
    layout and kernel, is None; else that kernel's launch (``kernel_launch``)."""
    size = size_of(x, w)
    if size[1] == 0:
        return Steps(_zeros)
    found = configured(size, *device_facts())
    if found is None:
        assert fallback is not None
        return fallback(x, w, out)
    smem, copy_x = found.plan.smem_bytes, x.align < ALIGN
    return kernel_launch(found.kernel, found.grid, THREADS, smem, found.scalars, copy_x)


# ---- the layout arithmetic the kernels do in C++, written once more in Python ----
# For the pictures (conv/diagrams.py) and the exercises; tests/test_diagrams.py holds it to the
# .cu files and multiplies a small layer through it (a NumPy model of rung 8's kernel).


def quad_words(k: int) -> tuple[int, int, int, int]:
    """The input rows of quad k's four pair words in register order (a0, a1, a2, a3): 2k,
    2k + 1, 2k + 1, 2k + 2 (``rewrite_quads`` in staging.cuh, rungs 8 and 9). Why: lane
    (g, t)'s a0 is A row g (output row 2i) at filter row 2j, a1 row g + 8 (output row 2i + 1)
    at 2j, a2 row g at 2j + 1, a3 row g + 8 at 2j + 1, and an input row is the output row plus
    the filter row, so with k = i + j they read rows 2k, 2k + 1, 2k + 1, 2k + 2."""
    return 2 * k, 2 * k + 1, 2 * k + 1, 2 * k + 2


def diagonal(k: int, tiles: int, steps: int = PAIRS) -> list[tuple[int, int]]:
    """The (tile i, k16 step j) pairs whose A fragment is quad k, i + j = k, for ``tiles`` m16
    tiles and ``steps`` k16 steps: one 16-byte load feeds them all (``window``, rung 8)."""
    return [(i, k - i) for i in range(tiles) if 0 <= k - i < steps]


def pair_word_column(layout: Layout, col: int, t: int, qc: int = 0) -> int:
    """The first of the two input columns of the pair words lane t holds for its column ``col``
    (A rows g and g + 8) in the window of filter-column chunk qc: its filter columns are
    8 qc + 2t and + 1, so input columns CSTEP col + 2t + 8 qc and + 1 (CSTEP = 2 when packed:
    a column is then a pair of output columns)."""
    return (2 if layout.packed else 1) * col + 2 * t + Q_CHUNK * qc


def window_quad(
    layout: Layout, col: int, t: int, sub_band: int, channel: int, qc: int = 0, pb: int = 0
) -> int:
    """Where lane (col, t)'s first quad of window (channel, qc, pb) of a sub-band lies, in quads
    (16 bytes) from ``quads_at``; the window's quad k follows at + k (rungs 8 and 9:
    ``lane_quads`` and ``src`` in r08_tensor_core.cu). A column of quads is ``quad_stride``
    long and holds one input column, quad k its rows 2k .. 2k + 2 of the band."""
    cstep = 2 if layout.packed else 1
    column = channel * layout.cols + col + 2 * t // cstep + qc * Q_CHUNK // cstep
    return column * layout.quad_stride + sub_band * layout.tiles + pb * PAIRS


def job_walk(layout: Layout) -> list[dict[str, Any]]:
    """The jobs of one full band in the order the kernels' loop takes them (r08_tensor_core.cu;
    warpgroup jobs, r09_wgmma.cu): job = round · SLOTS + slot = fg · supergroups + sg, with
    SLOTS = NWARPS / job_warps job slots per round; job sg covers columns n from
    8 job_warps sg, 8 job_warps of them, numbered sub-band by sub-band (n = sub_band · Wn + w),
    those past the band's last column idle. One record per job: job, round, slot, fg (its
    filter group) and columns, the (sub_band, w) it computes."""
    sub_bands = ceil_div(min(layout.band_rows, layout.Ho), layout.tile_rows * layout.tiles)
    columns = sub_bands * layout.Wn
    span = 8 * layout.job_warps
    supergroups = ceil_div(ceil_div(columns, 8), layout.job_warps)
    slots = NWARPS // layout.job_warps
    walk = []
    for job in range(supergroups * layout.NFG):
        fg, sg = divmod(job, supergroups)
        round_, slot = divmod(job, slots)
        first = sg * span
        cols = [divmod(n, layout.Wn) for n in range(first, min(first + span, columns))]
        walk.append({"job": job, "round": round_, "slot": slot, "fg": fg, "columns": cols})
    return walk


def fm_row(m: int) -> tuple[int, int, int]:
    """(filter f, dy, dx) of row m of rung 13's A, wgmma's 64 rows (r13_filters_on_m.cu): warp
    wq = m // 16 holds rows 16 wq .. 16 wq + 15, its lane (i, t) rows 16 wq + i (dx = 0) and
    16 wq + i + 8 (dx = 1), ordered so that f = 4 (i % 4) + wq and dy = i // 4: the two
    accumulators of one lane's column are then dx = 0 and 1 of one output, one half2 store."""
    warp, rest = divmod(m, 16)
    dx, i = divmod(rest, 8)
    return 4 * (i % 4) + warp, i // 4, dx


def fm_tap(m: int, p: int, q: int, k: int) -> tuple[int, int] | None:
    """The filter tap (row, column) that A[m][(c, p, q)] holds in rung 13, for window row p and
    column q (0 to 7) of a K x K filter: w[f][c][p - dy][q - dx], None outside the filter."""
    _, dy, dx = fm_row(m)
    row, col = p - dy, q - dx
    return (row, col) if 0 <= row < k and 0 <= col < k else None


def parity_row(r: int, rows: int) -> int:
    """Where rung 13's rewrite puts input row r among a channel's ``rows`` (R, even) rewritten
    rows: the even rows first, then the odd ones, s = (r % 2) R/2 + r // 2."""
    return r % 2 * (rows // 2) + r // 2


def fm_chunk(c: int, r: int, n: int, rows: int, blocks: int) -> int:
    """The 16-byte chunk of rung 13's rewritten input that holds x[c][r][2n .. 2n + 7]:
    (c R + s(r)) NP + n, R = ``rows`` per channel, NP = ``blocks`` per block row."""
    return (c * rows + parity_row(r, rows)) * blocks + n


def fm_step(c: int, j: int, job: int, rows: int, blocks: int, n_blocks: int) -> dict[str, int]:
    """Rung 13's descriptor of B for k16 step (c, j) of job ``job`` (``issue_job``,
    ``chunk_desc``): ``start``, the chunk of the even k8 half (filter row 2j) of the job's first
    block, (c R + j) NP + job NT with NT = ``n_blocks``; ``lbo``, the bytes from the even half
    to the odd one (filter row 2j + 1), R/2 NP chunks; ``sbo``, the bytes between n8 blocks,
    one 128-byte core matrix. Block g's even-half chunk is then start + g and its odd-half
    chunk start + R/2 NP + g, for every block row at once."""
    return {
        "start": (c * rows + j) * blocks + job * n_blocks,
        "lbo": rows // 2 * blocks * 16,
        "sbo": 8 * 16,
    }
