"""CPU target rules for tile operations: ``T.copy``, ``T.fill``, ``T.gemm``, ``T.reduce_*``, ``T.cumsum``,
``T.atomic_*`` (see :mod:`.codegen` for the contract).

Regions become loops over their non-unit extents; a copy pairs the source's non-unit extents with the
trailing ones of the destination (broadcasting the rest, as the interpreter does). ``T.gemm`` takes its
operands as tiles of the accumulator's compute type and calls ``mm`` (``np.dot``, BLAS) once per tile.

A statement on whole buffers of a plain dtype (fp32/fp64: storage and compute type are one; fp16/bf16 through
their bit patterns) becomes one call of an external helper instead (:mod:`.prelude_tiles`: ``tile_in``/
``tile_out`` between a global tensor of rank 1-5 and an entire 2-D tile, ``fill_all``, ``copy_all``, ``mm_acc``
for a gemm of whole 2-D tiles, ``acc_all`` after a general ``mm``, ``row_sum``/``row_max``/``row_min``): the same
meaning, and no helper code in the kernel for Numba and LLVM to compile again. ``_whole``, ``_tile_call`` and
``_mm_acc`` state when; the name each call uses comes from ``_Gen.ext``, which records the helper's symbol.
"""

from __future__ import annotations

from ... import dtypes as dt
from ...ir import nodes as N
from .codegen import STMT_RULES, Unsupported, _encode_const, _Gen, onchip_dtype

rule = STMT_RULES.register


def _ext(g: _Gen, e) -> str:
    return str(e) if isinstance(e, int) else g.expr(e)


def _starts(g: _Gen, r: N.Region) -> list:
    out = []
    for st in r.starts:
        if isinstance(st, N.Const):
            out.append(str(int(st.value)))
        else:
            name = g.fresh("s")
            g.emit(f"{name} = {g.expr(st)}")
            out.append(name)
    return out


def _nonunit(r: N.Region) -> list:
    return [d for d, e in enumerate(r.extents) if not (isinstance(e, int) and e == 1)]


def _same_extent(a, b) -> bool:
    return a == b


def _open_loops(g: _Gen, r: N.Region, dims: list) -> list:
    names = []
    for d in dims:
        j = g.fresh("j")
        g.emit(f"for {j} in range({_ext(g, r.extents[d])}):")
        g.depth += 1
        names.append(j)
    return names


def _index(starts: list, dims: list, loops: list) -> list:
    pos = dict(zip(dims, loops))
    return [f"{s} + {pos[d]}" if d in pos else s for d, s in enumerate(starts)]


def _paired(src: N.Region, src_starts: list, dst: N.Region, dst_dims: list, loops: list, where) -> list:
    """``src``'s indices: its non-unit dims take the trailing loops of ``dst``'s (checked to match)."""
    sn = _nonunit(src)
    if len(sn) > len(dst_dims):
        raise Unsupported("a tile copy whose source has more non-unit extents than its destination", where)
    tail = dst_dims[len(dst_dims) - len(sn):]
    for a, b in zip(sn, tail):
        if not _same_extent(src.extents[a], dst.extents[b]):
            raise Unsupported("a tile copy between regions of different shapes", where)
    return _index(src_starts, sn, loops[len(loops) - len(sn):])


# ------------------------------------------------------------------ whole-tile helpers (prelude_tiles.py)
_PLAIN = ("float32", "float64")  # dtypes whose storage and compute representation are one NumPy type


def _whole(r: N.Region) -> bool:
    """``r`` is all of an on-chip (shared/fragment) buffer with a static shape."""
    b = r.buffer
    return (b.scope not in ("global", "var") and b.alias_of is None and b.static_shape() is not None
            and all(isinstance(st, N.Const) and int(st.value) == 0 for st in r.starts)
            and tuple(r.extents) == tuple(b.static_shape()))


def _glob_tile(g: _Gen, s: N.Copy):
    """``(glob, tile, args)`` when ``s`` copies between a 1-5-D global tensor and a whole 2-D on-chip tile whose
    rows and columns are two of the global region's dims (``args``: the helper's five starts and the two dims;
    the starts are emitted), else None."""
    src, dst = s.src, s.dst
    glob, tile = (src, dst) if src.scope == "global" else (dst, src)
    if glob.scope != "global" or not _whole(tile) or len(tile.buffer.shape) != 2 or not 2 <= len(glob.extents) <= 5:
        return None
    dims = _nonunit(glob)
    if len(dims) != 2 or any(glob.extents[d] != e for d, e in zip(dims, tile.buffer.shape)):
        return None
    starts = _starts(g, glob) + ["0"] * (5 - len(glob.extents))
    return glob, tile, f"{', '.join(starts)}, {dims[0]}, {dims[1]}"


