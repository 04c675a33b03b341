"""Builders of ``tilesim.language.allreduce``: TVM's thread all-reduce, written out as shared memory, barriers
and a per-thread loop (no IR of its own, so every consumer already knows its parts).

Contract
--------
* ``with T.attr(reducer, "reduce_scope", v):`` (:func:`with_attr`, called by the tracer's ``with``) traces its
  body inline with ``reducer`` (a :class:`Reducer` from ``T.comm_reducer``) as the launch's current reducer;
  ``v`` is not evaluated. Another key, or a non-reducer node, is a ``KernelSyntaxError``.
* ``T.tvm_thread_allreduce(count, value, cond, out_elem, *thread_vars)`` (per-thread code, outside
  ``T.Parallel``, inside a reduce scope) emits, with ``t`` the linear thread index and ``S`` a hoisted
  shared buffer of one element per thread (the reducer's identity dtype)::

      S[t] = value; sync_threads
      out_elem = identity; for r_d in serial(extent_d) (every reduced dim d): out_elem = combine(out_elem, S[t_r])
      sync_threads

  where ``t_r`` is ``t`` with its coordinates in the reduced dims replaced by ``r_d``. ``count`` must be 1,
  ``cond`` True, the thread arguments thread indices of this launch (``T.get_thread_binding(d)``), and
  ``out_elem`` one element of a buffer (or a ``T.alloc_var``). It evaluates to ``None`` (``T.evaluate`` takes it).
* Errors are ``KernelError`` located at the call.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import KernelSyntaxError, KernelTypeError
from ..ir import nodes as N
from . import exprs as X
from . import helpers
from . import simt as S
from .builders import builder


@dataclass(frozen=True)
class Reducer:
    """``T.comm_reducer(combiner, identity)``: a trace-time value."""

    combiner: object  # a KernelLambda (written in the kernel) or a traceable Python function
    identity: object  # an IR expression or Python number


@builder("comm_reducer")
def _b_comm_reducer(tr, loc, combiner, identity):
    if not isinstance(combiner, helpers.KernelLambda) and not helpers.traceable(combiner):
        raise KernelTypeError("T.comm_reducer takes a two-argument lambda, e.g. lambda x, y: x + y", loc)
    ids = list(identity) if isinstance(identity, (list, tuple)) else [identity]
    if len(ids) != 1:
        raise KernelTypeError(f"T.comm_reducer: one identity element is supported, got {len(ids)}", loc)
    return Reducer(combiner, ids[0])


@builder("attr")
def _b_attr(tr, loc, node, attr_key, value):
    raise KernelSyntaxError("T.attr is used as `with T.attr(reducer, \"reduce_scope\", v):`", loc)


@builder("evaluate")
def _b_evaluate(tr, loc, value):
    if X.is_ir(value):
        raise KernelTypeError("T.evaluate of a value with no effect", loc,
                              hint="T.evaluate takes T.tvm_thread_allreduce(...); assign values instead")


def with_attr(tr, node, call):
    """``with T.attr(node, key, value):`` — the tracer's ``with`` statement hands the call here."""
    loc = tr.loc(node)
    if node.items[0].optional_vars is not None:
        raise KernelSyntaxError("`with T.attr(...)` binds no name", loc)
    if len(call.args) != 3 or call.keywords:
        raise KernelTypeError("T.attr takes (node, attr_key, value)", loc)
    key = tr.ev(call.args[1])
    if key != "reduce_scope":
        raise KernelSyntaxError(f"T.attr key {key!r} is not supported by tilesim", loc,
                                hint="tilesim knows the \"reduce_scope\" of T.tvm_thread_allreduce")
    reducer = tr.ev(call.args[0])
    if not isinstance(reducer, Reducer):
        raise KernelTypeError("T.attr(..., \"reduce_scope\", ...) takes a T.comm_reducer(...)", loc)
    if not tr.in_launch():
        raise KernelSyntaxError("T.attr reduce scope outside `with T.Kernel(...)`", loc)
    saved = tr.launch.get("reducer")
    tr.launch["reducer"] = (reducer, node)
    try:
        tr.visit_body(node.body)
    finally:
        tr.launch["reducer"] = saved


