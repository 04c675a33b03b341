"""ir.traverse: the field declarations cover the IR, walks reach every node, regions() and map_stmts()."""

import dataclasses

import pytest

from kernels.registry import all_specs
from tests import core_kernels as K
from tilesim.errors import InternalError
from tilesim.ir import groups as G
from tilesim.ir import nodes as N
from tilesim.ir import queries
from tilesim.ir import traverse as T
from tilesim.ir.printer import format_ir

IR_TYPE_WORDS = ("Expr", "Region", "Buffer", "Body", "Var", "Dim")


def _kernels():
    out = [K.matmul_relu(100, 70, 50), K.matmul_dynamic(trans_B=True), K.matmul_splitk(64, 64, 64),
           K.softmax(16, 40), K.rms_norm(8, 24), K.flash_attention(1, 2, 64, 32)]
    for spec in all_specs():
        if spec.test_shapes:
            out.append(spec.build(**spec.params(spec.test_shapes[0])))
    return [k.prim_func for k in out]


PFS = _kernels()


def _oracle(node, out):
    """Every Stmt/Expr/Region under ``node`` by a blind recursion over dataclass fields (not into Buffers)."""
    if isinstance(node, (list, tuple)):
        for x in node:
            _oracle(x, out)
    elif isinstance(node, (N.Stmt, N.Expr, N.Region)):
        out.append(node)
        for f in dataclasses.fields(node):
            # loop / block / let variables are bindings, not expressions
            if f.name != "loc" and not (isinstance(node, N.Stmt) and f.name in ("var", "vars", "block_vars")):
                _oracle(getattr(node, f.name), out)


def test_declarations_cover_every_node_class():
    assert set(T.DECLS) == G.EXPRS | G.STMTS | {N.Region, N.Buffer, N.PrimFunc}
    for cls, decl in T.DECLS.items():
        assert set(decl.values()) <= set(T.KINDS), cls
        for f in dataclasses.fields(cls):
            holds_ir = any(w in str(f.type) for w in IR_TYPE_WORDS)
            assert holds_ir == (f.name in decl), f"{cls.__name__}.{f.name}: {f.type}"


def test_walk_reaches_every_node_of_real_kernels():
    seen = set()
    for pf in PFS:
        walked = list(T.walk(pf.body))
        expect: list = []
        _oracle(pf.body, expect)
        assert [id(x) for x in walked] == [id(x) for x in expect], pf.name  # same nodes, same (pre-)order
        seen |= {type(x) for x in walked}
    assert G.TILE_OPS | {N.For, N.Parallel, N.If, N.Let, N.Launch, N.Alloc, N.Store} <= seen
    assert {N.Const, N.Var, N.Binary, N.Compare, N.Load, N.Cast, N.Call, N.Region} <= seen


def test_walk_is_pre_order_and_walk_stmts_can_prune():
    pf = K.matmul_relu(128, 128, 64).prim_func
    stmts = list(T.walk_stmts(pf.body))
    assert type(stmts[0]) is N.Launch and stmts[0] is pf.body[0]
    loop = next(s for s in stmts if isinstance(s, N.For))
    assert stmts[stmts.index(loop) + 1] is loop.body[0]
    no_par = list(T.walk_stmts(pf.body, enter=lambda s: not isinstance(s, N.Parallel)))
    par = next(s for s in stmts if isinstance(s, N.Parallel))
    assert par in no_par and not any(s in no_par for s in par.body)
    assert [x for x in T.walk(pf.body) if isinstance(x, N.Stmt)] == stmts


def test_children_and_bodies():
    i = N.Var("i", "int32")
    c = N.Compare("lt", i, N.Const(4, "int32"))
    st = N.Store(N.Buffer("a", (8,), "float32", "shared"), (i,), N.Const(1.0, "float32"))
    s = N.If(c, (st,), (N.Break(),))
    assert T.bodies(s) == ((st,), (N.Break(),))
    assert T.stmt_children(s) == (st, N.Break())
    assert T.children(s) == (c, st, N.Break())
    assert T.expr_children(c) == (i, c.b)
    assert T.stmt_exprs(st) == (i, st.value)
    assert T.buffers_of(st) == (st.buffer,)
    loop = N.For(i, N.Const(0, "int32"), N.Const(4, "int32"), 1, "serial", (s,))
    assert T.binds(loop) == (i,) and T.bodies(loop) == ((s,),)
    assert T.expr_children(7) == () and T.expr_children(None) == ()
    with pytest.raises(InternalError, match="no field declaration for int"):
        T.children(7)


def _r(buf):
    return N.full_region(buf)


