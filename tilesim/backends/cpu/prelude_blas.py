"""A tile product straight into its accumulator: BLAS's ``gemm`` with ``beta`` 0 or 1, through the entry Numba's own
``np.dot`` uses (``numba_xxgemm``, SciPy's BLAS).

Contract: ``gemm_into(a, b, c, ta, tb, acc)`` (``a``, ``b``, ``c`` C-contiguous 2-D arrays of one float type,
``ta``/``tb``/``acc`` booleans): ``c`` becomes ``op(a) @ op(b)`` (``acc`` false) or ``c + op(a) @ op(b)`` (``acc``
true), ``op(x)`` being ``x.T`` where its flag is set. Shapes are the caller's to get right (``c`` is
``m x n``, ``op(a)`` ``m x k``, ``op(b)`` ``k x n``); a BLAS error code is ignored (there is none for valid
shapes). ``k = 0`` gives zeros (``acc`` false) or leaves ``c`` as it was.

Why: ``np.dot`` allocates its result and the accumulation was a second pass over it: 20 of each per causal
attention of 256 tokens (64x64 tiles), ~0.3 us apiece. With ``beta = 1`` BLAS adds its fp32 result to ``c`` in
its own epilogue — one rounding of ``c + product`` as before wherever BLAS does not split K (it does past a few
hundred), within float rounding of it otherwise (the documented tolerance of a tile product).
"""

from __future__ import annotations

from llvmlite import ir as llvm_ir
from numba.core import cgutils, types
from numba.extending import intrinsic
from numba.np import linalg as _linalg

__all__ = ["gemm_into"]

_CHAR = llvm_ir.IntType(8)
_VOIDP = llvm_ir.IntType(8).as_pointer()


def _slot(builder, elt, value: float):
    """A stack slot holding ``value`` (BLAS takes alpha and beta by pointer)."""
    p = cgutils.alloca_once(builder, elt)
    builder.store(llvm_ir.Constant(elt, value), p)
    return p


def _codegen(context, builder, sig, args):
    a_ty, b_ty, c_ty = sig.args[:3]
    a = context.make_array(a_ty)(context, builder, args[0])
    b = context.make_array(b_ty)(context, builder, args[1])
    c = context.make_array(c_ty)(context, builder, args[2])
    ta, tb, acc = args[3:]
    intp = context.get_value_type(types.intp)
    a_shape = cgutils.unpack_tuple(builder, a.shape, 2)
    b_shape = cgutils.unpack_tuple(builder, b.shape, 2)
    m, n = cgutils.unpack_tuple(builder, c.shape, 2)
    k = builder.select(ta, a_shape[0], a_shape[1])
    elt = context.get_value_type(c_ty.dtype)
    one = _slot(builder, elt, 1.0)
    beta = builder.select(acc, one, _slot(builder, elt, 0.0))
    t, nt = llvm_ir.Constant(_CHAR, ord("t")), llvm_ir.Constant(_CHAR, ord("n"))
    kind = llvm_ir.Constant(_CHAR, ord("s" if c_ty.dtype == types.float32 else "d"))
    fnty = llvm_ir.FunctionType(llvm_ir.IntType(32), [_CHAR, _CHAR, _CHAR, intp, intp, intp, _VOIDP, _VOIDP, intp,
                                                      _VOIDP, intp, _VOIDP, _VOIDP, intp])
    fn = cgutils.get_or_insert_function(builder.module, fnty, "numba_xxgemm")
    # row-major C = op(a) op(b) is column-major C^T = op(b)^T op(a)^T: b first, each with its own flag
    builder.call(fn, [kind, builder.select(tb, t, nt), builder.select(ta, t, nt), n, m, k,
                      builder.bitcast(one, _VOIDP), builder.bitcast(b.data, _VOIDP), b_shape[1],
                      builder.bitcast(a.data, _VOIDP), a_shape[1], builder.bitcast(beta, _VOIDP),
                      builder.bitcast(c.data, _VOIDP), n])
    return context.get_dummy_value()


@intrinsic
def gemm_into(typingctx, a, b, c, ta, tb, acc):
    arrays = (a, b, c)
    if not all(isinstance(x, types.Array) and x.ndim == 2 and x.layout == "C" for x in arrays):
        return None
    if c.dtype not in (types.float32, types.float64) or any(x.dtype != c.dtype for x in arrays):
        return None
    if not all(isinstance(x, types.Boolean) for x in (ta, tb, acc)):
        return None
    _linalg.ensure_blas()
    return types.void(a, b, c, types.boolean, types.boolean, types.boolean), _codegen
