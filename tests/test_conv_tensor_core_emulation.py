"""The tensor-core convolution rung (conv r08), emulated lane by lane in NumPy: no GPU needed.

``emulate`` runs ``r08_tensor_core.cu`` block by block, warp by warp, as vectors over the 32
lanes, with the index formulas of the .cu file copied line for line (the comments name the
lambda or function each part mirrors) and the launch plan of the real launcher (``plan``).
Shared memory is one byte array with the kernel's layout, filled with NaN bit patterns first,
so a value read from anywhere the kernel never wrote poisons the result. The mma instructions
are emulated from the PTX ISA's fragment tables for m16n8k16 and m16n8k8, written here
independently of the kernel: lane l = 4 g + t holds A rows g and g + 8 at columns 2t, 2t + 1
(and 2t + 8, 2t + 9 for k16), B column g at rows 2t, 2t + 1 (and 2t + 8, 2t + 9), D rows g and
g + 8 at columns 2t, 2t + 1. Every output element must be stored exactly once.

What this cannot see: races (the barriers are argued in the .cu comments), cp.async timing,
and the hardware's own rounding inside an mma (the emulation sums in float64, the tensor core
in FP32; both are far inside the tolerance).
"""

import collections
import re
from pathlib import Path

import numpy as np
import pytest

from ladder.conv import r08_tensor_core as r08
from ladder.conv.problem import CONV1, CONV2, TEST_SIZES, conv_numpy

SOURCE = Path(r08.__file__).with_name("r08_tensor_core.cu").read_text()
WG_SOURCE = Path(r08.__file__).with_name("r09_wgmma.cu").read_text()
WGB_SOURCE = Path(r08.__file__).with_name("r10_row_shifts.cu").read_text()
WGJ_SOURCE = Path(r08.__file__).with_name("r11_one_group.cu").read_text()
WGK_SOURCE = Path(r08.__file__).with_name("r12_bulk.cu").read_text()
NAN_HALF = 0x7E00
CORE_BYTES = 128  # a wgmma core matrix: 8 rows of 16 bytes (r09_wgmma.cu)
SEGMENTS = int(re.search(r"constexpr int SEGMENTS = (\d+);", SOURCE).group(1))  # rung 11


PATHS: collections.Counter = collections.Counter()  # the branches the emulated kernel took


def fast_div(n, magic: int, shift: int):
    """The kernel's fast_div: (umulhi(n, magic) + n) >> shift, for ints or lane vectors."""
    wide = np.asarray(n, dtype=np.uint64)
    return (((wide * np.uint64(magic)) >> np.uint64(32)) + wide) >> np.uint64(shift)


def origin(item: int, p: r08.Plan) -> tuple[int, int]:
    """The kernel's origin lambda: item -> (image, first output row)."""
    b = int(fast_div(item, p.bands_magic, p.bands_shift))
    return b, (item - b * p.bands) * p.band_rows


def test_constants_match_the_cu_file():
    for name in ("NWARPS", "P_BLOCK", "Q_CHUNK", "FRAG_BYTES", "PACK_FILTERS"):
        found = re.search(rf"constexpr int {name} = (\d+);", SOURCE)
        assert found and int(found.group(1)) == getattr(r08, name), name
    macro = SOURCE[SOURCE.index("#define CONV_TC_KERNEL") : SOURCE.index("const Conv p{")]
    names = re.findall(r"(?:long long|unsigned|int) (\w+)(?=[,)])", macro)
    assert tuple(names) == r08.PARAMS
    kernels = r"CONV_TC_KERNEL\((\w+), (\d+), (\d+), (true|false), (true|false|2), (\w+)\)"
    compiled = set(re.findall(kernels, SOURCE))
    wanted = {
        (f"conv_tc_t{t}_n{nt}", str(t), str(nt), "false", "false", "MmaSync")
        for nt, ts in r08.TILES.items()
        for t in ts
    }
    wanted |= {
        (f"conv_tc_chunked_t{t}_n{nt}", str(t), str(nt), "true", "false", "MmaSync")
        for nt in r08.TILES
        for t in [r08.CHUNKED_TILES]
    }
    wanted |= {
        (f"conv_tc_pack_t{t}_n1", str(t), "1", "false", "true", "MmaSync") for t in r08.TILES[1]
    }
    assert compiled == wanted
    # rung 9: always packed, the Wgmma policy
    wanted = {
        (f"conv_wg_t{t}_n{nt}", str(t), str(nt), "false", "true", "Wgmma")
        for nt, ts in r08.WG_TILES.items()
        for t in ts
    }
    t, nt = r08.WG_CHUNKED
    wanted.add((f"conv_wg_chunked_t{t}_n{nt}", str(t), str(nt), "true", "true", "Wgmma"))
    assert set(re.findall(kernels, WG_SOURCE)) == wanted
    # rung 10: PACK == 2 (row shifts too), the WgmmaBlocks policy
    wanted = {
        (f"conv_wgb_t{t}_n{nt}", str(t), str(nt), "false", "2", "WgmmaBlocks")
        for nt, ts in r08.WGB_TILES.items()
        for t in ts
    }
    t, nt = r08.WGB_CHUNKED
    wanted.add((f"conv_wgb_chunked_t{t}_n{nt}", str(t), str(nt), "true", "2", "WgmmaBlocks"))
    assert set(re.findall(kernels, WGB_SOURCE)) == wanted
    # rung 11: one kernel per NT for each (C, T) the planner may pick, the WgmmaJob policy
    # rungs 11 and 12: the same kernel list (C, T, NT), each with its own policy
    for source, kind, policy in ((WGJ_SOURCE, "wgj", "WgmmaJob"), (WGK_SOURCE, "wgk", "WgmmaBulk")):
        macro = source[source.index(f"#define CONV_{kind.upper()}_KERNELS") :]
        pattern = rf"CONV_TC_KERNEL\(conv_{kind}_c##CH##_t##T##_n(\d), T, \1, false, 2, "
        assert sorted(int(nt) for nt in re.findall(pattern, macro)) == sorted(r08.WGB_TILES)
        assert f"{policy}<CH>" in macro
        pattern = rf"^CONV_{kind.upper()}_KERNELS\((\d+), (\d+)\)$"
        used = {(int(c), int(t)) for c, t in re.findall(pattern, macro, re.M)}
        assert used == {(c, t) for c, ts in r08.JOB_TILES.items() for t in ts}


# ---- the mma instructions, from the PTX ISA fragment tables --------------------------------

LANE = np.arange(32)
G, T4 = LANE // 4, LANE % 4


