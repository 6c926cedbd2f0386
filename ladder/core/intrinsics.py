"""Device-side helpers that Numba does not offer: 16-byte loads and stores of four float32.

Numba compiles ``A[i, j]`` to a 4-byte ``ld.global.f32``; it has no ``float4``. A kernel that
moves a tile with four times fewer, four times wider instructions needs an LLVM vector load,
which an ``@intrinsic`` can emit: ``load4`` reads ``arr[i, j:j+4]`` as one ``<4 x float>``
(``ld.global.v4.f32`` or ``ld.shared.v4.f32`` in the PTX) and ``store4`` writes four floats
the same way.

The caller promises what the hardware needs for a 16-byte access: ``arr`` is a C-contiguous
2D float32 array whose element ``[i, j]`` sits on a 16-byte boundary (the base pointer is
16-byte aligned, the row length is a multiple of 4, and ``j`` is a multiple of 4), and
``j + 3`` is inside the row. Rungs check this in their launcher and fall back to scalar
loads when it does not hold. Indices are not wrapped (a negative index is undefined).

Shared arrays read with ``load4`` must be declared ``alignment=VECTOR_ALIGN``: Numba aligns
a float32 shared array to 4 bytes by default. The simulator refuses any ``alignment``
argument, so there ``VECTOR_ALIGN`` is None (and alignment does not matter).

In the CUDA simulator the same names are plain Python functions with the same meaning.
"""

from __future__ import annotations

from typing import Any

from ladder.core import device

VECTOR_ALIGN = None if device.simulator() else 16

if device.simulator():

    def load4(arr: Any, i: int, j: int) -> tuple[Any, Any, Any, Any]:
        return arr[i, j], arr[i, j + 1], arr[i, j + 2], arr[i, j + 3]

    def store4(arr: Any, i: int, j: int, x0: Any, x1: Any, x2: Any, x3: Any) -> None:
        arr[i, j] = x0
        arr[i, j + 1] = x1
        arr[i, j + 2] = x2
        arr[i, j + 3] = x3

else:
    from llvmlite import ir
    from numba.cuda import cgutils, types
    from numba.cuda.extending import intrinsic

    def _element_pointer(context, builder, aryty, ary, indices, index_types):
        array = context.make_array(aryty)(context, builder, ary)
        inds = [
            context.cast(builder, ind, ity, types.intp)
            for ind, ity in zip(indices, index_types, strict=True)
        ]
        return cgutils.get_item_pointer(context, builder, aryty, array, inds, wraparound=False)

    def _vector_pointer(builder, ptr):
        vec = ir.VectorType(ir.FloatType(), 4)
        return builder.bitcast(ptr, vec.as_pointer(ptr.type.addrspace))

    def _is_float32_2d(arr: Any) -> bool:
        return isinstance(arr, types.Array) and arr.dtype == types.float32 and arr.ndim == 2

    @intrinsic
    def load4(typingctx, arr, i, j):
        if not (
            _is_float32_2d(arr) and isinstance(i, types.Integer) and isinstance(j, types.Integer)
        ):
            return None
        sig = types.UniTuple(types.float32, 4)(arr, i, j)

        def codegen(context, builder, signature, args):
            ptr = _element_pointer(context, builder, signature.args[0], args[0], args[1:], (i, j))
            vec = builder.load(_vector_pointer(builder, ptr), align=16)
            lanes = [builder.extract_element(vec, ir.Constant(ir.IntType(32), k)) for k in range(4)]
            return context.make_tuple(builder, signature.return_type, lanes)

        return sig, codegen

    @intrinsic
    def store4(typingctx, arr, i, j, x0, x1, x2, x3):
        if not (
            _is_float32_2d(arr) and isinstance(i, types.Integer) and isinstance(j, types.Integer)
        ):
            return None
        sig = types.void(arr, i, j, types.float32, types.float32, types.float32, types.float32)

        def codegen(context, builder, signature, args):
            ptr = _element_pointer(context, builder, signature.args[0], args[0], args[1:3], (i, j))
            vec = ir.Constant(ir.VectorType(ir.FloatType(), 4), ir.Undefined)
            for k, value in enumerate(args[3:]):
                vec = builder.insert_element(vec, value, ir.Constant(ir.IntType(32), k))
            builder.store(vec, _vector_pointer(builder, ptr), align=16)
            return context.get_dummy_value()

        return sig, codegen
