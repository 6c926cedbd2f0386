"""The convolution rungs' plans (``ladder.core.fastcall``): every GPU rung launches from a plan
kept per signature of x, w and out (shapes, strides, dtype, alignment).

The Numba rungs run (in the simulator without a GPU): a new signature builds a new plan with
the right answer, a repeated one reuses its plan. The CUDA C++ rungs (8 to 13) cannot run
without a GPU: their plan builders run with a stand-in source, device and driver (as
``tests/test_fastcall.py`` does for attention rung 5), and the packed launch is read back:
grid, block, shared memory, the three pointers and the scalars, and which plan a misaligned
or fallback case gets.
"""

from __future__ import annotations

import ctypes
import sys

import numpy as np
import pytest
from test_fastcall import FakeArray, _FakeDriver, _FakeSource

from ladder.conv import r08_tensor_core as r08
from ladder.conv import r09_wgmma as r09
from ladder.conv import r10_row_shifts as r10
from ladder.conv import r11_one_group as r11
from ladder.conv import r12_bulk as r12
from ladder.conv import r13_filters_on_m as r13
from ladder.conv.problem import conv_numpy
from ladder.conv.tc import plan as tc
from ladder.core import cuda_cpp, fastcall, timing
from ladder.core.dtypes import resolve, to_device, to_host
from ladder.core.fastcall import PlanCache, Steps, intake
from ladder.core.rung import get_problem, rungs

PROBLEM = get_problem("conv")
GPU_RUNGS = [r for r in rungs("conv", references=False) if not r.on_cpu]
NUMBA_RUNGS = [r for r in GPU_RUNGS if "cupy" not in r.needs and r.unavailable_reason() is None]
TC_RUNGS = {8: r08, 9: r09, 10: r10, 11: r11, 12: r12, 13: r13}


def _launch(module):
    """The launcher ``conv_rung`` registered for the rung of ``module``."""
    return next(r.launch for r in GPU_RUNGS if r.launch.__module__ == module.__name__)


def _plans(module):
    """The plans the launcher of ``module``'s rung keeps."""
    return _launch(module).plans


def test_every_conv_gpu_rung_launches_from_plans():
    """Rungs 1 to 13: the registration keeps each one's plans (``launch.plans``), built from
    its geometry; an empty output needs none."""
    assert sorted(r.number for r in GPU_RUNGS) == list(range(1, 14))
    for rung in GPU_RUNGS:
        plans = rung.launch.plans
        assert isinstance(plans, PlanCache), rung.name
        assert rung.launch.geometry is sys.modules[rung.launch.__module__].geometry
        dtype = rung.dtypes[0]
        typestr = resolve(dtype).str
        x = FakeArray((0, 2, 6, 5), typestr)
        w = FakeArray((3, 2, 3, 3), typestr, ptr=1 << 21)
        out = FakeArray((0, 3, 4, 3), typestr, ptr=1 << 22)
        before = plans.misses
        assert rung.launch(x, w, out) is out
        assert plans.misses == before, rung.name


def _poisoned(shape, dtype, offset=0):
    """A NaN-filled device array, ``offset`` elements into its allocation."""
    count = int(np.prod(shape))
    flat = to_device(np.full(count + offset, np.nan, resolve(dtype)))
    return flat[offset:].reshape(shape)


def _check(rung, x, w, dx, dw, out):
    """The rung on (dx, dw, out): out given back, and the float64 answer within tolerance."""
    assert rung.launch(dx, dw, out) is out
    got = to_host(out)
    assert np.all(np.isfinite(got)), "an element was never written (still NaN)"
    ref = conv_numpy(x.astype(np.float64), w.astype(np.float64))
    dtype = np.dtype(x.dtype).name
    assert timing.relative_error(got, ref) <= PROBLEM.tolerance(dtype)


@pytest.mark.parametrize("rung", NUMBA_RUNGS, ids=lambda r: r.name)
def test_numba_conv_plans_are_kept_per_signature(rung):
    """A repeated signature reuses its plan; another shape, dtype, alignment of out or
    stride (a contiguous view of a wider x) builds one, with the right answer; a
    non-contiguous view is refused with the launchers' message."""
    plans = rung.launch.plans
    plans.clear()
    start = plans.misses
    dtype = rung.dtypes[0]
    small, odd = (1, 2, 1, 6, 5, 3), (2, 1, 3, 9, 11, 5)

    def new_plans(size, dtype=dtype, out_offset=0, wide_x=False, seed=0):
        before = plans.misses
        x, w = PROBLEM.make_inputs(size, dtype, seed=seed)
        if wide_x:  # x as channels 0 to C - 1 of a 2C-channel image: strides not x's own
            wide = np.concatenate([x, np.zeros_like(x)], axis=1)
            dx = to_device(wide)[:, : x.shape[1]]
            assert intake(dx, "x").strides != intake(to_device(x), "x").strides
        else:
            dx = to_device(x)
        out = _poisoned(PROBLEM.output_shape(size), dtype, out_offset)
        _check(rung, x, w, dx, to_device(w), out)
        return plans.misses - before

    assert new_plans(small) == 1
    assert new_plans(small, seed=1) == 0  # the same signature, other arrays
    x, w = PROBLEM.make_inputs(small, dtype)
    dx, dw = to_device(x), to_device(w)
    ops = [intake(a, n) for a, n in ((dx, "x"), (dw, "w"), (rung.launch(dx, dw), "out"))]
    found = plans(*ops)  # out allocated by the launcher: the same signature too
    assert plans.misses - start == 1 and isinstance(found, Steps)
    assert all(isinstance(launch, fastcall.NumbaLaunch) for launch in found.launches)
    assert new_plans(odd) == 1
    assert new_plans(small, out_offset=1) == 1  # out off its 16-byte alignment
    assert new_plans(small, wide_x=True) == 1  # one image: contiguous, another B stride
    if len(rung.dtypes) > 1:
        assert new_plans(small, dtype=rung.dtypes[1]) == 1
    strided = to_device(np.concatenate([x, x], axis=3))[:, :, :, ::2]
    with pytest.raises(ValueError, match=r"x must be C-contiguous \(NCHW\); copy it first"):
        rung.launch(strided, to_device(w))
    out = to_device(np.zeros((1, 1, 4, 6), resolve(dtype)))[:, :, :, :3]
    with pytest.raises(ValueError, match=r"out must be C-contiguous \(NCHW\)"):
        rung.launch(to_device(x), to_device(w), out)


