"""The fast-call machinery (``ladder.core.fastcall``): array intake, plan caches, raw launches.

Intake and the plan caches run on the CPU, with fake objects that expose
``__cuda_array_interface__`` and with the simulator's arrays; raw launches need the driver and
run on the GPU machine only.
"""

import ctypes
import sys
import types

import numpy as np
import pytest
from conftest import ON_GPU, gpu_only
from numba import cuda

from ladder.attention.problem import PROBLEMS, attention_numpy
from ladder.core import device, fastcall, geometry, numba_internals
from ladder.core.dtypes import resolve, to_device, to_host
from ladder.core.fastcall import PlanCache, intake
from ladder.core.rung import get_problem, get_rung, rungs
from ladder.fused import problem as fused_problem
from ladder.fused.softmax import r05_rows_in_registers as softmax5
from ladder.gemm import hopper, r09_wide_loads, r12_tuned, tensor_core
from ladder.gemm import r22_wgmma as r22
from ladder.gemm.problem import operands


class FakeArray:
    """Anything exposing ``__cuda_array_interface__`` (the pointer is never dereferenced)."""

    def __init__(self, shape, typestr="<f4", ptr=1 << 20, strides=None, **extra):
        self.__cuda_array_interface__ = {
            "shape": tuple(shape),
            "typestr": typestr,
            "data": (ptr, extra.pop("readonly", False)),
            "strides": strides,
            "version": 3,
            **extra,
        }


def test_intake_reads_the_interface_once_into_a_record():
    op = intake(FakeArray((3, 5), ptr=0x1000), "A")
    assert (op.name, op.ptr, op.shape, op.strides) == ("A", 0x1000, (3, 5), (5, 1))
    assert (op.dtype, op.itemsize, op.ndim, op.size) == ("float32", 4, 2, 15)
    assert op.contiguous and not op.readonly and op.stream is None
    assert op.align == fastcall.ALIGN_CAP
    assert intake(op, "B") is op  # a record passes through (rungs hand them to lower rungs)


def test_intake_takes_byte_strides_as_element_strides():
    op = intake(FakeArray((4, 3), "<f2", strides=(2, 8)), "x")  # a transposed float16 view
    assert op.strides == (1, 4) and not op.contiguous
    rows = intake(FakeArray((2, 3), strides=(40, 4)), "x")  # every other row of a wider one
    assert rows.strides == (10, 1) and not rows.contiguous
    assert intake(FakeArray((1, 3), strides=(40, 4)), "x").contiguous  # one row: any stride
    assert intake(FakeArray((3, 1), strides=(4, 400)), "x").contiguous  # one column
    assert intake(FakeArray((0, 3), strides=(4, 4)), "x").contiguous  # empty
    assert intake(FakeArray((2, 2, 3), strides=(24, 12, 4)), "x").contiguous
    assert not intake(FakeArray((2, 2, 3), strides=(48, 12, 4)), "x").contiguous


def test_intake_records_alignment_readonly_and_stream():
    assert intake(FakeArray((2, 2), ptr=0x1004), "A").align == 4
    assert intake(FakeArray((2, 2), ptr=0x1008), "A").align == 8
    assert intake(FakeArray((2, 2), ptr=0x1100), "A").align == 16  # capped at ALIGN_CAP
    assert intake(FakeArray((2, 2), ptr=0x1002, typestr="<f2"), "A").align == 2
    op = intake(FakeArray((2, 2), readonly=True, stream=7), "A")
    assert op.readonly and op.stream == 7


def test_intake_names_bfloat16_from_the_array_dtype():
    fake = FakeArray((2, 2), "<V2")
    fake.dtype = resolve("bfloat16")  # ml_dtypes: the interface can only say "<V2"
    op = intake(fake, "A")
    assert (op.dtype, op.itemsize) == ("bfloat16", 2)


@pytest.mark.parametrize(
    ("arg", "error", "message"),
    [
        (np.ones((2, 2), np.float32), TypeError, r"A is a host array \(numpy.ndarray\)"),
        ([1.0, 2.0], TypeError, r"A must be a device array .* got list"),
        (FakeArray((2, 2), mask=object()), TypeError, "A: masked arrays are not supported"),
        (FakeArray((2, 2), strides=(8, 2)), ValueError, "not whole float32 elements"),
    ],
    ids=["host", "list", "masked", "half-element-strides"],
)
def test_intake_refuses_with_a_clear_error(arg, error, message):
    with pytest.raises(error, match=message):
        intake(arg, "A")


@pytest.mark.parametrize("arg", [np.ones((2, 2), np.float32), [1.0], 3.0], ids=repr)
def test_intake_refuses_as_device_array_does(arg):
    """The same messages as ``device.device_array``, which the other problems still use."""
    with pytest.raises(TypeError) as old:
        device.device_array(arg, "C")
    with pytest.raises(TypeError) as new:
        intake(arg, "C")
    assert str(new.value) == str(old.value)


def test_intake_reads_device_arrays_and_views():
    host = np.arange(4 * 9, dtype=np.float32).reshape(4, 9)
    d = cuda.to_device(host)
    op = intake(d, "x")
    assert (op.shape, op.strides, op.dtype, op.contiguous) == ((4, 9), (9, 1), "float32", True)
    assert op.obj is d and op.base is d
    shifted = intake(d[:, 1:], "x")  # every row one element (4 bytes) further
    assert shifted.strides == (9, 1) and not shifted.contiguous
    assert shifted.ptr == op.ptr + 4
    assert fastcall.numba_array(op) is d


def test_numba_array_gives_back_the_callers_array():
    d = to_device(np.ones((2, 3), np.float16))
    assert fastcall.numba_array(intake(d, "x")) is d
    if device.simulator():
        with pytest.raises(TypeError, match="x must be a device array"):
            fastcall.numba_array(intake(FakeArray((2, 2)), "x"))


def test_plan_cache_builds_once_per_signature():
    built = []

    def build(a, b):
        built.append((a.shape, b.shape))
        return len(built)

    cache = PlanCache(build)
    a, b = intake(FakeArray((2, 3), ptr=0x1000), "a"), intake(FakeArray((3, 4), ptr=0x2000), "b")
    assert cache(a, b) == 1
    moved = intake(FakeArray((2, 3), ptr=0x9000), "a")  # other memory, same signature
    assert cache(moved, b) == 1 and cache.misses == 1


@pytest.mark.parametrize(
    "other",
    [
        FakeArray((2, 4), ptr=0x1000),  # shape
        FakeArray((2, 3), ptr=0x1000, strides=(16, 4)),  # strides (rows padded)
        FakeArray((2, 3), ptr=0x1004),  # alignment
        FakeArray((2, 3), "<f2", ptr=0x1000),  # dtype
    ],
    ids=["shape", "strides", "alignment", "dtype"],
)
def test_plan_cache_never_reuses_a_plan_for_another_signature(other):
    cache = PlanCache(lambda a: object())
    first = cache(intake(FakeArray((2, 3), ptr=0x1000), "a"))
    second = cache(intake(other, "a"))
    assert second is not first and cache.misses == 2
    assert cache(intake(FakeArray((2, 3), ptr=0x2000), "a")) is first


