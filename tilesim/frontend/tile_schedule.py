"""``T.PersistentTileScheduler``: TileLang's persistent, grid-strided tile scheduler, built at trace time.

Contract
--------
``sched = T.PersistentTileScheduler(num_m_tiles, num_n_tiles, num_workers=None, swizzle_size=1,
column_major=True, cluster_size=1, stateful=True, name=None)`` (inside a launch) is a trace-time object
whose methods emit ordinary IR (``Store`` to four ``T.alloc_var`` int32 variables, expressions over them),
with TileLang's meaning:

* the grid is ``m' x num_n_tiles`` tiles with ``m' = ceildiv(num_m_tiles, cluster_size)`` (``m_idx`` is a
  cluster row when ``cluster_size > 1``: the caller adds its rank); ``total = m' * num_n_tiles``;
* ``coord(t)`` decodes linear tile ``t``: with ``(p, s) = (m', n)`` if ``column_major`` else ``(n, m')``,
  ``group = t // (p * swizzle)``, ``width = max(1, min(swizzle, s - group * swizzle))``,
  ``fast = (t - group * p * swizzle) // width``, ``slow = group * swizzle + (t - group * p * swizzle) % width``;
  ``(m, n) = (fast, slow)`` if ``column_major`` else ``(slow, fast)``;
* ``init(w)``: iteration 0 at linear tile ``w``; ``next_tile()``: the next iteration, ``num_workers`` tiles on
  (default ``get_num_sms() // cluster_size``, the stand-in device's SM count); ``valid()`` is
  ``linear < total``; ``m_idx``, ``n_idx``, ``linear_idx``, ``current_iter`` read the state.

With ``stateful=False`` only ``coord`` exists (the state methods are a located ``KernelSyntaxError``).
Arguments that are not integers (Python ints or integer kernel expressions) are a ``KernelTypeError``.
"""

from __future__ import annotations

from .. import dtypes as dt
from ..carver.arch import driver
from ..errors import KernelSyntaxError, KernelTypeError
from ..ir import nodes as N
from . import exprs as X
from .builders import builder


def _int(v, loc, what):
    if isinstance(v, N.Const):
        v = v.value
    if X.is_ir(v):
        e = X.to_expr(v, loc)
        if not dt.is_int(e.dtype):
            raise KernelTypeError(f"T.PersistentTileScheduler: {what} must be an integer, got a {e.dtype} value", loc)
        return e
    if isinstance(v, bool) or not isinstance(v, int):
        raise KernelTypeError(f"T.PersistentTileScheduler: {what} must be an integer, got {v!r}", loc)
    return v


def _trace_time(fn):
    fn.__tilesim_trace_time__ = True  # called with kernel values at trace time (see tracer_exprs.ex_Call)
    return fn


class PersistentTileScheduler:
    """The trace-time scheduler object (see the module docstring)."""

    def __init__(self, tr, loc, num_m_tiles, num_n_tiles, num_workers, swizzle_size, column_major, cluster_size,
                 stateful, name):
        self._tr, self._loc = tr, loc
        for v, what in ((swizzle_size, "swizzle_size"), (cluster_size, "cluster_size")):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise KernelTypeError(f"T.PersistentTileScheduler: {what} must be a positive Python int, got {v!r}",
                                      loc)
        m, n = _int(num_m_tiles, loc, "num_m_tiles"), _int(num_n_tiles, loc, "num_n_tiles")
        self.cluster_size, self.swizzle_size, self._column_major = cluster_size, swizzle_size, bool(column_major)
        if num_workers is None:
            num_workers = driver.get_num_sms() // cluster_size
        self.num_workers = _int(num_workers, loc, "num_workers")
        m_clusters = X.binop("floordiv", X.binop("add", m, cluster_size - 1, loc), cluster_size, loc)
        self._total = X.binop("mul", m_clusters, n, loc)
        self._primary, self._secondary = (m_clusters, n) if column_major else (n, m_clusters)
        self._stateful = bool(stateful)
        if self._stateful:
            prefix = f"{name}_" if name else "sched_"
            self._vars = {}
            for k in ("m_idx", "n_idx", "linear_idx", "current_iter"):
                buf = N.Buffer(prefix + k, (), "int32", "var", loc=loc)
                tr._alloc(buf, None)
                self._vars[k] = buf

    # -------------------------------------------------------------------------------- state
    def _var(self, k):
        if not self._stateful:
            raise KernelSyntaxError(f"T.PersistentTileScheduler(stateful=False) has no {k}: it only decodes tiles "
                                    "with coord(tile_id)", self._loc, hint="construct it with stateful=True")
        return self._vars[k]

    def _get(self, k):
        return N.Load(self._var(k), (), "int32", self._loc)

    def _set(self, k, v):
        self._tr.emit(N.Store(self._var(k), (), X.cast_to(X.to_expr(v, self._loc, like="int32"), "int32", self._loc),
                              self._loc))

    @property
    def m_idx(self):
        return self._get("m_idx")

    @property
    def n_idx(self):
        return self._get("n_idx")

    @property
    def linear_idx(self):
        return self._get("linear_idx")

    @property
    def current_iter(self):
        return self._get("current_iter")

    # -------------------------------------------------------------------------------- methods
    @_trace_time
    def coord(self, tile_id):
        """``(m, n)`` of linear tile ``tile_id`` (expressions; no state)."""
        loc = self._loc
        t = _int(tile_id, loc, "tile_id")
        p, s, sw = self._primary, self._secondary, self.swizzle_size
        panel = X.binop("mul", p, sw, loc)
        group = X.binop("floordiv", t, panel, loc)
        base = X.binop("mul", group, sw, loc)
        width = X.binop("max", 1, X.binop("min", sw, X.binop("sub", s, base, loc), loc), loc)
        in_group = X.binop("sub", t, X.binop("mul", group, panel, loc), loc)
        fast = X.binop("floordiv", in_group, width, loc)
        slow = X.binop("add", base, X.binop("floormod", in_group, width, loc), loc)
        return (fast, slow) if self._column_major else (slow, fast)

    def _update(self):
        m, n = self.coord(self._get("linear_idx"))
        self._set("m_idx", m)
        self._set("n_idx", n)

    @_trace_time
    def init(self, worker_id):
        self._set("current_iter", 0)
        self._set("linear_idx", _int(worker_id, self._loc, "the worker id"))
        self._update()

    @_trace_time
    def next_tile(self):
        self._set("current_iter", X.binop("add", self._get("current_iter"), 1, self._loc))
        self._set("linear_idx", X.binop("add", self._get("linear_idx"), self.num_workers, self._loc))
        self._update()

    @_trace_time
    def valid(self):
        return X.compare("lt", self._get("linear_idx"), self._total, self._loc)


@builder("PersistentTileScheduler")
def _b_persistent_tile_scheduler(tr, loc, num_m_tiles, num_n_tiles, num_workers, swizzle_size, column_major,
                                 cluster_size, stateful, name):
    if not tr.in_launch():
        raise KernelSyntaxError("T.PersistentTileScheduler outside `with T.Kernel(...)`", loc,
                                hint="make the scheduler inside the launch, where its state variables live")
    return PersistentTileScheduler(tr, loc, num_m_tiles, num_n_tiles, num_workers, swizzle_size, column_major,
                                   cluster_size, stateful, name)
