"""Builders for ``T.*`` primitives: argument checking and IR construction (the semantic layer).

Contract
--------
* :func:`call` binds the call's arguments against the marker's Python signature (so argument errors
  read like Python's, as ``KernelTypeError``), then runs the builder registered for the primitive.
* Builders of tile operations check shapes, dtypes and scopes and emit one statement; builders of
  expression primitives return an IR expression (or a Python value when every input is Python).
* ``BUILDERS`` covers every marker in ``tilesim.language``; a test checks it.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import math

from .. import dtypes as dt
from ..errors import KernelError, KernelSyntaxError, KernelTypeError
from ..ir import nodes as N
from ..language.kernel import Kernel
from ..language.types import symbol_names
from . import allreduce as AR  # noqa: F401  (registers T.comm_reducer / T.tvm_thread_allreduce)
from . import bitwise as _bitwise  # noqa: F401  (registers T.shift_left/right, T.bitwise_*)
from . import cluster as C  # T.ClusterKernel's cluster_dims (and registers the cluster builders)
from . import exprs as X
from . import extern as _extern  # noqa: F401  (registers T.import_source/call_extern)
from . import ptx as _ptx  # noqa: F401  (registers cp.async, access_ptr, vector atomics)
from . import reducer as _reducer  # T.alloc_reducer / T.finalize_reducer
from . import regions as R
from . import rng as _rng  # noqa: F401  (registers T.rng_init / T.rng_rand)
from . import simt as S  # also registers the per-thread builders
from . import warp as _warp  # noqa: F401  (registers the warp-shuffle builders)
from . import ws as W  # noqa: F401  (registers the warp-specialisation builders)
from .builders import BUILDERS, builder
from .persistent import persistent_loop

LOOP_PRIMS = frozenset({"Parallel", "parallel", "Pipelined", "serial", "unroll", "vectorized", "grid", "thread_binding",
                        "Persistent"})
_NO_OPS = frozenset({"annotate_padding", "annotate_l2_hit_ratio",
                     "no_set_max_nreg", "set_max_nreg", "disable_warp_group_reg_alloc", "print"})


def call(tr, node, name, fn, args, kwargs):
    loc = tr.loc(node)
    reason = getattr(fn, "__tilesim_unsupported__", None)
    if reason is not None:
        raise KernelSyntaxError(f"T.{name} is not supported by tilesim", loc, hint=reason)
    if name in _NO_OPS:
        return None
    b = BUILDERS.get(name)
    if b is None:
        if name in LOOP_PRIMS or name == "Kernel":
            raise KernelSyntaxError(f"T.{name} can only be used as `for ... in T.{name}(...)`"
                                    if name != "Kernel" else "T.Kernel is used as `with T.Kernel(...) as ...:`", loc)
        raise KernelSyntaxError(f"T.{name} cannot be used here", loc)
    sig_fn, shown = getattr(fn, "__tilesim_sig__", fn), getattr(fn, "__tilesim_display__", f"T.{name}")
    try:
        ba = inspect.signature(sig_fn).bind(*args, **kwargs)
    except TypeError as e:
        raise KernelTypeError(f"{shown}: {e}", loc, hint=f"signature: {shown}{inspect.signature(sig_fn)}") from None
    ba.apply_defaults()
    try:
        return b(tr, loc, **ba.arguments)
    except KernelError as e:
        raise e.with_loc(loc)  # noqa: B904 - the same exception, located


def _tile_op_context(tr, loc, name):
    if not tr.in_launch():
        raise KernelSyntaxError(f"T.{name} outside `with T.Kernel(...)`", loc,
                                hint="tile operations run inside a kernel launch")
    if tr.parallel_depth:
        raise KernelSyntaxError(f"tile operation T.{name} inside T.Parallel", loc,
                                hint="move it out of the T.Parallel loop; T.Parallel bodies hold element-wise "
                                     "statements only")


# ---------------------------------------------------------------------------------------- launch
def launch(tr, node, call_node, target):
    loc = tr.loc(node)
    args, kwargs = tr.call_args(call_node)
    try:
        ba = inspect.signature(Kernel.__tilesim_sig__).bind(*args, **kwargs)
    except TypeError as e:
        raise KernelTypeError(f"T.Kernel: {e}", loc) from None
    ba.apply_defaults()
    grid = ba.arguments["blocks"]
    if tr.in_launch():
        raise KernelSyntaxError("T.Kernel inside another T.Kernel", loc, hint="launches are sequential, not nested")
    if tr.ir_depth:
        raise KernelSyntaxError("T.Kernel inside a kernel loop or `if`", loc,
                                hint="launches must be top-level statements of the program")
    if not 1 <= len(grid) <= 3:
        raise KernelTypeError(f"T.Kernel takes 1 to 3 grid extents, got {len(grid)}", loc)
    gexprs = []
    for g in grid:
        if isinstance(g, int) and g <= 0:
            raise KernelTypeError(f"T.Kernel grid extent must be positive, got {g}", loc)
        gexprs.append(X.index_expr(g, loc))
    threads = ba.arguments["threads"]
    threads = tuple(threads) if isinstance(threads, (tuple, list)) else (threads,)
    if not all(isinstance(t, int) and t > 0 for t in threads):
        raise KernelTypeError(f"T.Kernel threads must be positive ints, got {threads}", loc)
    names = ("bx", "by", "bz")
    bvars = tuple(N.Var(names[i], "int32", kind="block", loc=loc) for i in range(len(grid)))
    if target is not None:
        if isinstance(target, ast.Name):
            tr.bind(target.id, bvars[0] if len(bvars) == 1 else bvars, target)
        else:
            elts = target.elts
            if len(elts) != len(bvars):
                raise KernelSyntaxError(f"T.Kernel has {len(bvars)} grid dimension(s) but {len(elts)} names", loc)
            for e, v in zip(elts, bvars):
                tr.bind(e.id, v, e)
    cluster = C.launch_cluster(ba.arguments["cluster_dims"], grid, loc)
    tr.launch = {"allocs": [], "annotations": [("cluster", cluster)] if cluster else [], "threads": threads,
                 "thread_vars": {}, "block_vars": bvars, "cluster": cluster}
    tr.bodies.append([])
    try:
        tr.visit_body(node.body)
    finally:
        body = tr.bodies.pop()
        info = tr.launch
        tr.launch = None
    body = _reducer.rewrite_launch(info, body)
    stmt = N.Launch(tuple(gexprs), bvars, threads, tuple(info["allocs"]) + tuple(body),
                    tuple(info["annotations"]), loc, S.launch_thread_vars(info, loc))
    tr.emit(stmt)


# ---------------------------------------------------------------------------------------- loops
def loop(tr, node, name, fn, args, kwargs):
    loc = tr.loc(node)
    if name == "range":
        if kwargs or not 1 <= len(args) <= 3:
            raise KernelTypeError("range() takes 1 to 3 positional arguments", loc)
        start, stop, step = (0, args[0], 1) if len(args) == 1 else (args[0], args[1], args[2] if len(args) == 3 else 1)
        return _serial(tr, node, "serial", start, stop, step, ())
    if name == "thread_binding":
        return S.thread_binding_loop(tr, node, fn, args, kwargs)
    sig_fn = getattr(fn, "__tilesim_sig__", fn)
    try:
        ba = inspect.signature(sig_fn).bind(*args, **kwargs)
    except TypeError as e:
        raise KernelTypeError(f"T.{name}: {e}", loc) from None
    ba.apply_defaults()
    a = ba.arguments
    if name == "Parallel":
        return _parallel(tr, node, a["extents"])
    if name == "parallel":  # TIR's parallel loop: T.Parallel over stop - start, the index offset by start
        start, stop = (0, a["start"]) if a.get("stop") is None else (a["start"], a["stop"])
        start, stop = (v.value if isinstance(v, N.Const) else v for v in (start, stop))
        if not isinstance(start, int) or not isinstance(stop, int):
            raise KernelTypeError("T.parallel bounds must be compile-time constants", loc,
                                  hint="use tile sizes (Python ints); guard the tensor edge with an `if` inside")
        return _parallel(tr, node, (stop - start,), offset=start)
    if name == "grid":
        return _grid(tr, node, a["extents"])
    if name == "Persistent":
        return persistent_loop(tr, node, a)
    if tr.parallel_depth and name == "Pipelined":
        raise KernelSyntaxError("T.Pipelined inside T.Parallel", loc, hint="pipeline the outer tile loop instead")
    start, stop = (0, a["start"]) if a.get("stop") is None else (a["start"], a["stop"])
    step = a.get("step") or 1
    ann = ()
    if name == "Pipelined":
        if not tr.in_launch():
            raise KernelSyntaxError("T.Pipelined outside `with T.Kernel(...)`", loc)
        ns = a["num_stages"]
        if not isinstance(ns, int) or ns < 0:
            raise KernelTypeError(f"T.Pipelined num_stages must be a non-negative int, got {ns!r}", loc)
        ann = (("num_stages", ns), ("order", _tup(a["order"])), ("stage", _tup(a["stage"])))
    kind = {"Pipelined": "pipelined", "serial": "serial", "unroll": "unroll", "vectorized": "vectorized"}[name]
    return _serial(tr, node, kind, start, stop, step, ann)


def _tup(v):
    return tuple(v) if isinstance(v, (list, tuple)) else v


def _serial(tr, node, kind, start, stop, step, ann):
    loc = tr.loc(node)
    if not isinstance(node.target, ast.Name):
        raise KernelSyntaxError("a serial loop binds one name", loc)
    if not isinstance(step, int) or step == 0:
        raise KernelTypeError(f"loop step must be a non-zero Python int, got {step!r}", loc)
    var = N.Var(node.target.id, "int32", kind="loop", loc=tr.loc(node.target))
    s, e = X.index_expr(start, loc), X.index_expr(stop, loc)
    tr.bind(node.target.id, var, node.target, loop_var=True)
    body = tr.sub_body(node.body, loop=True)
    tr.emit(N.For(var, s, e, step, kind, body, ann, loc))


def _parallel(tr, node, extents, offset=0):
    loc = tr.loc(node)
    if not tr.in_launch():
        raise KernelSyntaxError("T.Parallel outside `with T.Kernel(...)`", loc)
    if not extents:
        raise KernelTypeError("T.Parallel needs at least one extent", loc)
    exts = []
    for e in extents:
        if isinstance(e, N.Const):
            e = e.value
        if not isinstance(e, int):
            raise KernelTypeError("T.Parallel extents must be compile-time constants", loc,
                                  hint="use tile sizes (Python ints); guard the tensor edge with an `if` inside")
        if e <= 0:
            raise KernelTypeError(f"T.Parallel extent must be positive, got {e}", loc)
        exts.append(e)
    tgt = node.target
    names = [tgt] if isinstance(tgt, ast.Name) else list(getattr(tgt, "elts", []))
    if len(names) != len(exts) or not all(isinstance(n, ast.Name) for n in names):
        raise KernelSyntaxError(f"T.Parallel has {len(exts)} extent(s) but the loop binds {len(names)} name(s)", loc)
    vars_ = tuple(N.Var(n.id, "int32", kind="parallel", loc=tr.loc(n)) for n in names)
    for n, v in zip(names, vars_):
        tr.bind(n.id, v if not offset else X.binop("add", v, offset, loc), n, loop_var=True)
    tr.parallel_depth += 1
    tr.parallel_axes.append((vars_, tuple(exts)))
    try:
        body = tr.sub_body(node.body, loop=False)
    finally:
        tr.parallel_depth -= 1
        tr.parallel_axes.pop()
    tr.emit(N.Parallel(vars_, tuple(exts), body, loc))
    if not tr.parallel_depth:  # statements the body's builders asked to run after the outermost loop
        for s in tr.launch.pop("after_parallel", ()):
            tr.emit(s)


def _grid(tr, node, extents):
    loc = tr.loc(node)
    tgt = node.target
    names = [tgt] if isinstance(tgt, ast.Name) else list(getattr(tgt, "elts", []))
    if len(names) != len(extents):
        raise KernelSyntaxError(f"T.grid has {len(extents)} extent(s) but the loop binds {len(names)} name(s)", loc)
    vars_ = [N.Var(n.id, "int32", kind="loop", loc=tr.loc(n)) for n in names]
    for n, v in zip(names, vars_):
        tr.bind(n.id, v, n, loop_var=True)
    body = tr.sub_body(node.body, loop=True)
    for v, e in reversed(list(zip(vars_, extents))):
        body = (N.For(v, N.Const(0, "int32"), X.index_expr(e, loc), 1, "serial", body, (), loc),)
    tr.emit(body[0])


# ---------------------------------------------------------------------------------------- allocation
def _static_shape(shape, loc, what):
    shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
    out = []
    for s in shape:
        if isinstance(s, N.Const):
            s = s.value
        if not isinstance(s, int):
            raise KernelTypeError(f"{what}: tile shape must be compile-time constants, got a kernel value", loc,
                                  hint="tile shapes are Python ints (e.g. closure constants block_M, block_N)")
        if s <= 0:
            raise KernelTypeError(f"{what}: tile dimension must be positive, got {s}", loc)
        out.append(int(s))
    return tuple(out)


def _alloc(tr, loc, shape, dtype, scope, what):
    shp = _static_shape(shape, loc, what)
    buf = N.Buffer(tr.assign_name or scope, shp, dt.canon(dtype), scope, loc=loc)
    tr._alloc(buf)
    return buf


@builder("alloc_shared")
def _b_alloc_shared(tr, loc, shape, dtype, scope):
    return _alloc(tr, loc, shape, dtype, "shared", "T.alloc_shared")


@builder("alloc_fragment")
def _b_alloc_fragment(tr, loc, shape, dtype, scope=None, op=None, replication=None):
    return _alloc(tr, loc, shape, dtype, "fragment", "T.alloc_fragment")


@builder("alloc_local")
def _b_alloc_local(tr, loc, shape, dtype, scope):
    return _alloc(tr, loc, shape, dtype, "local", "T.alloc_local")


@builder("alloc_var")
def _b_alloc_var(tr, loc, dtype, init, scope):
    """A scalar variable of the block; inside ``T.Parallel`` one per element (each iteration of a
    parallel loop allocates its own, as TileLang's per-thread local), an :class:`~.exprs.ElementVar`."""
    d = dt.canon(dtype)
    init_e = None if init is None else X.cast_to(X.to_expr(init, loc, like=d), d, loc)
    if not tr.in_launch():
        raise KernelSyntaxError("T.alloc_var outside `with T.Kernel(...)`", loc)
    if tr.parallel_axes:
        axes = [v for vs, _ in tr.parallel_axes for v in vs]
        shape = tuple(e for _, es in tr.parallel_axes for e in es)
        buf = N.Buffer(tr.assign_name or "var", shape, d, "fragment", loc=loc)
        tr._alloc(buf)
        if init_e is not None:
            tr.emit(N.Store(buf, tuple(axes), init_e, loc))
        return X.ElementVar(buf, tuple(axes), loc)
    buf = N.Buffer(tr.assign_name or "var", (), d, "var", loc=loc)
    tr._alloc(buf, init_e)
    return buf


@builder("alloc_global")
def _b_alloc_global(tr, loc, shape, dtype):
    shp = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
    buf = N.Buffer(tr.assign_name or "workspace", tuple(_dim(s, loc) for s in shp), dt.canon(dtype), "global", loc=loc)
    tr._alloc(buf)
    return buf


def _dim(s, loc):
    if isinstance(s, int):
        return s
    return X.index_expr(s, loc)


@builder("empty")
def _b_empty(tr, loc, shape, dtype):
    if not tr.eager:
        raise KernelSyntaxError("T.empty is for eager-style kernels", loc,
                                hint="in a prim_func, add the output as a T.Tensor parameter and use out_idx")
    shp = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
    buf = N.Buffer(tr.assign_name or f"out{len(tr.outputs_declared())}", tuple(_dim(s, loc) for s in shp),
                   dt.canon(dtype), "global", loc=loc)
    if not hasattr(tr, "_empties"):
        tr._empties = []
    tr._empties.append(buf)
    return buf


@builder("const")
def _b_const(tr, loc, names, dtype):
    if not tr.eager:
        raise KernelSyntaxError("T.const is for eager-style kernels", loc,
                                hint="in a kernel factory, pass sizes as factory arguments")
    parts = symbol_names(names, "T.const")
    out = []
    for p in parts:
        if p in tr.const_values:
            out.append(int(tr.const_values[p]))
        else:
            v = N.Var(p, dt.canon(dtype), kind="const", loc=loc)
            tr.const_vars.append(v)
            out.append(v)
    return out[0] if len(out) == 1 else tuple(out)


@builder("reshape", "view")
def _b_view(tr, loc, src, shape=None, dtype=None):
    if not isinstance(src, N.Buffer):
        raise KernelTypeError("T.reshape/T.view take a buffer", loc)
    new_dtype = dt.canon(dtype) if dtype is not None else src.dtype
    shp = src.shape if shape is None else (tuple(shape) if isinstance(shape, (tuple, list)) else (shape,))
    shp = tuple(_dim(s, loc) for s in shp)
    old = _nbits(src.shape, src.dtype)
    new = _nbits(shp, new_dtype)
    if old is not None and new is not None and old != new:
        raise KernelTypeError(f"cannot view {src.name} {tuple(src.shape)} {src.dtype} as {shp} {new_dtype}: "
                              f"{old // 8} vs {new // 8} bytes", loc)
    root = src.alias_of or src
    buf = N.Buffer(tr.assign_name or f"{src.name}_view", shp, new_dtype, src.scope, alias_of=root, loc=loc)
    tr._alloc(buf)
    return buf


def _nbits(shape, dtype):
    n = 1
    for s in shape:
        if not isinstance(s, int):
            return None
        n *= s
    return int(n * dt.bits(dtype))


# ---------------------------------------------------------------------------------------- tile ops
@builder("copy", "tma_copy", "async_copy")
def _b_copy(tr, loc, src, dst, **_hints):
    _tile_op_context(tr, loc, "copy")
    s = R.operand(src, loc, "T.copy source")
    d = R.operand(dst, loc, "T.copy destination")
    if isinstance(s, R.Corner) and isinstance(d, R.Corner):
        raise KernelTypeError("T.copy: both operands are single elements, so the tile shape is unknown", loc,
                              hint="give one side a shape: a buffer or a slice region such as A[0:64, k:k+32]")
    if isinstance(s, R.Corner):
        s = R.complete(s, d.extents, loc, "T.copy source")
    if isinstance(d, R.Corner):
        d = R.complete(d, s.extents, loc, "T.copy destination")
    if not R.pair_shapes(s.extents, d.extents):
        raise KernelTypeError(
            f"T.copy: source {s.buffer.name} region {_fmt(s.extents)} and destination {d.buffer.name} region "
            f"{_fmt(d.extents)} do not pair", loc,
            hint="the non-unit extents must match in order (or the source broadcast to the destination)")
    for r in (s, d):
        if r.scope != "global":
            R.static_extents(r, "T.copy", loc)
    tr.emit(N.Copy(s, d, loc))


def _fmt(ext):
    return "(" + ", ".join(str(e) if isinstance(e, int) else "?" for e in ext) + ")"


def _gemm_shape(r, name, loc):
    ext = [e for e in R.static_extents(r, "T.gemm", loc)]
    while len(ext) > 2 and ext[0] == 1:
        ext.pop(0)
    if len(ext) != 2:
        raise KernelTypeError(f"T.gemm: {name} ({r.buffer.name}) must be a 2-D tile, got {_fmt(r.extents)}", loc)
    return ext


@builder("gemm", "wgmma_gemm")
def _b_gemm(tr, loc, A, B, C, transpose_A, transpose_B, policy, clear_accum, k_pack, wg_wait, mbar, pair=False,
            annotations=None):
    _tile_op_context(tr, loc, "gemm")
    ra, rb, rc = (R.operand(x, loc, f"T.gemm {n}") for x, n in ((A, "A"), (B, "B"), (C, "C")))
    for r, n in ((ra, "A"), (rb, "B"), (rc, "C")):
        if isinstance(r, R.Corner):
            raise KernelTypeError(f"T.gemm: operand {n} must be a buffer or a slice region", loc)
        if r.scope == "global":
            raise KernelTypeError(f"T.gemm: operand {n} ({r.buffer.name}) is a global tensor", loc,
                                  hint="copy tiles into T.alloc_shared / T.alloc_fragment buffers first")
    if rc.scope not in ("fragment", "local", "tmem"):
        raise KernelTypeError(f"T.gemm: C ({rc.buffer.name}) must be a fragment (T.alloc_fragment) or tensor "
                              "memory (T.alloc_tmem)", loc)
    sa, sb, sc = _gemm_shape(ra, "A", loc), _gemm_shape(rb, "B", loc), _gemm_shape(rc, "C", loc)
    m, ka = (sa[1], sa[0]) if transpose_A else (sa[0], sa[1])
    kb, n = (sb[1], sb[0]) if transpose_B else (sb[0], sb[1])
    n = 2 * n if pair else n  # a 2-CTA gemm: B is this block's half of the pair's (T.tcgen05_gemm, use_2cta)
    if ka != kb:
        raise KernelTypeError(
            f"T.gemm: reduction dims differ: A ({ra.buffer.name}) is {tuple(sa)}{' transposed' if transpose_A else ''}, "
            f"B ({rb.buffer.name}) is {tuple(sb)}{' transposed' if transpose_B else ''}: K {ka} vs {kb}", loc,
            hint="check transpose_A / transpose_B and the tile shapes")
    if (m, n) != tuple(sc):
        raise KernelTypeError(f"T.gemm: C ({rc.buffer.name}) is {tuple(sc)} but op(A) @ op(B) is ({m}, {n})", loc)
    if ra.dtype != rb.dtype and not (ra.dtype in dt.FP8 and rb.dtype in dt.FP8):  # e4m3 x e5m2: as TileLang
        raise KernelTypeError(f"T.gemm: A is {ra.dtype} but B is {rb.dtype}", loc,
                              hint="A and B must share a dtype (or both be fp8); convert one with T.copy")
    if dt.is_int(ra.dtype) and not dt.is_int(rc.dtype):
        raise KernelTypeError(f"T.gemm: integer inputs need an integer accumulator (C is {rc.dtype})", loc)
    if dt.is_float(ra.dtype) and not dt.is_float(rc.dtype):
        raise KernelTypeError(f"T.gemm: float inputs need a float accumulator (C is {rc.dtype})", loc)
    pol = getattr(policy, "name", str(policy))
    clear = clear_accum.value if isinstance(clear_accum, N.Const) else clear_accum
    g = N.Gemm(ra, rb, rc, bool(transpose_A), bool(transpose_B), False, pol, loc, pair)
    if X.is_ir(clear) and pair:  # both blocks' C are cleared: the choice is between two pair gemms
        tr.emit(N.If(X.to_bool(clear, loc), (dataclasses.replace(g, clear_accum=True),), (g,), loc))
        return
    if X.is_ir(clear):  # `clear_accum=k == 0`: clear where it holds, then accumulate
        tr.emit(N.If(X.to_bool(clear, loc), (N.Fill(rc, N.Const(0, rc.dtype, loc), loc),), (), loc))
        clear = False
    tr.emit(dataclasses.replace(g, clear_accum=bool(clear)))


def _reduce(tr, loc, kind, buffer, out, dim, clear):
    _tile_op_context(tr, loc, f"reduce_{kind}")
    rs = R.operand(buffer, loc, f"T.reduce_{kind} input")
    rd = R.operand(out, loc, f"T.reduce_{kind} output")
    if isinstance(rs, R.Corner) or isinstance(rd, R.Corner):
        raise KernelTypeError(f"T.reduce_{kind}: operands must be buffers or slice regions", loc)
    se = R.static_extents(rs, "T.reduce", loc)
    de = R.static_extents(rd, "T.reduce", loc)
    nd = len(se)
    if not -nd <= dim < nd:
        raise KernelTypeError(f"T.reduce_{kind}: dim {dim} is out of range for a {nd}-D input", loc)
    dim = dim % nd
    want = se[:dim] + se[dim + 1:]
    keep = se[:dim] + (1,) + se[dim + 1:]
    if tuple(de) not in (want, keep) and [e for e in de if e != 1] != [e for e in want if e != 1]:
        raise KernelTypeError(f"T.reduce_{kind}: output {rd.buffer.name} is {tuple(de)} but reducing dim {dim} "
                              f"of {tuple(se)} gives {want}", loc, hint="the output drops the reduced dim (or keeps it as 1)")
    if not isinstance(clear, bool):
        raise KernelTypeError("T.reduce_*: clear must be a Python bool", loc)
    tr.emit(N.Reduce(kind, rs, rd, dim, clear, loc))


for _k in ("max", "min", "sum", "absmax"):
    def _mk(kind):
        def b(tr, loc, buffer, out, dim, clear, annotations=None):
            return _reduce(tr, loc, kind, buffer, out, dim, clear)
        return b
    BUILDERS[f"reduce_{_k}"] = _mk(_k)


@builder("reduce_abssum")
def _b_abssum(tr, loc, buffer, out, dim):
    return _reduce(tr, loc, "abssum", buffer, out, dim, True)


@builder("reduce")
def _b_reduce(tr, loc, buffer, out, reduce_type, dim, clear):
    if reduce_type not in N.REDUCE_KINDS:
        raise KernelTypeError(f"T.reduce: unknown reduce_type {reduce_type!r}", loc,
                              hint="one of " + ", ".join(sorted(N.REDUCE_KINDS)))
    return _reduce(tr, loc, reduce_type, buffer, out, dim, clear)


@builder("cumsum")
def _b_cumsum(tr, loc, src, dst, dim, reverse):
    _tile_op_context(tr, loc, "cumsum")
    rs = R.operand(src, loc, "T.cumsum input")
    rd = rs if dst is None else R.operand(dst, loc, "T.cumsum output")
    if isinstance(rs, R.Corner) or isinstance(rd, R.Corner):
        raise KernelTypeError("T.cumsum: operands must be buffers or slice regions", loc)
    se = R.static_extents(rs, "T.cumsum", loc)
    if tuple(rd.extents) != se:
        raise KernelTypeError(f"T.cumsum: output is {tuple(rd.extents)} but input is {se}", loc)
    nd = len(se)
    if not -nd <= dim < nd:
        raise KernelTypeError(f"T.cumsum: dim {dim} out of range", loc)
    tr.emit(N.Cumsum(rs, rd, dim % nd, bool(reverse), loc))


@builder("fill")
def _b_fill(tr, loc, buffer, value, annotations=None):
    _tile_op_context(tr, loc, "fill")
    r = R.operand(buffer, loc, "T.fill")
    if isinstance(r, R.Corner):
        r = N.Region(r.buffer, r.starts, tuple(1 for _ in r.starts), r.loc)
    v = X.cast_to(X.to_expr(value, loc, like=r.dtype), r.dtype, loc)
    tr.emit(N.Fill(r, v, loc))


@builder("clear")
def _b_clear(tr, loc, buffer):
    return _b_fill(tr, loc, buffer, 0)


def _atomic(tr, loc, kind, dst, value, return_prev):
    if return_prev:
        return S.atomic_fetch(tr, loc, kind, dst, value)
    if not tr.in_launch():
        raise KernelSyntaxError(f"T.atomic_{kind} outside `with T.Kernel(...)`", loc)
    d = R.operand(dst, loc, f"T.atomic_{kind} destination")
    if isinstance(value, (N.Buffer, N.Region)) or (isinstance(value, X.Access) and value.has_slice):
        v = R.operand(value, loc, f"T.atomic_{kind} value")
        if isinstance(d, R.Corner):
            d = R.complete(d, v.extents, loc, f"T.atomic_{kind} destination")
        if not R.pair_shapes(v.extents, d.extents):
            raise KernelTypeError(f"T.atomic_{kind}: value {_fmt(v.extents)} and destination {_fmt(d.extents)} "
                                  "do not pair", loc)
        if tr.parallel_depth:
            raise KernelSyntaxError(f"tile-region T.atomic_{kind} inside T.Parallel", loc)
    else:
        if isinstance(d, R.Corner):
            d = N.Region(d.buffer, d.starts, tuple(1 for _ in d.starts), d.loc)
        v = X.cast_to(X.to_expr(value, loc, like=d.dtype), d.dtype, loc)
    tr.emit(N.Atomic(kind, d, v, loc))


for _k in ("add", "max", "min"):
    def _mka(kind):
        def b(tr, loc, dst, value, memory_order=None, return_prev=False, use_tma=False):
            return _atomic(tr, loc, kind, dst, value, return_prev)
        return b
    BUILDERS[f"atomic_{_k}"] = _mka(_k)


@builder("use_swizzle")
def _b_swizzle(tr, loc, panel_size, order, enable):
    if not tr.in_launch():
        raise KernelSyntaxError("T.use_swizzle outside `with T.Kernel(...)`", loc)
    if enable:
        tr.launch["annotations"].append(("swizzle", (int(panel_size), str(order))))


@builder("sync_grid")
def _b_sync_grid(tr, loc):
    """A grid-wide barrier: the launch is marked ``("sync_grid", True)``; its blocks then run in lockstep
    (``interp/chunks.py``), so every block's writes before the barrier are seen after it."""
    if not tr.in_launch():
        raise KernelSyntaxError("T.sync_grid outside `with T.Kernel(...)`", loc)
    if tr.parallel_depth:
        raise KernelSyntaxError("T.sync_grid inside T.Parallel", loc, hint="put the grid barrier between loops")
    if ("sync_grid", True) not in tr.launch["annotations"]:
        tr.launch["annotations"].append(("sync_grid", True))
    tr.emit(N.SyncThreads(grid=True, loc=loc))  # its place: the race checker's phases (interp/checks.py)


@builder("annotate_safe_value")
def _b_safe(tr, loc, safe_value_map):
    if not tr.in_launch():
        raise KernelSyntaxError("T.annotate_safe_value outside `with T.Kernel(...)`", loc)
    if not isinstance(safe_value_map, dict):
        raise KernelTypeError("T.annotate_safe_value takes a dict {tensor: value}", loc)
    pairs = []
    for buf, value in safe_value_map.items():
        if not isinstance(buf, N.Buffer) or buf.scope != "global":
            raise KernelTypeError("T.annotate_safe_value: keys must be global tensors (kernel parameters)", loc)
        if isinstance(value, N.Const):
            value = value.value
        if X.is_ir(value) or not isinstance(value, (int, float)):
            raise KernelTypeError("T.annotate_safe_value: values must be compile-time numbers", loc,
                                  hint="e.g. T.annotate_safe_value({A: -T.infinity('float32')})")
        pairs.append((buf.uid, float(value) if dt.is_float(buf.dtype) else int(value)))
    tr.launch["annotations"].append(("safe_value", tuple(pairs)))


@builder("im2col", "c2d_im2col")
def _b_im2col(tr, loc, img, col, nhw_step, c_step, kernel, stride, dilation, pad, eviction_policy=None,
              annotations=None):
    """Desugared into one ``T.Parallel`` over the tile with guarded loads: every consumer already knows it."""
    _tile_op_context(tr, loc, "im2col")
    if not isinstance(img, N.Buffer) or img.scope != "global" or img.ndim != 4:
        raise KernelTypeError("T.im2col: img must be a 4-D global tensor (N, H, W, C)", loc)
    if not isinstance(col, N.Buffer) or col.scope == "global" or col.ndim != 2:
        raise KernelTypeError("T.im2col: col must be a 2-D shared or fragment tile (block_M, block_K)", loc)
    for name, v in (("kernel", kernel), ("stride", stride), ("dilation", dilation), ("pad", pad)):
        if not isinstance(v, int) or v < 0 or (name != "pad" and v == 0):
            raise KernelTypeError(f"T.im2col: {name} must be a positive Python int, got {v!r}", loc)
    bm, bk = col.shape
    n_, h_, w_, c_ = img.shape
    oh = X.binop("add", X.binop("floordiv", X.binop("sub", X.binop("add", h_, 2 * pad, loc),
                                                      dilation * (kernel - 1) + 1, loc), stride, loc), 1, loc)
    ow = X.binop("add", X.binop("floordiv", X.binop("sub", X.binop("add", w_, 2 * pad, loc),
                                                      dilation * (kernel - 1) + 1, loc), stride, loc), 1, loc)
    i = N.Var("i", "int32", kind="parallel", loc=loc)
    j = N.Var("j", "int32", kind="parallel", loc=loc)
    r = X.binop("add", X.binop("mul", nhw_step, bm, loc), i, loc)
    q = X.binop("add", X.binop("mul", c_step, bk, loc), j, loc)
    n = X.binop("floordiv", r, X.binop("mul", oh, ow, loc), loc)
    ohi = X.binop("floormod", X.binop("floordiv", r, ow, loc), oh, loc)
    owi = X.binop("floormod", r, ow, loc)
    kh = X.binop("floordiv", q, kernel * c_, loc) if isinstance(c_, int) else \
        X.binop("floordiv", q, X.binop("mul", kernel, c_, loc), loc)
    kw = X.binop("floormod", X.binop("floordiv", q, c_, loc), kernel, loc)
    cc = X.binop("floormod", q, c_, loc)
    hh = X.binop("sub", X.binop("add", X.binop("mul", ohi, stride, loc), X.binop("mul", kh, dilation, loc), loc),
                 pad, loc)
    ww = X.binop("sub", X.binop("add", X.binop("mul", owi, stride, loc), X.binop("mul", kw, dilation, loc), loc),
                 pad, loc)
    conds = [X.compare("lt", n, n_, loc), X.compare("lt", kh, kernel, loc), X.compare("ge", hh, 0, loc),
             X.compare("lt", hh, h_, loc), X.compare("ge", ww, 0, loc), X.compare("lt", ww, w_, loc)]
    valid = conds[0]
    for c in conds[1:]:
        valid = X.logical("and", valid, c, loc)
    value = X.select(valid, N.Load(img, tuple(X.index_expr(x, loc) for x in (n, hh, ww, cc)), img.dtype, loc),
                     0, loc)
    store = N.Store(col, (i, j), X.cast_to(X.to_expr(value, loc, like=col.dtype), col.dtype, loc), loc)
    tr.emit(N.Parallel((i, j), (bm, bk), (store,), loc))


# ---------------------------------------------------------------------------------------- expressions
_UNARY_MATH = ("exp", "exp2", "exp10", "log", "log2", "log10", "log1p", "expm1", "sqrt", "rsqrt", "tanh",
               "sigmoid", "abs", "sin", "cos", "tan", "erf", "floor", "ceil", "round", "trunc", "isnan",
               "isinf", "isfinite", "fabs", "atan", "asin", "acos", "sinh", "cosh")

_PY_MATH = {"exp": math.exp, "exp2": lambda x: 2.0 ** x, "log": math.log, "log2": math.log2, "sqrt": math.sqrt,
            "rsqrt": lambda x: 1 / math.sqrt(x), "tanh": math.tanh, "abs": abs, "fabs": abs,
            "sigmoid": lambda x: 1 / (1 + math.exp(-x)), "floor": math.floor, "ceil": math.ceil,
            "log10": math.log10, "exp10": lambda x: 10.0 ** x}

for _f in _UNARY_MATH:
    def _mkm(func):
        def b(tr, loc, x):
            if not X.is_ir(x) and func in _PY_MATH:
                return _PY_MATH[func](x)
            return X.call_math("fabs" if func == "fabs" else func, [x], loc)
        return b
    BUILDERS[_f] = _mkm(_f)


@builder("pow")
def _b_pow(tr, loc, x, y):
    return X.binop("pow", x, y, loc) if X.is_ir(x) or X.is_ir(y) else x ** y


@builder("fmod")
def _b_fmod(tr, loc, x, y):
    return X.call_math("fmod", [x, y], loc)


BUILDERS["max"] = lambda tr, loc, a, b: X.binop("max", a, b, loc)
BUILDERS["min"] = lambda tr, loc, a, b: X.binop("min", a, b, loc)


@builder("clamp")
def _b_clamp(tr, loc, x, lo, hi):
    return X.binop("min", X.binop("max", x, lo, loc), hi, loc)


@builder("if_then_else")
def _b_ite(tr, loc, cond, then_value, else_value):
    return X.select(cond, then_value, else_value, loc)


@builder("cast")
def _b_cast(tr, loc, value, dtype):
    d = dt.canon(dtype)
    if not X.is_ir(value):
        return X.const(value, d, loc)
    return X.cast_to(X.to_expr(value, loc), d, loc)


@builder("Cast")
def _b_Cast(tr, loc, dtype, value):  # noqa: N802
    return _b_cast(tr, loc, value, dtype)


@builder("reinterpret")
def _b_reinterpret(tr, loc, a, b):
    dtype, value = (a, b) if not X.is_ir(a) else (b, a)
    d = dt.canon(dtype)
    e = X.to_expr(value, loc)
    if dt.bits(d) != dt.bits(e.dtype):
        raise KernelTypeError(f"T.reinterpret: {e.dtype} and {d} have different widths", loc)
    return N.Reinterpret(e, d, loc)


@builder("infinity")
def _b_inf(tr, loc, dtype):
    d = dt.canon(dtype)
    if not dt.is_float(d):
        raise KernelTypeError(f"T.infinity: {d} has no infinity", loc)
    return N.Const(math.inf, d, loc)


@builder("max_value")
def _b_maxv(tr, loc, dtype):
    d = dt.canon(dtype)
    return X.const(dt.max_value(d), d, loc)


@builder("min_value")
def _b_minv(tr, loc, dtype):
    d = dt.canon(dtype)
    return X.const(dt.min_value(d), d, loc)


BUILDERS["floordiv"] = lambda tr, loc, a, b: X.binop("floordiv", a, b, loc)
BUILDERS["floormod"] = lambda tr, loc, a, b: X.binop("floormod", a, b, loc)
BUILDERS["truncmod"] = lambda tr, loc, a, b: X.binop("truncmod", a, b, loc)
BUILDERS["And"] = lambda tr, loc, a, b: X.logical("and", a, b, loc)
BUILDERS["Or"] = lambda tr, loc, a, b: X.logical("or", a, b, loc)
BUILDERS["Not"] = lambda tr, loc, a: X.unary("not", a, loc)


@builder("truncdiv")
def _b_truncdiv(tr, loc, a, b):
    if not X.is_ir(a) and not X.is_ir(b):
        return int(a / b)
    e = X.binop("div", a, b, loc)
    return e


@builder("ceildiv")
def _b_ceildiv(tr, loc, a, b):
    if not X.is_ir(a) and not X.is_ir(b):
        return -(-a // b)
    return X.binop("floordiv", X.binop("add", a, X.binop("sub", b, 1, loc), loc), b, loc)