def test_plan_cache_keys_plain_values_and_the_launch_path():
    cache = PlanCache(lambda m, n: object())
    assert cache(1, 2) is cache(1, 2)
    assert cache(1, 2) is not cache(2, 1)
    plain = cache(1, 2)
    with fastcall.dispatcher_launches():
        assert not fastcall.raw_launches()
        assert cache(1, 2) is not plain  # built for the other path
    assert cache(1, 2) is plain


def test_plan_cache_drops_the_oldest_past_its_size():
    cache = PlanCache(lambda n: object(), size=3)
    first = cache(0)
    for n in range(1, 4):
        cache(n)
    assert len(cache) == 3 and cache(0) is not first


def test_stream_handle_reads_each_kind():
    class Protocol:
        def __cuda_stream__(self):
            return (0, 42)

    class Torchish:
        cuda_stream = 7

    assert fastcall.stream_handle(None) == 0 and fastcall.stream_handle(5) == 5
    assert fastcall.stream_handle(Protocol()) == 42
    assert fastcall.stream_handle(Torchish()) == 7
    with pytest.raises(TypeError, match="stream must be"):
        fastcall.stream_handle("default")


def test_raw_arguments_are_packed_as_cuda_core_packs_them():
    assert isinstance(fastcall._as_ctypes(3), ctypes.c_int64)  # Python ints: 8 bytes
    assert isinstance(fastcall._as_ctypes(True), ctypes.c_int64)  # bools too (cuda.core)
    assert fastcall._as_ctypes(2**63 + 1).value == 2**63 + 1
    assert isinstance(fastcall._as_ctypes(1.5), ctypes.c_double)
    assert ctypes.sizeof(fastcall._as_ctypes(np.int32(3))) == 4
    assert fastcall._as_ctypes(ctypes.c_float(2.5)).value == 2.5
    with pytest.raises(TypeError, match="no raw form"):
        fastcall._as_ctypes(np.float16(1.0))


TUNED = get_rung("gemm", "tuned").launch  # the launcher the registration built
SOFTMAX5 = get_rung("softmax", "rows-in-registers").launch
ELEMENTWISE1 = get_rung("elementwise", "three-kernels").launch
WIDE_LOADS = get_rung("gemm", "wide-loads").launch


def _gemm(a, b, c):
    TUNED(to_device(a), to_device(b), c)
    return to_host(c)


def test_tuned_gemm_replans_for_a_new_shape():
    problem = get_problem("gemm")
    for size in [(5, 8, 7), (9, 12, 5), (5, 8, 7)]:
        a, b = problem.make_inputs(size, "float32", seed=sum(size))
        out = _gemm(a, b, to_device(np.full(size[:2], np.nan, np.float32)))
        assert np.allclose(out, problem.reference((a, b)), rtol=1e-5, atol=1e-5)
    assert TUNED.plans.misses >= 2


@pytest.mark.parametrize("offset", [0, 1])
def test_tuned_gemm_plans_by_the_outputs_alignment(offset):
    """C one element into its allocation: contiguous, but its rows are not 16-byte aligned, so
    the plan takes rung 9's scalar kernel (and is not the aligned C's plan)."""
    problem = get_problem("gemm")
    a, b = problem.make_inputs((4, 8, 4), "float32", seed=3)
    flat = to_device(np.full(32 + offset, np.nan, np.float32))
    c = flat[offset:].reshape(4, 8)
    out = _gemm(a, b, c)
    assert np.allclose(out, problem.reference((a, b)), rtol=1e-5, atol=1e-5)
    ops = [intake(to_device(a), "A"), intake(to_device(b), "B"), intake(c, "C")]
    kernel = r12_tuned.wide_kernel if offset == 0 else r12_tuned.scalar_kernel
    assert TUNED.plans(*ops).kernel is kernel  # TUNED's, built by rung 9's make_kernel


@pytest.mark.parametrize("offset", [0, 1])
def test_softmax_plans_by_the_outputs_alignment(offset):
    """A contiguous ``out`` that starts one element into its allocation takes scalar accesses;
    the plan for the aligned one is not reused for it."""
    problem = get_problem("softmax")
    (x,) = problem.make_inputs((2, 8), "float32", seed=offset)
    flat = to_device(np.full(16 + offset, np.nan, np.float32))
    out = flat[offset:].reshape(2, 8)
    returned = SOFTMAX5(to_device(x), out)
    assert returned is out
    assert np.allclose(to_host(out), problem.reference((x,)), rtol=1e-5)
    dx = intake(to_device(x), "x")
    plan = SOFTMAX5.plans(dx, intake(out, "out"))
    wide = softmax5.quads_allowed(dx, intake(out, "out"))
    assert plan.kernel is (softmax5.WIDE if wide else softmax5.SCALAR)[32]
    assert wide == (offset == 0)


@pytest.mark.skipif(ON_GPU, reason="the simulator's path")
def test_numba_launch_stays_on_the_dispatcher_in_the_simulator():
    problem = get_problem("softmax")
    (x,) = problem.make_inputs((1, 5), "float32", seed=1)
    dx = intake(to_device(x), "x")
    out = intake(to_device(np.zeros((1, 5), np.float32)), "out")
    launch = geometry.plan_of(softmax5.geometry(dx, out), (dx, out))
    assert launch.mode == "new"
    launch(dx, out)
    assert launch.mode == "dispatcher: the CUDA simulator"


def test_numba_cudas_private_names_are_where_the_raw_launch_reads_them():
    """Every private name of numba-cuda that the raw launch reads (``numba_internals.PRIVATE``)
    is in the installed numba-cuda's sources, with the parameters the code passes: checked from
    the sources, so it runs without a GPU (where the simulator replaces numba.cuda.dispatcher).
    A failure names each missing or changed name, its file and the numba-cuda version."""
    found = numba_internals.missing()
    assert not found, "the raw launch would fall back to the dispatcher:\n" + "\n".join(found)


def test_the_private_name_check_says_what_changed(monkeypatch):
    """The check bites: a changed signature, a member gone, a class gone and a file gone are
    each reported with the version and the file."""
    monkeypatch.setattr(
        numba_internals,
        "PRIVATE",
        (
            ("dispatcher.py", "_Kernel", "_prepare_args", "method ty, val, stream"),
            ("dispatcher.py", "_Kernel", "_gone_by_now", "attribute"),
            ("dispatcher.py", "_NoSuchClass", "x", "attribute"),
            ("no_such_file.py", "C", "m", "attribute"),
            ("dispatcher.py", "_Kernel", "_prepare_args", "attribute"),  # now a method
        ),
    )
    found = numba_internals.missing()
    version = numba_internals.version()
    assert len(found) == 5 and all(f"numba-cuda {version}, numba/cuda/" in f for f in found)
    assert "_Kernel._prepare_args is 'method ty, val, stream, retr, kernelargs'" in found[0]
    assert "_Kernel._gone_by_now is gone" in found[1]
    assert "no class _NoSuchClass" in found[2] and "no_such_file.py: no class C" in found[3]
    assert "_Kernel._prepare_args is now a method" in found[4]


