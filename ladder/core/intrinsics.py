"""Device-side helpers that Numba does not offer, or not in its CUDA simulator.

Vector accesses. Numba compiles ``A[i, j]`` to one 4-byte ``ld.global.f32``; it has no
``float4``. A kernel that moves data with four times fewer, four times wider instructions needs
an LLVM vector access, which an ``@intrinsic`` can emit: ``load4`` reads ``arr[i, j:j+4]`` as
one vector (``ld.global.v4.f32`` or ``ld.shared.v4.f32`` in the PTX for float32, 16 bytes;
``ld.global.v4.u16`` for float16, 8 bytes), ``load4_f32`` the same with each value widened to
float32 in registers, ``load4_1d`` reads ``arr[j:j+4]`` of a 1-D array and ``store4`` writes four
values the same way (converted to the array's dtype).

The caller promises what the hardware needs for such an access: ``arr`` is a C-contiguous
float32 or float16 array whose element ``[i, j]`` (``[j]``) sits on a boundary of 4 elements
(the base pointer is so aligned, the row length is a multiple of 4, and ``j`` is a multiple of
4), and ``j + 3`` is inside the row. Launchers check this with ``vector_aligned`` and fall back
to scalar accesses when it does not hold. Indices are not wrapped (a negative index is
undefined).

Shared arrays read with ``load4`` must be declared ``alignment=VECTOR_ALIGN``: Numba aligns a
float32 shared array to 4 bytes by default. The simulator refuses any ``alignment`` argument,
so there ``VECTOR_ALIGN`` is None (and alignment does not matter).

Warp shuffles. ``shfl_xor_sync`` is ``cuda.shfl_xor_sync`` and ``syncwarp`` a warp barrier;
``FULL_MASK`` names all 32 lanes. The simulator has neither shuffles nor warp barriers, and it
runs each thread of a block as a Python thread, so every barrier is expensive there. Its
shuffle swaps values through one of two shared slots per thread, alternating: a thread writes
its value, waits at one block barrier and reads its partner's; the next shuffle writes the
other slot, which nobody can still be reading, since every thread has passed the barrier in
between. Its warp barrier is a block barrier. Both are right only where every thread of the
block reaches them, the same number of times.

In the CUDA simulator every name here is a plain Python function with the same meaning.
"""

from __future__ import annotations

import threading
from typing import Any

from numba import cuda, float32

from ladder.core import device
from ladder.core.fastcall import Operand

VEC = 4  # elements per vector access
VECTOR_ALIGN = None if device.simulator() else 16
FULL_MASK = 0xFFFFFFFF  # all 32 lanes take part in every shuffle


def vector_aligned(*arrays: Any) -> bool:
    """True when 4-element vector accesses are allowed: every row length a multiple of 4 and
    every array starting on a boundary of 4 elements (16 bytes in float32, 8 in float16).

    Takes ``Operand`` records (``ladder.core.fastcall``) or device arrays (whose pointer counts
    as 0 in the simulator)."""
    for arr in arrays:
        if arr.shape[arr.ndim - 1] % VEC != 0:  # (the simulator's shapes take no [-1])
            return False
        if isinstance(arr, Operand):
            pointer, itemsize = arr.ptr, arr.itemsize
        else:
            pointer = 0 if device.simulator() else arr.__cuda_array_interface__["data"][0]
            itemsize = arr.dtype.itemsize
        if pointer % (VEC * itemsize) != 0:
            return False
    return True


if device.simulator():

    def load4(arr: Any, i: Any, j: Any) -> tuple[Any, Any, Any, Any]:
        return arr[i, j], arr[i, j + 1], arr[i, j + 2], arr[i, j + 3]

    def load4_1d(arr: Any, j: Any) -> tuple[Any, Any, Any, Any]:
        return arr[j], arr[j + 1], arr[j + 2], arr[j + 3]

    def load4_f32(arr: Any, i: Any, j: Any) -> tuple[Any, Any, Any, Any]:
        return (
            float32(arr[i, j]),
            float32(arr[i, j + 1]),
            float32(arr[i, j + 2]),
            float32(arr[i, j + 3]),
        )

    def store4(arr: Any, i: Any, j: Any, x0: Any, x1: Any, x2: Any, x3: Any) -> None:
        arr[i, j] = x0
        arr[i, j + 1] = x1
        arr[i, j + 2] = x2
        arr[i, j + 3] = x3

    _slots: tuple[dict[int, Any], dict[int, Any]] = ({}, {})  # one block at a time runs
    _turn = threading.local()

    def shfl_xor_sync(mask: int, value: Any, lane_mask: int) -> Any:
        """The value of the thread whose index differs by ``lane_mask`` (one block barrier)."""
        thread = threading.current_thread()
        turn = getattr(_turn, "parity", 0)
        _turn.parity = 1 - turn
        _slots[turn][thread.thread_id] = value
        thread.syncthreads()
        return _slots[turn][thread.thread_id ^ lane_mask]

    def syncwarp() -> Any:
        """A block barrier: stronger than a warp barrier, and all the simulator has."""
        threading.current_thread().syncthreads()

