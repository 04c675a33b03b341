"""Explicit SIMD for the CPU target's tile helpers: LLVM vector code where Numba's loops do not vectorise.

Contract:

* ``vsum16(p, base, nb)``: the sum of the same elements in the same lanes (lane sums, then pairwise), in
  the element type: another order than a serial sum, so equal to it within float rounding (the interpreter's
  NumPy sums use their own order too).
* ``vmax16(p, base, nb)`` / ``vmin16(p, base, nb)`` (``p`` a ``CPointer`` of float32 or float64, ``base``
  and ``nb >= 1`` int64): the max (min) of the ``16 * nb`` elements ``p[base : base + 16 * nb]``, folded
  as 16 interleaved lanes (lane ``m`` folds elements ``base + m + 16 * b`` in order of ``b``) and then the
  lanes pairwise (lane ``m`` with lane ``m + w``, ``w`` = 8, 4, 2, 1). Each fold step is
  :func:`.prelude.fmax`'s (``fmin``'s) meaning: a NaN on either side gives their sum (a NaN), otherwise the
  kept value unless the new one is strictly greater (less). So the result is the row's max (min) as NumPy's
  ``maximum.reduce`` gives it, NaN propagating; only which of equal values is returned (the sign of a zero
  among +0 and -0) or which NaN's payload may differ from a serial fold.

* ``vtranspose8(src, s0, ss, dst, d0, ds)`` (``src``/``dst`` C-contiguous arrays of one float type, offsets into
  their flat data and row strides in elements, int64): ``dst[d0 + j * ds + i] = src[s0 + i * ss + j]`` for ``i, j`` in 0..7 — an 8x8 block
  transposed through vector shuffles (three rounds of two-vector shuffles); the blocks must not overlap.

Why: the same fold written as a Numba loop over a 16-element lane array stays scalar (LLVM cannot prove the
lane array and the tile do not alias), and a row max was 2.3 us of a 64x64 tile (35% of a causal
attention step's non-BLAS time); one ``<16 x float>`` compare-select per 16 elements is what the fold is.

Errors: none at run time; an argument of another type is a Numba typing error (the helpers never emit one).
"""

from __future__ import annotations

from llvmlite import ir as llvm_ir
from numba.core import types
from numba.extending import intrinsic

__all__ = ["vmax16", "vmin16", "vsum16", "vtranspose8"]

_W = 16
_I64 = llvm_ir.IntType(64)
_I32 = llvm_ir.IntType(32)


def _combine(builder, y, x, is_max):
    """``fmax(y, x)`` (``fmin``) element by element, ``y`` kept on ties; ``y + x`` where ``is_max`` is None."""
    if is_max is None:
        return builder.fadd(y, x)
    uno = builder.fcmp_unordered("uno", y, x)
    keep = builder.fcmp_ordered(">=" if is_max else "<=", y, x)
    return builder.select(uno, builder.fadd(y, x), builder.select(keep, y, x))


def _fold_codegen(is_max):
    def codegen(context, builder, sig, args):
        ptr, base, nb = args
        elt = ptr.type.pointee
        vty = llvm_ir.VectorType(elt, _W)
        align = 4 if isinstance(elt, llvm_ir.FloatType) else 8

        def load(offset):
            return builder.load(builder.bitcast(builder.gep(ptr, [offset]), vty.as_pointer()), align=align)

        first = load(base)
        pre = builder.block
        loop = builder.append_basic_block("vfold_loop")
        done = builder.append_basic_block("vfold_done")
        one = llvm_ir.Constant(_I64, 1)
        builder.cbranch(builder.icmp_signed("<", one, nb), loop, done)
        builder.position_at_end(loop)
        b = builder.phi(_I64)
        acc = builder.phi(vty)
        b.add_incoming(one, pre)
        acc.add_incoming(first, pre)
        new = _combine(builder, acc, load(builder.add(base, builder.mul(b, llvm_ir.Constant(_I64, _W)))), is_max)
        nxt = builder.add(b, one)
        b.add_incoming(nxt, loop)
        acc.add_incoming(new, loop)
        builder.cbranch(builder.icmp_signed("<", nxt, nb), loop, done)
        builder.position_at_end(done)
        v = builder.phi(vty)
        v.add_incoming(first, pre)
        v.add_incoming(new, loop)
        w = _W // 2
        while w:
            lo = builder.shuffle_vector(v, v, llvm_ir.Constant(llvm_ir.VectorType(_I32, w), list(range(w))))
            hi = builder.shuffle_vector(v, v, llvm_ir.Constant(llvm_ir.VectorType(_I32, w), list(range(w, 2 * w))))
            v = _combine(builder, lo, hi, is_max)
            w //= 2
        return builder.extract_element(v, llvm_ir.Constant(_I32, 0))
    return codegen


