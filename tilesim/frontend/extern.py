"""Builders of ``T.import_source``, ``T.access_ptr`` and ``T.call_extern``: external device functions whose
meaning tilesim knows are given it; every other one is refused.

Contract
--------
* ``T.import_source(src)`` records CUDA/HIP source text for the launch (no IR of its own).
* ``T.access_ptr(x, mode="r", ...)`` is a trace-time pointer: the buffer and the element index it points to
  (``x`` a buffer: its first element; an element ``buf[i]``: that one). It may only be passed to
  ``T.call_extern``.
* ``T.call_extern(dtype, name, *args)`` (TileLang also accepts ``call_extern(name, *args, dtype=...)``) of a
  function in :data:`KNOWN` whose definition was imported with ``T.import_source`` in this kernel (the
  source must contain every marker :data:`KNOWN` lists for it: the name and the constants that fix its
  meaning) is expanded into the element statements that function performs — one per output element, so
  each thread's ``T.alloc_local`` arrays are read and written exactly as the device function does. Any
  other call is a ``KernelSyntaxError`` naming the function.

Known functions (from TileLang's dequantization examples; the CUDA PTX and HIP versions agree):

* ``decode_i4u_to_f16(src, dst, N=8)`` / ``decode_i4s_to_f16``: the 32-bit word ``w`` of ``src[0:4]``
  (little-endian bytes) gives ``dst[2i] = ((w >> 4i) & 15) - b`` and ``dst[2i+1] = ((w >> (16 + 4i)) & 15)
  - b`` for ``i < N / 2`` (``b`` = 8 for the signed variant, else 0), as float16.
* ``decode_i2u_to_i8s(src, dst, N=16)`` / ``decode_i2s_to_i8s``: ``dst[4i + b] = ((src[b] >> 2i) & 3) - s``
  for ``i < N / 4`` and the 4 bytes ``b`` of ``src`` (``s`` = 2 for the signed variant, else 0), as int8.
* ``decode_fp4_to_bf16_twiddling(src, dst, N=8)``: for ``i < N``, ``t`` = the bytes ``src[4i:4i+4]``
  big-endian; ``d0 = t & M``, ``d1 = (t << 3) & M``, ``d2 = (t << 6) & M``, ``d3 = ((t << 1) & 0x80008000)
  | ((t >> 3) & 0x01800180) | ((t >> 7) & 0x00400040)`` with ``M = 0x81C081C0``; ``dst[8i + j]`` is the
  high and ``dst[8i + j + 4]`` the low bfloat16 half of ``d_j`` times ``2^126`` (exact).
"""

from __future__ import annotations

from ..errors import KernelSyntaxError, KernelTypeError
from ..ir import nodes as N
from . import exprs as X
from .builders import builder
from .ptx import Pointer

_M32 = 0xFFFFFFFF


def _sources(tr) -> list:
    return tr.launch.setdefault("extern_sources", []) if tr.in_launch() else []


@builder("import_source")
def _b_import_source(tr, loc, source=None):
    if source is None:
        return
    if not isinstance(source, str):
        raise KernelTypeError(f"T.import_source takes the source text, got {type(source).__name__}", loc)
    if not tr.in_launch():
        raise KernelSyntaxError("T.import_source outside `with T.Kernel(...)`", loc)
    _sources(tr).append(source)


def _byte(tr, p: Pointer, k: int, loc) -> N.Expr:
    """Byte ``k`` of the array ``p`` points to, as uint32 (8-bit element types only)."""
    if p.buffer.dtype not in ("uint8", "int8"):
        raise KernelTypeError(f"T.call_extern: the source array {p.buffer.name} is {p.buffer.dtype}; the known "
                              "decoders read 8-bit storage", loc)
    v = X.make_load(p.buffer, [X.binop("add", p.offset, k, loc)], loc)
    return X.binop("bitand", X.cast_to(v, "uint32", loc), 0xFF, loc)


def _word(tr, p, first: int, loc, big_endian=False) -> N.Expr:
    w = None
    for k in range(4):
        shift = 8 * (3 - k) if big_endian else 8 * k
        b = X.binop("shl", _byte(tr, p, first + k, loc), shift, loc)
        w = b if w is None else X.binop("bitor", w, b, loc)
    return w


def _store(tr, p: Pointer, k: int, value: N.Expr, loc) -> None:
    idx = X.index_expr(X.binop("add", p.offset, k, loc), loc)
    tr.emit(N.Store(p.buffer, (idx,), X.cast_to(value, p.buffer.dtype, loc), loc))


