"""Rung 13 of conv (filters on wgmma's M), emulated in NumPy: no GPU needed.

``emulate`` runs ``r13_filters_on_m.cu`` block by block with the index formulas of the .cu
file (the comments name the part each mirrors) and the layout of the real launcher's ``plan``:
shared memory is one byte array filled with NaN bit patterns first, so a value read from
anywhere the kernel never wrote poisons the result. wgmma is emulated from the PTX ISA's
definitions, written here independently of the kernel: the register A fragment (lane 4 i + t of
warp q holds rows 16 q + i and + 8 at columns 2t, 2t + 1 and 2t + 8, 2t + 9), B read through its
descriptor (K-major core matrices without swizzle: element (k, n) at start + (k / 8) LBO +
(n / 8) SBO + (n % 8) 16 + (k % 8) 2), and the accumulator fragment (rows 16 q + i and + 8 at
columns 8 j + 2t, + 1). Every output element must be stored exactly once.

What this cannot see: races (the barriers are argued in the .cu comments), the bulk copies'
timing, and the tensor core's own rounding (the emulation sums in float64).
"""

import numpy as np
import pytest
from conftest import gpu_only

from ladder.conv import r13_filters_on_m as r13
from ladder.conv.layers import CONV1, CONV2
from ladder.conv.problem import conv_numpy

NAN_HALF = 0x7E00
SBO = 128  # a core matrix: 8 rows of 16 bytes


def test_every_channel_count_is_compiled():
    """The kernel's constants and parameter list reach NVRTC from r13's DEFINES (one source);
    the cubin holds a kernel per channel count the planner can pick (no GPU needed)."""
    assert r13.DEFINES["FM_ARGUMENTS"] == ", ".join(r13.PARAMS)
    cubin = r13.SOURCE.build("sm_90a").cubin
    for c in range(1, r13.MAX_CHANNELS + 1):
        assert f"conv_fm_c{c}".encode() + b"\0" in cubin


def test_conv2_plan_takes_the_fast_paths_and_two_blocks_per_sm():
    found = r13.plan(CONV2)
    assert found is not None and found.kernel_name == "conv_fm_c4"
    assert (found.NY, found.NP, found.G, found.tiles, found.R, found.RW) == (17, 17, 289, 2, 40, 40)
    assert found.flags(0, 0) == r13.BULK_IN | r13.BULK_OUT | r13.PAIRED
    assert found.flags(2, 0) == r13.BULK_OUT | r13.PAIRED  # x not 16-byte aligned
    assert found.flags(0, 4) == r13.BULK_IN | r13.PAIRED
    assert 2 * (found.smem_bytes + 1024) <= 228 * 1024  # two blocks per SM on sm_90


@pytest.mark.parametrize(
    "size",
    [
        CONV1,
        (2, 5, 16, 40, 40, 7),
        (2, 4, 16, 40, 40, 8),
        (2, 4, 4, 40, 40, 7),
        (2, 4, 17, 9, 9, 1),
    ],
    ids=["conv1", "C5", "K8", "M4", "M17"],
)
def test_sizes_outside_the_kernel_fall_back_to_rung_12(size):
    assert r13.plan(size) is None


def test_images_beyond_shared_memory_fall_back():
    assert r13.plan((1, 4, 16, 200, 200, 7)) is None
    assert r13.plan((1, 4, 16, 200, 200, 7), smem_limit=10**7) is not None


def _halves(a: np.ndarray) -> np.ndarray:
    return a.astype(np.float16).view(np.uint16)


