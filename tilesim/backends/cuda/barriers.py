"""Barrier placement for one launch: a mixin of :class:`~.lower.KernelGen`.

Contract: :meth:`BarrierPlanner.plan_barriers` walks the launch body with the per-statement memory
events of :data:`.rules.EVENT_RULES` and adds to ``barrier_before`` the ids of the block-level
statements that need a ``cuda.syncthreads()`` before them (a read after a write, or a write after a
read or write, of the same shared/global resource since the last barrier); loop bodies are iterated to
a fixpoint. It emits nothing itself: ``Emitter.body`` emits the barriers.
"""

from __future__ import annotations

from ...errors import InternalError
from ...ir import nodes as N
from . import rules as Rl


class BarrierPlanner:
    """The barrier pass (see the module docstring)."""

    def plan_barriers(self):
        EV = Rl.EVENT_RULES

        def events(s):
            try:
                return EV[type(s)](self, s)
            except KeyError:
                raise InternalError(f"no barrier rule for {type(s).__name__}") from None

        def step(s, written, read):
            ev = events(s)
            pre = []
            for e in ev:
                if e[0] == "SYNC":
                    break
                pre.append(e)
            conflict = any((k == "R" and r in written) or (k == "W" and (r in written or r in read))
                           for k, r in pre)
            if conflict:
                self.barrier_before.add(id(s))
                written, read = set(), set()
            for e in ev:
                if e[0] == "SYNC":
                    written, read = set(), set()
                elif e[0] == "R":
                    read.add(e[1])
                else:
                    written.add(e[1])
            return written, read

        def run(body, written, read):
            written, read = set(written), set(read)
            for s in body:
                if isinstance(s, (N.If, N.For, N.While)):
                    written, read = step(s, written, read)  # the condition / bounds
                    if isinstance(s, N.If):
                        w1, r1 = run(s.then, written, read)
                        w2, r2 = run(s.orelse, written, read)
                        written, read = w1 | w2, r1 | r2
                    else:
                        ew, er = set(written), set(read)
                        for _ in range(4):
                            w1, r1 = run(s.body, ew, er)
                            nw, nr = ew | w1, er | r1
                            if nw == ew and nr == er:
                                break
                            ew, er = nw, nr
                        w1, r1 = run(s.body, ew, er)
                        written, read = ew | w1, er | r1
                else:
                    written, read = step(s, written, read)
            return written, read

        run(self.launch.body, set(), set())
