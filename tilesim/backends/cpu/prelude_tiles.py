"""Whole-tile helpers that generated CPU kernels call as external functions (imported by them; imports numba).

Why: a Numba function calling another jitted function links the callee's IR into its own module, and LLVM
optimises and emits it again in every kernel (half of a cold attention launch's LLVM time). These helpers are
compiled once per machine as C functions (``numba.cfunc``, ``cache=True``), registered with LLVM under fixed
symbols (``tilesim_cpu_<helper>_<dtype>``) and called through intrinsics that emit one ``call``. A launch's
cached machine code refers to the symbols by name: a generated module calls :func:`need` with the symbols it
uses when it is imported, before that code is loaded.

Arguments. Each helper intrinsic has a fixed list of argument kinds:

* a **global view** (``g``): a C-contiguous array of rank 1-5 (what ``tilesim.binding`` passes); passed as its
  data pointer, its shape padded to 5 dims with 1 and its strides in elements padded with 0.
* a **tile** (``t``): a C-contiguous on-chip array; passed as its data pointer, its first extent and the
  product of the others (rows and columns of a 2-D tile; ``n`` and 1 of a 1-D one).
* an integer or bool (``i``: int64), or a value of the arrays' element type (``v``).

The helper's element type (its symbol's suffix) is the first array argument's dtype: ``float32``, ``float64``,
or ``uint16`` (fp16/bf16 bit patterns) where ``_HELPERS`` lists it; a call the table does not cover is a Numba
typing error (the generator does not emit one).

Contract of each helper (the code generator, :mod:`.codegen_tiles`, only emits a call when it holds; semantics
are those of the interpreter, bit for bit):

* ``fill_all(a, v)``: every element of tile ``a`` becomes ``v``. ``copy_all(src, dst)``: ``dst`` becomes
  ``src`` (same size). ``acc_all(c, p)``: ``c += p`` element by element in ``c``'s type.
* ``tile_in(src, dst, fill, s0..s4, rd, cd)``: ``dst[i, j]`` (a 2-D tile) becomes the global ``src`` at index
  ``s`` with ``i`` added along dim ``rd`` and ``j`` along dim ``cd`` (``rd < cd``), or ``fill`` where that
  index is outside ``src``. ``tile_out(src, dst, s0..s4, rd, cd)`` stores tile ``src`` into global ``dst`` the
  same way, skipping elements outside ``dst``. ``tile_add(src, dst, s0..s4, rd, cd)``: ``dst[i, j] += src[...]``
  over the same window, which lies inside ``src`` (no bounds checks).
* ``row_sum``/``row_max``/``row_min(src, dst, init, clear)``: ``dst[j]`` becomes the reduction of row ``j`` of
  the 2-D ``src`` starting from ``init`` (0, -inf, inf; summed in the element type; max/min propagate
  NaN as ``prelude.fmax``/``fmin``), folded into ``dst[j]`` unless ``clear``. Rows of 32 or more elements
  fold in 16 interleaved lanes, then the lanes pairwise (:mod:`.prelude_simd`): a sum in another order than a
  serial one (equal within rounding, as the interpreter's NumPy sums, whose order is not part of the meaning);
  max/min the same value as the serial fold (order-free on values); only which of equal values is kept may differ — the sign of a zero maximum among +0 and -0, the
  payload of a NaN among several — as NumPy's own vectorised max (the interpreter's) leaves it unspecified too.
* ``mm_acc(a, b, c, ta, tb, clear)``: ``c`` (2-D) becomes, or is incremented by, ``a @ b`` (``a.T``/``b.T``
  where ``ta``/``tb``): BLAS's ``gemm`` with ``beta`` 0 or 1 into ``c`` (:mod:`.prelude_blas`; a "B transposed"
  product of 8-aligned tiles transposes B first, :mod:`.prelude_simd`).
* ``dec_all(bits, dst, bf)``, ``enc_all(src, bits, bf)``, ``rnd_all(src, dst, bf)``: fp16 (``bf`` false) or
  bf16 decode, encode and rounding of whole tiles (:mod:`.prelude`'s ``dec_*``/``enc_*``/``rnd_*``).

Errors: none at run time (shapes are the generator's to get right); :func:`need` raises ``KeyError`` for an
unknown symbol.
"""

