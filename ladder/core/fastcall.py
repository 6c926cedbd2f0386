"""Fast calls: a launcher's host time per call, from hundreds of µs down to a few.

The harness's, not the rungs': a rung declares its launch geometry, and its problem's
registration (``ladder.core.geometry``) builds the launcher from the pieces here. A launch
through Numba's dispatcher costs about 24 µs of host time before the driver sees it, and
turning each argument into a Numba device array (``cuda.as_cuda_array``) several µs more. A
launcher that runs the same kernel on same-shaped arrays again and again needs neither. Three
pieces make the repeated call cheap, and keep the first call (and the simulator) on the ordinary
path:

- ``intake(obj, name)`` reads a device array once into an ``Operand``: its pointer, shape,
  strides in elements, dtype name, read-only flag and stream, plus the caller's object. PyTorch
  tensors, CuPy and Numba arrays are read through their own attributes (a few hundred ns);
  anything else through ``__cuda_array_interface__``, or ``__dlpack__`` through CuPy. It refuses
  what ``ladder.core.device.device_array`` refuses, with the same messages. ``output`` reads or
  allocates a launcher's output the same way.
- ``PlanCache`` keeps what a launcher decides for one signature of its operands (shapes,
  strides, dtypes and pointer alignment up to ``ALIGN_CAP`` bytes: ``Operand.key``): the
  kernel, the grid and the packed arguments. A call whose operands differ in any of these gets
  a plan of its own, never a stale one. A launcher of several kernels keeps them as ``Steps``.
- ``PackedLaunch`` calls the driver's ``cuLaunchKernel`` (through ``cuda.bindings``, or ctypes)
  with a parameter buffer built once; a call only writes the new pointers into it.
  ``NumbaLaunch`` builds one for a Numba ``@cuda.jit`` kernel after its first ordinary launch
  (which compiles it), from the arguments Numba itself packs for that launch, and
  ``cupy_launch`` for a CUDA C++ kernel loaded by CuPy.

Numba offers no public way to the packed arguments or the loaded kernel: every private name of
numba-cuda that ``NumbaLaunch`` reads is in ``ladder.core.numba_internals``, which says why each
is read. Where one is missing or changed, building the raw launch fails and the launch stays on
the dispatcher, the public path; ``NumbaLaunch.mode`` says which path calls take and why (with
the numba-cuda version), and ``numba_internals.missing()`` checks the installed sources.

Every launch goes to ``current_stream()``, the default stream unless ``on_stream(stream)``
names another (per thread), unless its caller names a stream. In the CUDA simulator every launch
goes through the dispatcher (there is no driver); so does everything inside
``dispatcher_launches()``, for comparing the two paths. A launcher whose calls a CUDA graph
cannot hold calls ``refuse_capture`` (``graphs.capture`` records inside ``capturing()``).

The public surface is ``__all__``; the rest is private to this module and its tests.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import sys
import threading
from collections.abc import Callable, Hashable, Iterator, Sequence
from typing import Any

import numpy as np

from ladder.core import device, numba_internals
from ladder.core.dtypes import name_of

__all__ = [
    "ALIGN_CAP",
    "PLANS_PER_CACHE",
    "POINTER",
    "CaptureRefused",
    "NumbaLaunch",
    "Operand",
    "PackedLaunch",
    "PlanCache",
    "Steps",
    "bits_view",
    "c_contiguous",
    "capturing",
    "cupy_launch",
    "current_stream",
    "dispatcher_launches",
    "intake",
    "launch_stream",
    "numba_array",
    "numba_bits",
    "on_stream",
    "output",
    "raw_launches",
    "refuse_capture",
    "stream_handle",
]

ALIGN_CAP = 16  # bytes: the widest access any rung makes (float4, cp.async, TMA's addresses)
PLANS_PER_CACHE = 64  # distinct operand signatures a launcher keeps plans for
POINTER = "pointer"  # in ``cupy_launch``'s argument list: a device pointer given per call
CUDA_ERROR_INVALID_CONTEXT = 201

_RAW = [True]  # False inside ``dispatcher_launches()``


class _Current(threading.local):
    handle = 0  # the stream launches go to when none is named: ``on_stream`` sets it
    capturing = False  # inside ``graphs.capture``'s recording, in this thread


class CaptureRefused(RuntimeError):
    """A launcher that cannot be recorded into a CUDA graph was called during capture."""


def refuse_capture(why: str) -> None:
    """Raise ``CaptureRefused(why)`` if this thread is recording a graph (``graphs.capture``):
    for the launchers whose calls a graph cannot hold (work on the host between launches)."""
    if _CURRENT.capturing:
        raise CaptureRefused(why)


@contextlib.contextmanager
def capturing() -> Iterator[None]:
    """Marks this thread as recording a graph (``graphs.capture`` uses it)."""
    saved = _CURRENT.capturing
    _CURRENT.capturing = True
    try:
        yield
    finally:
        _CURRENT.capturing = saved


_CURRENT = _Current()


class Operand:
    """One device array, read once: what a launcher checks and what a kernel needs."""

    __slots__ = (
        "base",
        "contiguous",
        "dtype",
        "itemsize",
        "key",
        "name",
        "obj",
        "ptr",
        "readonly",
        "shape",
        "stream",
        "strides",
    )

    def __init__(
        self,
        name: str,
        obj: Any,
        base: Any,
        ptr: int,
        shape: tuple[int, ...],
        strides: tuple[int, ...],
        dtype: str,
        itemsize: int,
        readonly: bool = False,
        stream: int | None = None,
        contiguous: bool | None = None,
    ) -> None:
        self.name = name  # the argument's name, for error messages
        self.obj = obj  # what the caller passed (a launcher returns it as the output)
        self.base = base  # what owns the memory: obj, or CuPy's view of a DLPack array
        self.ptr = ptr  # device address of element 0
        self.shape = shape
        self.strides = strides  # in elements
        self.dtype = dtype  # "float32", "float16", "bfloat16", ...
        self.itemsize = itemsize
        self.readonly = readonly
        self.stream = stream  # the producer's stream (__cuda_array_interface__), not waited on
        # C-contiguous (row-major); given by a caller that already knows
        self.contiguous = c_contiguous(shape, strides) if contiguous is None else contiguous
        low = ptr & (ALIGN_CAP - 1)
        # what a plan may depend on: shape, strides, dtype and alignment (up to ALIGN_CAP)
        self.key = (shape, strides, dtype, low & -low if low else ALIGN_CAP)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape)) if self.shape else 1

    @property
    def align(self) -> int:
        """The largest power of two up to ALIGN_CAP that divides the pointer."""
        return self.key[3]

    def __repr__(self) -> str:
        return (
            f"Operand({self.name}: {self.dtype}{list(self.shape)}, strides {self.strides}, "
            f"ptr 0x{self.ptr:x}, align {self.align})"
        )


def c_contiguous(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    """NumPy's rule, in elements: dimensions of length 1 may have any stride; empty is."""
    if len(shape) == 2:  # the common case, written out: this runs on every call
        rows, cols = shape
        sr, sc = strides
        return ((cols == 1 or sc == 1) and (rows == 1 or sr == cols)) or rows * cols == 0
    if 0 in shape:
        return True
    expected = 1
    for dim, stride in zip(reversed(shape), reversed(strides), strict=True):
        if dim != 1 and stride != expected:
            return False
        expected *= dim
    return True


