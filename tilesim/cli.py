"""The ``tilesim`` command line.

Subcommands: ``report`` (the main job), ``sim``, ``hw``, ``kernels``, ``run``, ``ir``, ``lint``,
``check`` (the sanitizer, :mod:`tilesim.sanitize`; exit 1 on a finding), ``bench``, ``attention-cost``. Every failure is **one line** on stderr and a non-zero exit status, never a
traceback: usage errors and user errors (a ``KernelError`` with its file:line and hint, a bad hardware
file, a file that cannot be read or written, a factory that does not take the arguments) exit 2;
internal errors say they are bugs and exit 3 (``TILESIM_TRACEBACK=1`` prints their traceback).

Layer: app (see :mod:`tilesim.hw`): imports the kernel library and the hardware models at module level.
One command is loaded on use: ``report`` (:data:`REPORT_MODULE`) pulls in ``matplotlib.pyplot``,
which would more than double the start-up time of every other command.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback

from hwmodels.cli import add_subcommands as add_hw_subcommands
from kernels.memory_accounting import attention_cost
from kernels.registry import all_specs
from kernels.registry import get as get_spec

from .analysis.profiles import get_profile
from .bench import main as bench_main
from .cli_args import ArgParser, non_negative_int, one_line, parse_kv, positive_int
from .cli_args import load_factory as _load_factory
from .errors import InternalError, KernelTypeError, TilesimError
from .ir.nodes import PrimFunc
from .ir.printer import format_ir
from .lint import lint
from .runner import check_shape_values, run_registered
from .sanitize import check_kernel
from .sim.cli import build_kernel, main_sim
from .sweep import Progress, add_executor_arguments, executor_from_args
from .tune import tune_spec

__all__ = ["main", "build_parser", "parse_kv"]

#: The module whose ``main(args)`` runs ``tilesim report``, imported when that command runs.
REPORT_MODULE = "tilesim.report.main"


def _build(target: str, args: list):
    """The kernel or ``PrimFunc`` a ``FILE.py::factory`` target denotes with ``--args``."""
    obj = _load_factory(target)
    kernel = build_kernel(obj, parse_kv(args), target)
    if not isinstance(kernel, PrimFunc) and not hasattr(kernel, "prim_func"):
        raise SystemExit(f"tilesim: {target} gave a {type(kernel).__name__}, not a kernel or a @T.prim_func")
    return kernel


def _cmd_ir(args):
    kernel = _build(args.target, args.args)
    if isinstance(kernel, PrimFunc):
        print(format_ir(kernel), end="")
    else:
        print(kernel.get_ir() if hasattr(kernel, "get_ir") else kernel.get_kernel_source(), end="")
    return 0


def _cmd_lint(args):
    kernel = _build(args.target, args.args)
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
    if args.profile is not None:
        get_profile(args.profile)  # an unknown profile is one error now, not one per configuration
    shape = dict(spec.shapes[0]) if spec.shapes else {}
    extra = check_shape_values(spec, parse_kv(args.shape))
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
    return bench_main(args.which, targets=tuple(t for t in args.targets.split(",") if t))


def _cmd_report(args):
    os.makedirs(args.out, exist_ok=True)  # an unusable --out fails now, not after the whole run
    if not os.access(args.out, os.W_OK):
        raise PermissionError(13, "cannot write into this folder", args.out)
    return importlib.import_module(REPORT_MODULE).main(args)


def _cmd_sim(args):
    return main_sim(args.rest)


def _cmd_attention_cost(args):
    try:
        cost = attention_cost(args.model, args.context, batch=args.batch)
    except ValueError as e:  # the model accounting's documented argument errors
        raise KernelTypeError(f"attention-cost: {e}") from None
    print(cost.summary())
    return 0


def _cmd_check(args):
    kernel = _build(args.target, args.args)
    modes = ("batched", "serial") if args.mode == "both" else (args.mode,)
    rep = check_kernel(kernel, shapes=parse_kv(args.shapes), seed=args.seed, modes=modes)
    print(rep.summary())
    return 0 if rep.ok else 1


def _cmd_ops(args):
    return importlib.import_module("tilesim.ir.ops").main(args.node)


def build_parser() -> argparse.ArgumentParser:
    p = ArgParser(prog="tilesim", description="TileLang-compatible tile language: interpret, "
                                "run on a GPU, and simulate LLM kernels on A100/H100/H200/Ascend 910B/MLU370.")
    sub = p.add_subparsers(dest="cmd", metavar="COMMAND")

    r = sub.add_parser("report", help="simulate every registered kernel on every hardware model; write plots and tables")
    r.add_argument("--hw", nargs="+", default=["all"], help="hardware model names or TOML paths (default: all)")
    r.add_argument("--kernels", nargs="+", default=["all"], help="kernel names (default: all)")
    r.add_argument("--profile", default=None, help="lowering profile (default: the device's own)")
    r.add_argument("--out", default="reports", help="output folder (default: reports/)")
    r.add_argument("--quick", action="store_true", help="one shape per kernel")
    r.add_argument("--tune-budget", type=non_negative_int, default=12,
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
    t.add_argument("--budget", type=positive_int, default=24)
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

    ck = sub.add_parser("check", help="run a kernel under the sanitizer (out-of-bounds explicit indices, races "
                                      "between blocks, uninitialised memory): tilesim check FILE.py::factory "
                                      "[--args k=v ...]; exit 1 when it finds something")
    ck.add_argument("target")
    ck.add_argument("--args", nargs="*", default=[])
    ck.add_argument("--shapes", nargs="*", default=[], metavar="K=V", help="symbolic dimensions of the inputs")
    ck.add_argument("--mode", default="batched", choices=["batched", "serial", "both"])
    ck.add_argument("--seed", type=int, default=0)
    ck.set_defaults(fn=_cmd_check)

    o = sub.add_parser("ops", help="where each consumer (frontend, verifier, printer, interpreter, CUDA lowering, "
                                   "cost analysis) implements an IR node class: tilesim ops Gemm")
    o.add_argument("node")
    o.set_defaults(fn=_cmd_ops)

    b = sub.add_parser("bench", help="CPU benchmarks against NumPy (ratios measured in one run)")
    b.add_argument("which", nargs="?", default="all", choices=["all", "gemm", "attention", "attention-large"])
    b.add_argument("--targets", default="interp", help="comma-separated targets to time, e.g. interp,cpu")
    b.set_defaults(fn=_cmd_bench)

    a = sub.add_parser("attention-cost", help="memory and FLOPs of dense vs DeepSeek sparse attention")
    a.add_argument("--model", default="deepseek-v3.2")
    a.add_argument("--context", type=positive_int, default=131072)
    a.add_argument("--batch", type=positive_int, default=1)
    a.set_defaults(fn=_cmd_attention_cost)
    return p


def main(argv=None) -> int:
    """Run the command ``argv``; the exit status (see the module docstring for how failures look)."""
    try:
        return _main(argv)
    except SystemExit as e:  # argparse (already printed) or a one-line ``tilesim: ...`` message
        if isinstance(e.code, int) or e.code is None:
            return e.code or 0
        text = " ".join(str(e.code).split("\n"))
        print(text if ": error: " in text else "tilesim: error: " + text.split(": ", 1)[-1], file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("tilesim: interrupted", file=sys.stderr)
        return 130
    except InternalError as e:
        print(f"tilesim: {one_line(e)}", file=sys.stderr)
        return 3
    except TilesimError as e:
        print(f"tilesim: error: {one_line(e)}", file=sys.stderr)
        return 2
    except OSError as e:  # a report, trace or output that cannot be written, a file that cannot be read
        print(f"tilesim: error: {one_line(e)}", file=sys.stderr)
        return 2
    except Exception as e:  # noqa: BLE001 - a bug: one line, the traceback on request
        if os.environ.get("TILESIM_TRACEBACK"):
            traceback.print_exc()
        print(f"tilesim: internal error (a bug in tilesim; TILESIM_TRACEBACK=1 shows where): "
              f"{type(e).__name__}: {one_line(e)}", file=sys.stderr)
        return 3


def _main(argv) -> int:
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["sim"]:  # its own parser: argparse.REMAINDER would not pass "-h"/"--hw" first
        args = argparse.Namespace(fn=_cmd_sim, rest=argv[1:])
    else:
        args = parser.parse_args(argv)
    if not getattr(args, "fn", None):
        parser.print_help()
        return 0
    return int(args.fn(args) or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