def test_regions_of_every_tile_op():
    A = N.Buffer("A", (16, 16), "float16", "global")
    s = N.Buffer("s", (16, 16), "float16", "shared")
    f = N.Buffer("f", (16, 16), "float32", "fragment")
    r = N.Buffer("r", (16,), "float32", "fragment")
    ra, rs, rf, rr = _r(A), _r(s), _r(f), _r(r)
    assert T.regions(N.Copy(ra, rs)) == ((ra,), (rs,))
    assert T.regions(N.Gemm(rs, rs, rf)) == ((rs, rs, rf), (rf,))
    assert T.regions(N.Gemm(rs, rs, rf, clear_accum=True)) == ((rs, rs), (rf,))
    assert T.regions(N.Reduce("sum", rf, rr, 1)) == ((rf,), (rr,))
    assert T.regions(N.Reduce("max", rf, rr, 1, clear=False)) == ((rf, rr), (rr,))
    assert T.regions(N.Cumsum(rf, rf, 1)) == ((rf,), (rf,))
    assert T.regions(N.Fill(rf, N.Const(0.0, "float32"))) == ((), (rf,))
    assert T.regions(N.Atomic("add", ra, rf)) == ((rf, ra), (ra,))
    assert T.regions(N.Atomic("add", ra, N.Const(1.0, "float32"))) == ((ra,), (ra,))
    # element statements: a store writes its buffer, loads in its own expressions (indices too) are reads
    i = N.Var("i", "int32")
    idx = N.Load(N.Buffer("ix", (16,), "int32", "shared"), (i,), "int32")
    st = N.Store(r, (i,), N.Load(f, (idx, i), "float32"))
    assert T.regions(st) == ((f, idx.buffer), (r,))
    assert T.regions(N.Let(N.Var("x", "float32"), N.Load(r, (i,), "float32"))) == ((r,), ())
    v = N.Buffer("v", (), "int32", "var")
    assert T.regions(N.Alloc(v, N.Const(0, "int32"))) == ((), (v,))
    assert T.regions(N.Alloc(s)) == ((), ())
    # the region starts of a tile op are read too
    start = N.Load(v, (), "int32")
    win = N.Region(A, (start, N.Const(0, "int32")), (1, 16))
    assert T.regions(N.Copy(win, rs)) == ((win, v), (rs,))


@pytest.mark.parametrize("pf", PFS[:6], ids=lambda pf: pf.name)
def test_map_stmts_identity_gives_an_equal_program(pf):
    body = T.map_stmts(pf.body, lambda s: s)
    assert all(a is b for a, b in zip(body, pf.body)) and len(body) == len(pf.body)
    assert dataclasses.replace(pf, body=body) == pf


def test_map_stmts_replaces_splices_and_drops():
    pf = K.matmul_relu(128, 128, 64).prim_func

    def fn(s):
        if isinstance(s, N.Fill):  # T.clear -> fill with 1
            return N.Fill(s.dst, N.Const(1.0, s.value.dtype), s.loc)
        if isinstance(s, N.Gemm):
            return (s, s)
        if isinstance(s, N.Parallel):
            return ()
        return s

    new = dataclasses.replace(pf, body=T.map_stmts(pf.body, fn))
    kinds = [type(s) for s in T.walk_stmts(new.body)]
    assert kinds.count(N.Gemm) == 2 and N.Parallel not in kinds
    text = format_ir(new)
    assert "T.fill(C_local[0:64, 0:64], 1.0)" in text
    # the copies before the gemm are the same objects (caches keyed by id stay valid)
    old_copies = [s for s in T.walk_stmts(pf.body) if isinstance(s, N.Copy)]
    new_copies = [s for s in T.walk_stmts(new.body) if isinstance(s, N.Copy)]
    assert [id(s) for s in old_copies] == [id(s) for s in new_copies]


def _oracle_refs(node, uid):
    if isinstance(node, N.Buffer):
        return int(node.uid == uid or (node.alias_of is not None and node.alias_of.uid == uid))
    if isinstance(node, (list, tuple)):
        return sum(_oracle_refs(x, uid) for x in node)
    if dataclasses.is_dataclass(node) and not isinstance(node, type):
        return sum(_oracle_refs(getattr(node, f.name), uid) for f in dataclasses.fields(node))
    return 0


def test_queries_match_a_blind_field_recursion():
    for pf in PFS:
        for launch in pf.launches:
            allocs = [s.buffer for s in T.walk_stmts(launch.body) if isinstance(s, N.Alloc)]
            for b in allocs:
                assert queries.buffer_refs(launch.body, b.uid) == _oracle_refs(launch.body, b.uid)
            roots = queries.referenced_buffers(launch.body)
            assert {b.uid for b in allocs if b.alias_of is None} <= set(roots)
            vs = queries.referenced_vars(launch.grid)
            assert all(type(v) is N.Var for v in vs.values())
