"""Builders of ``tilelang.tools.cuda.iket``'s kernel-side calls (:mod:`tilesim.tools.cuda.iket`).

Contract
--------
* ``iket.mark(name, payload=None)`` emits :class:`~tilesim.ir.nodes.Event` ``kind="mark"``;
  ``iket.range_push`` / ``range_start(name, payload=None)`` emits ``kind="range_start"`` and opens the range in
  the launch's record (``tr.launch["iket_ranges"]``); ``iket.range_pop`` / ``range_end(name=None)`` emits
  ``kind="range_end"`` (event id 31, TileLang's range-end id) for the innermost open range and closes it;
  ``with iket.range(name, payload=None): body`` is a push, the body, a pop (:func:`with_range`).
* ``iket.payload(expr, dtype=None)`` is a :class:`~tilesim.tools.cuda.iket.PayloadSpec` (a trace-time value):
  ``dtype`` normalised to int32/uint32/float32, or inferred from ``expr`` (its IR dtype; Python bool -> uint32,
  int -> int32, float -> float32); the event's payload is ``expr`` cast to that dtype. A bare ``payload=expr`` is
  the same as ``payload=iket.payload(expr)``.
* Events are registered in the iket registry (``(kind, name)`` -> event id, payload dtype) at trace time.
* Errors (outside a launch, a bad name or dtype, a payload dtype changing, a pop without a push or of another
  name) are ``KernelError`` located at the call.
"""

from __future__ import annotations

from ..errors import KernelSyntaxError, KernelTypeError
from ..ir import nodes as N
from ..tools.cuda import iket as I
from . import exprs as X
from .builders import builder


def _launch_only(tr, loc, what):
    if not tr.in_launch():
        raise KernelSyntaxError(f"iket.{what} outside `with T.Kernel(...)`", loc,
                                hint="iket events are kernel program points: put them inside the launch")


def _payload_spec(value, dtype, loc) -> I.PayloadSpec:
    if dtype is None:
        if X.is_ir(value):
            dtype = X.to_expr(value, loc).dtype
        elif isinstance(value, bool):
            dtype = "uint32"
        elif isinstance(value, int):
            dtype = "int32"
        elif isinstance(value, float):
            dtype = "float32"
        else:
            raise KernelTypeError(f"cannot infer an iket payload dtype for {value!r}", loc,
                                  hint="use iket.payload(expr, dtype='int32') (int32, uint32 or float32)")
    d = I.normalize_dtype(dtype)
    return I.PayloadSpec(value, d, I.PAYLOAD_IKET_IDS[d])


def _payload_expr(spec: I.PayloadSpec | None, loc):
    if spec is None:
        return None, "NoPayload"
    e = X.to_expr(spec.expr, loc, like=spec.dtype) if not X.is_ir(spec.expr) else X.to_expr(spec.expr, loc)
    return (e if e.dtype == spec.dtype else X.cast_to(e, spec.dtype, loc)), spec.dtype


def _event(tr, loc, what, name, kind, payload):
    _launch_only(tr, loc, what)
    spec = payload if payload is None or isinstance(payload, I.PayloadSpec) else _payload_spec(payload, None, loc)
    expr, pdt = _payload_expr(spec, loc)
    info = I.register(name, "mark" if kind == "mark" else "range", pdt)
    tr.emit(N.Event(name, kind, info.event_id, expr, pdt, loc))


def _pop(tr, loc, what, name):
    _launch_only(tr, loc, what)
    stack = tr.launch.setdefault("iket_ranges", [])
    if not stack:
        raise KernelSyntaxError(f"iket.{what}() without a matching iket.range_push()", loc)
    if name is not None and name != stack[-1]:
        raise KernelSyntaxError(f"iket.{what}({name!r}) does not match the open range {stack[-1]!r}", loc)
    started = stack.pop()
    tr.emit(N.Event(started, "range_end", I.RANGE_END_EVENT_ID, None, "NoPayload", loc))


@builder("iket_payload")
def _b_payload(tr, loc, expr, dtype=None):
    return _payload_spec(expr, dtype, loc)


@builder("iket_mark")
def _b_mark(tr, loc, name, payload=None):
    _event(tr, loc, "mark", name, "mark", payload)


def _push(what):
    def b(tr, loc, name, payload=None):
        _event(tr, loc, what, name, "range_start", payload)
        tr.launch.setdefault("iket_ranges", []).append(name)
    return b


def _pop_builder(what):
    return lambda tr, loc, name=None: _pop(tr, loc, what, name)


for _w in ("range_push", "range_start"):
    builder("iket_" + _w)(_push(_w))
for _w in ("range_pop", "range_end"):
    builder("iket_" + _w)(_pop_builder(_w))


@builder("iket_range")
def _b_range(tr, loc, name, payload=None):
    raise KernelSyntaxError("iket.range(name) is used as `with iket.range(name):`", loc,
                            hint="or call iket.range_push(name) ... iket.range_pop(name)")


def with_range(tr, node, call):
    """``with iket.range(name, payload=None): body`` — the tracer's ``with`` statement hands the call here."""
    loc = tr.loc(node)
    if node.items[0].optional_vars is not None:
        raise KernelSyntaxError("`with iket.range(...)` binds no name", loc)
    args, kwargs = tr.call_args(call)
    try:
        name, payload = _bind(*args, **kwargs)
    except TypeError as e:
        raise KernelTypeError(f"iket.range: {e}", loc, hint="iket.range(name, payload=None)") from None
    _push("range")(tr, loc, name, payload)
    depth = len(tr.launch["iket_ranges"])
    tr.visit_body(node.body)
    if len(tr.launch["iket_ranges"]) != depth or tr.launch["iket_ranges"][-1] != name:
        raise KernelSyntaxError(f"the body of `with iket.range({name!r})` leaves a range_push open", loc)
    _pop(tr, loc, "range", name)


def _bind(name, payload=None):
    return name, payload