def _halves(reg: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The two float16 values of 32-bit registers (low half first) as float64."""
    lo = (reg & 0xFFFF).astype(np.uint16).view(np.float16).astype(np.float64)
    hi = (reg >> 16).astype(np.uint16).view(np.float16).astype(np.float64)
    return lo, hi


def _accumulate(acc: np.ndarray, a: np.ndarray, b: np.ndarray) -> None:
    """acc (4, 32) += A (16 x k, from a) @ B (k x 8, from b) for k = 8 * len(b)."""
    k = 8 * len(b)
    am = np.zeros((16, k))
    bm = np.zeros((k, 8))
    for reg in range(len(a)):  # a0: rows g, a1: rows g + 8, a2/a3: the same at k + 8
        lo, hi = _halves(a[reg])
        row, col = G + 8 * (reg % 2), 2 * T4 + 8 * (reg // 2)
        am[row, col], am[row, col + 1] = lo, hi
    for reg in range(len(b)):  # b0: rows 2t, 2t + 1; b1: rows 2t + 8, 2t + 9; column g
        lo, hi = _halves(b[reg])
        row = 2 * T4 + 8 * reg
        bm[row, G], bm[row + 1, G] = lo, hi
    d = am @ bm
    for reg in range(4):  # d0, d1: row g, columns 2t, 2t + 1; d2, d3: row g + 8
        acc[reg] += d[G + 8 * (reg // 2), 2 * T4 + reg % 2]


# ---- the kernel ---------------------------------------------------------------------------


class Smem:
    """The block's dynamic shared memory, poisoned, with the kernel's three regions."""

    def __init__(self, p: r08.Plan):
        self.bytes = np.full(p.smem_bytes // 2, NAN_HALF, np.uint16).view(np.uint8)
        self.frags = self.bytes[: p.quads_at].view(np.uint32).reshape(-1, 2)  # uint2
        self.quads = self.bytes[p.quads_at : p.raw_at].view(np.uint32).reshape(-1, 4)  # uint4
        self.raw = self.bytes[p.raw_at : p.raw_end].view(np.uint16)
        # rung 12: one image's output, as halves, and how often each was stored this image
        self.out = self.bytes[p.out_at : p.out_at + p.out_bytes].view(np.uint16)
        self.out_writes = np.zeros(self.out.size, np.int64)


def emulate(x: np.ndarray, w: np.ndarray, p: r08.Plan, grid: int, y_skew: int = 0):
    """y = conv(x, w) the way the kernel computes it; y_skew halves shift the output pointer
    off its 16-byte alignment (the epilogue then takes its two-halves path)."""
    B, C, M, H, W, K = p.size
    T, NT = p.tiles, p.n_tiles
    ROWS = p.tile_rows * T
    CSTEP = 2 if p.packed else 1
    xb = np.ascontiguousarray(x, np.float16).reshape(-1).view(np.uint16)
    wb = np.ascontiguousarray(w, np.float16).reshape(-1).view(np.uint16)
    y = np.full(y_skew + B * M * p.Ho * p.Wo, NAN_HALF, np.uint16)
    writes = np.zeros(y.size, np.int64)
    # rung 12: the output buffer when the plan has one and y is 16-byte aligned (bulk_out)
    bulk_out = p.out_bytes > 0 and y_skew % 8 == 0

    for block in range(grid):
        s = Smem(p)

        def band_start(b, c, h0):
            return ((b * C + c) * H + h0) * W

        def issue_raw(item, chunk, s=s):
            b, h0 = origin(item, p)
            c0 = chunk * p.chunk_channels
            cc = min(p.chunk_channels, C - c0)
            length = min(p.RIN, H - h0) * W
            if p.bulk:  # rung 12: one bulk copy per channel (thread 0), the tail as below
                for cl in range(cc):
                    start = band_start(b, c0 + cl, h0)
                    first = start & ~7
                    n = (start - first + length + 7) >> 3
                    slot = cl * p.slot_chunks
                    assert n <= p.slot_chunks
                    if first + 8 * n > p.x_halves:
                        PATHS["copy: bulk, the last chunk by halves"] += 1
                        n -= 1
                        at = first + 8 * n
                        tail = np.zeros(8, np.uint16)
                        tail[: p.x_halves - at] = xb[at : p.x_halves]
                        s.raw[(slot + n) * 8 : (slot + n + 1) * 8] = tail
                    if n > 0:  # 16 n bytes, both ends 16-byte aligned
                        PATHS["copy: bulk"] += 1
                        assert first % 8 == 0 and (p.raw_at + 16 * slot) % 16 == 0
                        s.raw[slot * 8 : (slot + n) * 8] = xb[first : first + 8 * n]
                return
            for i in range(cc * p.slot_chunks):  # every thread's i, tid + THREADS steps
                cl = int(fast_div(i, p.slot_magic, p.slot_shift))
                k = i - cl * p.slot_chunks
                assert (cl, k) == divmod(i, p.slot_chunks)
                start = band_start(b, c0 + cl, h0)
                first = start & ~7
                if k * 8 < (start - first) + length:
                    at = first + k * 8
                    # cp.async of 16 bytes, or the last chunk of x half by half, zeros after it
                    valid = min(8, p.x_halves - at)
                    assert 0 < valid
                    chunk16 = np.zeros(8, np.uint16)
                    chunk16[:valid] = xb[at : at + valid]
                    slot = (cl * p.slot_chunks + k) * 8
                    s.raw[slot : slot + 8] = chunk16

        def relayout(item, chunk, s=s):
            b, h0 = origin(item, p)
            c0 = chunk * p.chunk_channels
            cc = min(p.chunk_channels, C - c0)
            rows = min(p.RIN, H - h0)
            words = p.packed and W % 2 == 0  # the kernel's aligned-word path
            PATHS["rewrite: words" if words else "rewrite: halves"] += 1
            if p.one_group and words:
                slide(b, h0, c0, cc, rows)
                return
            for cl in range(cc):
                skew = band_start(b, c0 + cl, h0) & 7
                src = cl * p.slot_chunks * 8 + skew
                dst = cl * p.cols * p.quad_stride
                quads_per_column = p.quad_stride if p.blocks else (p.RIN + 1) // 2
                written = np.zeros((p.cols, quads_per_column), np.int64)
                for tid in range(r08.THREADS):  # each thread's walk, THREADS quads apart
                    k = int(fast_div(tid, p.cols_magic, p.cols_shift))
                    col = tid - k * p.cols
                    while k < quads_per_column:
                        xc = CSTEP * col

                        def pair_word(r, xc=xc, src=src, col=col):
                            live = r < rows
                            if words:  # one aligned 32-bit word, word r W / 2 + col
                                at = src + 2 * (r * (W // 2) + col)
                                assert (p.raw_at + 2 * at) % 4 == 0, "a misaligned word"
                                if not (live and col < W // 2):
                                    return 0
                                return int(s.raw[at]) | int(s.raw[at + 1]) << 16
                            lo = int(s.raw[src + r * W + xc]) if live and xc < W else 0
                            hi = int(s.raw[src + r * W + xc + 1]) if live and xc + 1 < W else 0
                            return lo | hi << 16

                        middle = pair_word(2 * k + 1)
                        if p.blocks:  # rows 2k, 2k + 2, 2k + 1, 2k + 3
                            quad = [pair_word(2 * k), pair_word(2 * k + 2), middle]
                            quad.append(pair_word(2 * k + 3))
                        else:
                            quad = [pair_word(2 * k), middle, middle, pair_word(2 * k + 2)]
                        s.quads[dst + col * p.quad_stride + k] = quad
                        written[col, k] += 1
                        k += p.step_rows
                        col += p.step_cols
                        if col >= p.cols:
                            col -= p.cols
                            k += 1
                assert np.all(written == 1), "the relayout walk must write every quad once"

        def slide(b, h0, c0, cc, rows, s=s):  # relayout's SLIDE path (rung 11)
            PATHS["rewrite: slide"] += 1
            per_column, half_w = p.quad_stride, W // 2
            columns, seg_len = cc * p.cols, -(-per_column // SEGMENTS)
            written = np.zeros((cc * p.cols, per_column), np.int64)
            for u in range(columns * SEGMENTS):  # thread u % THREADS, pass u // THREADS
                seg, column = divmod(u, columns)
                cl = int(fast_div(column, p.cols_magic, p.cols_shift))
                col = column - cl * p.cols
                skew = band_start(b, c0 + cl, h0) & 7
                src = cl * p.slot_chunks * 8 + skew + 2 * col  # in halves: word col

                def word(r, src=src, col=col):
                    if not (col < half_w and r < rows):
                        return 0
                    at = src + 2 * r * half_w
                    assert (p.raw_at + 2 * at) % 4 == 0, "a misaligned word"
                    return int(s.raw[at]) | int(s.raw[at + 1]) << 16

                k = seg * seg_len
                end = min(k + seg_len, per_column)
                even, odd = word(2 * k), word(2 * k + 1)
                while k < end:
                    even_next, odd_next = word(2 * k + 2), word(2 * k + 3)
                    s.quads[column * p.quad_stride + k] = [even, even_next, odd, odd_next]
                    written[column, k] += 1
                    even, odd = even_next, odd_next
                    k += 1
            assert np.all(written == 1), "the sliding rewrite must write every quad once"

        def stage_weights(chunk, s=s):
            c0 = chunk * p.chunk_channels
            cc = min(p.chunk_channels, C - c0)
            count = cc * p.QC * p.PB * r08.PAIRS * p.NTP
            for e in range(count):
                rest = e
                tile, rest = rest % p.NTP, rest // p.NTP
                pair, rest = rest % r08.PAIRS, rest // r08.PAIRS
                pb, rest = rest % p.PB, rest // p.PB
                qc, cl = rest % p.QC, rest // p.QC
                f = tile * 4 + G // 2 if p.packed else tile * 8 + G
                shift = G % 2 if p.packed else 0
                ph, q = pb * r08.P_BLOCK + 2 * pair, qc * r08.Q_CHUNK + 2 * T4 - shift

                def tap(pp, qq, f=f, cl=cl, c0=c0):
                    ok = (f < M) & (pp < K) & (qq >= 0) & (qq < K)
                    index = (((f * C + c0 + cl) * K + pp) * K + qq) * ok
                    return np.where(ok, wb[index], 0).astype(np.uint32)

                if not p.wgmma:
                    s.frags[e * 32 + LANE, 0] = tap(ph, q) | tap(ph, q + 1) << 16
                    s.frags[e * 32 + LANE, 1] = tap(ph + 1, q) | tap(ph + 1, q + 1) << 16
                    continue
                # Wgmma: 16-byte row (k8 half, n) holds B[8 half + 0..7][n]: n = 2 f' + shift,
                # so lanes 8 half .. 8 half + 7 (as G) give the row n = G % 8. Blocks: n8 tile
                # `tile` is filters 4 (tile // 2) .. at row shift tile % 2, one filter row up.
                quad, row_shift = (tile // 2, tile % 2) if p.blocks else (tile, 0)
                for half in range(2):
                    n = LANE[:8]
                    fn, sn = quad * 4 + n // 2, n % 2
                    qs = qc * r08.Q_CHUNK + np.arange(8)[:, None] - sn  # (k, n)

                    def tap2(pp, qq, f=fn, cl=cl, c0=c0):
                        ok = (f < M) & (pp >= 0) & (pp < K) & (qq >= 0) & (qq < K)
                        index = (((f * C + c0 + cl) * K + pp) * K + qq) * ok
                        return np.where(ok, wb[index], 0).astype(np.uint16)

                    rows = tap2(ph + half - row_shift, qs).T  # (n, k)
                    start = e * r08.FRAG_BYTES + half * CORE_BYTES
                    s.bytes[start : start + CORE_BYTES] = rows.reshape(-1).view(np.uint8)

        def wg_window(acc, src, entry, taps, s=s):  # Wgmma::window, WgmmaBlocks::window
            per_tile = 2 if p.blocks else 1  # the diagonal: (i, j) reads quad per_tile i + j
            quads = per_tile * (T - 1) + r08.PAIRS
            loaded = per_tile * (T - 1) + (taps + 1) // 2
            column_quad = src % p.quad_stride
            staged = p.quad_stride if p.blocks else (p.RIN + 1) // 2
            assert np.all(column_quad + loaded <= staged)
            zero = np.zeros(32, np.uint32)
            for k in range(quads):
                a = [s.quads[src + k, e] if k < loaded else zero for e in range(4)]
                for j in range(r08.PAIRS):
                    i, off = divmod(k - j, per_tile)
                    if off or i < 0 or i >= T:
                        continue
                    for nt in range(NT):  # the descriptor's layout: PTX's K-major, no swizzle
                        at = (entry + j * p.NTP + nt) * r08.FRAG_BYTES + G * 16 + 4 * T4
                        words = s.bytes.view(np.uint32)
                        b0, b1 = words[at // 4], words[(at + CORE_BYTES) // 4]
                        _accumulate(acc[i][nt], a, [b0, b1])

        def window(acc, src, frag, taps, s=s):  # window<T, NT, TAPS>
            steps = taps // 2
            used = steps + taps % 2
            quads = T + used - 1
            bw = [[s.frags[frag + (j * p.NTP + nt) * 32] for nt in range(NT)] for j in range(used)]
            # the quads a lane loads: src[0 .. quads - 1], all within its column's staged quads
            column_quad = src % p.quad_stride
            assert np.all(column_quad + quads <= (p.RIN + 1) // 2)
            for k in range(quads):
                a = [s.quads[src + k, e] for e in range(4)]  # one 16-byte load: a.x .. a.w
                for j in range(used):
                    i = k - j
                    if i < 0 or i >= T:
                        continue
                    for nt in range(NT):
                        if j < steps:
                            b2 = bw[j][nt]
                            _accumulate(acc[i][nt], a, [b2[:, 0], b2[:, 1]])
                        else:
                            _accumulate(acc[i][nt], a[:2], [bw[j][nt][:, 0]])

        def accumulate(acc, lane_quads, fg, chunk):
            if p.one_group:  # WgmmaJob::job: every channel's window, in one group
                assert not p.chunked and p.QC == p.PB == 1 and p.size[1] in r08.JOB_TILES
                PATHS["job: one group"] += 1
                taps = min(r08.P_BLOCK, K + 1)
                for cl in range(C):
                    src = lane_quads + cl * p.cols * p.quad_stride
                    wg_window(acc, src, cl * r08.PAIRS * p.NTP + fg * NT, taps)
                return
            cc = min(p.chunk_channels, C - chunk * p.chunk_channels)
            for cl in range(cc):
                for qc in range(p.QC):
                    for pb in range(p.PB):
                        taps = min(r08.P_BLOCK, K + p.blocks - pb * r08.P_BLOCK)
                        src = (
                            lane_quads
                            + (cl * p.cols + qc * r08.Q_CHUNK // CSTEP) * p.quad_stride
                            + pb * (r08.P_BLOCK // 2)
                        )
                        entry = ((cl * p.QC + qc) * p.PB + pb) * r08.PAIRS * p.NTP + fg * NT
                        if p.wgmma:
                            wg_window(acc, src, entry, taps)
                        else:
                            window(acc, src, entry * 32 + LANE, taps)

        def store_out(image, s=s):  # rung 12: the buffer out, one bulk copy of the image
            PATHS["output: bulk copy"] += 1
            assert np.all(s.out_writes == 1), "a buffered output was stored twice or never"
            at = y_skew + image * M * p.Ho * p.Wo
            assert at % 8 == 0 and s.out.size % 8 == 0  # 16-byte aligned, whole chunks
            y[at : at + s.out.size] = s.out
            writes[at : at + s.out.size] += 1
            s.out_writes[:] = 0

        def stage(item, chunk, next_item, next_chunk, block=block):
            if bulk_out and item != block:
                store_out(item - grid)
            relayout(item, chunk)
            if p.chunked:
                stage_weights(chunk)
            if next_item < p.items:
                issue_raw(next_item, next_chunk)

        if not p.chunked:
            stage_weights(0)
        if block < p.items:
            issue_raw(block, 0)
        for item in range(block, p.items, grid):
            b, h0 = origin(item, p)
            sub_bands = -(-min(p.band_rows, p.Ho - h0) // ROWS)
            columns = sub_bands * p.Wn
            groups = -(-columns // 8)
            jobs = -(-groups // p.job_warps) * p.NFG
            rounds = -(-jobs // (r08.NWARPS // p.job_warps))
            if not p.chunked:
                stage(item, 0, item + grid, 0)
            accs = {}
            for rnd in range(rounds):
                for warp in range(r08.NWARPS):  # the warps of a round, one after another
                    job = rnd * (r08.NWARPS // p.job_warps) + warp // p.job_warps
                    accs[warp] = (job < jobs, np.zeros((T, NT, 4, 32)))
                if p.chunked:
                    for chunk in range(p.chunks):
                        last = chunk + 1 == p.chunks
                        nxt = item if not last or rnd + 1 < rounds else item + grid
                        stage(item, chunk, nxt, 0 if last else chunk + 1)
                        for warp in range(r08.NWARPS):
                            _job_accumulate(accs, warp, rnd, groups, columns, p, chunk, accumulate)
                else:
                    for warp in range(r08.NWARPS):
                        _job_accumulate(accs, warp, rnd, groups, columns, p, 0, accumulate)
                for warp in range(r08.NWARPS):
                    active, acc = accs[warp]
                    if active:
                        out = s if bulk_out else None
                        _epilogue(acc, rnd, warp, groups, columns, b, h0, p, y, writes, y_skew, out)
        if bulk_out and block < p.items:  # the block's last image
            store_out(block + (p.items - 1 - block) // grid * grid)
    return y, writes


def _job_accumulate(accs, warp, rnd, groups, columns, p, chunk, accumulate):
    active, acc = accs[warp]
    if not active:
        return
    fg, group = _job(rnd, warp, groups, p.job_warps)
    n = group * 8 + G
    n_live = n < columns
    sb = np.where(n_live, fast_div(n, p.wn_magic, p.wn_shift).astype(np.int64), 0)
    col = np.where(n_live, n - sb * p.Wn, 0)
    cstep = 2 if p.packed else 1
    lane_quads = (col + 2 * T4 // cstep) * p.quad_stride + sb * (p.tile_rows * p.tiles // 2)
    accumulate(acc, lane_quads, fg, chunk)


def _job(rnd: int, warp: int, groups: int, job_warps: int = 1) -> tuple[int, int]:
    """(fg, group) of a warp's job in a round as the kernel keeps them: a job is job_warps
    warps' (slot = warp / job_warps, member = warp % job_warps) and spans that many groups;
    its supergroup sg starts at slot, grows by SLOTS a round, and supergroups are subtracted
    into fg (no division); the warp's group is sg * job_warps + member."""
    slots, slot, member = r08.NWARPS // job_warps, warp // job_warps, warp % job_warps
    supergroups = -(-groups // job_warps)
    fg, sg = 0, slot
    for _ in range(rnd + 1):
        while sg >= supergroups:
            sg -= supergroups
            fg += 1
        if _ < rnd:
            sg += slots
    assert (fg, sg) == divmod(rnd * slots + slot, supergroups)
    return fg, sg * job_warps + member


def _pack_half2(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    lo16 = lo.astype(np.float16).view(np.uint16).astype(np.uint32)
    hi16 = hi.astype(np.float16).view(np.uint16).astype(np.uint32)
    return lo16 | hi16 << 16


def _movmatrix_trans(a: np.ndarray) -> np.ndarray:
    """movmatrix.sync.aligned.m8n8.trans.b16: lane (g, t) gives row g, columns 2t, 2t + 1 of an
    8 x 8 matrix and receives rows 2t, 2t + 1 of column g (the PTX ISA's figures; ggml's
    shuffle fallback for CUDA < 11.8 spells out the same lane mapping)."""
    m = np.zeros((8, 8), np.uint32)
    m[G, 2 * T4], m[G, 2 * T4 + 1] = a & 0xFFFF, a >> 16
    return m[2 * T4, G] | m[2 * T4 + 1, G] << 16


def _epilogue(acc, rnd, warp, groups, columns, b, h0, p, y, writes, y_skew, out=None):
    """The job's stores into y (as halves, counted in writes), or with ``out`` (rung 12) into
    out's image buffer."""
    M = p.size[2]
    ROWS = p.tile_rows * p.tiles
    NT = p.n_tiles
    Ho, Wo = p.Ho, p.Wo
    fg, group = _job(rnd, warp, groups, p.job_warps)
    if p.packed:  # lane (g, t): filter t at output columns 2 col, 2 col + 1 of its rows
        n = group * 8 + G
        la = n < columns
        sb = np.where(la, fast_div(n, p.wn_magic, p.wn_shift).astype(np.int64), 0)
        col = np.where(la, n - sb * p.Wn, 0)
        lb = la & (2 * col + 1 < Wo)
        same_row = lb
        wa, wb = 2 * col, 2 * col + 1
        ha0 = hb0 = h0 + sb * ROWS
    else:
        na = group * 8 + 2 * T4
        nb = na + 1
        la, lb = na < columns, nb < columns
        sba = np.where(la, fast_div(na, p.wn_magic, p.wn_shift).astype(np.int64), 0)
        wa = np.where(la, na - sba * Wo, 0)
        wraps = lb & (wa + 1 == Wo)
        sbb = np.where(lb, sba + wraps, 0)
        wb = np.where(lb & ~wraps, wa + 1, 0)
        assert np.array_equal(sbb, np.where(lb, nb // Wo, 0))
        ha0, hb0 = h0 + sba * ROWS, h0 + sbb * ROWS
        same_row = la & lb & (sba == sbb)
    aligned_pairs = p.packed and Wo % 2 == 0 and y_skew % 2 == 0  # the kernel's pairs_aligned
    PATHS["epilogue: aligned pairs" if aligned_pairs else "epilogue: general"] += 1
    if aligned_pairs:  # one 32-bit word per store, only a row test
        h = h0 + sb * ROWS
        half_wo, plane = Wo // 2, p.Ho * (Wo // 2)
        y_image = y_skew // 2 + b * M * plane  # in 32-bit words of y
        at = h * half_wo + col
        if out is not None:  # rung 12: the same layout in the image's buffer (h0 == 0)
            assert p.one_group and p.bands == 1 and h0 == 0
            PATHS["epilogue: into the buffer"] += 1
            y, writes, y_image = out.out, out.out_writes, 0
        if p.one_group:  # LEAN: a pointer per filter, an offset and a test per output row
            PATHS["epilogue: per filter"] += 1
            row_at = [rr * half_wo for rr in range(p.tile_rows * p.tiles)]
            row_live = [h + rr < p.Ho for rr in range(p.tile_rows * p.tiles)]
            for q in range(NT // 2):
                f = (fg * (NT // 2) + q) * r08.PACK_FILTERS + T4
                live = la & (f < M)
                yf = y_image + np.where(live, f, 0) * plane + at
                for i in range(p.tiles):
                    for r in range(2):
                        for sr in range(2):
                            rr = 4 * i + 2 * r + sr
                            pair = _pack_half2(
                                acc[i][2 * q + sr][2 * r], acc[i][2 * q + sr][2 * r + 1]
                            )
                            word = yf + row_at[rr]
                            for lane in np.flatnonzero(live & row_live[rr]):
                                y[2 * word[lane] : 2 * word[lane] + 2] = [
                                    pair[lane] & 0xFFFF,
                                    pair[lane] >> 16,
                                ]
                                writes[2 * word[lane] : 2 * word[lane] + 2] += 1
            return
        for nt in range(NT):
            f = ((fg * NT + nt) >> p.blocks) * r08.PACK_FILTERS + T4
            live = la & (f < M)
            at_f = np.where(live, f, 0) * plane + at
            for i in range(p.tiles):
                for r in range(2):
                    row = 4 * i + 2 * r + nt % 2 if p.blocks else 2 * i + r
                    pair = _pack_half2(acc[i][nt][2 * r], acc[i][nt][2 * r + 1])
                    stored = live & (h + row < p.Ho)
                    word = y_image + at_f + row * half_wo
                    for lane in np.flatnonzero(stored):
                        y[2 * word[lane] : 2 * word[lane] + 2] = [
                            pair[lane] & 0xFFFF,
                            pair[lane] >> 16,
                        ]
                        writes[2 * word[lane] : 2 * word[lane] + 2] += 1
        return
    narrow = not p.packed and NT == 1 and M - fg * 8 <= 4
    step = p.tile_rows * Wo
    for nt in range(NT):
        row_shift = G // 4 if narrow else 0
        if p.packed:
            f = ((fg * NT + nt) >> p.blocks) * 4 + T4
        else:
            f = (fg * NT + nt) * 8 + (G % 4 if narrow else G)
        row_at = nt % 2 if p.blocks else 0
        f_live = f < M
        plane = y_skew + (b * M + np.where(f_live, f, 0)) * Ho * Wo  # y: 16-byte aligned
        ya = plane + (ha0 + row_shift) * Wo + wa
        b_at = (hb0 - ha0) * Wo + wb - wa  # column nb, from ya (two-halves path)

        def store(pair, r, offset, aligned, ya, f_live=f_live, b_at=b_at):
            va = f_live & la & (ha0 + r < Ho)
            vb = f_live & lb & (hb0 + r < Ho)
            both = same_row & va & aligned
            for lane in range(32):
                at_a, at_b = ya[lane] + offset, ya[lane] + offset + b_at[lane]
                if both[lane]:  # one 32-bit store
                    assert (2 * at_a) % 4 == 0
                    y[at_a : at_a + 2] = [pair[lane] & 0xFFFF, pair[lane] >> 16]
                    writes[at_a : at_a + 2] += 1
                    continue
                if va[lane]:
                    y[at_a] = pair[lane] & 0xFFFF
                    writes[at_a] += 1
                if vb[lane]:
                    y[at_b] = pair[lane] >> 16
                    writes[at_b] += 1

        even = (2 * ya) % 4 == 0
        for i in range(p.tiles):
            if narrow:
                first = _pack_half2(acc[i][nt][0], acc[i][nt][1])
                second = _pack_half2(acc[i][nt][2], acc[i][nt][3])[LANE ^ 2]  # shfl_xor 2
                pair = _movmatrix_trans(np.where(T4 < 2, first, second))
                store(pair, 2 * i + row_shift, 0, even, ya)
            else:
                for half_row in range(2):
                    pair = _pack_half2(acc[i][nt][2 * half_row], acc[i][nt][2 * half_row + 1])
                    if not p.packed:
                        pair = _movmatrix_trans(pair)
                    r = (2 if p.blocks else 1) * half_row + row_at
                    aligned = ~even if (r * Wo) & 1 else even
                    store(pair, p.tile_rows * i + r, r * Wo, aligned, ya)
            ya = ya + step


# ---- the checks ---------------------------------------------------------------------------


def _check(size, p: r08.Plan, grid: int, y_skew: int = 0, seed: int = 0):
    b, c, m, h, w, k = size
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (b, c, h, w)).astype(np.float16)
    wt = rng.uniform(-1, 1, (m, c, k, k)).astype(np.float16)
    y, writes = emulate(x, wt, p, grid, y_skew)
    assert np.all(writes[y_skew:] == 1), "an output element was stored twice or never"
    assert np.all(writes[:y_skew] == 0)
    out = y[y_skew:].view(np.float16).astype(np.float64).reshape(b, m, h - k + 1, w - k + 1)
    ref = conv_numpy(x.astype(np.float64), wt.astype(np.float64))
    err = np.linalg.norm(out - ref) / max(np.linalg.norm(ref), 1e-30)
    assert err <= 2e-3, f"relative error {err:.2e} for {size} with {p}"


def _forced(
    size, tiles, n_tiles, packed=False, wgmma=False, blocks=False, one_group=False, bulk=False
):
    """A whole-image plan for size on the kernel variant (tiles, n_tiles, packed, wgmma,
    blocks, one_group, bulk)."""
    ho = size[3] - size[5] + 1
    one_group = one_group or bulk
    blocks = blocks or one_group
    rows = (4 if blocks else 2) * tiles
    band = -(-ho // rows) * rows
    wgmma = wgmma or blocks
    packed = packed or wgmma
    return r08.Plan(
        size, tiles, n_tiles, False, band, size[1], packed, wgmma, blocks, one_group, bulk
    )


# the planner's modes, one per rung: 8 (none), 9, 10, 11 and 12
PLAN_MODES = [None, "wgmma", "blocks", "one_group", "bulk"]


@pytest.mark.parametrize("mode", PLAN_MODES, ids=str)
@pytest.mark.parametrize("size", TEST_SIZES, ids=str)
def test_planned_launch_matches_float64(size, mode):
    small = (min(size[0], 2), *size[1:])  # the emulation is slow; two images show the loop
    _check(small, r08.plan(small, **({mode: True} if mode else {})), grid=1)


@pytest.mark.parametrize(
    ("size", "tiles", "n_tiles"),
    [
        ((2, 1, 4, 23, 21, 7), 1, 1),  # odd Wo; 11 column pairs: one warp of the job is idle
        ((2, 2, 7, 14, 15, 5), 1, 2),  # taps 5: the third k16 step reads zero weights
        ((2, 3, 16, 15, 13, 7), 1, 4),
        ((2, 3, 16, 15, 13, 7), 2, 4),
        ((1, 4, 16, 20, 40, 7), 3, 4),
        ((2, 2, 12, 9, 10, 1), 2, 4),  # K = 1: one row of four k16 steps is live
        ((1, 2, 40, 20, 21, 12), 3, 4),  # K = 12: row blocks of 8 and 4, 3 filter groups
        ((2, 3, 4, 12, 14, 8), 1, 1),  # K = 8: the shifted copy needs a second chunk
    ],
    ids=str,
)
def test_every_wgmma_kernel_variant(size, tiles, n_tiles):
    _check(size, _forced(size, tiles, n_tiles, wgmma=True), grid=2)


def test_wgmma_channel_chunks():
    size = (2, 7, 20, 9, 40, 3)
    p = r08.plan(size, smem_limit=20 * 1024, wgmma=True)
    assert p.chunked and p.chunks > 1 and p.kernel_name == "conv_wg_chunked_t1_n4"
    _check(size, p, grid=3)


@pytest.mark.parametrize(
    ("size", "tiles", "n_tiles"),
    [
        ((2, 1, 4, 23, 21, 7), 1, 2),  # odd Ho and Wo: the last block row and column half dead
        ((2, 1, 4, 23, 21, 7), 2, 2),
        ((2, 2, 7, 14, 15, 5), 1, 4),  # taps 6: the fourth k16 step reads zero weights
        ((2, 2, 7, 14, 15, 5), 2, 4),
        ((2, 3, 16, 15, 13, 7), 1, 8),
        ((2, 3, 16, 15, 13, 7), 2, 8),
        ((1, 4, 16, 22, 40, 7), 2, 8),  # conv2's width, two rows of sub-bands
        ((2, 2, 12, 9, 10, 1), 2, 8),  # K = 1: two live input rows of eight
        ((1, 2, 40, 20, 21, 12), 2, 8),  # K = 12: row blocks of 8 and 5, 3 filter groups
        ((2, 3, 4, 12, 14, 8), 1, 2),  # K = 8: both shifted copies need a second chunk
        ((2, 2, 20, 13, 12, 7), 2, 8),  # 20 filters: the second group has 4 live of 16
    ],
    ids=str,
)
def test_every_blocks_kernel_variant(size, tiles, n_tiles):
    _check(size, _forced(size, tiles, n_tiles, blocks=True), grid=2)


def test_blocks_channel_chunks_and_bands():
    size = (2, 7, 20, 9, 40, 3)
    p = r08.plan(size, smem_limit=24 * 1024, blocks=True)
    assert p.chunked and p.chunks > 1 and p.kernel_name == "conv_wgb_chunked_t1_n8"
    _check(size, p, grid=3)
    size = (3, 2, 6, 29, 19, 5)
    p = r08.plan(size, smem_limit=16 * 1024, blocks=True)
    assert not p.chunked and p.bands > 1
    _check(size, p, grid=2)


@pytest.mark.parametrize(
    ("size", "tiles", "n_tiles"),
    [
        ((2, 1, 4, 23, 22, 6), 1, 2),  # odd Ho and Wo (even W: the sliding rewrite), one channel
        ((2, 1, 4, 23, 22, 7), 2, 2),
        ((2, 1, 16, 14, 16, 5), 2, 8),  # taps 6: the fourth k16 step reads zero weights
        ((2, 2, 7, 14, 16, 5), 1, 4),
        ((1, 2, 20, 13, 12, 7), 1, 8),  # 20 filters: the second group has 4 live of 16
        ((2, 3, 16, 15, 14, 7), 1, 8),
        ((2, 3, 3, 9, 10, 1), 1, 2),  # K = 1: quads 1 to 3 of a window are zeros, not loaded
        ((1, 4, 16, 22, 40, 7), 1, 8),  # conv2's width and channels
        ((2, 4, 8, 11, 18, 6), 1, 4),
    ],
    ids=str,
)
def test_every_one_group_kernel_variant(size, tiles, n_tiles):
    assert size[1] in r08.JOB_TILES and tiles in r08.JOB_TILES[size[1]]
    PATHS.clear()
    _check(size, _forced(size, tiles, n_tiles, one_group=True), grid=2)
    assert PATHS["job: one group"] and PATHS["rewrite: slide"]
    wo_even = (size[4] - size[5] + 1) % 2 == 0  # else the general epilogue (odd Wo)
    assert bool(PATHS["epilogue: per filter"]) == wo_even != bool(PATHS["epilogue: general"])


def test_one_group_falls_back_to_rung_10_where_it_cannot_apply():
    for size in ((2, 5, 16, 40, 40, 7), (2, 3, 4, 12, 14, 8), (2, 2, 5, 12, 14, 9)):
        p = r08.plan(size, one_group=True)  # C > 4, K = 8 and 9: rung 10's kernels
        assert not p.one_group and p.blocks and p == r08.plan(size, blocks=True)
    size = (2, 3, 6, 29, 40, 5)
    p = r08.plan(size, smem_limit=26 * 1024, one_group=True)  # bands of rows: still one group
    assert p.one_group and p.bands == 3
    _check(size, p, grid=2)
    p = r08.plan(size, smem_limit=18 * 1024, one_group=True)  # channel chunks: rung 10's
    assert p.chunked and not p.one_group and p.kernel_name == "conv_wgb_chunked_t1_n8"
    size = (1, 2, 4, 15, 17, 4)  # odd W: the one-group job, rung 10's rewrite (halves)
    p = r08.plan(size, one_group=True)
    PATHS.clear()
    _check(size, p, grid=1)
    assert p.one_group and PATHS["rewrite: halves"] and not PATHS["rewrite: slide"]


BULK_VARIANTS = [
    ((3, 1, 4, 23, 22, 6), 1, 2),  # odd Ho (a half sub-band), one channel; 3 images, 2 blocks
    ((3, 1, 4, 23, 22, 7), 2, 2),
    ((3, 1, 16, 14, 16, 5), 2, 8),
    ((3, 2, 7, 14, 16, 5), 1, 4),  # M Ho Wo = 840: whole 16-byte chunks
    ((2, 2, 20, 13, 12, 7), 1, 8),  # 20 filters
    ((3, 3, 16, 15, 14, 7), 1, 8),
    ((3, 3, 3, 9, 10, 1), 1, 2),  # K = 1; M Ho Wo = 270: no buffer (not whole chunks)
    ((3, 4, 16, 22, 40, 7), 1, 8),  # conv2's width and channels
    ((3, 4, 8, 11, 18, 6), 1, 4),
]


@pytest.mark.parametrize(("size", "tiles", "n_tiles"), BULK_VARIANTS, ids=str)
def test_every_bulk_kernel_variant(size, tiles, n_tiles):
    p = _forced(size, tiles, n_tiles, bulk=True)
    _, _, m, _, w, k = size
    ho, wo = size[3] - k + 1, w - k + 1
    assert bool(p.out_bytes) == (wo % 2 == 0 and m * ho * wo % 8 == 0)
    PATHS.clear()
    _check(size, p, grid=2)
    assert PATHS["copy: bulk"] and PATHS["job: one group"]
    buffered = bool(p.out_bytes)
    assert bool(PATHS["epilogue: into the buffer"]) == buffered == bool(PATHS["output: bulk copy"])
    assert PATHS["output: bulk copy"] == (size[0] if buffered else 0)  # once per image


def test_bulk_copies_the_last_chunk_of_x_by_halves():
    size = (2, 3, 5, 11, 13, 3)  # B C H W = 858 halves: the last chunk reaches past x
    p = r08.plan(size, bulk=True)
    assert p.bulk and p.x_halves % 8 and p.out_bytes == 0  # Wo = 11 is odd
    PATHS.clear()
    _check(size, p, grid=1)
    assert PATHS["copy: bulk, the last chunk by halves"] == 1 and PATHS["copy: bulk"]


def test_bulk_output_buffer_only_where_it_can_serve():
    size = (3, 2, 8, 14, 18, 5)  # M Ho Wo = 1120
    p = r08.plan(size, bulk=True)
    assert p.bulk and p.out_bytes == 2 * 8 * 10 * 14 and p.out_at == p.raw_end
    assert p.bar_at == p.out_at + p.out_bytes and p.smem_bytes == p.bar_at + 8
    PATHS.clear()  # y off its 16-byte alignment: the jobs store to global memory
    _check(size, p, grid=2, y_skew=2)
    assert PATHS["epilogue: per filter"] and not PATHS["output: bulk copy"]
    banded = r08.plan(size, smem_limit=12 * 1024, bulk=True)  # bands of rows: no buffer
    assert banded.bulk and banded.bands > 1 and banded.out_bytes == 0
    PATHS.clear()
    _check(size, banded, grid=2)
    assert PATHS["copy: bulk"] and not PATHS["output: bulk copy"]

    # the buffer only where it costs no resident block (blocks_per_sm: by shared memory alone)
    def per_sm(limit):
        return lambda smem: limit // (smem + 1024)

    assert r08.out_buffer_or_not(p, per_sm(2 * (p.smem_bytes + 1024))) == p
    lean = r08.out_buffer_or_not(p, per_sm(2 * (p.smem_bytes + 1024) - 1))
    assert lean.out_bytes == 0 and lean.bar_at == lean.raw_end and lean.bulk
    assert r08.out_buffer_or_not(lean, per_sm(1)) == lean


def test_bulk_falls_back_to_rung_10_where_rung_11_does():
    for size in ((2, 5, 16, 40, 40, 7), (2, 3, 4, 12, 14, 8)):
        p = r08.plan(size, bulk=True)
        assert not p.bulk and not p.one_group and p == r08.plan(size, blocks=True)
    p = r08.plan((2, 3, 6, 29, 40, 5), smem_limit=18 * 1024, bulk=True)  # channel chunks
    assert p.chunked and not p.bulk and p.kernel_name == "conv_wgb_chunked_t1_n8"


# per planner mode (one per rung, as PLAN_MODES): conv1's and conv2's (kernel, rounds); every
# whole-image plan has band_rows = Ho rounded up to whole sub-bands (80 and 36)
CANONICAL_PLANS = {
    None: (("conv_tc_pack_t10_n1", 3), ("conv_tc_t6_n2", 2)),
    "wgmma": (("conv_wg_t1_n1", 25), ("conv_wg_t3_n4", 2)),
    "blocks": (("conv_wgb_t2_n2", 7), ("conv_wgb_t1_n8", 3)),
    "one_group": (("conv_wgj_c1_t2_n2", 7), ("conv_wgj_c4_t1_n8", 3)),
    "bulk": (("conv_wgk_c1_t2_n2", 7), ("conv_wgk_c4_t1_n8", 3)),
}


def test_canonical_layers_pick_the_planned_kernels():
    assert list(CANONICAL_PLANS) == PLAN_MODES
    for mode, expected in CANONICAL_PLANS.items():
        plans = [r08.plan(layer, **({mode: True} if mode else {})) for layer in (CONV1, CONV2)]
        assert [(p.kernel_name, p.rounds) for p in plans] == list(expected), mode
        assert [p.band_rows for p in plans] == [80, 36], mode
    conv1, conv2 = r08.plan(CONV1), r08.plan(CONV2)
    assert conv1.smem_bytes < 46 * 1024 and conv2.smem_bytes < 74 * 1024  # two blocks per SM
    conv1, conv2 = r08.plan(CONV1, blocks=True), r08.plan(CONV2, blocks=True)
    assert conv1.smem_bytes < 46 * 1024 and conv2.smem_bytes < 72 * 1024
    conv1, conv2 = r08.plan(CONV1, bulk=True), r08.plan(CONV2, bulk=True)
    assert (conv1.out_bytes, conv2.out_bytes) == (51200, 36992)
    assert conv2.smem_bytes + 1024 <= 228 * 1024 // 2  # two blocks per SM with the buffer


@pytest.mark.parametrize(
    ("size", "tiles", "n_tiles", "packed"),
    [
        ((2, 1, 4, 23, 21, 7), 2, 1, False),
        ((2, 1, 4, 23, 21, 7), 6, 1, False),
        ((1, 1, 4, 30, 26, 7), 10, 1, False),
        ((2, 3, 16, 15, 13, 5), 2, 2, False),
        ((2, 3, 11, 17, 12, 3), 6, 2, False),
        ((1, 2, 24, 9, 35, 1), 2, 1, False),
        ((2, 2, 20, 13, 11, 3), 6, 1, False),  # three groups of 8 filters, the last one narrow
        ((2, 1, 5, 12, 17, 5), 6, 1, False),  # five filters: not narrow
        ((2, 1, 3, 14, 15, 7), 10, 1, False),  # three filters: narrow
        ((2, 1, 4, 23, 21, 7), 2, 1, True),  # packed: odd Wo, the last pair half past the image
        ((2, 2, 3, 19, 24, 7), 6, 1, True),  # even Wo, three filters
        ((1, 1, 4, 30, 26, 7), 10, 1, True),
        ((2, 3, 4, 12, 14, 8), 6, 1, True),  # K = 8: the shifted copy needs a second chunk
        ((2, 1, 1, 9, 10, 1), 2, 1, True),  # K = 1, M = 1
        ((2, 2, 9, 11, 13, 3), 2, 1, True),  # nine filters: three packed groups of 4
    ],
    ids=str,
)
def test_every_kernel_variant(size, tiles, n_tiles, packed):
    _check(size, _forced(size, tiles, n_tiles, packed), grid=2)


@pytest.mark.parametrize(
    "size",
    [
        (1, 3, 5, 12, 13, 9),  # K = 9: two column chunks and two row blocks (taps 8, then 1)
        (1, 2, 3, 20, 21, 12),  # K = 12: taps 8 then 4
        (1, 40, 9, 11, 12, 9),  # C K K = 3240
        (3, 5, 70, 9, 10, 3),  # M = 70: several filter groups, a partial last one
    ],
    ids=str,
)
def test_large_filters_and_channel_counts(size):
    _check(size, r08.plan(size), grid=2)


def test_bands_and_the_persistent_loop():
    size = (3, 2, 6, 29, 19, 5)
    p = r08.plan(size, smem_limit=13 * 1024)
    assert not p.chunked and p.bands == 2  # the second band is a partial sub-band
    _check(size, p, grid=2)


@pytest.mark.parametrize("grid", [1, 3])
def test_channel_chunks(grid):
    size = (2, 7, 20, 9, 40, 3)
    p = r08.plan(size, smem_limit=18 * 1024)
    assert p.chunked and (p.chunks, p.chunk_channels, p.rounds, p.bands) == (3, 3, 2, 2)
    _check(size, p, grid=grid)


def test_misaligned_output_takes_the_two_halves_path():
    size = (2, 2, 5, 9, 12, 3)
    _check(size, r08.plan(size), grid=1, y_skew=1)


@pytest.mark.parametrize(
    "size, y_skew, paths",
    [
        # conv1-like (even W and Wo), aligned y: the packed fast paths
        ((2, 1, 3, 22, 20, 7), 0, {"rewrite: words", "epilogue: aligned pairs"}),
        # the same with y one half off its alignment: the general epilogue
        ((2, 1, 3, 22, 20, 7), 1, {"rewrite: words", "epilogue: general"}),
        # odd W (even Wo = W - K + 1 with K even): halves in the rewrite, aligned stores
        ((1, 2, 4, 15, 17, 4), 0, {"rewrite: halves", "epilogue: aligned pairs"}),
        # odd Wo: the general epilogue
        ((1, 2, 4, 15, 16, 4), 0, {"rewrite: words", "epilogue: general"}),
    ],
    ids=str,
)
def test_packed_fast_paths_and_their_fallbacks(size, y_skew, paths):
    for wgmma, blocks in ((False, False), (True, False), (True, True)):
        p = r08.plan(size, wgmma=wgmma, blocks=blocks)
        assert p.packed
        PATHS.clear()
        _check(size, p, grid=2, y_skew=y_skew)
        assert set(PATHS) == paths


def test_kernel_arguments_follow_the_cu_signature():
    p = r08.plan(CONV2)
    scalars = p.scalars()
    assert len(scalars) == len(r08.PARAMS)
    assert scalars[0].dtype == np.int64
    for name, v in zip(r08.PARAMS[1:], scalars[1:], strict=True):
        assert v.dtype == (np.uint32 if "magic" in name else np.int32), name
    named = dict(zip(r08.PARAMS, (int(v) for v in scalars), strict=True))
    assert named["x_halves"] == 10000 * 4 * 40 * 40
    assert (named["B"], named["C"], named["M"], named["H"], named["W"], named["K"]) == CONV2
    assert named["raw_at"] + named["chunk_channels"] * named["slot_chunks"] * 16 == p.smem_bytes


def test_fast_division_matches_integer_division():
    """The kernel's fast_div with the launcher's multipliers equals n // d for every divisor
    it is given and every n below 2**31, checked at the edges and on random samples."""
    rng = np.random.default_rng(7)
    divisors = [*range(1, 300), 2**16 - 1, 2**16, 2**16 + 1, 2**30 - 1, 2**30, 2**31 - 1]
    divisors += [int(d) for d in rng.integers(1, 2**31, 200)]
    for d in divisors:
        magic, shift = r08.fast_division(d)
        assert 0 <= magic < 2**32 and 0 <= shift <= 31
        n = np.concatenate(
            [
                np.arange(0, 1000),
                d * np.arange(1, 50) - 1,
                d * np.arange(1, 50),
                rng.integers(0, 2**31, 2000),
                [2**31 - 1, 2**31 - 2],
            ]
        )
        n = n[(n >= 0) & (n < 2**31)]
        assert np.array_equal(fast_div(n, magic, shift), n // d), d
    with pytest.raises(ValueError, match="at least 1"):
        r08.fast_division(0)


def test_shapes_too_large_are_refused_clearly():
    with pytest.raises(ValueError, match="too large for this rung"):
        r08.plan((1, 4, 8, 64, 100000, 3))