def _decode_i4_to_f16(signed: bool):
    def expand(tr, loc, src: Pointer, dst: Pointer, n: int = 8):
        w = _word(tr, src, 0, loc)
        for i in range(n // 2):
            for half in (0, 1):
                nib = X.binop("bitand", X.binop("shr", w, 4 * i + 16 * half, loc), 15, loc)
                v = X.binop("sub", X.cast_to(nib, "int32", loc), 8 if signed else 0, loc)
                _store(tr, dst, 2 * i + half, X.cast_to(v, "float16", loc), loc)

    return expand


def _decode_i2_to_i8(signed: bool):
    def expand(tr, loc, src: Pointer, dst: Pointer, n: int = 16):
        for i in range(n // 4):
            for b in range(4):
                v = X.binop("bitand", X.binop("shr", _byte(tr, src, b, loc), 2 * i, loc), 3, loc)
                v = X.binop("sub", X.cast_to(v, "int32", loc), 2 if signed else 0, loc)
                _store(tr, dst, 4 * i + b, v, loc)

    return expand


def _decode_fp4_to_bf16_twiddling(tr, loc, src: Pointer, dst: Pointer, n: int = 8):
    mask = 0x81C081C0
    for i in range(n):
        t = _word(tr, src, 4 * i, loc, big_endian=True)

        def sh(op, amount, t=t):
            return X.binop("bitand", X.binop(op, t, amount, loc), _M32, loc)

        ds = [X.binop("bitand", t, mask, loc), X.binop("bitand", sh("shl", 3), mask, loc),
              X.binop("bitand", sh("shl", 6), mask, loc),
              X.binop("bitor", X.binop("bitor", X.binop("bitand", sh("shl", 1), 0x80008000, loc),
                                       X.binop("bitand", sh("shr", 3), 0x01800180, loc), loc),
                      X.binop("bitand", sh("shr", 7), 0x00400040, loc), loc)]
        for j, d in enumerate(ds):
            for k, shift in ((8 * i + j, 16), (8 * i + j + 4, 0)):
                half = X.cast_to(X.binop("bitand", X.binop("shr", d, shift, loc), 0xFFFF, loc), "uint16", loc)
                bf = X.cast_to(N.Reinterpret(half, "bfloat16", loc), "float32", loc)
                _store(tr, dst, k, X.binop("mul", bf, X.const(2.0 ** 126, "float32", loc), loc), loc)


#: name -> (markers the imported source must contain, expansion)
KNOWN = {
    "decode_i4u_to_f16": (("decode_i4u_to_f16", "decode_i4b_to_f16", "0x000f000f", "0x64006400"),
                          _decode_i4_to_f16(False)),
    "decode_i4s_to_f16": (("decode_i4s_to_f16", "decode_i4b_to_f16", "0x000f000f", "0x64086408"),
                          _decode_i4_to_f16(True)),
    "decode_i2u_to_i8s": (("decode_i2u_to_i8s", "0x03030303", "i2b >> (2 * i)"), _decode_i2_to_i8(False)),
    "decode_i2s_to_i8s": (("decode_i2s_to_i8s", "0x03030303", "i2b >> (2 * i)", "0x02020202", "__vsub4"),
                          _decode_i2_to_i8(True)),
    "decode_fp4_to_bf16_twiddling": (("decode_fp4_to_bf16_twiddling", "0x7e807e80"),
                                     _decode_fp4_to_bf16_twiddling),
}
#: the twiddling masks, as the PTX (binary) or HIP (hex) source spells them: one of each pair must appear
_TWIDDLE_MASKS = (("0b10000001110000001000000111000000", "0x81C081C0"), ("0b10000000000000001000000000000000",
                                                                         "0x80008000"))


def _recognised(name: str, sources: list) -> bool:
    markers, _ = KNOWN[name]
    for src in sources:
        if all(m in src for m in markers) and (name != "decode_fp4_to_bf16_twiddling" or all(
                any(alt in src for alt in pair) for pair in _TWIDDLE_MASKS)):
            return True
    return False


@builder("call_extern")
def _b_call_extern(tr, loc, args=(), dtype=None):
    if dtype is not None:
        args = (dtype,) + tuple(args)
    if len(args) < 2 or not isinstance(args[1], str):
        raise KernelTypeError("T.call_extern(dtype, func_name, *args): func_name must be a Python string", loc)
    name, rest = args[1], args[2:]
    hint = ("tilesim knows " + ", ".join(KNOWN) + " (with their source imported by T.import_source); write "
            "other device functions with T.* primitives")
    if name not in KNOWN or not tr.in_launch():
        raise KernelSyntaxError(f"T.call_extern of {name!r}: an external device function tilesim cannot run",
                                loc, hint=hint)
    if not _recognised(name, _sources(tr)):
        raise KernelSyntaxError(f"T.call_extern of {name!r} without its known definition imported in this kernel",
                                loc, hint=hint)
    if len(rest) < 2 or not all(isinstance(p, Pointer) for p in rest[:2]) or \
            not all(isinstance(a, int) and not isinstance(a, bool) and a > 0 for a in rest[2:3]):
        raise KernelTypeError(f"T.call_extern({name!r}, src, dst[, N]): src and dst must be T.access_ptr "
                              "pointers and N a positive Python int", loc)
    KNOWN[name][1](tr, loc, rest[0], rest[1], *rest[2:3])