def _typer(is_max):
    def typer(typingctx, p, base, nb):
        if not isinstance(p, types.CPointer) or p.dtype not in (types.float32, types.float64):
            return None
        if not isinstance(base, types.Integer) or not isinstance(nb, types.Integer):
            return None
        return p.dtype(p, types.int64, types.int64), _fold_codegen(is_max)
    return typer


vsum16 = intrinsic(_typer(None))
vmax16 = intrinsic(_typer(True))
vmin16 = intrinsic(_typer(False))


#: the three shuffle rounds of an 8x8 transpose: (pairs of input rows, masks) per round; checked by the tests
_T1 = ([0, 8, 1, 9, 4, 12, 5, 13], [2, 10, 3, 11, 6, 14, 7, 15])
_T2 = ([0, 1, 8, 9, 4, 5, 12, 13], [2, 3, 10, 11, 6, 7, 14, 15])
_T3 = ([0, 1, 2, 3, 8, 9, 10, 11], [4, 5, 6, 7, 12, 13, 14, 15])


def _transpose_codegen(context, builder, sig, args):
    _, s0, ss, _, d0, ds = args
    src = context.make_array(sig.args[0])(context, builder, args[0]).data
    dst = context.make_array(sig.args[3])(context, builder, args[3]).data
    elt = src.type.pointee
    vty = llvm_ir.VectorType(elt, 8)
    align = 4 if isinstance(elt, llvm_ir.FloatType) else 8

    def mask(m):
        return llvm_ir.Constant(llvm_ir.VectorType(_I32, 8), m)

    def row_ptr(base, off, stride, i):
        at = builder.add(off, builder.mul(stride, llvm_ir.Constant(_I64, i)))
        return builder.bitcast(builder.gep(base, [at]), vty.as_pointer())

    r = [builder.load(row_ptr(src, s0, ss, i), align=align) for i in range(8)]
    t = []
    for k in range(4):
        t += [builder.shuffle_vector(r[2 * k], r[2 * k + 1], mask(m)) for m in _T1]
    u = [None] * 8
    for half in (0, 4):
        u[half + 0] = builder.shuffle_vector(t[half + 0], t[half + 2], mask(_T2[0]))
        u[half + 1] = builder.shuffle_vector(t[half + 0], t[half + 2], mask(_T2[1]))
        u[half + 2] = builder.shuffle_vector(t[half + 1], t[half + 3], mask(_T2[0]))
        u[half + 3] = builder.shuffle_vector(t[half + 1], t[half + 3], mask(_T2[1]))
    for k in range(4):
        for j, m in ((k, _T3[0]), (k + 4, _T3[1])):
            builder.store(builder.shuffle_vector(u[k], u[k + 4], mask(m)), row_ptr(dst, d0, ds, j), align=align)
    return context.get_dummy_value()


@intrinsic
def vtranspose8(typingctx, src, s0, ss, dst, d0, ds):
    for a in (src, dst):
        if not (isinstance(a, types.Array) and a.layout == "C" and a.dtype in (types.float32, types.float64)):
            return None
    if src.dtype != dst.dtype:
        return None
    if not all(isinstance(x, types.Integer) for x in (s0, ss, d0, ds)):
        return None
    return types.void(src, types.int64, types.int64, dst, types.int64, types.int64), _transpose_codegen
