"""ir.rules.RuleTable: registration, loud missing-rule errors, coverage, where(); the `tilesim ops` command."""

import inspect
import io
from dataclasses import dataclass, field

import pytest

from tilesim.backends.interp import exprs as interp_exprs
from tilesim.backends.interp import rules as interp_rules
from tilesim.backends.interp.tables import EXPR_RULES as INTERP_EXPRS
from tilesim.cli import main as cli_main
from tilesim.errors import InternalError, Loc
from tilesim.ir import groups as G
from tilesim.ir import nodes as N
from tilesim.ir import ops, printer, verify
from tilesim.ir.rules import RuleTable, tables, where


@dataclass(frozen=True, slots=True)
class Mystery(N.Expr):
    """An expression class no table knows."""

    dtype: str = "float32"
    loc: Loc | None = field(default=None, compare=False)


def test_missing_rule_is_an_internal_error_naming_table_class_and_location():
    t = RuleTable("test table", groups={N.Const, N.Var})
    node = N.Var("i", "int32", loc=Loc("kernel.py", 12, 4))
    with pytest.raises(InternalError, match=r"'test table' has no rule for Var at kernel.py:12:5"):
        t(node)
    with pytest.raises(InternalError, match="'test table' has no rule for Const"):
        t[N.Const]
    with pytest.raises(InternalError, match=r"has no rule for Mystery \(no source location\)"):
        t(Mystery())


def test_interpreter_missing_rule_is_not_a_key_error():
    with pytest.raises(InternalError, match="interpreter expressions.*Mystery at k.py:3:1"):
        interp_exprs.ev(Mystery(loc=Loc("k.py", 3, 0)), None)


def test_register_dispatch_and_double_registration():
    t = RuleTable("dispatch", groups={N.Const, N.Var})

    @t.register(N.Const, N.Var)
    def leaf(x):
        return type(x).__name__

    assert t(N.Const(1, "int32"))(N.Const(1, "int32")) == "Const"
    assert t[N.Var] is leaf and N.Var in t and len(t) == 2 and set(t) == {N.Const, N.Var}
    assert t.get(N.Load) is None
    with pytest.raises(InternalError, match="'dispatch': Var is registered twice"):
        t.register(N.Var)(lambda x: x)


def test_coverage_check_fails_for_a_missing_rule():
    t = RuleTable("partial", groups={N.Const, N.Var, N.Load})
    t.register(N.Const)(lambda x: x)
    assert t.missing() == {N.Var, N.Load}
    with pytest.raises(InternalError, match="'partial' has no rule for Load, Var"):
        t.check_coverage()
    t.register(N.Var, N.Load)(lambda x: x)
    t.check_coverage()


def test_where_names_module_and_def_line_for_every_table():
    t = RuleTable("where test")

    @t.register(Mystery)
    def rule_for_mystery(x):
        return x

    line = inspect.getsourcelines(rule_for_mystery)[1] + 1  # below the decorator
    assert where(Mystery) == [("where test", f"{__name__}:{line}", "test_where_names_module_and_def_line_for_every_table"
                               ".<locals>.rule_for_mystery")]
    names = {w[0] for w in where(N.Gemm)}
    assert {"verifier statements", "printer statements", "interpreter statements"} <= names
    assert t in tables()


def test_verifier_and_printer_tables_cover_the_ir():
    for table in (verify.EXPRS, printer.EXPRS):
        assert table.groups == G.EXPRS
        table.check_coverage()
    for table in (verify.STMTS, printer.STMTS):
        assert table.groups == G.STMTS
        table.check_coverage()


def test_interpreter_tables_are_one_per_kind():
    assert interp_rules.STMT_RULES.rules[N.Gemm].__module__.endswith("tile_gemm")
    assert interp_rules.STMT_RULES.rules[N.Copy].__module__.endswith("tile_copy")
    assert INTERP_EXPRS is interp_exprs.EXPR_RULES


def test_ops_command_lists_every_consumer(capsys):
    assert cli_main(["ops", "Gemm"]) == 0
    out = capsys.readouterr().out
    for consumer in ("frontend: tilesim.frontend.prims:", "verifier statements: tilesim.ir.verify:",
                     "printer statements: tilesim.ir.printer:", "interpreter statements: tilesim.backends.interp.tile_gemm:",
                     "CUDA lowering statements: tilesim.backends.cuda.rules:",
                     "CUDA barrier events: tilesim.backends.cuda.rules:",
                     "cost analysis statements: tilesim.analysis.tile_rules:"):
        assert consumer in out, (consumer, out)
    assert "[T.gemm, T.wgmma_gemm]" in out
    buf = io.StringIO()
    assert ops.main("load", buf) == 0 and "interpreter expressions: tilesim.backends.interp.exprs:" in buf.getvalue()
    assert cli_main(["ops", "NoSuchNode"]) == 2
    assert "unknown IR node class 'NoSuchNode'" in capsys.readouterr().err