def emulate(size, x, w, x_at: int = 0, y_at: int = 0) -> np.ndarray:
    """The kernel's output for x, w (float16), as the .cu computes it, one block per image."""
    p = r13.plan(size)
    assert p is not None
    b_count, c_count, m_count, h, wd, k = size
    ho, wo, np_, g_all, big_r, rw = p.Ho, p.Wo, p.NP, p.G, p.R, p.RW
    gp, r2, flags = p.tiles * r13.NT, big_r // 2, p.flags(x_at, y_at)
    xh, wh = _halves(x).reshape(-1), _halves(w).reshape(-1)
    y = np.full(m_count * ho * wo * b_count, NAN_HALF, np.uint16)
    tid = np.arange(r13.THREADS)
    warp, lane = tid // 32, tid % 32
    i, t = lane // 4, lane % 4
    f, dy = 4 * (i % 4) + warp, i // 4  # conv_fm: this lane's accumulator rows
    smem = np.full(p.smem_bytes // 2, NAN_HALF, np.uint16).view(np.uint8)
    u32 = smem.view(np.uint32)

    # the A fragments (conv_fm's a[s][r], from weight_pair)
    def weight(ff, c, pp, qq):
        inside = (ff < m_count) & (pp >= 0) & (pp < k) & (qq >= 0) & (qq < k)
        at = ((np.minimum(ff, m_count - 1) * c_count + c) * k + np.clip(pp, 0, k - 1)) * k
        return np.where(inside, wh[at + np.clip(qq, 0, k - 1)], 0).astype(np.uint32)

    steps = 4 * c_count
    a = np.zeros((steps, 4, r13.THREADS), np.uint32)
    for s in range(steps):
        for r in range(4):
            dx, pp = r & 1, 2 * (s % 4) + (r >> 1)
            q = 2 * t - dx
            a[s, r] = weight(f, s // 4, pp - dy, q) | weight(f, s // 4, pp - dy, q + 1) << 16
    # the table (conv_fm's loop over 2 GP entries)
    e = np.arange(2 * gp)
    ddy, g = e // gp, e % gp
    yy, xx = 2 * (g // np_) + ddy, 2 * (g % np_)
    entry = np.where(
        (g >= g_all) | (yy >= ho),
        r13.INVALID,
        (yy * wo + xx) * 2 | np.where(xx + 1 >= wo, r13.HI_INVALID, 0),
    )
    u32[p.tab_at // 4 : p.tab_at // 4 + 2 * gp] = entry
    # the zero tail
    smem[p.rep_at + 16 * c_count * big_r * np_ : p.rep_at + 16 * p.rep_chunks] = 0

    image_halves = c_count * h * wd
    for b in range(b_count):
        raw = p.raw_at + (b % r13.RAW_SLOTS) * p.raw_bytes
        image = xh[b * image_halves : (b + 1) * image_halves]
        if flags & r13.BULK_IN:  # the bulk copy: the image's bytes as they are
            smem[raw : raw + 2 * image_halves] = image.view(np.uint8)
        else:  # through the threads, zeros past the image
            padded = np.zeros((c_count, big_r, rw), np.uint16)
            rows, cols = min(big_r, h), min(rw, wd)
            padded[:, :rows, :cols] = image.reshape(c_count, h, wd)[:, :rows, :cols]
            smem[raw : raw + padded.nbytes] = padded.reshape(-1).view(np.uint8)
        # the rewrite (conv_fm's loop over half rows): groups [first, last) of 4 chunks, with
        # 16-byte words cur, next and the one loaded ahead (after); the loads must stay inside
        # this slot's bytes (its padding included), the stores inside the chunks
        groups = (np_ + 3) // 4
        words16 = smem.view(np.uint32).reshape(-1, 4)
        for u in range(2 * c_count * big_r):
            half = int(u >= c_count * big_r)
            row = u - half * c_count * big_r
            c = int(row >= big_r) + int(row >= 2 * big_r) + int(row >= 3 * big_r)
            r = row - c * big_r
            first, last = (groups // 2, groups) if half else (0, groups // 2)
            src = raw + row * rw * 2
            dst = p.rep_at + 16 * ((c * big_r + (r & 1) * r2 + (r >> 1)) * np_ + 4 * first)
            assert src % 16 == 0 and src + 16 * (max(last, first) + 2) <= raw + p.raw_bytes
            cur, nxt = words16[src // 16 + first], words16[src // 16 + first + 1]
            for q in range(first, last):
                after = words16[src // 16 + q + 2]
                window = np.concatenate([cur, nxt])
                for k8 in range(4):  # chunk n = 4q + k8: words k8 .. k8 + 3 of the window
                    if 4 * q + k8 < np_:
                        assert dst + 16 * (k8 + 1) <= p.rep_at + 16 * c_count * big_r * np_
                        smem[dst + 16 * k8 : dst + 16 * (k8 + 1)] = window[k8 : k8 + 4].view(
                            np.uint8
                        )
                cur, nxt, dst = nxt, after, dst + 64
        out = np.full((p.smem_bytes - p.out_at) // 2, NAN_HALF, np.uint16)
        stored = np.zeros(out.size, np.int64)
        for job in range(p.tiles):
            d = np.zeros((r13.ROWS, r13.NT))
            for s in range(steps):
                # B through the descriptor (chunk_desc plus the step's offset)
                start = p.rep_at + 16 * job * r13.NT + 16 * ((s // 4) * big_r + s % 4) * np_
                kk, nn = np.meshgrid(np.arange(16), np.arange(r13.NT), indexing="ij")
                at = start + (kk // 8) * 16 * r2 * np_ + (nn // 8) * SBO + (nn % 8) * 16
                at = at + (kk % 8) * 2
                assert at.max() + 2 <= p.out_at  # inside the chunks and their zero tail
                assert start + 16 * 2 * r13.NT <= p.out_at  # the span memcheck checks
                bmat = smem.view(np.uint16)[at // 2].view(np.float16).astype(np.float64)
                # A from the register fragments
                amat = np.full((r13.ROWS, 16), np.nan)
                for r in range(4):
                    rows, cols = 16 * warp + i + 8 * (r & 1), 2 * t + 8 * (r >> 1)
                    amat[rows, cols] = (a[s, r] & 0xFFFF).astype(np.uint16).view(np.float16)
                    amat[rows, cols + 1] = (a[s, r] >> 16).astype(np.uint16).view(np.float16)
                d = amat @ bmat + (d if s else 0)
            # the epilogue: lane (i, t) holds columns 8 jj + 2t, + 1 of rows r0 and r0 + 8
            for lane_id in np.flatnonzero(f < m_count):
                plane, r0 = f[lane_id] * ho * wo, 16 * warp[lane_id] + i[lane_id]
                for column in 8 * np.arange(r13.NT // 8)[:, None] + 2 * t[lane_id] + [0, 1]:
                    for col in column:
                        found = int(entry[dy[lane_id] * gp + job * r13.NT + col])
                        pair = np.array([d[r0, col], d[r0 + 8, col]], np.float16).view(np.uint16)
                        at = plane + (found & 0x3FFFFFFF) // 2
                        if flags & r13.PAIRED and not found & r13.INVALID:
                            assert at % 2 == 0  # one aligned 32-bit store
                            out[at : at + 2] = pair
                            stored[at : at + 2] += 1
                        elif not flags & r13.PAIRED:
                            if not found & r13.INVALID:
                                out[at], stored[at] = pair[0], stored[at] + 1
                            if not found & (r13.INVALID | r13.HI_INVALID):
                                out[at + 1], stored[at + 1] = pair[1], stored[at + 1] + 1
        outputs = m_count * ho * wo
        assert np.all(stored[:outputs] == 1), "an output stored never or twice"
        assert not stored[outputs:].any(), "a store past the image's output"
        y[b * outputs : (b + 1) * outputs] = out[:outputs]
    return y.view(np.float16).reshape(b_count, m_count, ho, wo)


EMULATED = [
    (2, 4, 16, 40, 40, 7),  # conv2: bulk in and out, paired stores
    (1, 4, 16, 40, 33, 7),  # odd Wo: padded raw rows, halves stored apart
    (3, 4, 16, 13, 17, 7),  # odd Ho: the last block row's dy = 1 outside
    (2, 4, 16, 13, 16, 7),  # odd Ho with paired stores (even Wo): INVALID entries in pairs
    (2, 3, 5, 11, 9, 1),  # K = 1: 3 of 4 steps of each channel are zero weights
    (1, 1, 5, 7, 7, 7),  # one output pixel per filter, C = 1
    (3, 2, 9, 13, 17, 5),  # K = 5, H != W
    (1, 4, 16, 20, 22, 3),
    (2, 2, 12, 16, 18, 6),  # K = 6, odd Wo, rows padded to 16 bytes
    (1, 3, 16, 60, 60, 7),  # several jobs per image (G = 729: 5 of N = 152, and a padding job)
]


@pytest.mark.parametrize("size", EMULATED, ids=str)
def test_emulated_kernel_matches_float64(size):
    rng = np.random.default_rng(sum(size))
    b, c, m, h, wd, k = size
    x = rng.uniform(-1, 1, (b, c, h, wd)).astype(np.float16)
    w = rng.uniform(-1, 1, (m, c, k, k)).astype(np.float16)
    ref = conv_numpy(x.astype(np.float64), w.astype(np.float64))
    got = emulate(size, x, w).astype(np.float64)
    assert np.all(np.isfinite(got))
    assert np.linalg.norm(got - ref) / np.linalg.norm(ref) <= 2e-3


def test_emulated_threads_copy_of_conv2_shape_equals_its_bulk_copy():
    """x not 16-byte aligned: the threads copy conv2's image in instead of the bulk copy, with
    the same bytes (R = H, RW = W: nothing to pad), so the same output follows."""
    size = (2, 4, 16, 40, 40, 7)
    assert not r13.plan(size).flags(2, 0) & r13.BULK_IN
    rng = np.random.default_rng(1)
    x = rng.uniform(-1, 1, size[:2] + size[3:5]).astype(np.float16)
    w = rng.uniform(-1, 1, (16, 4, 7, 7)).astype(np.float16)
    assert np.array_equal(emulate(size, x, w, x_at=2), emulate(size, x, w))


# the kernel's paths at shapes the problem's test sizes do not reach: more images than blocks
# (slot reuse, the mbarrier's second phase, the buffer written again after a bulk store), paired
# stores with odd Ho, several jobs, K = 6, C = 3
GPU_PATHS = [(600, 4, 16, 8, 8, 7), (700, 4, 16, 40, 40, 7), (4, 2, 16, 17, 64, 5),
             (3, 3, 12, 60, 60, 7), (9, 3, 7, 25, 23, 6)]  # fmt: skip


@gpu_only
@pytest.mark.parametrize("size", GPU_PATHS, ids=str)
def test_kernel_paths_on_the_gpu(size):
    from ladder.conv.problem import CONV
    from ladder.core import timing
    from ladder.core.dtypes import to_device, to_host
    from ladder.core.rung import get_rung

    assert r13.plan(size) is not None
    inputs = CONV.make_inputs(size, "float16", seed=sum(size))
    ref = CONV.reference(inputs)
    out = to_device(np.full(ref.shape, np.nan, np.float16))
    get_rung("conv", "filters-on-m").launch(*[to_device(v) for v in inputs], out)
    got = to_host(out)
    assert np.all(np.isfinite(got)), "an element was never written (still NaN)"
    assert timing.relative_error(got, ref) <= CONV.tolerance("float16")


@gpu_only
def test_misaligned_arrays_take_the_threads_paths_on_the_gpu():
    """x and y one half off 16-byte alignment: the kernel copies the image in and the output out
    through its threads (no bulk copies), with the answer of the aligned launch."""
    from numba import cuda

    from ladder.core.rung import get_rung

    rung = get_rung("conv", "filters-on-m")
    size = (5, 4, 16, 40, 40, 7)
    rng = np.random.default_rng(3)
    x = rng.uniform(-1, 1, (5, 4, 40, 40)).astype(np.float16)
    w = rng.uniform(-1, 1, (16, 4, 7, 7)).astype(np.float16)
    dw = cuda.to_device(w)
    flat_x = cuda.to_device(np.concatenate([np.zeros(1, np.float16), x.reshape(-1)]))
    flat_y = cuda.device_array(1 + 5 * 16 * 34 * 34, np.float16)
    shifted_x, shifted_y = flat_x[1:].reshape(x.shape), flat_y[1:].reshape(5, 16, 34, 34)
    assert r13.plan(size).flags(shifted_x.device_ctypes_pointer.value, 0) & r13.BULK_IN == 0
    rung.launch(shifted_x, dw, shifted_y)
    aligned = rung.launch(cuda.to_device(x), dw)
    assert np.array_equal(shifted_y.copy_to_host(), aligned.copy_to_host())
    ref = conv_numpy(x.astype(np.float64), w.astype(np.float64))
    assert np.linalg.norm(aligned.copy_to_host() - ref) / np.linalg.norm(ref) <= 2e-3