def _py(v):
    return v.value if isinstance(v, N.Const) else v


@builder("tvm_thread_allreduce")
def _b_tvm_thread_allreduce(tr, loc, args, dtype):
    what = "T.tvm_thread_allreduce"
    if not tr.in_launch() or tr.launch.get("reducer") is None:
        raise KernelSyntaxError(f"{what} outside `with T.attr(T.comm_reducer(...), \"reduce_scope\", ...)`", loc)
    if tr.parallel_depth:
        raise KernelSyntaxError(f"{what} inside T.Parallel", loc, hint="threads reduce, not tile elements")
    if len(args) < 5:
        raise KernelTypeError(f"{what} takes (count, value, cond, out_element, *thread_indices)", loc)
    count, value, cond, out, *tvars = args
    if _py(count) != 1:
        raise KernelTypeError(f"{what}: count {count!r} (only 1 value per thread is supported)", loc)
    if _py(cond) is not True:
        raise KernelTypeError(f"{what}: cond must be True", loc)
    if isinstance(out, N.Buffer) and out.scope == "var":
        out = X.Access(out, (), loc)
    if not isinstance(out, X.Access) or out.has_slice:
        raise KernelTypeError(f"{what}: the output must be one buffer element, e.g. red[0]", loc)
    threads = tr.launch["threads"]
    dims = []
    for v in tvars:
        d = next((d for d in range(len(threads)) if v is S.thread_index(tr, loc, d)), None)
        if d is None or not isinstance(v, N.Var):
            raise KernelTypeError(f"{what}: reduce over thread indices of this launch (T.get_thread_binding(d)), "
                                  f"got {v!r}", loc)
        dims.append(d)
    red, with_node = tr.launch["reducer"]
    acc = X.to_expr(red.identity, loc).dtype
    nt, strides = 1, []
    for t in threads:
        strides.append(nt)
        nt *= t
    buf = N.Buffer((tr.assign_name or "allreduce") + "_red", (nt,), acc, "shared", loc=loc)
    tr._alloc(buf)
    t = S.linear_thread(tr, loc)
    tr.emit(N.Store(buf, (X.index_expr(t, loc),), X.cast_to(X.to_expr(value, loc), acc, loc), loc))
    tr.emit(N.SyncThreads(None, None, loc=loc))
    dst = X.make_load(out.buffer, out.items, loc)
    tr.emit(N.Store(dst.buffer, dst.indices, X.cast_to(X.to_expr(red.identity, loc, like=acc), dst.dtype, loc), loc))
    rvars = [N.Var(f"r{d}", "int32", kind="loop", loc=loc) for d in dims]
    tr_ = t
    for d, r in zip(dims, rvars):
        tr_ = X.binop("add", tr_, X.binop("mul", X.binop("sub", r, S.thread_index(tr, loc, d), loc), strides[d], loc),
                      loc)
    other = N.Load(buf, (X.index_expr(tr_, loc),), acc, loc)
    operands = [X.cast_to(dst, acc, loc), other]
    if isinstance(red.combiner, helpers.KernelLambda):
        combined = helpers.call_kernel_lambda(tr, red.combiner, operands, {}, red.combiner.node)
    else:  # a Python function of the program (a lambda of the enclosing factory)
        combined = helpers.inline_function(tr, red.combiner, operands, {}, with_node, "the reducer's combiner")
    body = (N.Store(dst.buffer, dst.indices, X.cast_to(X.to_expr(combined, loc), dst.dtype, loc), loc),)
    for d, r in reversed(list(zip(dims, rvars))):
        body = (N.For(r, N.Const(0, "int32", loc), N.Const(threads[d], "int32", loc), 1, "serial", body, (), loc),)
    tr.emit(body[0])
    tr.emit(N.SyncThreads(None, None, loc=loc))