else:
    from llvmlite import ir
    from numba.cuda import cgutils, types
    from numba.cuda.extending import intrinsic

    shfl_xor_sync = cuda.shfl_xor_sync

    @cuda.jit(device=True, inline=True)
    def syncwarp() -> None:
        cuda.syncwarp()

    def _fits(arr: Any, indices: tuple[Any, ...]) -> bool:
        return (
            isinstance(arr, types.Array)
            and arr.dtype in (types.float32, types.float16)
            and arr.ndim == len(indices)
            and all(isinstance(i, types.Integer) for i in indices)
        )

    def _vector_pointer(context, builder, aryty, ary, indices, index_types):
        """A pointer to the 4-element vector of ``aryty.dtype`` at ``ary[indices]``."""
        array = context.make_array(aryty)(context, builder, ary)
        inds = [
            context.cast(builder, ind, ity, types.intp)
            for ind, ity in zip(indices, index_types, strict=True)
        ]
        ptr = cgutils.get_item_pointer(context, builder, aryty, array, inds, wraparound=False)
        vec = ir.VectorType(context.get_value_type(aryty.dtype), VEC)
        return builder.bitcast(ptr, vec.as_pointer(ptr.type.addrspace))

    def _load(arr: Any, index_types: tuple[Any, ...], widen: bool = False):
        """One vector load of ``arr`` at the indices, as a tuple of its dtype (``widen``: each
        value converted to float32)."""
        value = types.float32 if widen else arr.dtype
        sig = types.UniTuple(value, VEC)(arr, *index_types)
        align = VEC * arr.dtype.bitwidth // 8  # 16 bytes for float32, 8 for float16

        def codegen(context, builder, signature, args):
            ptr = _vector_pointer(context, builder, arr, args[0], args[1:], index_types)
            vec = builder.load(ptr, align=align)
            lanes = [
                builder.extract_element(vec, ir.Constant(ir.IntType(32), k)) for k in range(VEC)
            ]
            if widen:
                lanes = [context.cast(builder, x, arr.dtype, types.float32) for x in lanes]
            return context.make_tuple(builder, signature.return_type, lanes)

        return sig, codegen

    @intrinsic
    def load4(typingctx, arr, i, j):
        """``arr[i, j:j+4]`` as one vector load (2-D float32 or float16)."""
        return _load(arr, (i, j)) if _fits(arr, (i, j)) else None

    @intrinsic
    def load4_f32(typingctx, arr, i, j):
        """``arr[i, j:j+4]`` as one vector load, each value widened to float32 (2-D float32 or
        float16: softmax's rows in registers)."""
        return _load(arr, (i, j), widen=True) if _fits(arr, (i, j)) else None

    @intrinsic
    def load4_1d(typingctx, arr, j):
        """``arr[j:j+4]`` as one vector load (1-D float32 or float16)."""
        return _load(arr, (j,)) if _fits(arr, (j,)) else None

    @intrinsic
    def store4(typingctx, arr, i, j, x0, x1, x2, x3):
        """``arr[i, j:j+4] = x0..x3`` as one vector store; values converted to arr's dtype."""
        values = (x0, x1, x2, x3)
        if not (_fits(arr, (i, j)) and all(isinstance(x, types.Float) for x in values)):
            return None
        sig = types.void(arr, i, j, *values)
        align = VEC * arr.dtype.bitwidth // 8

        def codegen(context, builder, signature, args):
            ptr = _vector_pointer(context, builder, arr, args[0], args[1:3], (i, j))
            vec = ir.Constant(ptr.type.pointee, ir.Undefined)
            for k, (value, ty) in enumerate(zip(args[3:], signature.args[3:], strict=True)):
                value = context.cast(builder, value, ty, arr.dtype)
                vec = builder.insert_element(vec, value, ir.Constant(ir.IntType(32), k))
            builder.store(vec, ptr, align=align)
            return context.get_dummy_value()

        return sig, codegen
