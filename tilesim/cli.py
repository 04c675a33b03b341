"""The ``tilesim`` command line.

Subcommands: ``report`` (the main job), ``sim``, ``hw``, ``kernels``, ``run``, ``ir``, ``bench``,
``attention-cost``. User errors print the ``KernelError`` text (with file:line and a hint) and exit 2;
internal errors say they are bugs and exit 3.

Layer: app (see :mod:`tilesim.hw`): imports the kernel library and the hardware models at module level.
One command is loaded on use: ``report`` (:data:`REPORT_MODULE`) pulls in ``matplotlib.pyplot``,
which would more than double the start-up time of every other command.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from hwmodels.cli import add_subcommands as add_hw_subcommands
from kernels.memory_accounting import attention_cost
from kernels.registry import all_specs
from kernels.registry import get as get_spec

from .bench import main as bench_main
from .cli_args import load_factory as _load_factory
from .cli_args import parse_kv
from .errors import InternalError, TilesimError
from .ir.nodes import PrimFunc
from .ir.printer import format_ir
from .lint import lint
from .runner import run_registered
from .sim.cli import main_sim
from .sweep import Progress, add_executor_arguments, executor_from_args
from .tune import tune_spec

__all__ = ["main", "build_parser", "parse_kv"]

#: The module whose ``main(args)`` runs ``tilesim report``, imported when that command runs.
REPORT_MODULE = "tilesim.report.main"


def _cmd_ir(args):
    obj = _load_factory(args.target)
    kernel = obj(**parse_kv(args.args)) if callable(obj) and not hasattr(obj, "get_kernel_source") else obj
    if isinstance(kernel, PrimFunc):
        print(format_ir(kernel), end="")
    else:
        print(kernel.get_ir() if hasattr(kernel, "get_ir") else kernel.get_kernel_source(), end="")
    return 0


def _cmd_lint(args):
    obj = _load_factory(args.target)
    kernel = obj(**parse_kv(args.args)) if callable(obj) and not hasattr(obj, "prim_func") else obj
    pf = kernel if isinstance(kernel, PrimFunc) else kernel.prim_func
    findings = lint(pf)
    for f in findings:
        print(f, end="\n\n")
    print(f"{len(findings)} TileLang-compatibility finding(s) in {pf.name}")
    return 1 if findings else 0


def _cmd_kernels(args):
    specs = all_specs()
    width = max((len(s.name) for s in specs), default=10)
    print(f"{'kernel':<{width}}  {'family':<12} shapes  description")
    for s in specs:
        print(f"{s.name:<{width}}  {s.family:<12} {len(s.shapes):>6}  {s.description}")
    return 0


def _cmd_run(args):
    # the stream at call time (the default is bound when tilesim.runner is imported)
    return run_registered(args.name, parse_kv(args.shape), target=args.target, seed=args.seed, out=sys.stdout)


def _cmd_tune(args):
    spec = get_spec(args.name)
    shape = dict(spec.shapes[0]) if spec.shapes else {}
    extra = parse_kv(args.shape)
    if extra:
        shape = {"label": ", ".join(f"{k}={v}" for k, v in extra.items()), **{k: v for k, v in shape.items()
                                                                                if k != "label"}, **extra}
    executor = executor_from_args(args)
    try:
        res = tune_spec(spec, shape, args.hw, args.profile, budget=args.budget, executor=executor,
                        progress=Progress() if executor is not None else None)
    finally:
        if executor is not None:
            executor.close()
    print(res.table())
    return 0


def _cmd_bench(args):
    return bench_main(args.which)


def _cmd_report(args):
    return importlib.import_module(REPORT_MODULE).main(args)


def _cmd_sim(args):
    return main_sim(args.rest)


def _cmd_attention_cost(args):
    print(attention_cost(args.model, args.context, batch=args.batch).summary())
    return 0


def _cmd_ops(args):
    return importlib.import_module("tilesim.ir.ops").main(args.node)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tilesim", description="TileLang-compatible tile language: interpret, "
                                "run on a GPU, and simulate LLM kernels on A100/H100/H200/Ascend 910B/MLU370.")
    sub = p.add_subparsers(dest="cmd", metavar="COMMAND")

    r = sub.add_parser("report", help="simulate every registered kernel on every hardware model; write plots and tables")
    r.add_argument("--hw", nargs="+", default=["all"], help="hardware model names or TOML paths (default: all)")
    r.add_argument("--kernels", nargs="+", default=["all"], help="kernel names (default: all)")
    r.add_argument("--profile", default=None, help="lowering profile (default: the device's own)")
    r.add_argument("--out", default="reports", help="output folder (default: reports/)")
    r.add_argument("--quick", action="store_true", help="one shape per kernel")
    r.add_argument("--tune-budget", type=int, default=12,
                   help="configurations tried per kernel and device by the simulator-driven tuner (0: registry defaults)")
    r.add_argument("--resume", action="store_true",
                   help="reuse the (kernel, device) groups an interrupted run recorded in OUT/.partial/")
    add_executor_arguments(r)
    r.set_defaults(fn=_cmd_report)

    s = sub.add_parser("sim", help="simulate one kernel: tilesim sim FILE.py::factory --hw NAME --args k=v ...",
                       add_help=False)
    s.add_argument("rest", nargs=argparse.REMAINDER)
    s.set_defaults(fn=_cmd_sim)

    add_hw_subcommands(sub)

    k = sub.add_parser("kernels", help="list the kernel library")
    k.add_argument("action", nargs="?", default="list", choices=["list"])
    k.set_defaults(fn=_cmd_kernels)

    rn = sub.add_parser("run", help="run a registered kernel and check it against its NumPy reference")
    rn.add_argument("name")
    rn.add_argument("--shape", nargs="*", default=[], help="KEY=VALUE shape/tunable parameters")
    rn.add_argument("--target", default="interp", help="interp (default) or cuda")
    rn.add_argument("--seed", type=int, default=0)
    rn.set_defaults(fn=_cmd_run)

    t = sub.add_parser("tune", help="tune a registered kernel's tile sizes/stages on a hardware model (simulator oracle)")
    t.add_argument("name")
    t.add_argument("--hw", default="h200_sxm_141gb")
    t.add_argument("--shape", nargs="*", default=[], help="KEY=VALUE (default: the kernel's first report shape)")
    t.add_argument("--budget", type=int, default=24)
    t.add_argument("--profile", default=None)
    add_executor_arguments(t)
    t.set_defaults(fn=_cmd_tune)

    li = sub.add_parser("lint", help="constructs tilesim runs but real TileLang 0.1.15 rejects: "
                                     "tilesim lint FILE.py::factory [--args k=v ...]")
    li.add_argument("target")
    li.add_argument("--args", nargs="*", default=[])
    li.set_defaults(fn=_cmd_lint)

    i = sub.add_parser("ir", help="print a kernel's tile IR: tilesim ir FILE.py::factory [--args k=v ...]")
    i.add_argument("target")
    i.add_argument("--args", nargs="*", default=[])
    i.set_defaults(fn=_cmd_ir)

    o = sub.add_parser("ops", help="where each consumer (frontend, verifier, printer, interpreter, CUDA lowering, "
                                   "cost analysis) implements an IR node class: tilesim ops Gemm")
    o.add_argument("node")
    o.set_defaults(fn=_cmd_ops)

    b = sub.add_parser("bench", help="interpreter benchmarks against NumPy (ratios measured in one run)")
    b.add_argument("which", nargs="?", default="all", choices=["all", "gemm", "attention", "attention-large"])
    b.set_defaults(fn=_cmd_bench)

    a = sub.add_parser("attention-cost", help="memory and FLOPs of dense vs DeepSeek sparse attention")
    a.add_argument("--model", default="deepseek-v3.2")
    a.add_argument("--context", type=int, default=131072)
    a.add_argument("--batch", type=int, default=1)
    a.set_defaults(fn=_cmd_attention_cost)
    return p


def main(argv=None) -> int:
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["sim"]:  # its own parser: argparse.REMAINDER would not pass "-h"/"--hw" first
        args = argparse.Namespace(fn=_cmd_sim, rest=argv[1:])
    else:
        args = parser.parse_args(argv)
    if not getattr(args, "fn", None):
        parser.print_help()
        return 0
    try:
        return int(args.fn(args) or 0)
    except InternalError as e:
        print(f"tilesim: {e}", file=sys.stderr)
        return 3
    except TilesimError as e:
        print(f"tilesim: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
