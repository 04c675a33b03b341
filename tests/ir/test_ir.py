"""IR-only tests: immutability, verifier rules, printer, and rule-table coverage of every consumer."""

import dataclasses

import pytest

from tests import core_kernels as K
from tilesim.backends.interp.exprs import EXPR_RULES
from tilesim.backends.interp.rules import STMT_RULES
from tilesim.errors import InternalError
from tilesim.frontend.prims import BUILDERS, LOOP_PRIMS
from tilesim.ir import groups as G
from tilesim.ir import nodes as N
from tilesim.ir.printer import format_ir
from tilesim.ir.verify import verify, verify_or_raise


def test_nodes_are_frozen():
    v = N.Var("i", "int32")
    with pytest.raises(dataclasses.FrozenInstanceError):
        v.name = "j"


def test_interpreter_rules_cover_every_node_class():
    assert EXPR_RULES.groups == G.EXPRS and STMT_RULES.groups == G.STMTS - {N.Launch}  # launches: runtime.py
    EXPR_RULES.check_coverage()
    STMT_RULES.check_coverage()
    assert set(EXPR_RULES) == set(G.EXPRS)


def test_frontend_builds_every_language_marker():
    import tilesim.language as T
    markers = {getattr(getattr(T, n), "__tilesim_prim__", None) for n in dir(T)}
    markers.discard(None)
    unsupported = {getattr(T, n).__tilesim_prim__ for n in dir(T)
                   if getattr(getattr(T, n), "__tilesim_unsupported__", None)}
    handled = set(BUILDERS) | set(LOOP_PRIMS) | {"Kernel"} | unsupported | {
        "annotate_layout", "annotate_padding", "annotate_l2_hit_ratio", "sync_grid", "no_set_max_nreg",
        "set_max_nreg", "disable_warp_group_reg_alloc", "print"}
    assert markers <= handled, markers - handled


def _prog(body, params=()):
    return N.PrimFunc("p", tuple(params), tuple(body))


def test_verifier_finds_out_of_scope_vars_and_unallocated_buffers():
    i = N.Var("i", "int32", kind="loop")
    buf = N.Buffer("X", (4,), "float32", "fragment")
    store = N.Store(buf, (i,), N.Const(1.0, "float32"))
    launch = N.Launch((N.Const(1, "int32"),), (N.Var("bx", "int32", kind="block"),), (128,), (store,))
    msgs = [p.message for p in verify(_prog([launch]))]
    assert any("'i' is used outside" in m for m in msgs)
    assert any("X is used before it is allocated" in m for m in msgs)


def test_verifier_finds_type_errors_and_raises_internal_error():
    bad = N.Binary("add", N.Const(1, "int32"), N.Const(1.0, "float32"), "float32")
    buf = N.Buffer("Y", (), "float32", "var")
    body = (N.Alloc(buf), N.Store(buf, (), bad))
    launch = N.Launch((N.Const(1, "int32"),), (N.Var("bx", "int32", kind="block"),), (128,), body)
    assert any("operand dtypes" in p.message for p in verify(_prog([launch])))
    with pytest.raises(InternalError, match="bug in tilesim"):
        verify_or_raise(_prog([launch]))


def test_verifier_rejects_tile_ops_in_parallel():
    buf = N.Buffer("Z", (4,), "float32", "fragment")
    j = N.Var("j", "int32", kind="parallel")
    par = N.Parallel((j,), (4,), (N.Fill(N.full_region(buf), N.Const(0.0, "float32")),))
    launch = N.Launch((N.Const(1, "int32"),), (N.Var("bx", "int32", kind="block"),), (128,), (N.Alloc(buf), par))
    assert any("inside T.Parallel" in p.message for p in verify(_prog([launch])))


@pytest.mark.parametrize("make", [
    lambda: K.matmul_relu(100, 70, 50), lambda: K.matmul_dynamic(trans_B=True), lambda: K.matmul_splitk(64, 64, 64),
    lambda: K.softmax(16, 40), lambda: K.rms_norm(8, 24), lambda: K.flash_attention(1, 2, 64, 32),
    lambda: K.elementwise_add.compile(M=4, N=4)], ids=["gemm", "dyn", "splitk", "softmax", "rms", "fa", "add"])
def test_core_kernels_verify_clean_and_print(make):
    k = make()
    assert verify(k.prim_func) == []
    text = format_ir(k.prim_func)
    assert text.startswith("@T.prim_func") and "with T.Kernel(" in text
    assert text == k.get_kernel_source()


def test_printer_shows_pipelining_and_regions():
    text = format_ir(K.matmul_relu(128, 128, 64).prim_func)
    assert "T.Pipelined(0, 2, num_stages=3" in text
    assert "T.copy(A[(by * 64):+64, (k * 32):+32], A_shared[0:64, 0:32])" in text
    assert "T.gemm(A_shared[0:64, 0:32], B_shared[0:32, 0:64], C_local[0:64, 0:64])" in text