def _c_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    if len(shape) == 2:
        return (shape[1], 1)
    strides, step = [], 1
    for dim in reversed(shape):
        strides.append(step)
        step *= max(dim, 1)
    return tuple(reversed(strides))


_DTYPES: dict[Any, tuple[str, int]] = {}


def _dtype_info(dtype: Any) -> tuple[str, int]:
    """(name, itemsize) of a NumPy, ml_dtypes or PyTorch dtype."""
    found = _DTYPES.get(dtype)
    if found is None:
        found = _DTYPES[dtype] = (name_of(dtype), int(dtype.itemsize))
    return found


_SIGNATURES: dict[tuple[Any, ...], tuple[str, int, tuple[int, ...], bool]] = {}


def _operand(
    name: str,
    obj: Any,
    base: Any,
    ptr: int,
    shape: tuple[int, ...],
    strides: tuple[int, ...] | None,
    dtype: Any,
    readonly: bool = False,
    stream: int | None = None,
    byte_strides: bool = True,
) -> Operand:
    # what depends only on the signature is worked out once per signature: a launcher's next
    # call with same-shaped arrays finds it here
    found = _SIGNATURES.get((dtype, shape, strides, byte_strides))
    if found is None:
        found = _signature(name, shape, strides, dtype, byte_strides)
    dname, itemsize, elements, contiguous = found
    return Operand(
        name, obj, base, ptr, shape, elements, dname, itemsize, readonly, stream, contiguous
    )