from __future__ import annotations

import threading

import numba
import numpy as np
from llvmlite import binding as llvm_binding
from llvmlite import ir as llvm_ir
from numba.core import cgutils, types
from numba.extending import intrinsic

from .codegen import extern_symbol
from .prelude import dec_bf16, dec_f16, enc_bf16, enc_f16, fmax, fmin, rnd_bf16, rnd_f16
from .prelude_blas import gemm_into
from .prelude_ew import _exp_affine, _mask_select, _row_op
from .prelude_simd import vmax16, vmin16, vsum16, vtranspose8

__all__ = ["need", "fill_all", "copy_all", "acc_all", "tile_in", "tile_add", "tile_out", "row_sum", "row_max", "row_min",
           "mm_acc", "dec_all", "enc_all", "rnd_all", "row_op", "exp_affine", "mask_select"]

_I = types.int64
_NDIM = 5
_KIND_ARGS = {"g": 1 + 2 * _NDIM, "t": 3}


def _c_args(kinds: str, dtype) -> list:
    """The C parameter types of a helper with argument ``kinds`` and element type ``dtype``."""
    out = []
    for k in kinds:
        if k in _KIND_ARGS:
            out += [types.CPointer(dtype)] + [_I] * (_KIND_ARGS[k] - 1)
        elif k == "v":
            out.append(dtype)
        else:
            out.append(_I)
    return out


# --------------------------------------------------------------------------------- the helpers' bodies
def _fill_all(a, n0, n1, v):
    for i in range(n0 * n1):
        a[i] = v


def _copy_all(s, m0, m1, d, n0, n1):
    for i in range(n0 * n1):
        d[i] = s[i]


def _acc_all(c, n0, n1, p, m0, m1):
    for i in range(n0 * n1):
        c[i] = c[i] + p[i]


def _tile_in(sp, a0, a1, a2, a3, a4, t0, t1, t2, t3, t4, dp, rows, cols, fill, s0, s1, s2, s3, s4, rd, cd):
    shape = (a0, a1, a2, a3, a4)
    stride = (t0, t1, t2, t3, t4)
    start = (s0, s1, s2, s3, s4)
    base = 0
    inside = True
    for d in range(_NDIM):
        if d != rd and d != cd:
            inside = inside and 0 <= start[d] < shape[d]
            base += start[d] * stride[d]
    c0 = start[cd]
    lo = min(max(0, -c0), cols)
    hi = max(min(cols, shape[cd] - c0), lo)
    rs, cs = stride[rd], stride[cd]
    for i in range(rows):
        r = start[rd] + i
        row = i * cols
        if not (inside and 0 <= r < shape[rd]):
            for j in range(cols):
                dp[row + j] = fill
            continue
        off = base + r * rs + c0 * cs
        for j in range(lo):
            dp[row + j] = fill
        if cs == 1:
            for j in range(lo, hi):
                dp[row + j] = sp[off + j]
        else:
            for j in range(lo, hi):
                dp[row + j] = sp[off + j * cs]
        for j in range(hi, cols):
            dp[row + j] = fill


def _tile_add(sp, a0, a1, a2, a3, a4, t0, t1, t2, t3, t4, dp, rows, cols, s0, s1, s2, s3, s4, rd, cd):
    stride = (t0, t1, t2, t3, t4)
    start = (s0, s1, s2, s3, s4)
    base = 0
    for d in range(_NDIM):
        if d != rd and d != cd:
            base += start[d] * stride[d]
    rs, cs = stride[rd], stride[cd]
    for i in range(rows):
        off = base + (start[rd] + i) * rs + start[cd] * cs
        row = i * cols
        if cs == 1:
            for j in range(cols):
                dp[row + j] = dp[row + j] + sp[off + j]
        else:
            for j in range(cols):
                dp[row + j] = dp[row + j] + sp[off + j * cs]