def test_numba_launch_falls_back_when_a_private_name_is_missing(monkeypatch):
    """A numba-cuda without one of the internals (here a compiled kernel's ``_codelibrary``):
    the launch stays on the dispatcher, every call, and ``mode`` names the error and the
    numba-cuda version."""

    class NoLibrary(_FakeKernel):
        def __init__(self, argument_types):
            super().__init__(argument_types)
            del self._codelibrary

    monkeypatch.setattr(sys.modules[__name__], "_FakeKernel", NoLibrary)
    intake(FakeArray((1, 1)), "x")  # intake learns FakeArray while the simulator is the backend
    monkeypatch.setattr(fastcall.device, "simulator", lambda: False)
    monkeypatch.setattr(fastcall, "driver", lambda: _FakeDriver(count=0))
    monkeypatch.setattr(fastcall, "_bindings", lambda: None)
    monkeypatch.setattr(fastcall, "numba_array", lambda op: type("A", (), {"op": op})())
    dispatcher = _FakeDispatcher()
    launch = fastcall.NumbaLaunch(dispatcher, 1, 32)
    x = intake(FakeArray((2, 2)), "x")
    launch(x)
    launch(x)
    version = numba_internals.version()
    assert launch.mode.startswith(f"dispatcher: AttributeError: numba-cuda {version}: ")
    assert "_codelibrary" in launch.mode and len(dispatcher.calls) == 2


@gpu_only
def test_a_known_kernel_takes_the_raw_path():
    """On a GPU, softmax's rows-in-registers kernel, launched through its registered launcher,
    takes the raw path from its second call: when it does not, the message says why, with the
    numba-cuda version and what the check of its sources finds."""
    x = cuda.to_device(np.random.default_rng(0).random((4, 64), dtype=np.float32))
    out = cuda.device_array_like(x)
    SOFTMAX5(x, out)
    SOFTMAX5(x, out)
    launch = SOFTMAX5.plans(intake(x, "x"), intake(out, "out"))
    assert launch.mode == "raw", (
        f"numba-cuda {numba_internals.version()}: {launch.mode}; {numba_internals.missing()}"
    )


@gpu_only
def test_numba_launch_goes_raw_after_its_first_call():
    @cuda.jit
    def scale(x, out):
        i, j = cuda.grid(2)
        if i < x.shape[0] and j < x.shape[1]:
            out[i, j] = 2.0 * x[i, j]

    x = cuda.to_device(np.arange(12, dtype=np.float32).reshape(3, 4))
    outs = [cuda.device_array((3, 4), np.float32) for _ in range(2)]
    launch = fastcall.NumbaLaunch(scale, (1, 1), (4, 4))
    for out in outs:  # the first through the dispatcher, the second raw
        launch(intake(x, "x"), intake(out, "out"))
    assert launch.mode == "raw"
    for out in outs:
        assert np.array_equal(out.copy_to_host(), 2 * x.copy_to_host())


@gpu_only
def test_numba_launch_with_scalars_goes_raw():
    @cuda.jit
    def scale(x, out, factor, negate):
        i = cuda.grid(1)
        if i < x.shape[0]:
            out[i] = -factor * x[i] if negate else factor * x[i]

    x = cuda.to_device(np.arange(8, dtype=np.float32))
    outs = [cuda.device_array(8, np.float32) for _ in range(2)]
    launch = fastcall.NumbaLaunch(scale, 1, 32, scalars=(np.float32(1.5), True))
    for out in outs:  # the first through the dispatcher, the second raw
        launch(intake(x, "x"), intake(out, "out"))
    assert launch.mode == "raw"
    for out in outs:
        assert np.array_equal(out.copy_to_host(), -1.5 * np.arange(8, dtype=np.float32))


@gpu_only
def test_fast_readers_agree_with_the_interface():
    """Torch, CuPy and Numba arrays read through their attributes give what their
    ``__cuda_array_interface__`` gives, for views too."""
    arrays = [cuda.to_device(np.ones((6, 10), np.float32))]
    for module in ("cupy", "torch"):
        try:
            lib = __import__(module)
        except ImportError:
            continue
        if module == "cupy":
            arrays.append(lib.ones((6, 10), dtype=lib.float16))
        else:
            arrays.append(lib.ones((6, 10), dtype=lib.float32, device="cuda"))
    for arr in arrays:
        for view in (arr, arr[1:, 2:], arr[:, 1:7], arr.T):
            fast = intake(view, "x")
            slow = fastcall._read_interface(view, "x")
            assert fast.key == slow.key and fast.ptr == slow.ptr, type(arr)
            assert fast.contiguous == slow.contiguous