def _signature(
    name: str,
    shape: tuple[int, ...],
    strides: tuple[int, ...] | None,
    dtype: Any,
    byte_strides: bool,
) -> tuple[str, int, tuple[int, ...], bool]:
    dname, itemsize = _dtype_info(dtype)
    if strides is None:
        elements = _c_strides(shape)
    elif byte_strides and itemsize > 1:
        if any(s % itemsize for s in strides):
            raise ValueError(
                f"{name}: strides {tuple(strides)} (bytes) are not whole {dname} elements"
            )
        elements = tuple([s // itemsize for s in strides])
    else:
        elements = tuple(strides)
    found = (dname, itemsize, elements, c_contiguous(shape, elements))
    if len(_SIGNATURES) >= 4096:
        _SIGNATURES.clear()
    _SIGNATURES[(dtype, shape, strides, byte_strides)] = found
    return found


def _host_error(name: str, what: str, hint: str) -> TypeError:
    return TypeError(f"{name} is a host array ({what}); copy it to the GPU first, e.g. {hint}")


def _refuse(obj: Any, name: str) -> Operand:
    if isinstance(obj, np.ndarray):
        raise _host_error(name, "numpy.ndarray", f"numba.cuda.to_device({name})")
    raise TypeError(
        f"{name} must be a device array (Numba, CuPy or PyTorch CUDA), got {type(obj).__name__}"
    )


def _read_simulated(arr: Any, name: str) -> Operand:
    host = numba_internals.host_array(arr)  # the simulator's device array wraps a NumPy array
    ptr = host.__array_interface__["data"][0]
    return _operand(name, arr, arr, ptr, tuple(host.shape), host.strides, host.dtype)


def _read_numba(arr: Any, name: str) -> Operand:
    ptr = arr.device_ctypes_pointer.value or 0
    return _operand(name, arr, arr, ptr, tuple(arr.shape), arr.strides, arr.dtype)


def _read_cupy(arr: Any, name: str) -> Operand:
    return _operand(name, arr, arr, arr.data.ptr, arr.shape, arr.strides, arr.dtype)


def _torch_reader(torch: Any) -> Callable[[Any, str], Operand]:
    strided = torch.strided

    def read(t: Any, name: str) -> Operand:
        if not t.is_cuda:
            raise _host_error(name, f"torch.Tensor on {t.device}", f"{name}.cuda()")
        if t.requires_grad:
            raise TypeError(f"{name} requires grad; pass {name}.detach()")
        if t.layout is not strided:
            raise TypeError(f"{name} must be a dense (strided) tensor, got {t.layout}")
        return _operand(
            name, t, t, t.data_ptr(), tuple(t.shape), t.stride(), t.dtype, byte_strides=False
        )

    return read


@functools.cache
def _typestr_dtype(typestr: str) -> np.dtype:
    return np.dtype(typestr)


def _read_interface(obj: Any, name: str) -> Operand:
    """Any ``__cuda_array_interface__`` object; else ``__dlpack__`` through CuPy; else refuse."""
    cai = getattr(obj, "__cuda_array_interface__", None)
    if cai is None:
        return _read_dlpack(obj, name)
    if cai.get("mask") is not None:
        raise TypeError(f"{name}: masked arrays are not supported")
    dtype = _typestr_dtype(cai["typestr"])
    if dtype.kind == "V":  # ml_dtypes' bfloat16 and others NumPy cannot name
        dtype = getattr(obj, "dtype", dtype)
    ptr, readonly = cai["data"]
    strides = cai.get("strides")
    return _operand(
        name,
        obj,
        obj,
        ptr or 0,
        tuple(cai["shape"]),
        None if strides is None else tuple(strides),
        dtype,
        bool(readonly),
        cai.get("stream"),
    )


def _read_dlpack(obj: Any, name: str) -> Operand:
    if device.simulator() or not hasattr(obj, "__dlpack__") or isinstance(obj, np.ndarray):
        return _refuse(obj, name)
    try:
        import cupy

        view = cupy.from_dlpack(obj)
    except (ImportError, TypeError, ValueError, RuntimeError, BufferError) as err:
        raise TypeError(
            f"{name}: could not take this __dlpack__ array onto the GPU ({err}); pass a "
            "Numba, CuPy or PyTorch CUDA array"
        ) from err
    found = _read_cupy(view, name)
    found.obj = obj
    return found


def _same(op: Operand, name: str) -> Operand:
    return op


def _reader_for(cls: type) -> Callable[[Any, str], Operand]:
    """How to read instances of ``cls``: chosen once per type."""
    if issubclass(cls, Operand):  # a view (``reshaped``): already read
        return _same
    if issubclass(cls, np.ndarray):
        return _refuse
    if device.simulator():
        from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

        if issubclass(cls, FakeCUDAArray):
            return _read_simulated
    else:
        from numba.cuda.cudadrv.devicearray import DeviceNDArray

        if issubclass(cls, DeviceNDArray):
            return _read_numba
    torch = sys.modules.get("torch")
    if torch is not None and issubclass(cls, torch.Tensor):
        return _torch_reader(torch)
    cupy = sys.modules.get("cupy")
    if cupy is not None and issubclass(cls, cupy.ndarray):
        return _read_cupy
    return _read_interface


_READERS: dict[type, Callable[[Any, str], Operand]] = {}


def intake(obj: Any, name: str) -> Operand:
    """``obj`` as an ``Operand``, without copying, or a clear error naming ``name``.

    Accepts what ``device.device_array`` accepts: anything with ``__cuda_array_interface__``
    (Numba, CuPy, PyTorch CUDA tensors) or ``__dlpack__`` (through CuPy), and an ``Operand``
    (returned as it is, so a rung may hand its operands to a lower rung). A host array is
    refused: silently copying it would hide a transfer from the timings. The producer's stream
    is recorded, not waited on (as ``device_array`` does, ``sync=False``). In the simulator any
    ``__cuda_array_interface__`` object is read too; only a launch needs a simulator array.
    """
    cls = type(obj)
    if cls is Operand:
        return obj
    reader = _READERS.get(cls)
    if reader is None:
        reader = _READERS[cls] = _reader_for(cls)
    return reader(obj, name)


def output(
    out: Any,
    shape: tuple[int, ...],
    dtype: str,
    name: str = "out",
    layout: str = "row-major",
    allocate: Callable[[tuple[int, ...], str], Any] | None = None,
    shape_text: str | None = None,
) -> Operand:
    """A launcher's output as an ``Operand``: ``out`` read and checked (its shape, its dtype,
    C-contiguous), or, when ``out`` is None, a new array from ``allocate(shape, dtype)`` (by
    default Numba's ``device_array``). ``layout`` and ``shape_text`` word the errors (``out
    must be C-contiguous (NCHW)``, ``out must have q's shape ...``); every problem's launchers
    check their output through this."""
    if out is None:
        if allocate is None:
            from numba import cuda

            from ladder.core.dtypes import resolve

            return intake(cuda.device_array(shape, dtype=resolve(dtype)), name)
        return intake(allocate(shape, dtype), name)
    found = intake(out, name)
    if found.shape != shape:
        raise ValueError(f"{name} must have {shape_text or 'shape'} {shape}, got {found.shape}")
    if found.dtype != dtype:
        raise TypeError(f"{name} must be {dtype}, got {found.dtype}")
    if not found.contiguous:
        raise ValueError(f"{name} must be C-contiguous" + (f" ({layout})" if layout else ""))
    return found


def numba_array(op: Operand) -> Any:
    """A Numba device array over ``op``'s memory (the caller's own when it is one)."""
    base = op.base
    if device.simulator():
        from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

        if isinstance(base, FakeCUDAArray):
            return base
        return _refuse(base, op.name)
    from numba import cuda
    from numba.cuda.cudadrv.devicearray import DeviceNDArray

    if isinstance(base, DeviceNDArray):
        return base
    return cuda.as_cuda_array(base, sync=False)


def numba_bits(op: Operand) -> Any:
    """A Numba uint16 array over a C-contiguous 2-byte operand's memory: its elements as bit
    patterns. Numba has no bfloat16 type, so a kernel that moves bfloat16 values (a copy) or
    converts them itself (``moe.common.bf16_to_float32``) takes them so; float16 is viewed the
    same way where only the bits matter."""
    if op.itemsize != 2 or not op.contiguous:
        raise TypeError(f"{op.name}: a bit view needs C-contiguous 2-byte elements, got {op!r}")
    from numba import cuda

    base = op.base
    if device.simulator() or isinstance(base, cuda.devicearray.DeviceNDArray):
        return numba_array(op).view(np.uint16)
    shape = op.shape
    interface = {"shape": shape, "strides": None, "typestr": "<u2", "data": (op.ptr, False),
                 "version": 3}  # fmt: skip
    return cuda.from_cuda_array_interface(interface, owner=op.obj, sync=False)


def stream_handle(stream: Any) -> int:
    """The CUstream handle of ``stream``: 0 (or None), an int, or a Numba, CuPy, PyTorch or
    cuda.core stream (anything with ``__cuda_stream__``)."""
    if not stream:
        return 0
    if isinstance(stream, int):
        return stream
    protocol = getattr(stream, "__cuda_stream__", None)
    if protocol is not None:
        return int(protocol()[1])
    for attr in ("cuda_stream", "ptr", "handle"):  # PyTorch, CuPy, Numba
        value = getattr(stream, attr, None)
        if value is not None:
            return int(getattr(value, "value", value) or 0)
    if type(stream).__module__.startswith("numba.cuda.simulator"):
        return 0  # the simulator's streams have no handle; it runs every launch in order
    raise TypeError(f"stream must be a CUDA stream or its handle, got {type(stream).__name__}")


def current_stream() -> int:
    """The stream (its CUstream handle) every launch built here goes to when its caller names
    none: 0, the default stream, unless ``on_stream`` says otherwise in this thread."""
    return _CURRENT.handle


@contextlib.contextmanager
def on_stream(stream: Any) -> Iterator[int]:
    """Inside, every rung launches on ``stream`` (a Numba, CuPy, PyTorch or cuda.core stream,
    or a handle): what graph capture needs (``ladder.core.graphs``), and a way to run a rung on
    a stream of one's own. CuPy's current stream is set to it too, so that the copies and fills
    some launchers make through CuPy stay in order with their kernels. Per thread; yields the
    handle."""
    saved = _CURRENT.handle
    _CURRENT.handle = handle = stream_handle(stream)
    try:
        cupy = sys.modules.get("cupy")
        if cupy is None or device.simulator():
            yield handle
        else:
            with cupy.cuda.ExternalStream(handle):
                yield handle
    finally:
        _CURRENT.handle = saved


def launch_stream(stream: Any = None) -> int:
    """The handle a launch goes to: ``stream``'s, or the current stream when it is None or 0."""
    return stream_handle(stream) if stream else _CURRENT.handle


@contextlib.contextmanager
def dispatcher_launches() -> Iterator[None]:
    """Inside, launches built here go through Numba's dispatcher or CuPy's ``RawKernel``, not
    ``cuLaunchKernel`` (plans are keyed by this choice too): the old path, for comparisons."""
    saved = _RAW[0]
    _RAW[0] = False
    try:
        yield
    finally:
        _RAW[0] = saved


def raw_launches() -> bool:
    """True when launches built now may call ``cuLaunchKernel`` directly."""
    return _RAW[0] and not device.simulator()


_MISSING = object()  # a plan may be None (nothing to launch)


class PlanCache:
    """Plans of one launcher, keyed by its operands' signatures.

    ``cache(*args)`` returns ``build(*args)`` for the first call with a signature and the same
    plan afterwards. An ``Operand`` contributes its ``key`` (shape, strides, dtype, alignment);
    any other argument must be hashable and contributes itself. Whether raw launches are on is
    part of the key. The oldest plan is dropped past ``size`` signatures.
    """

    def __init__(self, build: Callable[..., Any], size: int = PLANS_PER_CACHE) -> None:
        self.build = build
        self.size = size
        self.misses = 0
        self._plans: dict[Hashable, Any] = {}

    def __call__(self, *args: Any) -> Any:
        key = (_RAW[0], *[a.key if type(a) is Operand else a for a in args])
        plan = self._plans.get(key, _MISSING)
        if plan is _MISSING:
            plan = self._add(key, args)
        return plan

    def _add(self, key: Hashable, args: tuple[Any, ...]) -> Any:
        if len(self._plans) >= self.size:  # before building: the old plan's memory goes first
            del self._plans[next(iter(self._plans))]
        plan = self.build(*args)
        self.misses += 1
        self._plans[key] = plan
        return plan

    def __len__(self) -> int:
        return len(self._plans)

    def clear(self) -> None:
        self._plans.clear()


class Steps:
    """A plan of several launches (a launcher that runs more than one kernel): ``steps(*args)``
    calls ``run(*args)``, which makes them in order; ``launches`` lists them, so that ``mode``
    can say which path each takes (``NumbaLaunch.mode``), for reports."""

    __slots__ = ("launches", "run")

    def __init__(self, run: Callable[..., None], *launches: Any) -> None:
        self.run = run
        self.launches = launches

    def __call__(self, *args: Any) -> None:
        self.run(*args)

    @property
    def mode(self) -> str:
        modes = dict.fromkeys(getattr(x, "mode", type(x).__name__) for x in self.launches)
        ran = [mode for mode in modes if mode != "new"]  # "new": not launched yet
        return ", ".join(ran or modes)


class _Driver:
    """The few libcuda entry points a raw launch needs, through ctypes."""

    def __init__(self) -> None:
        names = ["nvcuda.dll"] if sys.platform == "win32" else ["libcuda.so.1", "libcuda.so"]
        for name in names:
            try:
                lib = ctypes.CDLL(name)
                break
            except OSError:
                continue
        else:
            raise OSError("the CUDA driver (libcuda) could not be loaded")
        self.launch = lib.cuLaunchKernel
        self.launch.restype = ctypes.c_int
        self.launch.argtypes = [
            ctypes.c_void_p,
            *[ctypes.c_uint] * 7,
            ctypes.c_void_p,
            ctypes.c_void_p,
            ctypes.c_void_p,
        ]
        self.kernel_function = lib.cuKernelGetFunction
        self.kernel_function.restype = ctypes.c_int
        self.kernel_function.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p]
        self.error_name = lib.cuGetErrorName
        self.error_name.restype = ctypes.c_int
        self.error_name.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]

    def describe(self, status: int) -> str:
        text = ctypes.c_char_p()
        if self.error_name(status, ctypes.byref(text)) != 0 or text.value is None:
            return f"CUresult {status}"
        return f"{text.value.decode()} ({status})"