def _tile_out(sp, rows, cols, dp, a0, a1, a2, a3, a4, t0, t1, t2, t3, t4, s0, s1, s2, s3, s4, rd, cd):
    shape = (a0, a1, a2, a3, a4)
    stride = (t0, t1, t2, t3, t4)
    start = (s0, s1, s2, s3, s4)
    base = 0
    for d in range(_NDIM):
        if d != rd and d != cd:
            if not 0 <= start[d] < shape[d]:
                return
            base += start[d] * stride[d]
    c0 = start[cd]
    lo = min(max(0, -c0), cols)
    hi = max(min(cols, shape[cd] - c0), lo)
    rs, cs = stride[rd], stride[cd]
    for i in range(rows):
        r = start[rd] + i
        if 0 <= r < shape[rd]:
            off = base + r * rs + c0 * cs
            if cs == 1:
                for j in range(lo, hi):
                    dp[off + j] = sp[i * cols + j]
            else:
                for j in range(lo, hi):
                    dp[off + j * cs] = sp[i * cols + j]


#: lanes a row sum/max/min folds in (rows of at least 2·_LANES elements; :mod:`.prelude_simd`): a serial chain of
#: NaN-checking compares was 79 of a 256-token causal attention's 210 µs; one vector op per 16 elements is ~0.7 µs
#: of a 64x64 tile's max
_LANES = 16


def _row_sum(sp, rows, cols, dp, n0, n1, init, clear):
    nb = cols // _LANES if cols >= 2 * _LANES else 0
    for j in range(rows):
        base = j * cols
        a = init
        if nb:  # 16 lanes, then pairwise (prelude_simd): another order, equal within rounding
            a = a + vsum16(sp, base, nb)
        for k in range(nb * _LANES, cols):
            a = a + sp[base + k]
        dp[j] = a if clear else dp[j] + a




@numba.njit(cache=True, error_model="numpy", nogil=True)
def _pick(a, b, is_max):
    return fmax(a, b) if is_max else fmin(a, b)


@numba.njit(cache=True, error_model="numpy", nogil=True)
def _fold_rows(sp, rows, cols, dp, init, clear, is_max):
    """``dp[j]`` (folded into it unless ``clear``) becomes the max (``is_max``) or min of row ``j``, NaN
    propagating; rows of ``2·_LANES`` or more elements in ``_LANES`` interleaved folds then the lanes pairwise
    (:mod:`.prelude_simd`), the rest serially."""
    nb = cols // _LANES if cols >= 2 * _LANES else 0
    for j in range(rows):
        base = j * cols
        a = init
        if nb:
            a = _pick(a, vmax16(sp, base, nb) if is_max else vmin16(sp, base, nb), is_max)
        for k in range(nb * _LANES, cols):
            a = _pick(a, sp[base + k], is_max)
        dp[j] = a if clear else _pick(dp[j], a, is_max)


def _row_max(sp, rows, cols, dp, n0, n1, init, clear):
    _fold_rows(sp, rows, cols, dp, init, clear, True)


def _row_min(sp, rows, cols, dp, n0, n1, init, clear):
    _fold_rows(sp, rows, cols, dp, init, clear, False)


def _mm_acc(ap, a0, a1, bp, b0, b1, cp, c0, c1, ta, tb, clear):
    a = numba.carray(ap, (a0, a1))
    b = numba.carray(bp, (b0, b1))
    c = numba.carray(cp, (c0, c1))
    if tb and not ta and b0 % 8 == 0 and b1 % 8 == 0:
        # BLAS's "B transposed" product was 1.6x slower than the plain one (64^3: 4.0 vs 2.5 us); a copy through
        # 8x8 vector transposes costs less than the difference
        t = np.empty((b1, b0), dtype=b.dtype)
        for i in range(0, b0, 8):
            for j in range(0, b1, 8):
                vtranspose8(b, i * b1 + j, b1, t, j * b0 + i, b0)
        gemm_into(a, t, c, False, False, not clear)
    else:
        gemm_into(a, b, c, ta != 0, tb != 0, not clear)


def _dec_all(s, m0, m1, d, n0, n1, bf):
    if bf:
        for i in range(n0 * n1):
            d[i] = dec_bf16(s[i])
    else:
        for i in range(n0 * n1):
            d[i] = dec_f16(s[i])


