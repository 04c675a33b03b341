"""Tile IR → Python source for Numba's CPU compiler: one function per launch, blocks as a loop.

Contract
--------
``gen_launch(pf, launch, options) -> LaunchSource`` returns the source of a function
``launch(<buffers>, <tables>, <scalars>, G0, G1, G2, lo, hi, step)`` (a module importing :mod:`.prelude`)
whose body runs blocks ``lo, lo + step, ... < hi`` in order, each block's statements as plain loops over tile elements;
``parallel`` says whether block ranges may run on several threads at once (no atomics). It raises :class:`Unsupported` (what and where) for IR it does not
compile; the runtime then falls back to the interpreter for the whole program.

Meaning is the interpreter's (``backends/interp``): values are held in their compute representation
(float32 for fp32 and narrower floats, rounded to the narrow type after every operation; int64 for
integers; bool), global narrow-float tensors as bit patterns (``narrow.py``), on-chip buffers as arrays of
the compute type (int and bool buffers keep their own type), uninitialised on-chip memory NaN or the
integer sentinel (``InterpOptions.uninit``). Out-of-range global reads give 0 (or the launch's safe value)
and out-of-range global writes are skipped; on-chip indices are in range by the frontend's checks.

Equal to the interpreter bit for bit except: sums (reductions, gemm) add in a different order
(``T.gemm`` through BLAS per tile, unless the K loop is fused as the interpreter fuses it:
:mod:`.codegen_gemm_loop`), and math
intrinsics come from LLVM's libm rather than NumPy's (last-place differences). ``docs/cpu-backend.md``
gives the tolerances the tests use.

Rule tables: ``EXPR_RULES`` and ``STMT_RULES`` (``tilesim ops NODE`` lists them); a node family the
target does not compile has a rule that raises :class:`Unsupported`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ... import dtypes as dt
from ...ir import groups as G
from ...ir import nodes as N
from ...ir.rules import RuleTable
from ...ir.traverse import walk_stmts
from ..interp.options import INT_SENTINEL
from . import narrow

EXPR_RULES = RuleTable("cpu target expressions", groups=G.EXPRS)
#: the per-thread body generator (``codegen_simt.gen_simt_body``, which imports this module)
SIMT_BODY: list = []
#: the K loops the runtime may fuse (``codegen_gemm_loop.fusable_loops``, which imports this module)
FUSABLE: list = []
STMT_RULES = RuleTable("cpu target statements", groups=G.STMTS)

__all__ = ["EXPR_RULES", "STMT_RULES", "Unsupported", "LaunchSource", "gen_launch"]


class Unsupported(Exception):
    """IR the CPU target does not compile (the runtime runs the program on the interpreter instead)."""

    def __init__(self, what: str, loc=None):
        super().__init__(f"{what}" + (f" at {loc}" if loc is not None else ""))
        self.what = what
        self.loc = loc


@dataclass
class LaunchSource:
    source: str
    buffers: list  # global Buffer params in argument order
    narrow: list  # narrow dtypes whose decode table / encode positions are arguments
    asserts: list  # T.device_assert statements: AssertionError(k) means asserts[k] failed
    scalars: list  # Var (scalar params, dyn dims) in argument order
    parallel: bool
    fused: list = field(default_factory=list)  # (loop, gemm, clear, tiles): arguments FP<k>, FS<k> (codegen_gemm_loop.py)


#: 16-bit floats converted by bit arithmetic (``prelude.dec_*``/``enc_*``/``rnd_*``), no table argument
_BITS16 = {"float16": "f16", "bfloat16": "bf16"}


@dataclass
class _Gen:
    pf: N.PrimFunc
    launch: N.Launch
    uninit: str
    tf32: bool = False
    lines: list = field(default_factory=list)
    depth: int = 0
    narrow: dict = field(default_factory=dict)  # dtype -> index (tables needed)
    tmp: int = 0
    safe: dict = field(default_factory=dict)
    thread_lets: set = field(default_factory=set)  # per-thread values: arrays indexed by the thread ``_t``
    asserts: list = field(default_factory=list)  # T.device_assert statements, by the code their failure raises
    names: dict = field(default_factory=dict)  # (kind, uid) -> the name's number in this launch's source
    externs: dict = field(default_factory=dict)  # symbols of the external whole-tile helpers called (ordered)
    consts: dict = field(default_factory=dict)  # (NumPy type name, literal) -> module-level constant name
    fused: dict = field(default_factory=dict)  # id(loop) -> k: K loops whose group products the runtime may pass
    fused_gemms: list = field(default_factory=list)  # k -> (gemm, clear) (codegen_gemm_loop.py)
    fused_tiles: dict = field(default_factory=dict)  # uid of a fusable loop's operand tile -> k
    views: set = field(default_factory=set)  # uids of on-chip reshapes compiled as views (``view``)

    def const(self, npname: str, literal: str) -> str:
        """A module-level constant ``np.<npname>(<literal>)``: Numba reads a global as a typed constant, one
        load instead of an attribute lookup and a call to type and lower at every use."""
        return self.consts.setdefault((npname, literal), f"K_{len(self.consts) + 1}")

    def ext(self, helper: str, dtype: str) -> str:
        """The name generated code calls ``helper`` (``prelude_tiles``) by, for element type ``dtype``; the
        module registers the helper's symbol (``need``) before its launch is compiled or loaded."""
        self.externs[extern_symbol(helper, dtype)] = None
        return helper

    def canon(self, kind: str, uid: int) -> str:
        """``kind`` + a number by order of first use: the source of a program does not depend on how many
        IR objects the process made before it (the disk cache and loaded modules are keyed by the source)."""
        n = self.names.setdefault((kind, uid), len(self.names) + 1)
        return f"{kind}{n}"

    def assert_code(self, s) -> int:
        self.asserts.append(s)
        return len(self.asserts) - 1

    def emit(self, line: str) -> None:
        self.lines.append("    " * self.depth + line)

    def fresh(self, stem: str = "t") -> str:
        self.tmp += 1
        return f"_{stem}{self.tmp}"

    def nested(self, header: str, stmts, body=None) -> None:
        """``header`` (an ``if``/``for``/``while`` line) and ``stmts`` one level deeper, through ``body``
        (default :meth:`body`); an empty block gets ``pass``."""
        self.emit(header)
        self.depth += 1
        before = len(self.lines)
        (body or self.body)(stmts)
        if len(self.lines) == before:
            self.emit("pass")
        self.depth -= 1

    def body(self, stmts) -> None:
        before = len(self.lines)
        for s in stmts:
            STMT_RULES(s)(self, s)
        if len(self.lines) == before:
            self.emit("pass")

    # ------------------------------------------------------------------ names and dtypes
    def var(self, v: N.Var) -> str:
        name = self.canon("v", v.uid)
        return f"{name}_[_t]" if v.uid in self.thread_lets else name

    def buf(self, b: N.Buffer) -> str:
        return self.canon("b", b.uid)

    def need_narrow(self, dtype: str) -> str:
        self.narrow.setdefault(dtype, len(self.narrow))
        return dtype.replace("float", "f").replace("_", "")

    def rnd(self, src: str, dtype: str) -> str:
        """float32 ``src`` rounded to narrow ``dtype`` (float32 result)."""
        if dtype in _BITS16:
            return f"rnd_{_BITS16[dtype]}({src})"
        k = self.need_narrow(dtype)
        return f"T_{k}[{self.enc(src, dtype)}]"

    def dec(self, bits: str, dtype: str) -> str:
        """The float32 value of narrow bit pattern ``bits``."""
        if dtype in _BITS16:
            return f"dec_{_BITS16[dtype]}({bits})"
        return f"T_{self.need_narrow(dtype)}[{bits}]"

    def enc(self, src: str, dtype: str) -> str:
        if dtype == "float16":
            return f"enc_f16({src})"
        if dtype == "bfloat16":
            return f"enc_bf16({src})"
        k = self.need_narrow(dtype)
        _, nan_pos, nan_neg, sat, inf_bits, sign = narrow.encode_args(dtype)
        return f"enc(np.float32({src}), P_{k}, {nan_pos}, {nan_neg}, {sat}, {inf_bits}, {sign})"

    def expr(self, e) -> str:
        return EXPR_RULES(e)(self, e)

    def conv(self, src: str, frm: str, to: str) -> str:
        """``src`` (compute repr of ``frm``) converted to ``to``'s compute representation."""
        if frm == to:
            return src
        if dt.is_float(to):
            if to == "float64":
                return f"np.float64({src})"
            v = src if frm == "float32" or frm in dt.NARROW_FLOATS else f"np.float32({src})"
            return self.rnd(v, to) if to in dt.NARROW_FLOATS else v
        if to == "bool":
            return f"({src} != 0)"
        if dt.is_float(frm):
            return f"np.int64(f2i({src}, {dt.min_value(to)}, {dt.max_value(to)}))"
        if to in ("int64", "uint64"):
            return f"np.int64({src})"
        return f"np.int64(np.{to}({src}))"

    # ------------------------------------------------------------------ buffers
    def storage_value(self, src: str, b: N.Buffer) -> str:
        """A compute value of ``b``'s dtype in ``b``'s storage representation."""
        if b.scope == "global" and b.dtype in dt.NARROW_FLOATS:
            return self.enc(src, b.dtype)
        return src

    def load(self, b: N.Buffer, idx: list) -> str:
        if b.alias_of is not None and b.scope != "global" and b.uid not in self.views:
            raise Unsupported(f"a view of another buffer ({b.name})", b.loc)
        if b.scope == "var":
            return self._from_storage(f"{self.buf(b)}[0]", b)
        if b.scope != "global":
            return self._from_storage(f"{self.buf(b)}[{', '.join(idx)}]", b)
        _max_dims(b)
        fill = self.safe.get(b.uid, 0)
        if b.dtype in dt.NARROW_FLOATS:
            bits = narrow.encode_args(b.dtype)
            fb = _encode_const(fill, b.dtype, bits)
            return self.dec(f"ld{len(idx)}({self.buf(b)}, {fb}, {', '.join(idx)})", b.dtype)
        return self._from_storage(f"ld{len(idx)}({self.buf(b)}, {fill!r}, {', '.join(idx)})", b)

    def _from_storage(self, src: str, b: N.Buffer) -> str:
        if dt.is_int(b.dtype):
            return f"np.int64({src})"
        return src

    def store(self, b: N.Buffer, idx: list, value: str) -> None:
        if b.alias_of is not None and b.scope != "global" and b.uid not in self.views:
            raise Unsupported(f"a view of another buffer ({b.name})", b.loc)
        v = self.storage_value(value, b)
        if b.scope == "var":
            self.emit(f"{self.buf(b)}[0] = {v}")
        elif b.scope != "global":
            self.emit(f"{self.buf(b)}[{', '.join(idx)}] = {v}")
        else:
            _max_dims(b)
            self.emit(f"st{len(idx)}({self.buf(b)}, {', '.join(idx)}, {v})")

    def alloc(self, b: N.Buffer) -> None:
        if b.alias_of is not None:
            self.view(b)
            return
        shape = (1,) if b.scope == "var" else b.static_shape()
        if shape is None:
            raise Unsupported(f"on-chip buffer {b.name} with a symbolic shape", b.loc)
        npd = onchip_dtype(b.dtype)
        if dt.is_float(b.dtype):
            fill = "np.nan" if self.uninit == "nan" else "0"
        elif b.dtype == "bool":
            fill = "False"
        else:
            fill = str(INT_SENTINEL) if self.uninit == "nan" else "0"
            fill = str(int(np.array(int(fill)).astype(npd)))
        if b.uid in self.fused_tiles:  # never read when the runtime passes the loop's products
            shape = f"({shape!r} if FS{self.fused_tiles[b.uid]}[0] == 0 else {(1,) * len(shape)!r})"
        self.emit(f"{self.buf(b)} = full({shape!s}, {self.const(npd.name, fill)})")


    def view(self, b: N.Buffer) -> None:
        """``T.reshape`` of an on-chip buffer into a buffer of the same element type: a NumPy view of the root's
        array (row-major, as the interpreter's). Other views (a dtype reinterpretation, of global or ``var``
        storage) are refused."""
        root, shape = b.alias_of, b.static_shape()
        if (b.scope in ("global", "var") or root.scope in ("global", "var") or shape is None
                or dt.np_dtype(b.dtype) != dt.np_dtype(root.dtype) or (root.alias_of is not None and root.uid not in self.views)):
            raise Unsupported(f"a view of another buffer ({b.name})", b.loc)
        self.views.add(b.uid)
        self.emit(f"{self.buf(b)} = {self.buf(root)}.reshape({shape!r})")