def _tile_call(g: _Gen, s: N.Copy) -> bool:
    """A copy between a global tensor and a whole 2-D on-chip tile of the same plain dtype, or between two
    whole on-chip buffers of one shape and dtype, as one helper call; False when it is neither."""
    src, dst = s.src, s.dst
    if src.dtype != dst.dtype or src.dtype not in _PLAIN:
        return _half_call(g, s)
    if _whole(src) and _whole(dst) and src.buffer.static_shape() == dst.buffer.static_shape():
        g.emit(f"{g.ext('copy_all', src.dtype)}({g.buf(src.buffer)}, {g.buf(dst.buffer)})")
        return True
    gt = _glob_tile(g, s)
    if gt is None:
        return False
    glob, tile, args = gt
    if glob is src:
        fill = g.safe.get(src.buffer.uid, 0)
        g.emit(f"{g.ext('tile_in', src.dtype)}({g.buf(src.buffer)}, {g.buf(dst.buffer)}, {g.const(src.dtype, repr(fill))}, {args})")
    else:
        g.emit(f"{g.ext('tile_out', src.dtype)}({g.buf(src.buffer)}, {g.buf(dst.buffer)}, {args})")
    return True


_HALF = ("float16", "bfloat16")  # global storage: uint16 bit patterns (``prelude_tiles.dec_all``/``enc_all``)
_F32 = ("float32", "float16", "bfloat16")  # on-chip storage float32 (narrow values already rounded)


def _half_call(g: _Gen, s: N.Copy) -> bool:
    """Copies of whole tiles involving fp16/bf16: on-chip to on-chip (``copy_all`` when no rounding is needed,
    else ``rnd_all``), a global fp16/bf16 tile into an on-chip tile of its dtype or float32 (bit patterns into
    a scratch tile, ``dec_all``), an on-chip fp32/fp16/bf16 tile into a global fp16/bf16 tensor (``enc_all``:
    one rounding, which is the interpreter's conversion followed by its exact storage)."""
    src, dst = s.src, s.dst
    if src.dtype not in _F32 or dst.dtype not in _F32:
        return False
    if _whole(src) and _whole(dst) and src.buffer.static_shape() == dst.buffer.static_shape():
        if src.dtype == dst.dtype or dst.dtype == "float32":
            g.emit(f"{g.ext('copy_all', 'float32')}({g.buf(src.buffer)}, {g.buf(dst.buffer)})")
        else:
            g.emit(f"{g.ext('rnd_all', 'float32')}({g.buf(src.buffer)}, {g.buf(dst.buffer)}, {dst.dtype == 'bfloat16'})")
        return True
    if src.scope == "global" and (src.dtype not in _HALF or dst.dtype not in (src.dtype, "float32")):
        return False
    if dst.scope == "global" and dst.dtype not in _HALF:
        return False
    gt = _glob_tile(g, s)
    if gt is None:
        return False
    glob, tile, args = gt
    bf = glob.dtype == "bfloat16"
    x = g.fresh("x")
    g.emit(f"{x} = full({tuple(tile.buffer.shape)!r}, {g.const('uint16', '0')})")
    if glob is src:
        fill = _encode_const(g.safe.get(src.buffer.uid, 0), src.dtype, None)
        g.emit(f"{g.ext('tile_in', 'uint16')}({g.buf(src.buffer)}, {x}, {g.const('uint16', str(fill))}, {args})")
        g.emit(f"{g.ext('dec_all', 'uint16')}({x}, {g.buf(dst.buffer)}, {bf})")
    else:
        g.emit(f"{g.ext('enc_all', 'float32')}({g.buf(src.buffer)}, {x}, {bf})")
        g.emit(f"{g.ext('tile_out', 'uint16')}({x}, {g.buf(dst.buffer)}, {args})")
    return True