def _enc_all(s, m0, m1, d, n0, n1, bf):
    if bf:
        for i in range(n0 * n1):
            d[i] = enc_bf16(s[i])
    else:
        for i in range(n0 * n1):
            d[i] = enc_f16(s[i])


def _rnd_all(s, m0, m1, d, n0, n1, bf):
    if bf:
        for i in range(n0 * n1):
            d[i] = rnd_bf16(s[i])
    else:
        for i in range(n0 * n1):
            d[i] = rnd_f16(s[i])


_F = ("float32", "float64")
#: helper -> (body, argument kinds, element types of its first array)
_HELPERS = {
    "fill_all": (_fill_all, "tv", _F),
    "copy_all": (_copy_all, "tt", _F),
    "acc_all": (_acc_all, "tt", _F),
    "tile_in": (_tile_in, "gtv" + "i" * 7, _F + ("uint16",)),
    "tile_out": (_tile_out, "tg" + "i" * 7, _F + ("uint16",)),
    "tile_add": (_tile_add, "gt" + "i" * 7, _F),
    "row_sum": (_row_sum, "ttvi", _F),
    "row_max": (_row_max, "ttvi", _F),
    "row_min": (_row_min, "ttvi", _F),
    "mm_acc": (_mm_acc, "tttii" + "i", _F),
    "dec_all": (_dec_all, "tti", ("uint16",)),
    "enc_all": (_enc_all, "tti", ("float32",)),
    "rnd_all": (_rnd_all, "tti", ("float32",)),
    "row_op": (_row_op, "tttii", _F),
    "exp_affine": (_exp_affine, "tttvviii", ("float32",)),
    "mask_select": (_mask_select, "t" + "i" * 7 + "vv", _F),
}
_NEED_LOCK = threading.RLock()
_CFUNCS: dict = {}  # symbol -> the compiled helper (kept alive: LLVM holds only its address)


def _c_signature(helper: str, dtype: str) -> list:
    argtypes = _c_args(_HELPERS[helper][1], getattr(types, dtype))
    if helper == "dec_all":  # bits in, float32 out
        argtypes[3] = types.CPointer(types.float32)
    elif helper == "enc_all":  # float32 in, bits out
        argtypes[3] = types.CPointer(types.uint16)
    return argtypes


def need(*symbols: str) -> None:
    """Compile (or load from Numba's cache) the helpers named by ``symbols`` and register their addresses with
    LLVM under those names; a generated module calls it before its launch is compiled or loaded. Thread-safe
    (the tiered target compiles on a worker thread): each symbol is compiled and registered once per process,
    and its compiled function is kept alive for the process."""
    with _NEED_LOCK:
        for sym in symbols:
            if sym in _CFUNCS:
                continue
            helper, dtype = _SYMBOLS[sym]
            cf = numba.cfunc(types.void(*_c_signature(helper, dtype)), cache=True, error_model="numpy")(_HELPERS[helper][0])
            llvm_binding.add_symbol(sym, cf.address)
            _CFUNCS[sym] = cf


_SYMBOLS = {extern_symbol(h, d): (h, d) for h, (_, _, dts) in _HELPERS.items() for d in dts}


# ------------------------------------------------------------------------------- the calls (intrinsics)
def _global_view(context, builder, ty, value) -> list:
    arr = context.make_array(ty)(context, builder, value)
    shape = cgutils.unpack_tuple(builder, arr.shape, ty.ndim)
    strides = cgutils.unpack_tuple(builder, arr.strides, ty.ndim)
    size = context.get_constant(types.intp, context.get_abi_sizeof(context.get_data_type(ty.dtype)))
    one, zero = context.get_constant(types.intp, 1), context.get_constant(types.intp, 0)
    pad = _NDIM - ty.ndim
    return [arr.data] + list(shape) + [one] * pad + [builder.sdiv(s, size) for s in strides] + [zero] * pad