# --- the CUDA C++ rungs' plans, on the CPU ---------------------------------------------------

SMS, PER_SM = 132, 2  # the stand-in device: SMs, and resident blocks per SM for any kernel


class _FakeDevice:
    def __init__(self, device_id=0):
        self.id = device_id
        self.attributes = {"MultiProcessorCount": SMS, "MaxSharedMemoryPerBlockOptin": 232448}


def _clear_tc_caches():
    for module in TC_RUNGS.values():
        _plans(module).clear()
        getattr(module, "_configured", getattr(module, "_configure", None)).cache_clear()


@pytest.fixture
def fake_gpu(monkeypatch):
    """A stand-in GPU for the CUDA C++ rungs' plan builders: sources that name their kernels
    (never compiled), a device of SMS SMs, and a driver that records each launch on stream 7
    (the current stream, as inside ``on_stream(7)``)."""
    import cupy

    intake(FakeArray((1, 1, 1, 1), "<f2"), "x")  # learn to read FakeArray in the simulator
    driver = _FakeDriver(count=0)
    sources = {number: _FakeSource() for number in TC_RUNGS}
    for number, module in TC_RUNGS.items():
        monkeypatch.setattr(module, "SOURCE", sources[number])
    monkeypatch.setattr(fastcall.device, "simulator", lambda: False)
    monkeypatch.setattr(fastcall, "driver", lambda: driver)
    monkeypatch.setattr(fastcall, "_bindings", lambda: None)  # ctypes: the fake
    monkeypatch.setattr(fastcall._CURRENT, "handle", 7)
    monkeypatch.setattr(cupy.cuda, "Device", _FakeDevice)
    monkeypatch.setattr(tc, "device_facts", lambda: (0, tc.SMEM_LIMIT))
    monkeypatch.setattr(tc, "blocks_per_sm", lambda *args: PER_SM)
    monkeypatch.setattr(cuda_cpp, "blocks_per_sm", lambda *args: PER_SM)
    _clear_tc_caches()
    yield driver, sources
    _clear_tc_caches()


def _ops(size, x_ptr=0x100000, out_ptr=0x300000):
    b, c, m, h, w, k = size
    arrays = (
        FakeArray((b, c, h, w), "<f2", ptr=x_ptr),
        FakeArray((m, c, k, k), "<f2", ptr=0x200000),
        FakeArray(PROBLEM.output_shape(size), "<f2", ptr=out_ptr),
    )
    return [intake(a, name) for a, name in zip(arrays, ("x", "w", "out"), strict=True)]


_KINDS = {"long long": ctypes.c_int64, "unsigned": ctypes.c_uint32, "int": ctypes.c_int32}


def _launched(driver, kinds):
    """The last launch: (grid, block, shared memory, stream, pointers, scalars)."""
    _, grid, block, smem, stream, _ = driver.launches[-1]
    addresses = driver.addresses[-1]
    pointers = [ctypes.c_uint64.from_address(a).value for a in addresses[:3]]
    values = zip(kinds, addresses[3:], strict=True)
    scalars = [_KINDS[kind].from_address(a).value for kind, a in values]
    return grid, block, smem, stream, pointers, scalars