@rule(N.Copy)
def _copy(g: _Gen, s: N.Copy) -> None:
    if _tile_call(g, s):
        return
    dst_starts = _starts(g, s.dst)
    src_starts = _starts(g, s.src)
    dims = _nonunit(s.dst)
    depth = g.depth
    loops = _open_loops(g, s.dst, dims)
    sidx = _paired(s.src, src_starts, s.dst, dims, loops, s.loc)
    v = g.conv(g.load(s.src.buffer, sidx), s.src.dtype, s.dst.dtype)
    g.store(s.dst.buffer, _index(dst_starts, dims, loops), v)
    g.depth = depth


@rule(N.Fill)
def _fill(g: _Gen, s: N.Fill) -> None:
    val = g.fresh("v")
    g.emit(f"{val} = {g.conv(g.expr(s.value), s.value.dtype, s.dst.dtype)}")
    if _whole(s.dst) and dt.is_float(s.dst.dtype):  # on-chip floats are stored as float32/64, ``val`` rounded
        g.emit(f"{g.ext('fill_all', onchip_dtype(s.dst.dtype).name)}({g.buf(s.dst.buffer)}, {val})")
        return
    starts = _starts(g, s.dst)
    dims = _nonunit(s.dst)
    depth = g.depth
    loops = _open_loops(g, s.dst, dims)
    g.store(s.dst.buffer, _index(starts, dims, loops), val)
    g.depth = depth


_COMBINE = {"add": "({a} + {b})", "max": "fmax({a}, {b})", "min": "fmin({a}, {b})"}
_COMBINE_INT = {"add": "({a} + {b})", "max": "max({a}, {b})", "min": "min({a}, {b})"}


@rule(N.Atomic)
def _atomic(g: _Gen, s: N.Atomic) -> None:
    starts = _starts(g, s.dst)
    d = s.dst.dtype
    if isinstance(s.value, N.Region):
        vstarts = _starts(g, s.value)
        dims = _nonunit(s.dst)
        depth = g.depth
        loops = _open_loops(g, s.dst, dims)
        vidx = _paired(s.value, vstarts, s.dst, dims, loops, s.loc)
        value = g.conv(g.load(s.value.buffer, vidx), s.value.dtype, d)
    else:
        value = g.fresh("v")
        g.emit(f"{value} = {g.conv(g.expr(s.value), s.value.dtype, d)}")
        dims = _nonunit(s.dst)
        depth = g.depth
        loops = _open_loops(g, s.dst, dims)
    idx = _index(starts, dims, loops)
    old = g.load(s.dst.buffer, idx)
    table = _COMBINE if dt.is_float(d) else _COMBINE_INT
    new = table[s.kind].format(a=old, b=value)
    if dt.is_float(d):
        new = g.conv(f"np.float32({new})" if d != "float64" else new, "float32" if d != "float64" else d, d)
    else:
        new = g.conv(f"np.int64({new})", "int64", d)
    g.store(s.dst.buffer, idx, new)
    g.depth = depth


# ------------------------------------------------------------------------------------------- gemm
def _matrix_dims(r: N.Region, where) -> list:
    """The two dims of ``r`` that form the matrix (leading unit extents dropped, as the interpreter)."""
    dims = list(range(len(r.extents)))
    while len(dims) > 2 and r.extents[dims[0]] == 1:
        dims.pop(0)
    if len(dims) != 2 or any(not isinstance(r.extents[d], int) for d in dims):
        raise Unsupported("a T.gemm operand that is not a static 2-D tile", where)
    if any(r.extents[d] != 1 for d in range(len(r.extents)) if d not in dims):
        raise Unsupported("a T.gemm operand with more than two non-unit extents", where)
    return dims


def _tile(g: _Gen, r: N.Region, acc: str, where) -> str:
    """A contiguous ``acc`` array holding region ``r`` as a matrix."""
    if r.buffer.scope in ("global", "var") or r.buffer.alias_of is not None:
        raise Unsupported("a T.gemm operand outside shared/fragment memory", where)
    dims = _matrix_dims(r, where)
    starts = _starts(g, r)
    sl = [f"{st}:{st} + {r.extents[d]}" if d in dims else st for d, st in enumerate(starts)]
    whole = all(st == "0" for st in starts) and all(r.extents[d] == r.buffer.shape[d] for d in dims)
    view = g.buf(r.buffer) if whole and len(dims) == len(r.extents) else f"{g.buf(r.buffer)}[{', '.join(sl)}]"
    if dt.is_float(r.dtype) and (r.dtype == "float64") == (acc == "float64"):
        return view  # already of the accumulator's compute type: ``mm`` takes it as it is
    name = g.fresh("m")
    if False:
        pass
    else:
        g.emit(f"{name} = np.ascontiguousarray({view}).astype(np.{acc})")
    return name


