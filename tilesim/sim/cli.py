"""``tilesim sim FILE.py::factory --hw NAME --args k=v ... [--shapes k=v ...] [--trace out.json]``.

Builds the kernel (a ``@tilesim.jit`` factory is called with ``--args``; an eager kernel is compiled
with them; a ``@T.prim_func`` or kernel object is used as it is), simulates it and prints a readable
summary. ``--shapes`` gives dynamic dimensions and hints (``hints.k=64`` → ``hints={"k": 64}``);
``--json`` prints the report as JSON; ``--trace`` writes a Chrome trace (open it in Perfetto).

Layer: app (see :mod:`tilesim.hw`).
"""

from __future__ import annotations

import json
import sys

from ..cli_args import ArgParser, call_factory, load_factory, parse_kv
from ..ir.nodes import PrimFunc
from ..jit import EagerJIT, LazyJIT
from ..kernel import JITKernel
from . import simulate_kernel

__all__ = ["main_sim", "build_kernel"]


def build_kernel(obj, args: dict, target: str = "the target"):
    """The kernel or program ``obj`` denotes once called/compiled with ``args`` (errors: one-line ``SystemExit``)."""
    if isinstance(obj, (JITKernel, PrimFunc)):
        if args:
            raise SystemExit(f"tilesim: {target} is a compiled kernel: it takes no --args (got {', '.join(args)})")
        return obj
    if isinstance(obj, EagerJIT):
        return obj.compile(**args)
    if isinstance(obj, LazyJIT) or callable(obj):
        kernel = call_factory(obj, args, target)
        if not isinstance(kernel, (JITKernel, PrimFunc)):
            raise SystemExit(f"tilesim: {target} returned a {type(kernel).__name__}, not a kernel or a @T.prim_func")
        return kernel
    raise SystemExit(f"tilesim: {target} is a {type(obj).__name__}, not a kernel, a factory or a prim_func")


def _parse(argv):
    p = ArgParser(prog="tilesim sim", description="simulate one kernel on a hardware model")
    p.add_argument("target", help="FILE.py::factory (a @tilesim.jit factory, an eager kernel or a prim_func)")
    p.add_argument("--hw", default="h200_sxm_141gb", help="hardware model name or TOML path")
    p.add_argument("--profile", default=None, help="lowering profile: tensorcore, numba, ascend, mlu "
                                                   "(default: the device's own)")
    p.add_argument("--args", nargs="*", default=[], metavar="K=V", help="factory parameters")
    p.add_argument("--shapes", nargs="*", default=[], metavar="K=V",
                   help="dynamic dimensions; hints as hints.NAME=V")
    p.add_argument("--trace", metavar="OUT.json", help="write a Chrome trace of one core's timeline")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    return p.parse_args(argv)


def main_sim(argv=None) -> int:
    """Entry point of ``tilesim sim`` (``argv`` without the program name)."""
    a = _parse(list(sys.argv[1:] if argv is None else argv))
    obj = load_factory(a.target)
    kernel = build_kernel(obj, parse_kv(a.args), a.target)
    shapes = parse_kv(a.shapes)
    hints = {k.split(".", 1)[1]: v for k, v in shapes.items() if k.startswith("hints.")}
    shapes = {k: v for k, v in shapes.items() if not k.startswith("hints.")}
    if hints:
        shapes["hints"] = hints
    rep = simulate_kernel(kernel, hw=a.hw, profile=a.profile, trace=bool(a.trace), **shapes)
    if a.json:
        print(json.dumps(rep.to_dict(), indent=2, default=float))
    else:
        print(rep.summary())
    if a.trace:
        rep.write_trace(a.trace)
        print(f"trace written to {a.trace} (open it in https://ui.perfetto.dev)")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main_sim())
