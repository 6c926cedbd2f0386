"""Every mixture-of-experts rung against float64, the routing kernels on their own, the input
generator's promises, and the clear errors.

Parametrized over the registry of the three problems (``moe-top2``, ``moe-top8``,
``grouped-gemm``): a rung added to ladder/moe is tested here without edits. On a GPU the sizes
are the problems' test sizes (T = 1, k = E, widths off every multiple of 8, every token to one
expert, experts with no token, past one tensor-core tile); in the simulator, a few tokens.
"""

import numpy as np
import pytest
from conftest import ON_GPU, quick_unless
from numba import cuda

import ladder.moe  # noqa: F401  (registers the problems and rungs)
from ladder.core import timing
from ladder.core.dtypes import resolve, to_device, to_host
from ladder.core.rung import NotApplicable, get_problem, get_rung, rungs
from ladder.moe import common
from ladder.moe.problem import MARGIN, group_sizes, moe_numpy, route_logits, route_numpy

PROBLEMS = ("moe-top2", "moe-top8", "grouped-gemm")
RUNGS = [r for name in PROBLEMS for r in rungs(name) if r.unavailable_reason() is None]
# the simulator's edge cases: one token (most experts empty), every token to expert 0
SIMULATOR_EDGES = {"moe-top2": [(1, 16, 24, 2, 0), (6, 17, 9, 4, 100)], "moe-top8": [],
                   "grouped-gemm": [(7, 17, 33, 4, 50)]}  # fmt: skip


def _cases():
    for rung in RUNGS:
        problem = get_problem(rung.problem)
        for i, dtype in enumerate(rung.dtypes):
            if ON_GPU:
                sizes = problem.test_sizes(dtype)
            else:  # one dtype per rung and problem, alternating; the edges on the slow path
                if i != rung.number % len(rung.dtypes):
                    continue
                sizes = problem.simulator_sizes(dtype) + SIMULATOR_EDGES[rung.problem]
            for j, size in enumerate(sizes):
                # top-8 launches top-2's kernels with k = 8 (a dozen seconds each in the
                # simulator): on the slow path with the edges
                marks = quick_unless(j > 0 or rung.problem == "moe-top8")
                yield pytest.param(rung, dtype, size, id=f"{rung.key}-{dtype}-{size}", marks=marks)


@pytest.mark.parametrize(("rung", "dtype", "size"), list(_cases()))
def test_moe_rung_matches_float64_reference(rung, dtype, size):
    problem = get_problem(rung.problem)
    inputs = problem.make_inputs(size, dtype, seed=sum(size))
    out = to_device(np.full(problem.output_shape(size), np.nan, resolve(dtype)))  # poisoned
    try:
        returned = rung.launch(*[to_device(x) for x in inputs], out)
    except NotApplicable as err:  # torch._grouped_mm refusing a dtype or an unaligned width
        assert rung.reference, f"{rung.key} is not a library: it must take every input"
        pytest.skip(str(err))
    assert returned is out
    result = to_host(out)
    assert np.all(np.isfinite(result)), "an element was never written (still NaN) or overflowed"
    assert timing.relative_error(result, problem.reference(inputs)) <= problem.tolerance(dtype)


def test_generated_logits_keep_their_margin_and_skew():
    rng = np.random.default_rng(3)
    for experts, k, hot in ((8, 2, 0), (8, 2, 50), (64, 8, 0), (4, 4, 0), (8, 2, 100)):
        logits = route_logits(1000, experts, k, hot, rng)
        ordered = -np.sort(-logits, axis=1)
        if k < experts:  # the k-th largest is MARGIN or more above the (k+1)-th
            assert np.all(ordered[:, k - 1] - ordered[:, k] >= MARGIN)
        ids, gates = route_numpy(logits, k)
        assert np.allclose(gates.sum(axis=1), 1.0)
        share = np.mean(np.any(ids == 0, axis=1))
        assert share == pytest.approx(hot / 100 if hot else k / experts, abs=0.05)