@functools.cache
def driver() -> _Driver:
    return _Driver()


def _dim3(dims: int | Sequence[int]) -> tuple[int, int, int]:
    found = [int(dims)] if isinstance(dims, int | np.integer) else [int(d) for d in dims]
    if not 1 <= len(found) <= 3:
        raise ValueError(f"launch dimensions must be 1 to 3 integers, got {dims!r}")
    return (*found, 1, 1)[:3]  # type: ignore[return-value]


@functools.cache
def _bindings() -> Any:
    """``cuda.bindings.driver`` (numba-cuda's own driver layer), or None without it."""
    try:
        from cuda.bindings import driver as cu
    except ImportError:
        return None
    return cu


VIAS = ("bindings", "ctypes")  # the two ways a PackedLaunch calls cuLaunchKernel


class PackedLaunch:
    """``cuLaunchKernel`` of one function with a parameter buffer built once.

    ``values`` are the kernel's parameters as ctypes scalars, in order (each kept, its address
    passed in ``kernelParams``); ``pointer_slots`` the indices of those a call supplies:
    ``launch(*pointers, stream=None)`` writes them and launches on ``stream`` (a handle; None:
    ``current_stream()``). ``via`` is how the driver is called: "bindings" (``cuda.bindings``'
    Cython wrapper, the default where it is installed) or "ctypes". A lock keeps two threads
    from interleaving the write and the launch (both let go of the GIL during the call).
    ``owner`` is kept alive with the launch: whatever holds the module ``function`` lives in.
    """

    def __init__(
        self,
        function: int,
        grid: int | Sequence[int],
        block: int | Sequence[int],
        shared_mem: int,
        values: Sequence[Any],
        pointer_slots: Sequence[int],
        owner: Any = None,
        via: str | None = None,
    ) -> None:
        self.owner = owner
        self.function = int(function)
        self.grid, self.block, self.shared_mem = _dim3(grid), _dim3(block), int(shared_mem)
        self._values = list(values)
        self._slots = [self._values[i] for i in pointer_slots]
        addresses = [ctypes.addressof(v) for v in self._values]
        self._params = (ctypes.c_void_p * max(len(addresses), 1))(*addresses)
        self._params_address = ctypes.addressof(self._params) if addresses else 0
        self._driver = driver()
        self._lock = threading.Lock()
        cu = _bindings()
        if via is None:
            via = "ctypes" if cu is None else "bindings"
        if via not in VIAS or (via == "bindings" and cu is None):
            raise ValueError(f"via must be one of {VIAS} (bindings needs cuda.bindings): {via!r}")
        self.via = via
        if via == "bindings":
            self._launch = cu.cuLaunchKernel
            self._success = cu.CUresult.CUDA_SUCCESS
            self._streams: dict[int, Any] = {}
            self._stream_type = cu.CUstream
            head = (cu.CUfunction(self.function), *self.grid, *self.block, self.shared_mem)
        else:
            self._launch = self._driver.launch
            self._success = 0
            head = (self.function, *self.grid, *self.block, self.shared_mem)
        self._head = head

    def _stream(self, handle: int) -> Any:
        if self.via == "ctypes":
            return handle
        found = self._streams.get(handle)
        if found is None:
            if len(self._streams) > 64:
                self._streams.clear()
            found = self._streams[handle] = self._stream_type(handle)
        return found

    def _status(self, result: Any) -> int:
        return int(result[0]) if self.via == "bindings" else int(result)

    def __call__(self, *pointers: int, stream: int | None = None) -> None:
        if len(pointers) != len(self._slots):
            raise TypeError(f"this launch takes {len(self._slots)} pointers, got {len(pointers)}")
        on = self._stream(_CURRENT.handle if stream is None else stream)
        with self._lock:
            for slot, value in zip(self._slots, pointers):  # noqa: B905 (lengths checked)
                slot.value = value
            result = self._launch(*self._head, on, self._params_address, 0)
            if self.via == "bindings":
                if result[0] == self._success:
                    return
            elif not result:
                return
            status = self._status(result)
            if status == CUDA_ERROR_INVALID_CONTEXT:  # a thread that never made it current
                from numba import cuda

                cuda.current_context()
                status = self._status(self._launch(*self._head, on, self._params_address, 0))
        if status:
            raise RuntimeError(
                f"cuLaunchKernel failed: {self._driver.describe(status)} (grid {self.grid}, "
                f"block {self.block}, {self.shared_mem} bytes of dynamic shared memory)"
            )


