"""Barrier placement for one launch: a mixin of :class:`~.lower.KernelGen`.

Contract: :meth:`BarrierPlanner.plan_barriers` walks the launch body with the per-statement memory
events of :data:`.rules.EVENT_RULES` and adds to ``barrier_before`` the ids of the block-level
statements that need a ``cuda.syncthreads()`` before them (a read after a write, or a write after a
read or write, of the same shared/global resource since the last barrier); loop bodies are iterated to
a fixpoint. It emits nothing itself: ``Emitter.body`` emits the barriers.
"""

from __future__ import annotations

from ...ir import groups as G
from ...ir import nodes as N
from ...ir.traverse import bodies
from . import rules as Rl

#: statements whose bodies the pass walks itself (a T.Parallel's events come from its rule; launches
#: do not nest)
_COMPOUND = frozenset({N.If, N.For, N.While})


class BarrierPlanner:
    """The barrier pass (see the module docstring)."""

    def plan_barriers(self):
        def events(s):
            return Rl.EVENT_RULES(s)(self, s)

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
                written, read = step(s, written, read)  # a compound statement's: its condition / bounds
                if type(s) not in _COMPOUND:
                    continue
                if id(s) in self.pipelines:  # a cp.async pipeline: every iteration starts after its barrier
                    (loop_body,) = bodies(s)
                    run(loop_body, set(), set())
                    written, read = set(), set()  # and the barrier after the loop
                elif type(s) in G.LOOPS:  # iterate the body to a fixpoint
                    (loop_body,) = bodies(s)
                    ew, er = set(written), set(read)
                    for _ in range(4):
                        w1, r1 = run(loop_body, ew, er)
                        nw, nr = ew | w1, er | r1
                        if nw == ew and nr == er:
                            break
                        ew, er = nw, nr
                    w1, r1 = run(loop_body, ew, er)
                    written, read = ew | w1, er | r1
                else:  # branches: each from the same state, joined
                    outs = [run(b, written, read) for b in bodies(s)]
                    written = set().union(*(w for w, _ in outs))
                    read = set().union(*(r for _, r in outs))
            return written, read

        run(self.launch.body, set(), set())