def test_group_sizes_add_up_and_skew():
    rng = np.random.default_rng(4)
    sizes = group_sizes(1000, 8, 50, rng)
    assert sizes.sum() == 1000 and sizes[0] == 500
    assert group_sizes(10, 1, 0, rng).tolist() == [10]


def test_reference_is_the_definition():
    rng = np.random.default_rng(5)
    x, w1, w2 = (
        rng.standard_normal((3, 4)),
        rng.standard_normal((5, 4, 6)),
        rng.standard_normal((5, 6, 4)),
    )
    logits = rng.standard_normal((3, 5))
    y = moe_numpy(x, logits, w1, w2, k=2)
    t = 1
    top = np.argsort(-logits[t])[:2]
    g = np.exp(logits[t, top]) / np.exp(logits[t, top]).sum()

    def expert(e):
        z = x[t] @ w1[e]
        return (z / (1 + np.exp(-z))) @ w2[e]

    assert y[t] == pytest.approx(g[0] * expert(top[0]) + g[1] * expert(top[1]))


def test_routing_kernels_sort_every_pair_once():
    """top_k_softmax against the float64 routing; then count, scan and permute: each expert's
    rows contiguous, each (token, slot) pair in exactly one row, the tile schedule's sums."""
    tokens, experts, k = 23, 6, 3
    logits = route_logits(tokens, experts, k, 30, np.random.default_rng(6))
    routing = common.Routing(tokens, experts, k, tile_rows=4)
    routing.run(to_device(logits), 0)
    ids, gates = routing.ids.copy_to_host(), routing.gates.copy_to_host()
    want_ids, want_gates = route_numpy(logits, k)
    assert np.array_equal(ids, want_ids)
    assert np.allclose(gates, want_gates, rtol=1e-6)
    counts = np.bincount(ids.ravel(), minlength=experts)
    offsets, starts = routing.offsets.copy_to_host(), routing.tile_starts.copy_to_host()
    assert offsets.tolist() == [0, *np.cumsum(counts).tolist()]
    assert starts.tolist() == [0, *np.cumsum(-(-counts // 4)).tolist()]
    perm, where = routing.perm_slot.copy_to_host(), routing.slot_row.copy_to_host()
    assert sorted(perm.tolist()) == list(range(tokens * k))
    assert np.array_equal(where[perm], np.arange(tokens * k))
    for e in range(experts):  # expert e's rows hold exactly its pairs
        assert np.all(ids.ravel()[perm[offsets[e] : offsets[e + 1]]] == e)
    assert not routing.counts.copy_to_host().any(), "the scan leaves the counts zero"


@cuda.jit
def _round_trip(bits, widened, narrowed, values, rounded):
    i = cuda.grid(1)
    if i < bits.size:
        widened[i] = common.bf16_to_float32(bits[i])
        narrowed[i] = common.float32_to_bf16(widened[i])
    if i < values.size:
        rounded[i] = common.float32_to_bf16(values[i])


def test_bfloat16_conversions_match_ml_dtypes():
    """bf16_to_float32 and float32_to_bf16 (libdevice bit casts on the GPU, NumPy views in the
    simulator) against ml_dtypes: every bit pattern on a GPU (a sample in the simulator) widens
    exactly and narrows back to itself; float32 values of every scale, ties, infinities,
    subnormals and the largest finite round to nearest, ties to even, as ml_dtypes does."""
    bf16 = resolve("bfloat16")
    bits = np.arange(0, 1 << 16, 1 if ON_GPU else 97).astype(np.uint16)
    rng = np.random.default_rng(11)
    scale = np.float32(10.0) ** rng.integers(-40, 38, 4000).astype(np.float32)
    values = (rng.standard_normal(4000).astype(np.float32) * scale).astype(np.float32)
    ties = (np.arange(1, 200, dtype=np.uint32) << 16 | 0x8000).view(np.float32)  # halfway
    specials = [np.inf, -np.inf, np.nan, 3.4028235e38, -1e-45, 1e-40, 0.0, -0.0]
    values = np.concatenate([values, ties, np.array(specials, np.float32)])
    widened, narrowed = np.empty(bits.size, np.float32), np.empty(bits.size, np.uint16)
    rounded = np.empty(values.size, np.uint16)
    _round_trip[-(-max(bits.size, values.size) // 128), 128](
        bits, widened, narrowed, values, rounded
    )
    want = bits.view(bf16).astype(np.float32)
    nan = np.isnan(want)
    assert np.array_equal(widened.view(np.uint32)[~nan], want.view(np.uint32)[~nan])
    assert np.isnan(widened[nan]).all()
    assert np.array_equal(narrowed[~nan], bits[~nan])
    assert np.isnan(narrowed[nan].view(bf16).astype(np.float32)).all()
    finite = ~np.isnan(values)
    assert np.array_equal(rounded[finite], values[finite].astype(bf16).view(np.uint16))
    assert np.isnan(rounded[~finite].view(bf16).astype(np.float32)).all()


def test_routing_reads_bfloat16_logits_as_bits():
    """The bfloat16 routing (top_k_softmax_bf16 on the logits' bits) picks what float64 picks
    from the same rounded logits."""
    tokens, experts, k = 19, 8, 2
    logits = route_logits(tokens, experts, k, 0, np.random.default_rng(8)).astype(
        resolve("bfloat16")
    )
    routing = common.Routing(tokens, experts, k, tile_rows=4, dtype="bfloat16")
    routing.run(to_device(logits.view(np.uint16)), 0)
    want_ids, want_gates = route_numpy(logits.astype(np.float32), k)
    assert np.array_equal(routing.ids.copy_to_host(), want_ids)
    assert np.allclose(routing.gates.copy_to_host(), want_gates, rtol=1e-6)


def test_bfloat16_combine_sums_each_tokens_slots():
    from ladder.moe.r05_wgmma_grouped import combine_slots_bf16

    bf16 = resolve("bfloat16")
    tokens, k, d = 7, 3, 37
    slots = np.random.default_rng(9).standard_normal((tokens * k, d)).astype(bf16)
    y = to_device(np.full((tokens, d), 0xFFFF, np.uint16))  # NaN bits: poisoned
    combine_slots_bf16[common.grid_for(tokens, d), common.ELEMENTWISE](
        to_device(slots.view(np.uint16)), k, y
    )
    want = slots.astype(np.float32).reshape(tokens, k, d).sum(axis=1)  # slot order, float32
    assert np.array_equal(y.copy_to_host(), want.astype(bf16).view(np.uint16))


def test_max_tiles_bounds_every_routing():
    rng = np.random.default_rng(7)
    for _ in range(200):
        experts = int(rng.integers(1, 20))
        counts = rng.multinomial(int(rng.integers(0, 300)), [1 / experts] * experts)
        for tile in (16, 128):
            need = int(np.sum(-(-counts // tile)))
            assert need <= common.max_tiles(int(counts.sum()), experts, tile)


def _inputs(size=(5, 16, 24, 4, 0), dtype="float32"):
    return [to_device(x) for x in get_problem("moe-top2").make_inputs(size, dtype, seed=1)]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda a: [a[0], a[1][:, :3], a[2], a[3]], "logits must be"),
        (lambda a: [_inputs((5, 8, 24, 4, 0))[0], a[1], a[2], a[3]], "w1 must be"),
        (lambda a: [a[0], a[1], a[2], _inputs((5, 16, 8, 4, 0))[3]], "w2 must be"),
        (lambda a: [a[0], a[1], a[2][0], a[3]], "w1 must be 3-D"),
    ],
)
def test_bad_shapes_are_refused_by_name(change, message):
    rung = get_rung("moe-top2", "expert-loop")
    with pytest.raises(ValueError, match=message):
        rung.launch(*change(_inputs()))


def test_bad_dtype_and_k_are_refused():
    launch = get_rung("moe-top2", "grouped").launch  # k defaults to the problem's, 2
    x, logits, w1, w2 = _inputs()
    with pytest.raises(ValueError, match="k must be"):
        launch(x, logits, w1, w2, k=5)
    half = _inputs(dtype="float16")
    with pytest.raises(TypeError, match="logits must be float32"):
        launch(x, half[1], w1, w2)


def test_grouped_gemm_checks_its_offsets():
    a, w, _ = (to_device(x) for x in get_problem("grouped-gemm").make_inputs((9, 16, 24, 3, 0)))
    rung = get_rung("grouped-gemm", "grouped")
    with pytest.raises(ValueError, match=r"offsets must be int32 of shape \(4,\)"):
        rung.launch(a, w, to_device(np.zeros(3, np.int32)))


def test_size_parsing_names_the_rule():
    problem = get_problem("moe-top8")
    with pytest.raises(ValueError, match="E must be at least k = 8"):
        problem.parse_size([16, 16, 16, 4, 0])
    with pytest.raises(ValueError, match="hot is a percentage"):
        problem.parse_size([16, 16, 16, 8, 101])
    assert problem.parse_size([16, 16, 16, 8, 0]) == (16, 16, 16, 8, 0)


@pytest.mark.parametrize(
    "rung",
    [r for r in RUNGS if r.problem == "grouped-gemm" and not r.reference],
    ids=lambda r: r.key,
)
def test_grouped_gemm_reads_each_calls_offsets(rung):
    """Two calls with the same shapes and different routings: a launcher that kept the first
    call's offsets (in a plan built for these shapes) answers the second one wrongly."""
    problem = get_problem("grouped-gemm")
    for hot in (0, 50):
        inputs = problem.make_inputs((40, 16, 24, 3, hot), rung.dtypes[-1], seed=hot)
        out = to_device(np.full((40, 24), np.nan, resolve(rung.dtypes[-1])))
        rung.launch(*[to_device(x) for x in inputs], out)
        error = timing.relative_error(to_host(out), problem.reference(inputs))
        assert error <= problem.tolerance(rung.dtypes[-1])


def test_the_diagrams_draw_the_kernels_rules():
    from matplotlib.patches import Rectangle

    from ladder.moe import diagrams
    from ladder.moe.r05_wgmma_grouped import BM

    example = diagrams.routing_example(tokens=10, experts=4, k=2)
    assert example["offsets"][-1] == 20 and sorted(example["perm_slot"]) == list(range(20))
    fig = diagrams.tile_schedule(rows=1024, experts=8, hot=50, tile_rows=BM)
    (ax,) = fig.axes
    counts = group_sizes(1024, 8, 50, np.random.default_rng(0))
    used = int(np.sum(-(-counts // BM)))
    assert ax.get_xlim() == (0, common.max_tiles(1024, 8, BM))  # one cell per block row
    assert f"{used} tiles used" in ax.get_title()
    assert any(isinstance(p, Rectangle) and p.get_hatch() for p in ax.patches)  # empty rows
    diagrams.routing()  # renders


def test_the_split_plot_reads_the_committed_file():
    import json

    from ladder.core import lab
    from ladder.moe.split import STAGES, plot_split

    path = lab.resolve("lab/moe/2026-11-26-split/nvidia-h100-80gb-hbm3-moe-split.json")
    doc = json.loads(path.read_text())
    for case in doc["cases"]:  # the stages add up to about the layer, timed alone each
        total = sum(case["stages_ms"][s] for s in STAGES)
        assert 0.9 < total / case["layer_ms"] < 1.1
    fig = plot_split(doc)
    assert doc["gpu"] in fig.get_suptitle()


def test_too_many_rows_are_refused_before_any_launch():
    """T·k past the copy kernels' grid (8 rows per block, 65,535 blocks along y): a clear error
    naming x, before any launch (the check reads shapes only, so no memory is allocated)."""
    from ladder.moe.problem import MAX_ROWS, operands

    class Shaped:  # an array interface with a shape and no data
        def __init__(self, shape):
            self.__cuda_array_interface__ = {
                "shape": shape, "typestr": "<f4", "data": (0, False), "version": 3,
                "strides": None,
            }  # fmt: skip

    _, _, w1, w2 = _inputs()
    tokens = MAX_ROWS // 2 + 1
    with pytest.raises(ValueError, match=r"x: T·k = \d+ rows, at most"):
        operands(Shaped((tokens, 16)), Shaped((tokens, 4)), w1, w2, None, 2, ("float32",))


# ---------------------------------------------------------------------------------------------
# grouped-gemm's offsets, checked on the device (issue 54, item 11). This section is kept apart
# from the tests above: expert e owns rows offsets[e] to offsets[e + 1], which must start at 0,
# never decrease and end at M. A call checks them on the GPU without a copy or a wait; bad ones
# get no tiles (nothing read or written), and the ValueError comes at the launcher's next call
# or from the rung module's check_offsets(). The Numba rung runs here and in the simulator;
# the CUDA C++ rung (wgmma-grouped, sm_90a) only on a GPU.

import importlib  # noqa: E402
import re  # noqa: E402

from conftest import gpu_only  # noqa: E402

OFFSETS_SIZES = [(9, 16, 16, 3, 0), (9, 17, 33, 3, 0)]  # on TMA's 8-wide rows, and padded
GUARD_ROWS = 3
GUARD = 1000.0  # the rows around C: a value no product here comes near, exact in float16
BAD_OFFSETS = {  # for M = 9 rows and E = 3 groups: each kind of fault, and what its error says
    "start-past-0": ([2, 3, 6, 9], r"offsets\[0\] = 2, but they must start at 0"),
    "negative-start": ([-4, 3, 6, 9], r"offsets\[0\] = -4, but they must start at 0"),
    "decreasing": ([0, 6, 3, 9], r"offsets\[2\] = 3 is less than offsets\[1\] = 6"),
    "negative-inside": ([0, 3, -5, 9], r"offsets\[2\] = -5 is less than offsets\[1\] = 3"),
    "ending-before-M": ([0, 3, 6, 7], r"offsets\[3\] = 7, but they must end at M = 9"),
    "ending-past-M": ([0, 3, 6, 12], r"offsets\[3\] = 12, but they must end at M = 9"),
    "past-M-inside": ([0, 3, 40, 40], r"offsets\[3\] = 40, but they must end at M = 9"),
}


@pytest.fixture
def offsets_rung(request):
    """(the launcher, its module's check_offsets) of grouped-gemm's rung ``request.param``;
    its fault flag cleared afterwards, so that a failed test leaves no report to the next."""
    rung = get_rung("grouped-gemm", request.param)
    reason = rung.unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    module = importlib.import_module(rung.launch.__module__)
    yield rung.launch, module.check_offsets
    if module.OFFSETS._status is not None:
        module.OFFSETS._status[0] = 0


def _guarded_call(launch, size, dtype, offsets):
    """Call ``launch`` on the problem's a and w with ``offsets`` (None: the problem's own) into
    a C poisoned with NaN that lies between GUARD_ROWS rows of GUARD on each side; returns
    (the inputs, C, the guard rows), copied back."""
    problem = get_problem("grouped-gemm")
    a, w, good = problem.make_inputs(size, dtype, seed=2)
    rows, cols = problem.output_shape(size)
    whole = np.full((rows + 2 * GUARD_ROWS, cols), GUARD, resolve(dtype))
    whole[GUARD_ROWS:-GUARD_ROWS] = np.nan
    device_whole = to_device(whole)
    out = device_whole[GUARD_ROWS : GUARD_ROWS + rows]
    chosen = good if offsets is None else np.array(offsets, np.int32)
    assert launch(to_device(a), to_device(w), to_device(chosen), out) is out
    found = to_host(device_whole)
    guards = np.concatenate([found[:GUARD_ROWS], found[-GUARD_ROWS:]])
    return (a, w, good), found[GUARD_ROWS:-GUARD_ROWS], guards


@pytest.mark.parametrize("offsets_rung", ["grouped"], indirect=True)
def test_good_offsets_pass_the_device_check(offsets_rung):
    launch, check_offsets = offsets_rung
    inputs, c, guards = _guarded_call(launch, OFFSETS_SIZES[0], "float32", None)
    check_offsets()  # nothing to report
    assert np.all(guards == GUARD), "a row past C was written"
    problem = get_problem("grouped-gemm")
    assert timing.relative_error(c, problem.reference(inputs)) <= problem.tolerance("float32")


@pytest.mark.parametrize(
    "case",
    # the two cases on the fast path; each launch is seconds in the simulator
    [
        pytest.param(c, marks=quick_unless(c not in ("decreasing", "ending-past-M")))
        for c in BAD_OFFSETS
    ],
)
@pytest.mark.parametrize("offsets_rung", ["grouped"], indirect=True)
def test_bad_offsets_raise_naming_offsets_and_write_nothing(offsets_rung, case):
    launch, check_offsets = offsets_rung
    offsets, why = BAD_OFFSETS[case]
    _, c, guards = _guarded_call(launch, OFFSETS_SIZES[0], "float32", offsets)
    with pytest.raises(ValueError, match=r"^offsets: a call of grouped-gemm/grouped .*GPU") as err:
        check_offsets()
    assert re.search(why, str(err.value)), str(err.value)
    assert np.all(guards == GUARD), "a row past C was written"
    assert np.all(np.isnan(c)), "bad offsets get no tiles: C is left as it was"
    check_offsets()  # a fault is reported once


@pytest.mark.parametrize("offsets_rung", ["grouped"], indirect=True)
def test_bad_offsets_are_reported_by_the_next_call(offsets_rung):
    """The call after a bad one raises before it launches anything, though its own offsets are
    good; the call after that runs (here on offsets with an empty group)."""
    launch, check_offsets = offsets_rung
    _guarded_call(launch, OFFSETS_SIZES[0], "float32", [0, 6, 3, 9])
    cuda.synchronize()  # the bad call's check has run
    with pytest.raises(ValueError, match=r"^offsets: .*never decrease"):
        _guarded_call(launch, OFFSETS_SIZES[0], "float32", None)
    _, c, _ = _guarded_call(launch, OFFSETS_SIZES[0], "float32", [0, 0, 9, 9])
    check_offsets()
    assert np.all(np.isfinite(c))


@gpu_only
@pytest.mark.parametrize("size", OFFSETS_SIZES, ids=str)
@pytest.mark.parametrize("offsets_rung", ["grouped", "wgmma-grouped"], indirect=True)
def test_every_kind_of_bad_offsets_on_the_gpu(offsets_rung, size):
    """Each kind of fault through each rung in float16, at a size on TMA's 8-wide rows and one
    that takes rung 5's padded copies: reported with its reason, nothing written past C; then
    the problem's offsets give the right answer."""
    launch, check_offsets = offsets_rung
    for offsets, why in BAD_OFFSETS.values():
        _, _, guards = _guarded_call(launch, size, "float16", offsets)
        with pytest.raises(ValueError, match=r"^offsets: ") as err:
            check_offsets()
        assert re.search(why, str(err.value)), str(err.value)
        assert np.all(guards == GUARD), "a row past C was written"
    inputs, c, guards = _guarded_call(launch, size, "float16", None)
    check_offsets()
    assert np.all(guards == GUARD)
    problem = get_problem("grouped-gemm")
    assert timing.relative_error(c, problem.reference(inputs)) <= problem.tolerance("float16")