def _mm_acc(g: _Gen, s: N.Gemm, acc: str) -> bool:
    """``T.gemm`` of whole 2-D on-chip operands and accumulator, all of the accumulator's compute type, as one
    ``mm_acc`` call (the product and the accumulation of ``mm`` + ``acc_all``/``copy_all``, same order)."""
    regions = (s.a, s.b, s.c)
    if not all(_whole(r) and len(r.buffer.shape) == 2 and onchip_dtype(r.dtype).name == acc for r in regions):
        return False
    if s.c.dtype != acc:  # a narrow accumulator is rounded after the addition: the element loops
        return False
    a, b, c = (g.buf(r.buffer) for r in regions)
    g.emit(f"{g.ext('mm_acc', acc)}({a}, {b}, {c}, {bool(s.trans_a)}, {bool(s.trans_b)}, {bool(s.clear_accum)})")
    return True


@rule(N.Gemm)
def _gemm(g: _Gen, s: N.Gemm) -> None:
    if not dt.is_float(s.c.dtype):
        raise Unsupported("an integer T.gemm", s.loc)
    if g.tf32 and s.a.dtype == "float32":
        raise Unsupported("TF32 gemm operands (InterpOptions.tf32)", s.loc)
    acc = "float64" if s.c.dtype == "float64" else "float32"
    if _mm_acc(g, s, acc):
        return
    a = _tile(g, s.a, acc, s.loc)
    b = _tile(g, s.b, acc, s.loc)
    prod = g.fresh("p")
    g.emit(f"{prod} = mm({a}, {b}, {bool(s.trans_a)}, {bool(s.trans_b)})")
    c = s.c
    if c.buffer.scope in ("global", "var") or c.buffer.alias_of is not None:
        raise Unsupported("a T.gemm accumulator outside fragment/shared memory", s.loc)
    dims = _matrix_dims(c, s.loc)
    if _whole(c) and c.dtype == acc:  # the product has the accumulator's shape (leading unit dims dropped)
        if s.clear_accum:
            g.emit(f"{g.ext('copy_all', acc)}({prod}, {g.buf(c.buffer)})")
        else:
            g.emit(f"{g.ext('acc_all', acc)}({g.buf(c.buffer)}, {prod})")
        return
    starts = _starts(g, c)
    i, j = g.fresh("i"), g.fresh("j")
    g.emit(f"for {i} in range({c.extents[dims[0]]}):")
    g.emit(f"    for {j} in range({c.extents[dims[1]]}):")
    g.depth += 2
    idx = _index(starts, dims, [i, j])
    p = f"{prod}[{i}, {j}]"
    if s.clear_accum:
        new = p
    else:
        new = f"np.{acc}({g.load(c.buffer, idx)} + {p})"
    g.store(c.buffer, idx, g.conv(new, acc, c.dtype))
    g.depth -= 2


# -------------------------------------------------------------------------------------- reductions
_REDUCE = {"sum": ("({a} + {b})", "0"), "abssum": ("({a} + abs({b}))", "0"),
           "max": ("fmax({a}, {b})", "-np.inf"), "min": ("fmin({a}, {b})", "np.inf"),
           "absmax": ("fmax({a}, abs({b}))", "-np.inf")}
_REDUCE_INT = {"sum": ("({a} + {b})", "0"), "abssum": ("({a} + abs({b}))", "0"),
               "max": ("max({a}, {b})", None), "min": ("min({a}, {b})", None), "absmax": ("max({a}, abs({b}))", None)}


def _reduce_type(src: str, dst: str, kind: str) -> str:
    """Compute dtype of the reduction (``reference.reduce``): the source's, widened for float sums."""
    sc = "float64" if src == "float64" else ("float32" if dt.is_float(src) else "int64")
    if dt.is_float(dst) and kind in ("sum", "abssum"):
        dc = "float64" if dst == "float64" else "float32"
        if sc == "int64" or "float64" in (sc, dc):
            return "float64"
        return "float32"
    return sc