def _tile(context, builder, ty, value) -> list:
    arr = context.make_array(ty)(context, builder, value)
    shape = cgutils.unpack_tuple(builder, arr.shape, ty.ndim)
    rest = context.get_constant(types.intp, 1)
    for n in shape[1:]:
        rest = builder.mul(rest, n)
    return [arr.data, shape[0], rest]


def _call(helper: str, args: tuple):
    """The typing result of an intrinsic calling ``helper`` with Numba types ``args`` (None: not applicable,
    a typing error)."""
    kinds = _HELPERS[helper][1]
    if len(args) != len(kinds):
        return None
    for k, a in zip(kinds, args):
        if (k in _KIND_ARGS) != isinstance(a, types.Array) or (k in _KIND_ARGS and a.layout != "C"):
            return None
        if k == "g" and not 1 <= a.ndim <= _NDIM:
            return None
    dtype = str(next(a for a in args if isinstance(a, types.Array)).dtype)
    if dtype not in _HELPERS[helper][2]:
        return None
    sym = extern_symbol(helper, dtype)
    need(sym)
    cargs = _c_signature(helper, dtype)
    sig = types.void(*(types.unliteral(a) for a in args))

    def codegen(context, builder, signature, llargs):
        vals, pos = [], 0
        for k, ty, v in zip(kinds, signature.args, llargs):
            if k in _KIND_ARGS:
                part = (_global_view if k == "g" else _tile)(context, builder, ty, v)
                part[0] = builder.bitcast(part[0], context.get_value_type(cargs[pos]))
            else:
                part = [context.cast(builder, v, ty, cargs[pos])]
            vals += part
            pos += len(part)
        fnty = llvm_ir.FunctionType(llvm_ir.VoidType(), [context.get_value_type(t) for t in cargs])
        builder.call(cgutils.get_or_insert_function(builder.module, fnty, sym), vals)
        return context.get_dummy_value()
    return sig, codegen


@intrinsic
def fill_all(typingctx, a, v):
    return _call("fill_all", (a, v))


@intrinsic
def copy_all(typingctx, src, dst):
    return _call("copy_all", (src, dst))


@intrinsic
def acc_all(typingctx, c, p):
    return _call("acc_all", (c, p))


@intrinsic
def tile_in(typingctx, src, dst, fill, s0, s1, s2, s3, s4, rd, cd):
    return _call("tile_in", (src, dst, fill, s0, s1, s2, s3, s4, rd, cd))


@intrinsic
def tile_add(typingctx, src, dst, s0, s1, s2, s3, s4, rd, cd):
    return _call("tile_add", (src, dst, s0, s1, s2, s3, s4, rd, cd))


@intrinsic
def tile_out(typingctx, src, dst, s0, s1, s2, s3, s4, rd, cd):
    return _call("tile_out", (src, dst, s0, s1, s2, s3, s4, rd, cd))


@intrinsic
def row_sum(typingctx, src, dst, init, clear):
    return _call("row_sum", (src, dst, init, clear))


@intrinsic
def row_max(typingctx, src, dst, init, clear):
    return _call("row_max", (src, dst, init, clear))


@intrinsic
def row_min(typingctx, src, dst, init, clear):
    return _call("row_min", (src, dst, init, clear))


@intrinsic
def mm_acc(typingctx, a, b, c, ta, tb, clear):
    return _call("mm_acc", (a, b, c, ta, tb, clear))


@intrinsic
def row_op(typingctx, dst, x, r, op, same):
    return _call("row_op", (dst, x, r, op, same))


@intrinsic
def exp_affine(typingctx, dst, x, r, a, b, mode, base2, same):
    return _call("exp_affine", (dst, x, r, a, b, mode, base2, same))


@intrinsic
def mask_select(typingctx, dst, k1, a1, b1, k2, a2, b2, op, va, vb):
    return _call("mask_select", (dst, k1, a1, b1, k2, a2, b2, op, va, vb))


@intrinsic
def dec_all(typingctx, bits, dst, bf):
    return _call("dec_all", (bits, dst, bf))


@intrinsic
def enc_all(typingctx, src, bits, bf):
    return _call("enc_all", (src, bits, bf))


@intrinsic
def rnd_all(typingctx, src, dst, bf):
    return _call("rnd_all", (src, dst, bf))