def _as_ctypes(value: Any) -> Any:
    """A kernel argument as cuda.core's ``launch`` passes it: a Python int (bool too) as an
    8-byte integer, a float as a double, NumPy and ctypes scalars as their own type."""
    if isinstance(value, int):
        return ctypes.c_int64(value) if value < 2**63 else ctypes.c_uint64(value)
    if isinstance(value, float):
        return ctypes.c_double(value)
    if isinstance(value, np.generic) and value.dtype.kind in "iuf" and value.itemsize != 2:
        return np.ctypeslib.as_ctypes_type(value.dtype)(value.item())
    if isinstance(value, ctypes._SimpleCData):
        return type(value)(value.value)
    raise TypeError(f"no raw form for a kernel argument of type {type(value).__name__}")


def _function_handle(handle: Any) -> int:
    """A CUfunction for the current context from cuda.core's kernel handle (a CUkernel)."""
    if type(handle).__name__ == "CUfunction":
        return int(handle)
    if type(handle).__name__ != "CUkernel":
        raise TypeError(f"unexpected kernel handle {type(handle).__name__}")
    found = ctypes.c_void_p()
    status = driver().kernel_function(ctypes.byref(found), int(handle))
    if status or not found.value:
        raise RuntimeError(f"cuKernelGetFunction failed: {driver().describe(status)}")
    return found.value