@rule(N.Reduce)
def _reduce(g: _Gen, s: N.Reduce) -> None:
    src, dst = s.src, s.dst
    sn = _nonunit(src)
    kept = [d for d in sn if d != s.dim]
    dn = _nonunit(dst)
    if len(kept) != len(dn) or any(not _same_extent(src.extents[a], dst.extents[b]) for a, b in zip(kept, dn)):
        raise Unsupported("a reduction whose destination does not match the kept source extents", s.loc)
    ct = _reduce_type(src.dtype, dst.dtype, s.kind)
    if (s.kind in ("sum", "max", "min") and src.dtype == dst.dtype == ct and ct in _PLAIN and _whole(src)
            and _whole(dst) and len(src.buffer.shape) == 2 and len(dst.buffer.shape) == 1 and s.dim == 1):
        init = {"sum": "0", "max": "-np.inf", "min": "np.inf"}[s.kind]
        g.emit(f"{g.ext('row_' + s.kind, ct)}({g.buf(src.buffer)}, {g.buf(dst.buffer)}, {g.const(ct, init)}, {bool(s.clear)})")
        return
    float_ = ct != "int64"
    expr, init = (_REDUCE if float_ else _REDUCE_INT)[s.kind]
    sstarts, dstarts = _starts(g, src), _starts(g, dst)
    depth = g.depth
    loops = _open_loops(g, src, kept)
    acc, k = g.fresh("a"), g.fresh("k")
    first = init is None
    g.emit(f"{acc} = np.{ct}({init if init is not None else 0})")
    red = s.dim if s.dim in sn else None
    n = _ext(g, src.extents[s.dim]) if red is not None else "1"
    g.emit(f"for {k} in range({n}):")
    g.depth += 1
    sidx = _index(sstarts, kept + ([red] if red is not None else []), loops + ([k] if red is not None else []))
    x = g.conv(g.load(src.buffer, sidx), src.dtype, ct)
    if first:
        g.emit(f"{acc} = {x} if {k} == 0 else {expr.format(a=acc, b=x)}")
    else:
        g.emit(f"{acc} = np.{ct}({expr.format(a=acc, b=x)})")
    g.depth -= 1
    didx = _index(dstarts, dn, loops)
    r = acc
    if not s.clear:
        old = g.conv(g.load(dst.buffer, didx), dst.dtype, ct)
        comb = {"sum": "({a} + {b})", "abssum": "({a} + {b})"}.get(
            s.kind, ("fmax({a}, {b})" if float_ else "max({a}, {b})") if s.kind in ("max", "absmax")
            else ("fmin({a}, {b})" if float_ else "min({a}, {b})"))
        r = f"np.{ct}({comb.format(a=old, b=acc)})"
    g.store(dst.buffer, didx, g.conv(r, ct, dst.dtype))
    g.depth = depth


@rule(N.Cumsum)
def _cumsum(g: _Gen, s: N.Cumsum) -> None:
    src, dst = s.src, s.dst
    if _nonunit(src) != _nonunit(dst) or any(not _same_extent(src.extents[d], dst.extents[d]) for d in _nonunit(src)):
        raise Unsupported("a cumsum between regions of different shapes", s.loc)
    dims = _nonunit(src)
    if s.dim not in dims:
        raise Unsupported("a cumsum along a unit extent", s.loc)
    ct = "float64" if src.dtype == "float64" else ("float32" if dt.is_float(src.dtype) else "int64")
    sstarts, dstarts = _starts(g, src), _starts(g, dst)
    kept = [d for d in dims if d != s.dim]
    depth = g.depth
    loops = _open_loops(g, src, kept)
    acc, k, kk = g.fresh("a"), g.fresh("k"), g.fresh("k")
    n = _ext(g, src.extents[s.dim])
    g.emit(f"{acc} = np.{ct}(0)")
    g.emit(f"for {k} in range({n}):")
    g.depth += 1
    g.emit(f"{kk} = {n} - 1 - {k}" if s.reverse else f"{kk} = {k}")
    order = kept + [s.dim]
    x = g.conv(g.load(src.buffer, _index(sstarts, order, loops + [kk])), src.dtype, ct)
    g.emit(f"{acc} = np.{ct}({acc} + {x})")
    g.store(dst.buffer, _index(dstarts, order, loops + [kk]), g.conv(acc, ct, dst.dtype))
    g.depth = depth