@pytest.mark.parametrize("number", [8, 9, 10, 11, 12])
def test_tensor_core_conv_plans_pack_the_kernels_arguments(fake_gpu, number):
    """Rungs 8 to 12: the kernel the layout planner names, a grid of resident blocks (at most
    one per item), 256 threads, the layout's shared memory, x, w and y per call and the
    layout's scalars in PARAMS order; the launcher launches it on the current stream."""
    driver, sources = fake_gpu
    driver.count = 3 + len(r12.PARAMS if number == 12 else tc.PARAMS)
    module = TC_RUNGS[number]
    size = (2, 3, 16, 15, 13, 5)
    layout = module.plan(size)
    plans = _plans(module)
    before = plans.misses
    x, w, out = _ops(size)
    plan = plans(x, w, out)
    assert plan.run.__name__ == "direct" and sources[number].names == [layout.kernel_name]
    plan(*_ops(size, x_ptr=0x500000, out_ptr=0x700000), 9)
    kinds = [kind for _, kind in layout.PARAMS]
    grid, block, smem, stream, pointers, scalars = _launched(driver, kinds)
    assert grid == (min(layout.items, SMS * PER_SM), 1, 1) and block == (tc.THREADS, 1, 1)
    assert (smem, stream) == (layout.smem_bytes, 9)
    assert pointers == [0x500000, 0x200000, 0x700000]
    assert scalars == [int(v) for v in layout.scalars(layout.PARAMS)]
    xs, ws, outs = (FakeArray(op.shape, "<f2", ptr=op.ptr) for op in _ops(size, 0x900000))
    assert _launch(module)(xs, ws, outs) is outs  # through its plans, on the current stream
    _, _, _, stream, pointers, _ = _launched(driver, kinds)
    assert plans.misses - before == 1 and stream == 7 and pointers[0] == 0x900000


@pytest.mark.parametrize("number", [8, 9, 10, 11, 12])
def test_tensor_core_conv_plans_copy_a_misaligned_x_and_fill_zeros(fake_gpu, number):
    """x off its 16-byte alignment: a plan of its own that copies x first (the kernel reads
    x in 16-byte chunks); out's alignment needs no copy; no channels: zeros, no kernel."""
    plans = _plans(TC_RUNGS[number])
    size = (2, 3, 16, 15, 13, 5)
    before = plans.misses
    aligned = plans(*_ops(size))
    shifted = plans(*_ops(size, x_ptr=0x100008))
    assert shifted is not aligned and shifted.run.__name__ == "aligned_copy"
    assert plans(*_ops(size, out_ptr=0x300002)).run.__name__ == "direct"
    assert plans(*_ops((2, 0, 16, 15, 13, 5))).run is tc._zeros
    assert plans.misses - before == 4


@pytest.mark.parametrize("number", [11, 12])
def test_rungs_11_and_12_plans_are_rung_10s_where_their_kernels_do_not_apply(fake_gpu, number):
    """Where their kernels do not apply, rungs 11 and 12 run rung 10's geometry: its kernel, on
    its configuration (loaded once: ``_configured`` is cached), in a plan of their own."""
    _, sources = fake_gpu
    plans = _plans(TC_RUNGS[number])
    for size in ((2, 5, 16, 40, 40, 7), (2, 3, 4, 12, 14, 8)):  # C > 4, K = 8
        ops = _ops(size)
        mine = plans(*ops)
        assert mine is not _plans(r10)(*ops) and mine.run.__name__ == "direct"
    names = [r10.plan(size).kernel_name for size in ((2, 5, 16, 40, 40, 7), (2, 3, 4, 12, 14, 8))]
    assert sources[10].names == names and sources[number].names == []


def test_filters_on_m_plan_takes_its_flags_from_the_alignment(fake_gpu):
    """Rung 13 on conv2's image shape: bulk copies in and out where x and out are 16-byte
    aligned (flags, the last scalar); each alignment a plan of its own; 4 filters: rung 12's
    plan."""
    driver, sources = fake_gpu
    driver.count = 3 + len(r13.PARAMS) + 1
    size = (2, 4, 16, 40, 40, 7)
    layout = r13.plan(size)
    plans = _plans(r13)
    before = plans.misses
    kinds = ["int"] * (len(r13.PARAMS) + 1)
    expected = [int(v) for v in layout.params().values()]
    both, pairs = r13.BULK_IN | r13.BULK_OUT | r13.PAIRED, r13.PAIRED
    for x_ptr, out_ptr, flags in (
        (0x100000, 0x300000, both),
        (0x100002, 0x300000, both & ~r13.BULK_IN),
        (0x100000, 0x300004, both & ~r13.BULK_OUT),
        (0x100008, 0x300008, pairs),
    ):
        ops = _ops(size, x_ptr, out_ptr)
        plan = plans(*ops)
        assert plan.run.__name__ == "direct"  # no copy: the threads read a misaligned x
        plan(*ops, 0)
        grid, block, smem, _, pointers, scalars = _launched(driver, kinds)
        assert grid == (min(2, SMS * PER_SM), 1, 1) and block == (r13.THREADS, 1, 1)
        assert smem == layout.smem_bytes and pointers == [x_ptr, 0x200000, out_ptr]
        assert scalars == [*expected, flags]
    assert plans.misses - before == 4 and sources[13].names == [layout.kernel_name]
    conv1 = _ops((2, 1, 4, 86, 86, 7))  # conv1's 4 filters: rung 12's geometry
    assert plans(*conv1).run.__name__ == _plans(r12)(*conv1).run.__name__ == "direct"
    assert sources[12].names == [r12.plan((2, 1, 4, 86, 86, 7)).kernel_name]
    assert plans(*_ops((2, 0, 16, 40, 40, 7))).run is tc._zeros