class NumbaLaunch:
    """A Numba ``@cuda.jit`` kernel at one grid and block, for one signature of its operands.

    ``launch(*operands, stream=None)`` takes ``Operand``s only; ``scalars``, the kernel's
    arguments after them (NumPy or Python scalars), are fixed when the launch is built, as a
    plan's grid is. The first call goes through the dispatcher, which compiles the kernel
    for these types and loads it; then, on a GPU, the launch is rebuilt as a ``PackedLaunch``
    from the arguments Numba packs for the same arrays, and later calls cost a ctypes call.
    ``mode`` says which path calls take: "new" (before the first), "raw", or "dispatcher: why".
    Operands of another signature than the first call's (which a ``PlanCache`` never hands
    over) go through the dispatcher: the packed shapes and strides would be theirs no more.
    """

    def __init__(
        self,
        kernel: Any,
        grid: int | Sequence[int],
        block: int | Sequence[int],
        shared_mem: int = 0,
        scalars: Sequence[Any] = (),
    ) -> None:
        self.kernel = kernel
        self.grid, self.block, self.shared_mem = _dim3(grid), _dim3(block), int(shared_mem)
        self.scalars = tuple(scalars)
        self.mode = "new"
        self._raw: PackedLaunch | None = None
        self._keys: list[tuple[Any, ...]] = []  # the operands' signature the raw launch packs
        # the simulator's kernel[...] configures the kernel object itself: configure each call
        self._configured = (
            None if device.simulator() else kernel[self.grid, self.block, 0, self.shared_mem]
        )

    def __call__(self, *operands: Operand, stream: int | None = None) -> None:
        raw = self._raw
        if raw is not None and [op.key for op in operands] == self._keys:
            raw(*[op.ptr for op in operands], stream=stream)
            return
        if stream is None:
            stream = _CURRENT.handle
        arrays = [numba_array(op) for op in operands]
        configured = self._configured
        if stream or configured is None:
            from numba import cuda

            handle = cuda.external_stream(stream) if stream else 0
            configured = self.kernel[self.grid, self.block, handle, self.shared_mem]
        configured(*arrays, *self.scalars)
        if self.mode == "new":
            self._raw, self.mode = self._build(operands, arrays)

    def _build(self, operands: Sequence[Operand], arrays: list[Any]) -> tuple[Any, str]:
        if device.simulator():
            return None, "dispatcher: the CUDA simulator"
        if not raw_launches():
            return None, "dispatcher: dispatcher_launches()"
        if not all(isinstance(op, Operand) for op in operands):
            return None, "dispatcher: an argument is not an Operand"
        try:
            self._keys = [op.key for op in operands]
            return self._pack(operands, arrays), "raw"
        except (AttributeError, KeyError, TypeError, ValueError, RuntimeError, OSError) as err:
            return None, f"dispatcher: {type(err).__name__}: {err}"

    def _pack(self, operands: Sequence[Operand], arrays: list[Any]) -> PackedLaunch:
        packed = numba_internals.pack(self.kernel, arrays, self.scalars, list(operands))
        function = _function_handle(packed.handle)
        values = [_as_ctypes(v) for v in packed.values]
        grid, block, smem = self.grid, self.block, self.shared_mem
        return PackedLaunch(
            function, grid, block, smem, values, packed.pointer_slots, packed.kernel
        )