def extern_symbol(helper: str, dtype: str) -> str:
    """The LLVM symbol of a ``prelude_tiles`` helper compiled for element type ``dtype``."""
    return f"tilesim_cpu_{helper}_{dtype}"


def _max_dims(b: N.Buffer) -> None:
    if len(b.shape) > 5:
        raise Unsupported(f"a global tensor of more than 5 dimensions ({b.name})", b.loc)


def onchip_dtype(dtype: str) -> np.dtype:
    if dt.is_float(dtype):
        return np.dtype(np.float64 if dtype == "float64" else np.float32)
    return dt.np_dtype(dtype)


def _encode_const(value, dtype: str, args) -> int:
    return int(dt.convert(np.array([value], dtype=np.float32), dtype).view(narrow.STORAGE[dtype])[0])


def has_atomics(stmts) -> bool:
    return any(isinstance(s, (N.Atomic, N.AtomicFetch)) for s in walk_stmts(stmts))


def gen_launch(pf: N.PrimFunc, launch: N.Launch, uninit: str = "nan", tf32: bool = False, workspaces=(),
               lets=()) -> LaunchSource:
    """The source of ``launch`` (see the module docstring)."""
    if launch.annotation("cluster"):
        raise Unsupported("a thread-block cluster launch (its blocks run together on the interpreter)", launch.loc)
    g = _Gen(pf, launch, uninit, tf32)
    g.safe = {uid: v for uid, v in ((b.uid, v) for b, v in dict(launch.annotation("safe_value", ())).items())}
    g.depth = 2
    buffers = [p for p in pf.params if isinstance(p, N.Buffer)] + list(workspaces)
    scalars = [p for p in pf.params if isinstance(p, N.Var)] + list(pf.dyn_vars) + list(lets)
    fused = [] if launch.thread_vars else FUSABLE[0](launch, {v.uid for v in scalars})
    for k, (loop, gemm, clear, tiles) in enumerate(fused):
        g.fused[id(loop)] = k
        g.fused_gemms.append((gemm, clear))
        g.fused_tiles.update(dict.fromkeys(tiles, k))
    grid_names = ["G0", "G1", "G2"][:len(launch.block_vars)]
    for d, v in enumerate(launch.block_vars):
        stride = "*".join(grid_names[:d]) or "1"
        g.emit(f"{g.var(v)} = (_blk // ({stride})) % {grid_names[d]}")
    if launch.thread_vars:
        SIMT_BODY[0](g, launch)
    else:
        g.body(launch.body)
    parallel = not has_atomics(launch.body)
    order = sorted(g.narrow, key=g.narrow.get)
    args = ([g.buf(b) for b in buffers] + [f"T_{g.need_narrow(d)}, P_{g.need_narrow(d)}" for d in order]
            + [g.var(v) for v in scalars] + [f"FP{k}, FS{k}" for k in range(len(fused))] + grid_names)
    head = ["from tilesim.backends.cpu.prelude import *  # noqa: F401,F403",
            "from tilesim.backends.cpu.prelude_tiles import *  # noqa: F401,F403", "",
            f"need({', '.join(repr(x) for x in g.externs)})"]
    head += [f"{name} = np.{t}({lit})" for (t, lit), name in g.consts.items()]
    head += ["",
            '@njit(cache=True, error_model="numpy", nogil=True)',
            f"def launch({', '.join(args + ['_lo', '_hi', '_step'])}):",
            "    for _blk in range(_lo, _hi, _step):"]
    return LaunchSource("\n".join(head + g.lines) + "\n", buffers, order, g.asserts, scalars, parallel, fused)


# rules live in codegen_rules.py (expressions, statements) and codegen_tiles.py (tile operations)
