"""Buffer placement queries and element access: a mixin of :class:`~.lower.KernelGen`.

Contract: :class:`MemoryAccess` answers where a buffer lives (``where``: global / shared / reg / var;
``resource`` for the barrier pass; ``layout`` of a register fragment), names its array (``arr``, which
also registers global buffers as kernel arguments), computes flat indices (``gdims``, ``sstrides``,
``lin``, ``reg_index``) and emits one element's ``load``/``store`` (global accesses guarded per
dimension unless the buffer is in ``unguarded``; atomics through ``cuda.atomic``), plus ``T.alloc_*``
statements. It relies on the :class:`~.emitter.Emitter` state and helpers of the same object.
"""

from __future__ import annotations

from ... import dtypes as dt
from ...errors import InternalError, KernelTypeError
from ...ir import nodes as N
from . import rules as Rl
from .codestr import _IDENT, _add, _mul, _prod, _san
from .layout import Layout


class MemoryAccess:
    """Buffer placement, indexing, loads and stores (see the module docstring)."""

    def where(self, buf: N.Buffer) -> str:
        root = buf.alias_of or buf
        if root.scope == "global":
            return "global"
        return self.placement.where(buf if buf.alias_of is None else root)

    def resource(self, buf: N.Buffer):
        w = self.where(buf)
        if w in ("global", "shared"):
            return (buf.alias_of or buf).uid
        return None

    def layout(self, buf: N.Buffer) -> Layout:
        lay = self.placement.reg.get(buf.uid)
        if lay is None:
            raise InternalError(f"fragment {buf.name} has no layout")
        return lay

    def arr(self, buf: N.Buffer) -> str:
        w = self.where(buf)
        if w == "global":
            if buf not in self.arg_arrays:
                self.arg_arrays.append(buf)
            return f"{_san(buf.name)}_{buf.uid}"
        root = buf.alias_of or buf
        return f"{_san(root.name)}_{root.uid}"

    def gdims(self, buf: N.Buffer) -> tuple:
        """Dimensions (code) of a global buffer."""
        got = self._gdims.get(buf.uid)
        if got is not None:
            return got
        self.arr(buf)
        dims = []
        for d, x in enumerate(buf.shape):
            if isinstance(x, int):
                dims.append(str(x))
            else:
                code = self._outer_expr(x)
                n = f"_d{buf.uid}_{d}"
                self.gprolog.append(f"{n} = {code}")
                dims.append(n)
        strides = []
        acc = "1"
        for d in reversed(range(len(dims))):
            strides.append(acc)
            nxt = _mul(acc, dims[d])
            if not _IDENT.match(nxt):
                n = f"_s{buf.uid}_{d}"
                self.gprolog.append(f"{n} = {nxt}")
                nxt = n
            acc = nxt
        got = (tuple(dims), tuple(reversed(strides)))
        self._gdims[buf.uid] = got
        return got

    def sstrides(self, buf: N.Buffer) -> tuple:
        root = buf.alias_of or buf
        if buf.alias_of is not None:
            return tuple(_prod(buf.shape[d + 1:]) for d in range(buf.ndim))
        return self.sstride[root.uid]

    def lin(self, strides, idx) -> str:
        code = "0"
        for s, i in zip(strides, idx):
            code = _add(code, _mul(i, s))
        return code

    def reg_index(self, buf: N.Buffer, idx_codes, idx_nodes) -> str:
        """Local-array index of a register fragment element."""
        lay = self.layout(buf)
        if self.par is not None and idx_nodes is not None and len(idx_nodes) == buf.ndim and buf.ndim > 0:
            dims = []
            for i, n in zip(idx_nodes, buf.shape):
                if type(i) is N.Var and i.uid in self.par.dims and self.par.layout.shape[self.par.dims[i.uid]] == n:
                    dims.append(self.par.dims[i.uid])
                else:
                    dims = None
                    break
            if dims is not None and len(set(dims)) == len(dims) and self.par.layout.restrict(dims) == lay:
                slots = lay.slots
                code = "0"
                for k, d in enumerate(dims):
                    code = _add(code, _mul(self.par.slot[d], _prod(slots[k + 1:])))
                return code
        if lay.full_replicated:
            strides = tuple(_prod(buf.shape[d + 1:]) for d in range(buf.ndim))
            return self.lin(strides, idx_codes)
        raise InternalError(f"fragment {buf.name} ({lay.describe()}) accessed outside its layout")

    def load(self, buf: N.Buffer, idx_codes, idx_nodes=None) -> str:
        w = self.where(buf)
        if w == "var":
            return Rl.from_register(self.var_name(buf), buf.dtype)
        if w == "reg":
            return Rl.from_register(f"{self.arr(buf)}[{self.reg_index(buf, idx_codes, idx_nodes)}]", buf.dtype)
        if w == "shared":
            return Rl.from_storage(f"_ldx({self.arr(buf)}, {self.slin(buf, idx_codes)})", buf.dtype)
        dims, strides = self.gdims(buf)
        if (buf.alias_of or buf).uid in self.unguarded:  # inside a copy whose whole tile is in bounds
            return Rl.from_storage(f"_ldx({self.arr(buf)}, {self.lin(strides, idx_codes)})", buf.dtype)
        idx = [self.hoist(c) for c in idx_codes]
        cond = " and ".join(f"{i} >= 0 and {i} < {d}" for i, d in zip(idx, dims)) or "True"
        val = Rl.from_storage(f"_ldx({self.arr(buf)}, {self.lin(strides, idx)})", buf.dtype)
        return f"({val} if ({cond}) else {Rl.zero(buf.dtype)})"

    def var_name(self, buf: N.Buffer) -> str:
        n = self.names.get(buf.uid)
        if n is None:
            n = f"{_san(buf.name)}_{buf.uid}"
            self.names[buf.uid] = n
        return n

    def store(self, buf: N.Buffer, idx_codes, idx_nodes, val_code: str, val_dtype: str, atomic=None):
        """Emit a store of ``val_code`` (compute repr of ``val_dtype``) into ``buf[idx]``."""
        v = Rl.convert(val_code, val_dtype, buf.dtype)
        w = self.where(buf)
        if w == "var":
            self.emit(f"{self.var_name(buf)} = {Rl.to_register(v, buf.dtype)}")
            return
        if w == "reg":
            self.emit(f"{self.arr(buf)}[{self.reg_index(buf, idx_codes, idx_nodes)}] = {Rl.to_register(v, buf.dtype)}")
            return
        guard = []
        if self.par is None:
            if not self.launch.thread_vars:  # per-thread code: every thread stores
                guard.append("_tid == 0")
        elif self.par.primary is not None:
            guard.append(self.par.primary)
        if w == "shared":
            lin = self.slin(buf, idx_codes)
        elif (buf.alias_of or buf).uid in self.unguarded:
            dims, strides = self.gdims(buf)
            lin = self.lin(strides, idx_codes)
        else:
            dims, strides = self.gdims(buf)
            idx = [self.hoist(c) for c in idx_codes]
            guard += [f"{i} >= 0 and {i} < {d}" for i, d in zip(idx, dims)]
            lin = self.lin(strides, idx)
        vv = self.hoist(v)
        stmt = self._store_stmt(buf, lin, vv, atomic)
        if guard:
            self.emit(f"if {' and '.join(guard)}:")
            self.emit(f"    {stmt}")
        else:
            self.emit(stmt)

    def _store_stmt(self, buf, lin, v, atomic):
        a = self.arr(buf)
        if atomic is None:
            return f"_stx({a}, {lin}, {Rl.to_storage(v, buf.dtype)})"
        if buf.dtype in dt.NARROW_FLOATS and buf.dtype != "float16":
            raise KernelTypeError(f"T.atomic_{atomic} on a {buf.dtype} buffer is not supported by the CUDA backend",
                                  hint="accumulate in a float32 buffer")
        if buf.dtype == "float16" and atomic != "add":
            raise KernelTypeError(f"T.atomic_{atomic} on float16 is not supported by the CUDA backend")
        return f"cuda.atomic.{atomic}({a}, {lin}, {Rl.to_storage(v, buf.dtype)})"

    # ----------------------------------------------------------------------------------- allocation
    def alloc(self, s: N.Alloc):
        b = s.buffer
        if b.scope == "var":
            init = Rl.zero(b.dtype) if s.init is None else Rl.convert(self.expr(s.init), s.init.dtype, b.dtype)
            self.emit(f"{self.var_name(b)} = {Rl.to_register(init, b.dtype)}")
            return
        if b.scope == "global":
            if b.alias_of is None:
                raise KernelTypeError(f"T.alloc_global({b.name}) inside a kernel launch", s.loc,
                                      hint="allocate workspaces at the top level of the prim_func")
            return
        if s.init is not None:
            raise KernelTypeError("an initialised on-chip buffer is not supported by the CUDA backend", s.loc)
        # on-chip buffers are declared in the prologue