_SCALAR_TYPES = {
    np.dtype(np.int32): ctypes.c_int32,
    np.dtype(np.uint32): ctypes.c_uint32,
    np.dtype(np.int64): ctypes.c_int64,
    np.dtype(np.uint64): ctypes.c_uint64,
    np.dtype(np.float32): ctypes.c_float,
    np.dtype(np.float64): ctypes.c_double,
}


def cupy_launch(
    kernel: Any,
    grid: int | Sequence[int],
    block: int | Sequence[int],
    shared_mem: int,
    args: Sequence[Any],
) -> Callable[..., None]:
    """A launch of a CuPy ``RawKernel`` with fixed grid, block and scalars: ``launch(*pointers,
    stream=None)``. ``args`` lists the kernel's parameters in order, ``POINTER`` for each device
    pointer given per call and NumPy scalars (int32, uint32, int64, uint64, float32, float64)
    for the rest. A ``PackedLaunch`` of the kernel's CUfunction when raw launches are on;
    otherwise the ``RawKernel`` call itself."""
    slots = [i for i, a in enumerate(args) if a is POINTER]
    if raw_launches():
        values = [
            ctypes.c_uint64(0) if a is POINTER else _SCALAR_TYPES[np.asarray(a).dtype](a.item())
            for a in args
        ]
        return PackedLaunch(kernel.kernel.ptr, grid, block, shared_mem, values, slots, kernel)
    grid3, block3 = _dim3(grid), _dim3(block)
    template = list(args)

    def launch(*pointers: int, stream: int | None = None) -> None:
        import cupy

        if stream is None:
            stream = _CURRENT.handle
        filled = list(template)
        for i, p in zip(slots, pointers, strict=True):
            filled[i] = np.uint64(p)
        current = cupy.cuda.get_current_stream().ptr == stream
        with contextlib.nullcontext() if current else cupy.cuda.ExternalStream(stream):
            kernel(grid3, block3, tuple(filled), shared_mem=shared_mem)

    return launch


def bits_view(op: Operand, shape: tuple[int, ...] | None = None) -> Any:
    """A CuPy view of a contiguous device array's elements as unsigned integers of their width
    (uint16 for float16 and bfloat16, which CuPy lacks; uint8 for the 8-bit floats), in
    ``shape`` (its own by default; a column-major matrix is its transpose, row-major): for the
    tensor-core rungs' zero-padded workspaces, which only copy bits (all-zero bits are +0.0 in
    every one of these types)."""
    import cupy

    shape = op.shape if shape is None else shape
    memory = cupy.cuda.UnownedMemory(op.ptr, int(np.prod(shape)) * op.itemsize, owner=op.base)
    return cupy.ndarray(shape, f"u{op.itemsize}", cupy.cuda.MemoryPointer(memory, 0))
