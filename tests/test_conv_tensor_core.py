"""Conv rungs 8 to 12 (tensor cores): their planners on the CPU, every compiled kernel variant
on the GPU.

The planners are plain Python: which kernel, tiling, bands and shared-memory layout each rung
picks for a shape, where rungs 11 and 12 hand a shape to rung 10, and rung 12's output buffer.
The kernels run on the GPU machine: each variant a planner can pick, forced on small odd
shapes, against float64 with a NaN-poisoned output (the registry's tests run the planned
launches on every test size). Every kernel name a planner returns is checked against the
compiled cubins here without a GPU.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from conftest import gpu_only, quick_unless

from ladder.conv import r08_tensor_core as r08
from ladder.conv import r09_wgmma as r09
from ladder.conv import r10_row_shifts as r10
from ladder.conv import r11_one_group as r11
from ladder.conv import r12_bulk as r12
from ladder.conv.problem import CONV1, CONV2, conv_numpy, operands
from ladder.conv.tc import plan as tc

RUNGS = {8: r08, 9: r09, 10: r10, 11: r11, 12: r12}

# (conv1, conv2): kernel and rounds of jobs per image, for each rung's planner
CANONICAL_PLANS = {
    8: (("conv_tc_pack_t10_n1", 3), ("conv_tc_t6_n2", 2)),
    9: (("conv_wg_t1_n1", 25), ("conv_wg_t3_n4", 2)),
    10: (("conv_wgb_t2_n2", 7), ("conv_wgb_t1_n8", 3)),
    11: (("conv_wgj_c1_t2_n2", 7), ("conv_wgj_c4_t1_n8", 3)),
    12: (("conv_wgk_c1_t2_n2", 7), ("conv_wgk_c4_t1_n8", 3)),
}


def test_canonical_layers_pick_the_planned_kernels():
    for number, expected in CANONICAL_PLANS.items():
        plans = [RUNGS[number].plan(layer) for layer in (CONV1, CONV2)]
        assert [(p.kernel_name, p.rounds) for p in plans] == list(expected), number
        assert [p.band_rows for p in plans] == [80, 36], number
    conv1, conv2 = r08.plan(CONV1), r08.plan(CONV2)
    assert conv1.smem_bytes < 46 * 1024 and conv2.smem_bytes < 74 * 1024  # two blocks per SM
    conv1, conv2 = r10.plan(CONV1), r10.plan(CONV2)
    assert conv1.smem_bytes < 46 * 1024 and conv2.smem_bytes < 72 * 1024
    conv1, conv2 = r12.plan(CONV1), r12.plan(CONV2)
    assert (conv1.out_bytes, conv2.out_bytes) == (51200, 36992)
    assert conv2.smem_bytes + 1024 <= 228 * 1024 // 2  # two blocks per SM with the buffer


def test_channel_chunks_and_bands_where_shared_memory_is_short():
    size = (2, 7, 20, 9, 40, 3)
    p = r08.plan(size, smem_limit=18 * 1024)
    assert p.chunked and (p.chunks, p.chunk_channels, p.rounds, p.bands) == (3, 3, 2, 2)
    assert r09.plan(size, smem_limit=20 * 1024).kernel_name == "conv_wg_chunked_t1_n4"
    assert r10.plan(size, smem_limit=24 * 1024).kernel_name == "conv_wgb_chunked_t1_n8"
    banded = r10.plan((3, 2, 6, 29, 19, 5), smem_limit=16 * 1024)
    assert not banded.chunked and banded.bands > 1


def test_rungs_11_and_12_leave_to_rung_10_what_they_cannot_take():
    for size in ((2, 5, 16, 40, 40, 7), (2, 3, 4, 12, 14, 8), (2, 2, 5, 12, 14, 9)):
        assert r11.plan(size) is None and r12.plan(size) is None  # C > 4, K = 8 and 9
    size = (2, 3, 6, 29, 40, 5)
    p = r11.plan(size, smem_limit=26 * 1024)  # bands of rows: still one group
    assert p is not None and p.bands == 3
    assert r11.plan(size, smem_limit=18 * 1024) is None  # channel chunks: rung 10's
    assert r12.plan(size, smem_limit=18 * 1024) is None


def test_rung_12_keeps_its_output_buffer_only_where_it_can_serve():
    size = (3, 2, 8, 14, 18, 5)  # M Ho Wo = 1120
    p = r12.plan(size)
    assert p.out_bytes == 2 * 8 * 10 * 14 and p.out_at == p.raw_end
    assert p.bar_at == p.out_at + p.out_bytes and p.smem_bytes == p.bar_at + 8
    banded = r12.plan(size, smem_limit=12 * 1024)  # bands of rows: no buffer
    assert banded.bands > 1 and banded.out_bytes == 0
    assert r12.plan((3, 3, 3, 9, 10, 1)).out_bytes == 0  # M Ho Wo = 270: not whole chunks
    assert r12.plan((2, 3, 5, 11, 13, 3)).out_bytes == 0  # odd Wo

    def per_sm(limit):
        return lambda smem: limit // (smem + 1024)

    assert r12.out_buffer_or_not(p, per_sm(2 * (p.smem_bytes + 1024))) == p
    lean = r12.out_buffer_or_not(p, per_sm(2 * (p.smem_bytes + 1024) - 1))
    assert lean.out_bytes == 0 and lean.bar_at == lean.raw_end
    assert r12.out_buffer_or_not(lean, per_sm(1)) == lean


def test_kernel_arguments_follow_the_parameter_list():
    for plan, params in ((r08.plan(CONV2), tc.PARAMS), (r12.plan(CONV2), r12.PARAMS)):
        scalars = plan.scalars(plan.PARAMS)
        assert plan.PARAMS == params and len(scalars) == len(params)
        kinds = {"long long": np.int64, "unsigned": np.uint32, "int": np.int32}
        for (name, kind), v in zip(params, scalars, strict=True):
            assert v.dtype == kinds[kind], name
        named = dict(zip((name for name, _ in params), (int(v) for v in scalars), strict=True))
        assert named["x_halves"] == 10000 * 4 * 40 * 40
        assert tuple(named[n] for n in ("B", "C", "M", "H", "W", "K")) == CONV2
        assert named["raw_at"] + named["chunk_channels"] * named["slot_chunks"] * 16 == (
            plan.raw_end
        )
    # the .cu files see the same list (tc/layout.cuh builds Conv and the signatures from it)
    options = tc.defines(r12.PARAMS)
    assert options[-1] == "-DCONV_ARGUMENTS=" + ", ".join(n for n, _ in r12.PARAMS)


def test_shapes_too_large_are_refused_clearly():
    with pytest.raises(ValueError, match="too large for this rung"):
        r08.plan((1, 4, 8, 64, 100000, 3))


# Kernel variants forced on small odd shapes: (rung, size, tiles, n_tiles[, packed]).
VARIANTS = [
    (8, (2, 1, 4, 23, 21, 7), 2, 1, False),
    (8, (2, 1, 4, 23, 21, 7), 6, 1, False),
    (8, (1, 1, 4, 30, 26, 7), 10, 1, False),
    (8, (2, 3, 16, 15, 13, 5), 2, 2, False),
    (8, (2, 3, 11, 17, 12, 3), 6, 2, False),
    (8, (1, 2, 24, 9, 35, 1), 2, 1, False),
    (8, (2, 2, 20, 13, 11, 3), 6, 1, False),  # three groups of 8 filters, the last one narrow
    (8, (2, 1, 3, 14, 15, 7), 10, 1, False),  # three filters: narrow
    (8, (2, 1, 4, 23, 21, 7), 2, 1, True),  # packed: odd Wo, the last pair half past the image
    (8, (2, 2, 3, 19, 24, 7), 6, 1, True),
    (8, (1, 1, 4, 30, 26, 7), 10, 1, True),
    (8, (2, 3, 4, 12, 14, 8), 6, 1, True),  # K = 8: the shifted copy needs a second chunk
    (8, (2, 1, 1, 9, 10, 1), 2, 1, True),  # K = 1, M = 1
    (9, (2, 1, 4, 23, 21, 7), 1, 1),
    (9, (2, 2, 7, 14, 15, 5), 1, 2),
    (9, (2, 3, 16, 15, 13, 7), 1, 4),
    (9, (2, 3, 16, 15, 13, 7), 2, 4),
    (9, (1, 4, 16, 20, 40, 7), 3, 4),
    (9, (1, 2, 40, 20, 21, 12), 3, 4),  # K = 12: row blocks of 8 and 4, 3 filter groups
    (10, (2, 1, 4, 23, 21, 7), 1, 2),
    (10, (2, 1, 4, 23, 21, 7), 2, 2),
    (10, (2, 2, 7, 14, 15, 5), 1, 4),
    (10, (2, 2, 7, 14, 15, 5), 2, 4),
    (10, (2, 3, 16, 15, 13, 7), 1, 8),
    (10, (1, 4, 16, 22, 40, 7), 2, 8),
    (10, (1, 2, 40, 20, 21, 12), 2, 8),
    (10, (2, 2, 20, 13, 12, 7), 2, 8),  # 20 filters: the second group has 4 live of 16
    (11, (2, 1, 4, 23, 22, 6), 1, 2),
    (11, (2, 1, 4, 23, 22, 7), 2, 2),
    (11, (2, 1, 16, 14, 16, 5), 2, 8),
    (11, (2, 2, 7, 14, 16, 5), 1, 4),
    (11, (1, 2, 20, 13, 12, 7), 1, 8),
    (11, (2, 3, 3, 9, 10, 1), 1, 2),  # K = 1: quads 1 to 3 of a window are zeros, not loaded
    (11, (1, 4, 16, 22, 40, 7), 1, 8),
    (11, (1, 2, 4, 15, 17, 4), 1, 2),  # odd W: the one-group job, rung 10's rewrite
    (12, (3, 1, 4, 23, 22, 6), 1, 2),
    (12, (3, 1, 16, 14, 16, 5), 2, 8),
    (12, (3, 2, 7, 14, 16, 5), 1, 4),  # M Ho Wo = 840: whole 16-byte chunks, the buffer
    (12, (2, 2, 20, 13, 12, 7), 1, 8),
    (12, (3, 3, 3, 9, 10, 1), 1, 2),  # no buffer
    (12, (3, 4, 16, 22, 40, 7), 1, 8),
    (12, (2, 3, 5, 11, 13, 3), 1, 2),  # B C H W = 858: the last chunk of x by halves
]


def forced(number: int, size, tiles: int, n_tiles: int, packed: bool = False) -> tc.Layout:
    """A whole-image plan of rung ``number`` for ``size`` on the kernel variant given."""
    plan = RUNGS[number].plan(size)
    assert plan is not None
    rows = plan.tile_rows * tiles
    band = -(-plan.Ho // rows) * rows
    changes = {"tiles": tiles, "n_tiles": n_tiles, "band_rows": band}
    if number == 8:
        changes["packed"] = packed
    return dataclasses.replace(plan, **changes)


# a rung's cubin is an NVRTC build of seconds to tens of seconds: the fast path keeps rung 9
@pytest.mark.parametrize("number", [pytest.param(n, marks=quick_unless(n != 9)) for n in RUNGS])
def test_every_forced_variant_is_a_compiled_kernel(number):
    """Without a GPU: every kernel named above, and every planned one, is in its cubin."""
    module = RUNGS[number]
    names = {forced(n, size, *variant).kernel_name for n, size, *variant in VARIANTS if n == number}
    names |= {module.plan(layer).kernel_name for layer in (CONV1, CONV2)}
    cubin = module.SOURCE.build(module.SOURCE.archs[-1]).cubin
    for name in names:
        assert name.encode() + b"\0" in cubin, f"rung {number}: {name} is not compiled"


def _run(module, plan: tc.Layout, size, y_skew: int = 0, seed: int = 0) -> None:
    import cupy

    b, c, m, h, w, k = size
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (b, c, h, w)).astype(np.float16)
    wt = rng.uniform(-1, 1, (m, c, k, k)).astype(np.float16)
    ho, wo = h - k + 1, w - k + 1
    backing = cupy.full(b * m * ho * wo + y_skew, np.nan, np.float16)
    out = backing[y_skew:].reshape(b, m, ho, wo)
    adjust = getattr(module, "out_buffer_or_not", None)

    def configured(_size, device_id, _smem_limit):
        return tc.configure(plan, module.SOURCE, device_id, adjust=adjust)

    ops = operands(cupy.asarray(x), cupy.asarray(wt), out, ("float16",))[:3]
    tc.launch_plan(*ops, configured)(*ops, 0)
    got = cupy.asnumpy(out).astype(np.float64)
    ref = conv_numpy(x.astype(np.float64), wt.astype(np.float64))
    assert not np.isnan(got).any(), "an output element was never stored"
    err = np.linalg.norm(got - ref) / max(np.linalg.norm(ref), 1e-30)
    assert err <= 2e-3, f"relative error {err:.2e} for {size} with {plan}"


@gpu_only
@pytest.mark.gpu
@pytest.mark.parametrize(
    ("number", "size", "tiles", "n_tiles", "packed"),
    [(*v, False) if len(v) == 4 else v for v in VARIANTS],
    ids=str,
)
def test_every_kernel_variant_on_the_gpu(number, size, tiles, n_tiles, packed):
    from ladder.core.rung import get_rung

    reason = get_rung("conv", str(number)).unavailable_reason()
    if reason:
        pytest.skip(reason)
    module = RUNGS[number]
    _run(module, forced(number, size, tiles, n_tiles, packed), size)


@gpu_only
@pytest.mark.gpu
@pytest.mark.parametrize("number", sorted(RUNGS))
def test_chunks_bands_and_a_misaligned_output_on_the_gpu(number):
    from ladder.core.rung import get_rung

    reason = get_rung("conv", str(number)).unavailable_reason()
    if reason:
        pytest.skip(reason)
    module = RUNGS[number]
    for size, limit in (((2, 7, 20, 9, 40, 3), 20 * 1024), ((3, 2, 6, 29, 19, 5), 16 * 1024)):
        plan = module.plan(size, smem_limit=limit)
        if plan is not None:  # rungs 11 and 12 leave channel chunks to rung 10
            _run(module, plan, size)
    for size in ((2, 1, 3, 22, 20, 7), (1, 2, 4, 15, 17, 4), (3, 2, 8, 14, 18, 5)):
        _run(module, module.plan(size), size, y_skew=1)  # y off its 4-byte alignment
        _run(module, module.plan(size), size, y_skew=2)  # off its 16-byte alignment


def fast_div(n: np.ndarray, magic: int, shift: int) -> np.ndarray:
    """The kernel's fast_div (ladder/core/cuda/fastdiv.cuh) in NumPy: (umulhi(n, magic) + n)
    >> shift."""
    n = n.astype(np.uint64)
    return ((((n * np.uint64(magic)) >> np.uint64(32)) + n) >> np.uint64(shift)).astype(np.int64)


def test_fast_division_matches_integer_division():
    """The kernel's fast_div with the launcher's multipliers equals n // d for every divisor
    it is given and every n below 2**31, checked at the edges and on random samples."""
    rng = np.random.default_rng(7)
    divisors = [*range(1, 300), 2**16 - 1, 2**16, 2**16 + 1, 2**30 - 1, 2**30, 2**31 - 1]
    divisors += [int(d) for d in rng.integers(1, 2**31, 200)]
    for d in divisors:
        magic, shift = tc.fast_division(d)
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
        tc.fast_division(0)