class _FakeDriver:
    """Stands in for libcuda: records each launch's function, grid and parameter values (read
    as 8-byte integers; ``addresses`` keeps where each parameter was read from)."""

    def __init__(self, count):
        self.count, self.launches, self.addresses = count, [], []

    def launch(self, function, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
        addresses = list((ctypes.c_void_p * self.count).from_address(params))
        values = [ctypes.c_int64.from_address(a).value for a in addresses]
        self.launches.append((function, (gx, gy, gz), (bx, by, bz), smem, stream, values))
        self.addresses.append(addresses)
        return 0


class CUfunction(int):  # the type name is what fastcall reads a cuda.core handle by
    pass


class _FakeKernel:
    """A compiled overload as numba-cuda 0.30 has it: ``_prepare_args`` lays an array out as
    meminfo, parent, nitems, itemsize, data, shape..., strides... (bytes)."""

    debug = cooperative = False

    def __init__(self, argument_types):
        self.argument_types = argument_types
        handle = CUfunction(0xF00D)
        cufunc = type("F", (), {"handle": handle})()
        self._codelibrary = type("L", (), {"get_cufunc": lambda self: cufunc})()

    def _prepare_args(self, ty, arr, stream, retr, values):
        if ty[0] == "scalar":  # as Numba packs a float32 and a bool
            values.append(ctypes.c_float(arr) if ty[1] == "float32" else arr)
            return
        op = arr.op
        values += [0, 0, op.size, op.itemsize, op.ptr, *op.shape]
        values += [s * op.itemsize for s in op.strides]


class _FakeDispatcher:
    extensions = None

    def __init__(self):
        self.overloads, self.calls = {}, []

    def typeof_pyval(self, arg):
        if not hasattr(arg, "op"):
            return ("scalar", type(arg).__name__)
        return ("array", arg.op.dtype, len(arg.op.shape))

    def __getitem__(self, config):
        def launch(*args):
            types = tuple(self.typeof_pyval(a) for a in args)
            self.overloads.setdefault(types, _FakeKernel(types))
            self.calls.append([a.op.ptr if hasattr(a, "op") else a for a in args])

        return launch


def test_numba_launch_packs_numbas_arguments_and_rewrites_only_the_pointers(monkeypatch):
    """The raw path without a GPU: a stand-in dispatcher and driver, the packing for real."""
    intake(FakeArray((1, 1)), "x")  # intake learns FakeArray while the simulator is the backend
    fake = _FakeDriver(count=2 * 9)  # two 2-D arrays: 5 + 2 * 2 values each
    monkeypatch.setattr(fastcall.device, "simulator", lambda: False)
    monkeypatch.setattr(fastcall, "driver", lambda: fake)
    monkeypatch.setattr(fastcall, "_bindings", lambda: None)  # ctypes: the fake
    monkeypatch.setattr(fastcall, "numba_array", lambda op: type("A", (), {"op": op})())
    dispatcher = _FakeDispatcher()
    launch = fastcall.NumbaLaunch(dispatcher, (3, 2), 128)

    def ops(x, out, rows=4):
        return (
            intake(FakeArray((rows, 6), ptr=x), "x"),
            intake(FakeArray((rows, 6), ptr=out), "out"),
        )

    launch(*ops(0x1000, 0x2000))  # the first call: the dispatcher, then packed
    assert launch.mode == "raw" and dispatcher.calls == [[0x1000, 0x2000]]
    launch(*ops(0x5000, 0x6000))
    launch(*ops(0x7000, 0x8000), stream=9)
    assert dispatcher.calls == [[0x1000, 0x2000]]  # no dispatcher call since
    (f, grid, block, smem, stream, values), last = fake.launches[0], fake.launches[1]
    assert (f, grid, block, smem, stream) == (0xF00D, (3, 2, 1), (128, 1, 1), 0, 0)
    assert values == [0, 0, 24, 4, 0x5000, 4, 6, 24, 4, 0, 0, 24, 4, 0x6000, 4, 6, 24, 4]
    assert last[4] == 9 and last[5][4] == 0x7000 and last[5][13] == 0x8000
    launch(*ops(0x9000, 0xA000, rows=5))  # another shape: never the packed launch
    assert dispatcher.calls[-1] == [0x9000, 0xA000] and len(fake.launches) == 2


def test_numba_launch_packs_its_scalars_once_after_the_operands(monkeypatch):
    """A plan's fixed scalars (attention's scale and causal flag) go to the dispatcher after
    the arrays, and into the raw launch as Numba packs them; a call writes only pointers."""
    intake(FakeArray((1, 1)), "x")  # intake learns FakeArray while the simulator is the backend
    fake = _FakeDriver(count=9 + 2)  # one 2-D array, then a float32 and a bool
    monkeypatch.setattr(fastcall.device, "simulator", lambda: False)
    monkeypatch.setattr(fastcall, "driver", lambda: fake)
    monkeypatch.setattr(fastcall, "_bindings", lambda: None)  # ctypes: the fake
    monkeypatch.setattr(fastcall, "numba_array", lambda op: type("A", (), {"op": op})())
    dispatcher = _FakeDispatcher()
    launch = fastcall.NumbaLaunch(dispatcher, 2, 64, scalars=(np.float32(0.25), True))
    launch(intake(FakeArray((4, 6), ptr=0x1000), "x"))
    assert launch.mode == "raw" and dispatcher.calls == [[0x1000, np.float32(0.25), True]]
    launch(intake(FakeArray((4, 6), ptr=0x3000), "x"))
    assert len(dispatcher.calls) == 1
    values, addresses = fake.launches[0][5], fake.addresses[0]
    assert values[4] == 0x3000 and values[10] == 1  # the pointer; True, 8 bytes (cuda.core)
    assert ctypes.c_float.from_address(addresses[9]).value == 0.25


class _FakeSource:
    """Stands in for the CUDA C++ source of attention rung 5: kernels by name, never compiled."""

    def __init__(self, regs=168):
        self.names, self.regs = [], regs  # registers a thread the "build" reports

    def kernel(self, name):
        self.names.append(name)
        function = type("Function", (), {"ptr": 0xC0DE})()
        members = {"kernel": function, "max_dynamic_shared_size_bytes": 0, "num_regs": self.regs}
        return type("RawKernel", (), members)()


@pytest.mark.parametrize("packed", [False, True], ids=["rung 5", "rung 6"])
def test_tensor_core_attention_plan_packs_the_kernels_arguments(monkeypatch, packed):
    """Attention rungs 5 and 6 without a GPU: the plan's raw launch on the current stream,
    with the .cu entry point's arguments (Q, K, V, O, N, H, HKV, scale_log2, causal) in order;
    operands the kernel cannot take (d = 80, a misaligned pointer) go through padded copies,
    workspaces the plan allocates once."""
    import cupy

    from ladder.attention import r05_tensor_core_flash as r05
    from ladder.attention import r06_gqa_packed as r06
    from ladder.attention import tensor_core as attention_tc

    def ops(d=64, q_ptr=0x10000):
        shapes = [(1, 4, 130, d), (1, 2, 130, d), (1, 2, 130, d), (1, 4, 130, d)]
        ptrs = [q_ptr, 0x20000, 0x30000, 0x40000]
        return [
            intake(FakeArray(shape, "<f2", ptr=ptr), name)
            for shape, ptr, name in zip(shapes, ptrs, ("q", "k", "v", "out"), strict=True)
        ]

    ops()  # intake learns to read FakeArray while the simulator is still the backend
    fake, source = _FakeDriver(count=9), _FakeSource()
    monkeypatch.setattr(fastcall.device, "simulator", lambda: False)
    monkeypatch.setattr(fastcall, "driver", lambda: fake)
    monkeypatch.setattr(fastcall, "_bindings", lambda: None)  # ctypes: the fake
    monkeypatch.setattr(r05, "SOURCE", source)
    monkeypatch.setattr(fastcall._CURRENT, "handle", 7)  # as inside on_stream(7)
    made = []

    def workspace(x, kd, what):
        made.append((x.name, (*x.shape[:-1], kd), what))
        return FakeArray((*x.shape[:-1], kd), "<f2", ptr=0x90000 + 0x10000 * len(made))

    monkeypatch.setattr(attention_tc, "padded_workspace", workspace)
    monkeypatch.setattr(cupy, "asarray", lambda x: x)  # no GPU: the plan keeps its views
    rung = r06 if packed else r05
    plan = rung.geometry(*ops())
    plan[True](*ops())
    (function, grid, block, smem, stream, _), addresses = fake.launches[0], fake.addresses[0]
    warps, mi = r05.TUNED[64]
    assert source.names == [r05.kernel_name(64, warps, mi, packed)]
    rows = 130 * 2 if packed else 130  # packed: the two query heads of a group in one block
    blocks = -(-rows // (16 * mi * warps))
    assert grid == (blocks, 2 if packed else 4, 1) and block == (32 * warps, 1, 1)
    assert (function, smem, stream) == (0xC0DE, r05.shared_bytes(64, warps, mi), 7)
    pointers = [ctypes.c_uint64.from_address(a).value for a in addresses[:4]]
    assert pointers == [0x10000, 0x20000, 0x30000, 0x40000]
    ints = [ctypes.c_int32.from_address(addresses[i]).value for i in (4, 5, 6, 8)]
    assert ints == [130, 4, 2, 1]  # N, H, HKV, causal
    scale = ctypes.c_float.from_address(addresses[7]).value
    assert scale == pytest.approx(1.4426950408889634 / 8)
    assert plan.plain.run.__name__ == "direct" and not made
    assert rung.geometry(*ops(d=80)).plain.run.__name__ == "padded"  # d padded to 128
    assert [shape for _, shape, _ in made] == [(1, 4, 130, 128), *[(1, 2, 130, 128)] * 2,
                                               (1, 4, 130, 128)]  # fmt: skip
    assert rung.geometry(*ops(q_ptr=0x10008)).plain.run.__name__ == "padded"  # q 8-byte aligned


def test_numba_launch_keeps_the_dispatcher_when_numbas_layout_differs(monkeypatch):
    intake(FakeArray((1, 1)), "x")  # intake learns FakeArray while the simulator is the backend
    monkeypatch.setattr(fastcall.device, "simulator", lambda: False)
    monkeypatch.setattr(fastcall, "driver", lambda: _FakeDriver(count=0))
    monkeypatch.setattr(fastcall, "_bindings", lambda: None)  # ctypes: the fake
    monkeypatch.setattr(fastcall, "numba_array", lambda op: type("A", (), {"op": op})())
    monkeypatch.setattr(_FakeKernel, "_prepare_args", lambda *a: a[-1].extend([0, 0, 0]))
    dispatcher = _FakeDispatcher()
    launch = fastcall.NumbaLaunch(dispatcher, 1, 32)
    x = intake(FakeArray((2, 2)), "x")
    launch(x)
    launch(x)
    assert launch.mode.startswith("dispatcher: ValueError: numba-cuda ")  # names the version
    assert "Numba's array arguments are not (meminfo, parent" in launch.mode
    assert len(dispatcher.calls) == 2


class _FakeBindings:
    """Stands in for ``cuda.bindings.driver``: its launch takes a CUfunction and a CUstream
    object and returns a tuple, the status first."""

    class CUresult:
        CUDA_SUCCESS = 0

    class CUfunction(int):
        pass

    class CUstream(int):
        pass

    def __init__(self):
        self.launches = []

    def cuLaunchKernel(self, f, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
        value = ctypes.c_uint64.from_address(ctypes.c_void_p.from_address(params).value).value
        self.launches.append(
            (type(f).__name__, int(f), (gx, gy, gz), type(stream).__name__, int(stream), value)
        )
        return (0,)


def test_packed_launch_goes_through_cuda_bindings_on_the_current_stream(monkeypatch):
    """The default path calls cuda.bindings' cuLaunchKernel with its own handle types; a call
    that names no stream goes to ``current_stream()``, which ``on_stream`` sets."""
    fake = _FakeBindings()
    monkeypatch.setattr(fastcall, "_bindings", lambda: fake)
    monkeypatch.setattr(fastcall, "driver", lambda: _FakeDriver(count=0))
    launch = fastcall.PackedLaunch(0xF00D, (4, 2), 64, 0, [ctypes.c_uint64(0)], [0])
    assert launch.via == "bindings"
    launch(0x1000)
    monkeypatch.setattr(fastcall.device, "simulator", lambda: True)  # on_stream leaves CuPy be
    with fastcall.on_stream(11) as handle:
        assert handle == 11 and fastcall.current_stream() == 11
        launch(0x2000)
        launch(0x3000, stream=5)  # a stream named by the caller wins
    assert fastcall.current_stream() == 0
    assert fake.launches == [
        ("CUfunction", 0xF00D, (4, 2, 1), "CUstream", 0, 0x1000),
        ("CUfunction", 0xF00D, (4, 2, 1), "CUstream", 11, 0x2000),
        ("CUfunction", 0xF00D, (4, 2, 1), "CUstream", 5, 0x3000),
    ]
    with pytest.raises(ValueError, match="via must be one of"):
        fastcall.PackedLaunch(0xF00D, 1, 32, 0, [], [], via="cuLaunch")


def test_plan_cache_keeps_a_plan_of_none():
    cache = PlanCache(lambda n: None)  # "nothing to launch" is a plan too (an empty C)
    assert cache(0) is None and cache(0) is None and cache.misses == 1


def _numba_gemm_rungs():
    return [r for r in rungs("gemm", references=False) if r.needs == {"numba"}]


def test_every_numba_gemm_rung_launches_from_plans():
    """`naive` to `fp16-staging`: the registration keeps each one's plans (``launch.plans``),
    built by its geometry (``gemm_rung``), and its launcher is named as its module's own."""
    found = _numba_gemm_rungs()
    fp16_staging = get_rung("gemm", "fp16-staging").number
    assert sorted(r.number for r in found) == list(range(1, fp16_staging + 1))
    for r in found:
        assert isinstance(r.launch.plans, PlanCache)
        assert r.launch.geometry is sys.modules[r.launch.__module__].geometry


def _gemm_operands(m, n, k, typestr="<f4", ptr=0x10000, c_strides=None):
    a = FakeArray((m, k), typestr, ptr=ptr)
    b = FakeArray((k, n), typestr, ptr=ptr + 0x100000)
    c = FakeArray((m, n), typestr, ptr=ptr + 0x200000, strides=c_strides)
    return [intake(x, name) for x, name in ((a, "A"), (b, "B"), (c, "C"))]


@pytest.mark.parametrize("rung", _numba_gemm_rungs(), ids=lambda r: r.name)
def test_numba_gemm_plans_are_kept_per_signature(rung):
    """Another shape, C's row stride (one row: still contiguous), C's alignment or the dtype:
    a plan of its own; the same signature elsewhere in memory: the same plan, with the grid
    that covers C's shape."""
    plans = PlanCache(rung.launch.plans.build)  # not the rung's own cache
    first = plans(*_gemm_operands(5, 8, 4))
    assert plans(*_gemm_operands(5, 8, 4, ptr=0x900000)) is first
    others = [
        _gemm_operands(9, 8, 4),
        _gemm_operands(1, 8, 4),
        _gemm_operands(1, 8, 4, c_strides=(64, 4)),
        _gemm_operands(5, 8, 4, ptr=0x10004),
        _gemm_operands(5, 8, 4, "<f2"),
    ]
    found = [plans(*ops) for ops in others]
    assert len({id(p) for p in [first, *found]}) == 6 and plans.misses == 6
    big = plans(*_gemm_operands(300, 200, 4))
    threads = np.prod(big.grid) * np.prod(big.block)
    assert big.grid != first.grid and threads * 128 >= 300 * 200  # at most 128 outputs each


def test_wide_loads_replans_in_the_launcher():
    """Rung 7 chooses its 16-byte or scalar kernel per plan: a call of another shape, with C
    one element into its allocation, or with a one-row A cut from a wider array (another row
    stride) gets a plan of its own and the right answer; a repeated signature reuses its plan.
    """
    problem = get_problem("gemm")
    plans = WIDE_LOADS.plans
    plans.clear()

    def new_plans(a_host, b_host, a, c):
        before = plans.misses
        assert WIDE_LOADS(a, to_device(b_host), c) is c
        ref = problem.reference((a_host, b_host))
        assert np.allclose(to_host(c), ref, rtol=1e-5, atol=1e-5)
        return plans.misses - before

    def poisoned(m, n):
        return to_device(np.full((m, n), np.nan, np.float32))

    a, b = problem.make_inputs((4, 8, 4), "float32", seed=1)
    assert new_plans(a, b, to_device(a), poisoned(4, 8)) == 1
    assert new_plans(a, b, to_device(a), poisoned(4, 8)) == 0  # same signature, other memory
    a2, b2 = problem.make_inputs((6, 4, 8), "float32", seed=2)
    assert new_plans(a2, b2, to_device(a2), poisoned(6, 4)) == 1  # another shape
    flat = to_device(np.full(33, np.nan, np.float32))
    shifted = flat[1:].reshape(4, 8)  # contiguous, rows not 16-byte aligned
    assert new_plans(a, b, to_device(a), shifted) == 1
    ops = [intake(to_device(a), "A"), intake(to_device(b), "B"), intake(shifted, "C")]
    assert plans(*ops).kernel is r09_wide_loads.scalar_kernel
    row = to_device(np.pad(a[:1], ((0, 0), (0, 4))))[:, :4]  # one row of 4, 8 apart
    assert intake(row, "A").strides == (8, 1)
    assert new_plans(a[:1], b, row, poisoned(1, 8)) == 1
    assert new_plans(a[:1], b, to_device(a[:1]), poisoned(1, 8)) == 1  # strides (4, 1)


# --- the tensor-core rungs' plans (tensor_core.TiledLauncher, TensorMapLaunch), on the CPU ---


class _FakeStream:
    ptr = 0


def _fake_kernel_for(built):
    """A ``kernel_for`` that records its sizes and dtype, and whose launches record pointers."""

    def kernel_for(m, n, k, dtype):
        launches = []

        def launch(a, b, c, stream=0):
            launches.append((a, b, c, stream))

        launch.sizes, launch.dtype, launch.launches = (m, n, k), dtype, launches
        built.append(launch)
        return launch

    return kernel_for


def _half(shape, ptr, dtype="float16"):
    if dtype == "float16":
        return FakeArray(shape, "<f2", ptr=ptr)
    fake = FakeArray(shape, "<V2", ptr=ptr)
    fake.dtype = resolve("bfloat16")
    return fake


def test_tiled_launcher_plans_per_signature(monkeypatch):
    """`wgmma`'s tiles (128 x 256 x 64): a tile-multiple, aligned call launches on the operands
    themselves; another shape, another dtype or a misaligned pointer gets its own plan (padded
    copies where it must); a kernel is built per padded size and dtype."""
    monkeypatch.setattr("cupy.cuda.get_current_stream", lambda: _FakeStream())
    built = []
    launcher = tensor_core.TiledLauncher((r22.BM, r22.BN, r22.BK), _fake_kernel_for(built))

    def ops(m, n, k, ptr=0x100000, dtype="float16"):
        found = operands(
            _half((m, k), ptr, dtype),
            _half((k, n), ptr + 0x1000000, dtype),
            _half((m, n), ptr + 0x2000000, dtype),
            dtype,
        )
        return found[:3]

    direct = launcher.plans(*ops(256, 512, 128))
    assert not isinstance(direct, tensor_core._Padded)
    assert launcher.plans(*ops(256, 512, 128, ptr=0x900000)) is direct
    direct(*ops(256, 512, 128, ptr=0x900000))
    assert built[0].sizes == (256, 512, 128) and built[0].dtype == "float16"
    assert built[0].launches == [(0x900000, 0x1900000, 0x2900000, 0)]
    bf16 = launcher.plans(*ops(256, 512, 128, dtype="bfloat16"))
    assert bf16 is not direct and built[1].dtype == "bfloat16"
    shifted = launcher.plans(*ops(256, 512, 128, ptr=0x100008))  # 8-byte aligned
    assert isinstance(shifted, tensor_core._Padded) and shifted.padded == (256, 512, 128)
    assert len(built) == 2  # the padded run is on the float16 kernel of the same size
    odd = launcher.plans(*ops(130, 500, 70))
    assert isinstance(odd, tensor_core._Padded) and odd.padded == (256, 512, 128)
    assert launcher.plans(*ops(0, 512, 128)) is tensor_core._nothing
    assert launcher.plans(*ops(128, 256, 0)) is tensor_core._zeros
    assert launcher.plans.misses == 6 and len(built) == 2


class _TensorMapDriver:
    """Stands in for libcuda: reads a launch's parameters as (map A, map B, C, M, N, K)."""

    def __init__(self):
        self.launches = []

    def launch(self, function, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
        address = (ctypes.c_void_p * 6).from_address(params)
        maps = [ctypes.string_at(address[i], 128) for i in (0, 1)]
        assert all(a % 64 == 0 for a in address[:2]), "maps are 64-byte aligned"
        c = ctypes.c_uint64.from_address(address[2]).value
        sizes = [ctypes.c_int32.from_address(address[i]).value for i in (3, 4, 5)]
        self.launches.append((function, (gx, gy, gz), (bx, by, bz), smem, stream, *maps, c, sizes))
        return 0


def _map(pointer, rows, cols):
    """A stand-in tensor map: the address and sizes it was made for, in 128 bytes."""
    record = np.zeros(16, np.uint64)
    record[:3] = pointer, rows, cols
    return record.view(np.dtype((np.void, 128)))


class _FakeRawKernel:
    max_dynamic_shared_size_bytes = 0

    def __init__(self, name):
        self.name, self.calls = name, []
        self.kernel = types.SimpleNamespace(ptr=0xF00D)

    def __call__(self, grid, block, args, shared_mem=0):
        self.calls.append((grid, block, args, shared_mem))


def _fake_rung18(monkeypatch):
    """`wgmma`'s ``geometry`` with stand-ins for its compiled kernels and the driver's map
    encoder (both need a GPU); returns the maps made and the kernels built."""
    made, kernels = [], {}

    def tensor_map(pointer, rows, cols, box_rows, box_cols, dtype):
        made.append((pointer, rows, cols, box_rows, box_cols, dtype))
        return _map(pointer, rows, cols)

    source = types.SimpleNamespace(
        kernel=lambda name: kernels.setdefault(name, _FakeRawKernel(name))
    )
    monkeypatch.setattr(r22, "SOURCE", source)
    monkeypatch.setattr(hopper, "tensor_map", tensor_map)
    return made, kernels


def test_tensor_maps_are_kept_per_pair_of_addresses(monkeypatch):
    """`wgmma`'s raw launch with a stand-in driver: the maps embed A's and B's addresses, so a
    call with other memory of the same signature (the same plan) gets maps of its own, never
    the last call's; a pair seen before reuses its maps; only C's address is rewritten."""
    made, kernels = _fake_rung18(monkeypatch)
    fake = _TensorMapDriver()
    monkeypatch.setattr(tensor_core, "raw_launches", lambda: True)
    monkeypatch.setattr(fastcall, "driver", lambda: fake)
    monkeypatch.setattr(fastcall, "_bindings", lambda: None)  # ctypes: the fake
    launch = r22.geometry(256, 512, 128, "bfloat16")
    assert set(kernels) == {"wgmma_tma_bf16"} and launch.mode == "raw"
    assert kernels["wgmma_tma_bf16"].max_dynamic_shared_size_bytes == r22.SMEM_BYTES
    calls = [(0xA000, 0xB000, 0xC000), (0xA000, 0xB000, 0xC100), (0xA100, 0xB000, 0xC200)]
    calls.append((0xA000, 0xB000, 0xC300))
    for a, b, c in calls:
        launch(a, b, c, stream=5)
    assert made == [
        (0xA000, 256, 128, r22.BM, 64, "bfloat16"),  # A: M x K in boxes of 128 x 64
        (0xB000, 128, 512, r22.BK, 64, "bfloat16"),  # B: K x N in boxes of 64 x 64
        (0xA100, 256, 128, r22.BM, 64, "bfloat16"),
        (0xB000, 128, 512, r22.BK, 64, "bfloat16"),
    ]
    for (a, b, c), got in zip(calls, fake.launches, strict=True):
        function, grid, block, smem, stream, map_a, map_b, c_found, sizes = got
        assert (function, grid, block, smem, stream) == (
            0xF00D,
            (2 * 2, 1, 1),
            (r22.THREADS, 1, 1),
            r22.SMEM_BYTES,
            5,
        )
        assert map_a == _map(a, 256, 128).tobytes() and map_b == _map(b, 128, 512).tobytes()
        assert c_found == c and sizes == [256, 512, 128]
    for i in range(tensor_core.MAPS_PER_LAUNCH):  # the oldest pairs are dropped past the bound
        launch(0x100000 + 0x100 * i, 0xB000, 0xC000)
    assert len(launch) == tensor_core.MAPS_PER_LAUNCH
    launch(0xA000, 0xB000, 0xC000)
    assert made[-2][0] == 0xA000 and fake.launches[-1][5] == _map(0xA000, 256, 128).tobytes()


def test_tensor_maps_through_cupy_when_raw_launches_are_off(monkeypatch):
    """The other path (the simulator here, ``dispatcher_launches()`` on a GPU): CuPy's
    ``RawKernel`` call with the maps of each pair of addresses, passed by value."""
    made, kernels = _fake_rung18(monkeypatch)
    monkeypatch.setattr("cupy.cuda.get_current_stream", lambda: _FakeStream())
    with fastcall.dispatcher_launches():
        launch = r22.geometry(128, 256, 64, "float16")
    assert launch.mode == "cupy RawKernel"
    launch(0xA000, 0xB000, 0xC000)
    launch(0xA100, 0xB000, 0xC000)
    launch(0xA000, 0xB000, 0xC100)
    (kernel,) = kernels.values()
    assert kernel.name == "wgmma_tma" and len(made) == 4
    for (grid, block, args, smem), a, c in zip(
        kernel.calls, [0xA000, 0xA100, 0xA000], [0xC000, 0xC000, 0xC100], strict=True
    ):
        assert (grid, block, smem) == ((1,), (r22.THREADS,), r22.SMEM_BYTES)
        assert args[0].tobytes() == _map(a, 128, 64).tobytes()
        assert args[1].tobytes() == _map(0xB000, 64, 256).tobytes()
        assert args[2] == np.uint64(c) and [int(x) for x in args[3:]] == [128, 256, 64]


def _variant(change, shape, wider_axis, dtype="float32"):
    """A device array of ``shape`` (the first call's x or q), or one that differs from it only
    in ``change``: its shape, its strides (the second half of an array twice as long along
    ``wider_axis``, C-contiguous all the same as a length-1 dimension's stride is free), its
    alignment (one element into its allocation) or its dtype. Returns the device array and the
    host values it holds."""
    rng = np.random.default_rng(0)
    dtype = "float16" if change == "dtype" else dtype
    if change == "shape":
        shape = (*shape[:-2], shape[-2] + 1, shape[-1])
    if change == "stride":
        wider = list(shape)
        wider[wider_axis] *= 2
        host = rng.uniform(-1, 1, wider).astype(dtype)
        half = [slice(None)] * len(shape)
        half[wider_axis] = slice(shape[wider_axis], None)
        return to_device(host)[tuple(half)], host[tuple(half)]
    host = rng.uniform(-1, 1, shape).astype(dtype)
    if change == "alignment":
        flat = to_device(np.concatenate([np.zeros(1, dtype), host.ravel()]))
        return flat[1:].reshape(shape), host
    return to_device(host), host


SIGNATURE_CHANGES = ["shape", "stride", "alignment", "dtype"]


@pytest.mark.parametrize("change", SIGNATURE_CHANGES)
def test_three_kernel_rung_replans_for_another_signature(change):
    """Elementwise rung 1 keeps its three launches and its t and u per plan: a call whose x
    differs from the first call's in shape, strides, alignment or dtype gets a plan (and
    buffers) of its own and the right answer; a call like the first finds the first's plan."""
    problem = get_problem("elementwise")
    plans = ELEMENTWISE1.plans
    plans.clear()  # it keeps WORKSPACE_PLANS, oldest out first: the first call's must stay

    def call(x, host):
        _, a, b = problem.make_inputs(host.shape, host.dtype.name, seed=1)
        da, db = to_device(a), to_device(b)
        out = to_device(np.full(host.shape, np.nan, host.dtype))
        assert ELEMENTWISE1(x, da, db, out) is out
        ref = problem.reference((host, a, b))
        assert np.allclose(to_host(out), ref, rtol=problem.tolerance(host.dtype.name))
        ops = [intake(arr, name) for arr, name in ((x, "x"), (da, "a"), (db, "b"), (out, "out"))]
        return ops[0], plans(*ops)

    first_x, first_plan = call(*_variant(None, (1, 8), 1))
    misses = plans.misses
    x, plan = call(*_variant(change, (1, 8), 1))
    assert x.contiguous and x.key != first_x.key
    assert plan is not first_plan and plans.misses == misses + 1
    assert isinstance(plan, fastcall.Steps) and len(plan.launches) == 3
    _, again = call(*_variant(None, (1, 8), 1))
    assert again is first_plan and plans.misses == misses + 1


@pytest.mark.parametrize("change", SIGNATURE_CHANGES)
def test_attention_rung_replans_for_another_signature(change):
    """Attention rung 1 (three kernels, the scores the plan's, one plan kept): a q that differs
    from the first call's in shape, strides, alignment or dtype gets a plan of its own, which
    replaces the first; a causal call finds the same plan as a plain one (``Masks``: both
    launches built together; the two problems' launchers share the plans)."""
    launchers = {c: get_rung(PROBLEMS[c].name, "naive").launch for c in (False, True)}
    plans = launchers[False].plans
    assert launchers[True].plans is plans
    plans.clear()

    def call(q, host, causal=False):
        shape, dtype = host.shape, host.dtype
        k, v = (np.random.default_rng(i).uniform(-1, 1, shape).astype(dtype) for i in (1, 2))
        out = to_device(np.full(shape, np.nan, dtype))
        dk, dv = to_device(k), to_device(v)
        assert launchers[causal](q, dk, dv, out) is out
        ref = attention_numpy(host, k, v, causal=causal)
        assert np.allclose(to_host(out), ref, rtol=2e-3, atol=2e-3)
        ops = [intake(arr, name) for arr, name in ((q, "q"), (dk, "k"), (dv, "v"), (out, "out"))]
        return ops[0], plans(*ops)

    shape = (1, 1, 4, 16)
    first_q, first_plan = call(*_variant(None, shape, 1))
    misses = plans.misses
    q, plan = call(*_variant(change, shape, 1))
    assert q.contiguous and q.key != first_q.key
    assert plan is not first_plan and plans.misses == misses + 1 and len(plans) == 1
    _, again = call(*_variant(change, shape, 1), causal=True)
    assert again is plan and plans.misses == misses + 1
    call(*_variant(None, shape, 1))  # the first signature again: planned anew
    assert plans.misses == misses + 2 and len(plans) == 1


def test_flat_is_the_same_memory_in_one_dimension(monkeypatch):
    """``fused.problem.flat``: a C-contiguous operand as the 1-D array of its elements (rung 2
    of elementwise casts through it), read by Numba's dispatcher as that on a GPU too."""
    x = intake(to_device(np.arange(6, dtype=np.float16).reshape(2, 3)), "x")
    one = fused_problem.flat(x)
    assert (one.shape, one.strides, one.ptr, one.dtype) == ((6,), (1,), x.ptr, "float16")
    assert one.contiguous and one.obj is x.obj
    assert to_host(fastcall.numba_array(one)).tolist() == list(range(6))
    monkeypatch.setattr(fastcall.device, "simulator", lambda: False)
    cai = fused_problem.flat(x).base.__cuda_array_interface__
    assert (cai["shape"], cai["data"][0], cai["typestr"]) == ((6,), x.ptr, "<f2")


class _AttentionMapDriver:
    """Stands in for libcuda: reads a launch's parameters as attention rung 9's entry point
    takes them, (map K, map V, Q, O, N, H, HKV, scale_log2, causal)."""

    def __init__(self):
        self.launches = []

    def launch(self, function, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
        address = (ctypes.c_void_p * 9).from_address(params)
        maps = [np.frombuffer(ctypes.string_at(address[i], 128), np.uint64)[:7] for i in (0, 1)]
        q, o = (ctypes.c_uint64.from_address(address[i]).value for i in (2, 3))
        ints = [ctypes.c_int32.from_address(address[i]).value for i in (4, 5, 6, 8)]
        scale = ctypes.c_float.from_address(address[7]).value
        grid, block = (gx, gy, gz), (bx, by, bz)
        self.launches.append(
            (grid, block, smem, stream, [m.tolist() for m in maps], q, o, ints, scale)
        )
        return 0


@pytest.mark.parametrize("d", [64, 128])
def test_producer_attention_plan_maps_k_and_v_per_head(monkeypatch, d):
    """Attention rung 9 without a GPU: K and V reach the kernel as tensor maps of B·HKV layers
    of N x d in boxes of 64 keys x 64 columns (a box never crosses a head), made once per pair
    of K and V addresses; Q and O follow as pointers, then N, H, HKV, the scale and the mask;
    the block is one producer warpgroup and the consumers, the grid a block per 64 x consumers
    query rows."""
    import cupy

    from ladder.attention import r09_producer_flash as r09
    from ladder.attention import warp_specialized
    from ladder.gemm import hopper

    def ops(k_ptr=0x20000):
        shapes = [(2, 4, 130, d), (2, 2, 130, d), (2, 2, 130, d), (2, 4, 130, d)]
        ptrs = [0x10000, k_ptr, 0x30000, 0x40000]
        return [
            intake(FakeArray(shape, "<f2", ptr=ptr), name)
            for shape, ptr, name in zip(shapes, ptrs, ("q", "k", "v", "out"), strict=True)
        ]

    ops()  # intake learns to read FakeArray while the simulator is still the backend
    fake, source, maps = _AttentionMapDriver(), _FakeSource(), []

    def tensor_map(pointer, rows, cols, box_rows, box_cols, dtype="float16", layers=None):
        maps.append((pointer, rows, cols, box_rows, box_cols, dtype, layers))
        record = np.zeros(16, np.uint64)
        record[:7] = pointer, rows, cols, box_rows, box_cols, len(dtype), layers
        return record.view(np.dtype((np.void, 128)))

    monkeypatch.setattr(fastcall.device, "simulator", lambda: False)
    monkeypatch.setattr(fastcall, "driver", lambda: fake)
    monkeypatch.setattr(fastcall, "_bindings", lambda: None)  # ctypes: the fake
    monkeypatch.setattr(fastcall._CURRENT, "handle", 7)  # as inside on_stream(7)
    monkeypatch.setattr(r09, "SOURCE", source)
    monkeypatch.setattr(hopper, "tensor_map", tensor_map)
    monkeypatch.setattr(cupy, "asarray", lambda x: x)  # no GPU
    plan = r09.geometry(*ops())
    plan[True](*ops())
    plan[True](*ops())  # the same addresses: the same maps
    plan[True](*ops(k_ptr=0x50000))  # another K: maps made again
    consumers = r09.CONSUMERS[d]
    assert source.names == [f"producer_flash_d{d}"]
    made_for = [0x20000, 0x30000, 0x50000, 0x30000]  # K, V, the second K, V again
    assert maps == [(p, 130, d, 64, 64, "float16", 4) for p in made_for]
    grid, block, smem, stream, made, q, o, ints, scale = fake.launches[0]
    assert grid == (-(-130 // (64 * consumers)), 4, 2) and block == (128 * (consumers + 1), 1, 1)
    assert (smem, stream) == (warp_specialized.shared_bytes(d, consumers, r09.BKV), 7)
    assert made == [[0x20000, 130, d, 64, 64, 7, 4], [0x30000, 130, d, 64, 64, 7, 4]]
    assert (q, o, ints) == (0x10000, 0x40000, [130, 4, 2, 1])
    assert scale == pytest.approx(1.4426950408889634 / np.sqrt(d), rel=1e-6)
    assert fake.launches[2][4][0][0] == 0x50000 and len(fake.launches) == 3
    monkeypatch.setattr(r09, "SOURCE", _FakeSource(regs=64))  # a build below the launch bound
    with pytest.raises(RuntimeError, match="setmaxnreg split needs"):
        r09.geometry(*ops())
