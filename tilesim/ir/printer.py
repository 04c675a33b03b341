"""Readable text form of the tile IR (``tilesim ir kernel.py``, ``kernel.get_kernel_source()``).

The text is Python-like and stable: names that repeat get a ``_<n>`` suffix in order of appearance.
"""

from __future__ import annotations

from . import nodes as N

_SYM = {"add": "+", "sub": "-", "mul": "*", "div": "/", "floordiv": "//", "floormod": "%",
        "bitand": "&", "bitor": "|", "bitxor": "^", "shl": "<<", "shr": ">>", "pow": "**",
        "lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}


class _P:
    def __init__(self):
        self.names: dict[int, str] = {}
        self.used: dict[str, int] = {}
        self.lines: list[str] = []

    def name(self, obj) -> str:
        uid = obj.uid
        if uid not in self.names:
            n = self.used.get(obj.name, 0)
            self.used[obj.name] = n + 1
            self.names[uid] = obj.name if n == 0 else f"{obj.name}_{n}"
        return self.names[uid]

    def dim(self, d):
        return str(d) if isinstance(d, int) else self.e(d)

    def e(self, x) -> str:
        if isinstance(x, N.Const):
            return repr(x.value) if x.dtype in ("int32", "bool", "float32") else f"{x.dtype}({x.value!r})"
        if isinstance(x, N.Var):
            return self.name(x)
        if isinstance(x, N.Binary):
            if x.op in ("min", "max", "truncmod"):
                return f"{x.op}({self.e(x.a)}, {self.e(x.b)})"
            return f"({self.e(x.a)} {_SYM[x.op]} {self.e(x.b)})"
        if isinstance(x, N.Compare):
            return f"({self.e(x.a)} {_SYM[x.op]} {self.e(x.b)})"
        if isinstance(x, N.Logical):
            return f"({self.e(x.a)} {x.op} {self.e(x.b)})"
        if isinstance(x, N.Unary):
            return {"neg": "-", "not": "not ", "bitnot": "~"}[x.op] + self.e(x.a)
        if isinstance(x, N.Call):
            return f"T.{x.func}(" + ", ".join(self.e(a) for a in x.args) + ")"
        if isinstance(x, N.Select):
            return f"T.if_then_else({self.e(x.cond)}, {self.e(x.a)}, {self.e(x.b)})"
        if isinstance(x, N.Cast):
            return f"T.cast({self.e(x.value)}, {x.dtype})"
        if isinstance(x, N.Reinterpret):
            return f"T.reinterpret({self.e(x.value)}, {x.dtype})"
        if isinstance(x, N.Load):
            if x.buffer.scope == "var":
                return self.name(x.buffer)
            return f"{self.name(x.buffer)}[" + ", ".join(self.e(i) for i in x.indices) + "]"
        return f"<{type(x).__name__}>"

    def region(self, r: N.Region) -> str:
        parts = []
        for s, ext in zip(r.starts, r.extents):
            if ext == 1:
                parts.append(self.e(s))
            elif isinstance(s, N.Const) and s.value == 0:
                parts.append(f"0:{self.dim(ext)}")
            else:
                parts.append(f"{self.e(s)}:+{self.dim(ext)}")
        return f"{self.name(r.buffer)}[" + ", ".join(parts) + "]"

    def w(self, depth, text):
        self.lines.append("    " * depth + text)

    def body(self, stmts, depth):
        if not stmts:
            self.w(depth, "pass")
        for s in stmts:
            self.s(s, depth)

    def s(self, s, d):
        t = type(s)
        if t is N.Launch:
            bv = ", ".join(self.name(v) for v in s.block_vars)
            grid = ", ".join(self.e(g) for g in s.grid)
            extra = "".join(f", {k}={v!r}" for k, v in s.annotations)
            self.w(d, f"with T.Kernel({grid}, threads={s.threads if len(s.threads) > 1 else s.threads[0]}{extra}) as ({bv}):")
            self.body(s.body, d + 1)
        elif t is N.Alloc:
            b = s.buffer
            shape = "(" + ", ".join(self.dim(x) for x in b.shape) + ("," if len(b.shape) == 1 else "") + ")"
            if b.alias_of is not None:
                self.w(d, f"{self.name(b)} = T.view({self.name(b.alias_of)}, {shape}, {b.dtype})")
            elif b.scope == "var":
                init = f", {self.e(s.init)}" if s.init is not None else ""
                self.w(d, f"{self.name(b)} = T.alloc_var({b.dtype}{init})")
            else:
                self.w(d, f"{self.name(b)} = T.alloc_{b.scope}({shape}, {b.dtype})")
        elif t is N.Copy:
            self.w(d, f"T.copy({self.region(s.src)}, {self.region(s.dst)})")
        elif t is N.Gemm:
            flags = "".join([", transpose_A=True" if s.trans_a else "", ", transpose_B=True" if s.trans_b else "",
                             ", clear_accum=True" if s.clear_accum else ""])
            self.w(d, f"T.gemm({self.region(s.a)}, {self.region(s.b)}, {self.region(s.c)}{flags})")
        elif t is N.Reduce:
            self.w(d, f"T.reduce_{s.kind}({self.region(s.src)}, {self.region(s.dst)}, dim={s.dim}, clear={s.clear})")
        elif t is N.Cumsum:
            self.w(d, f"T.cumsum({self.region(s.src)}, {self.region(s.dst)}, dim={s.dim}, reverse={s.reverse})")
        elif t is N.Fill:
            self.w(d, f"T.fill({self.region(s.dst)}, {self.e(s.value)})")
        elif t is N.Atomic:
            v = self.region(s.value) if isinstance(s.value, N.Region) else self.e(s.value)
            self.w(d, f"T.atomic_{s.kind}({self.region(s.dst)}, {v})")
        elif t is N.For:
            extra = "".join(f", {k}={v!r}" for k, v in s.annotations if v is not None)
            fn = {"serial": "T.serial", "pipelined": "T.Pipelined", "unroll": "T.unroll",
                  "vectorized": "T.vectorized"}[s.kind]
            step = f", {s.step}" if s.step != 1 else ""
            self.w(d, f"for {self.name(s.var)} in {fn}({self.e(s.start)}, {self.e(s.stop)}{step}{extra}):")
            self.body(s.body, d + 1)
        elif t is N.Parallel:
            vs = ", ".join(self.name(v) for v in s.vars)
            self.w(d, f"for {vs} in T.Parallel({', '.join(map(str, s.extents))}):")
            self.body(s.body, d + 1)
        elif t is N.While:
            self.w(d, f"while {self.e(s.cond)}:")
            self.body(s.body, d + 1)
        elif t is N.If:
            self.w(d, f"if {self.e(s.cond)}:")
            self.body(s.then, d + 1)
            if s.orelse:
                self.w(d, "else:")
                self.body(s.orelse, d + 1)
        elif t is N.Break:
            self.w(d, "break")
        elif t is N.Continue:
            self.w(d, "continue")
        elif t is N.Let:
            self.w(d, f"{self.name(s.var)}: {s.var.dtype} = {self.e(s.value)}")
        elif t is N.Store:
            if s.buffer.scope == "var":
                self.w(d, f"{self.name(s.buffer)} = {self.e(s.value)}")
            else:
                self.w(d, f"{self.name(s.buffer)}[" + ", ".join(self.e(i) for i in s.indices) + f"] = {self.e(s.value)}")
        else:
            self.w(d, f"<{t.__name__}>")


def format_ir(pf: N.PrimFunc) -> str:
    p = _P()
    params = []
    for x in pf.params:
        if isinstance(x, N.Buffer):
            shape = ", ".join(p.dim(s) for s in x.shape)
            params.append(f"{p.name(x)}: T.Tensor(({shape}{',' if x.ndim == 1 else ''}), {x.dtype})")
        else:
            params.append(f"{p.name(x)}: {x.dtype}")
    p.w(0, "@T.prim_func")
    p.w(0, f"def {pf.name}({', '.join(params)}):")
    p.body(pf.body, 1)
    return "\n".join(p.lines) + "\n"
