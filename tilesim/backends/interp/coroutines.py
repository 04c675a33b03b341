"""Warp groups of a block as threads of control: divergent code with mbarrier waits runs concurrently.

Contract
--------
On the GPU the warp groups of a block run concurrently: a group that waits on an mbarrier phase sleeps
until other groups' arrivals complete it. The interpreter gives that meaning to the two ways programs
divide a block into warp groups, when the divided code contains a barrier wait:

* a **run** of consecutive sibling statements each a ``with T.ws(...)`` (``WarpSpec``) or an ``if`` whose
  condition reads no buffer (``if tx < 128: ... else: ...`` on the thread index);
* :func:`plan` finds the runs of a launch body once (``{id(first member): members, id(other member):
  ()}``, cached per body); the ``If`` and ``WarpSpec`` rules hand a planned statement to :func:`run`
  (a member other than the first has already run with the first and does nothing).

:func:`run` makes one **task** per branch (a ``T.ws`` body; an ``if``'s then and else sides, under their
masks), each with its own shallow copy of the ``Ctx`` (own mask and loop stack; environment, storage
and barrier state shared). Tasks run one at a time on threads of control (Python threads handing a
baton: never two at once), in a deterministic order: the scheduler always resumes the *first* runnable
task in creation order. A task switch happens only when the running task blocks — at a barrier wait on
a phase that has not completed (:func:`block`), at a join (a parent waits for its tasks), or at its
start (a task waits for the earlier tasks of its run that share executors — warp groups, blocks or
threads — so each executor runs its statements in program order). A task finishing hands over too.

When no task is runnable and some are waiting, the program deadlocks on the GPU: a
``KernelRuntimeError`` located at a waiting statement names every waiting barrier, its parity and its
arrival count. A wait that blocks outside any run (nothing else could arrive) is the same error.
The tasks of a chunk all wait on the same blocks (the chunk's active blocks; a wait blocks until the
phase has completed in every active block), so batched and serial runs give the same values for a
race-free program; a program whose blocks need *different* interleavings can deadlock in a batched
chunk only — the error says so and ``mode="serial"`` runs it.
"""

from __future__ import annotations

import copy
import threading

import numpy as np

from ...errors import KernelRuntimeError
from ...ir import nodes as N
from ...ir.traverse import bodies, loads_in, walk_stmts
from .exprs import ev
from .state import Ctx, mask_and, none_active

WARP_GROUP = 128
_PLANS: dict[int, tuple] = {}


# ------------------------------------------------------------------------------------------ planning
def _waits(s) -> bool:
    return any(type(t) is N.MBarrier and t.op == "wait" for t in walk_stmts((s,)))


def _member(s) -> bool:
    return type(s) is N.WarpSpec or (type(s) is N.If and next(loads_in(s.cond), None) is None)


def plan(body) -> dict:
    """The runs of ``body`` (see the module docstring), cached per body object."""
    hit = _PLANS.get(id(body))
    if hit is not None and hit[0] is body:
        return hit[1]
    out: dict[int, tuple] = {}
    stack = [tuple(body)]
    while stack:
        stmts = stack.pop()
        i = 0
        while i < len(stmts):
            j = i
            while j < len(stmts) and _member(stmts[j]):
                j += 1
            if j > i and any(_waits(s) for s in stmts[i:j]):
                out[id(stmts[i])] = tuple(stmts[i:j])
                out.update((id(s), ()) for s in stmts[i + 1:j])
            i = max(j, i + 1)
        for s in stmts:
            stack.extend(tuple(b) for b in bodies(s))
    if len(_PLANS) > 512:  # the body is kept so ids stay unique; bound the cache as gemm_loop's
        _PLANS.clear()
    _PLANS[id(body)] = (body, out)
    return out


# ------------------------------------------------------------------------------------------ branches
def _branches(s, ctx: Ctx) -> list:
    """``(groups or None, mask, body)`` per branch of a run member, at the point the run starts."""
    saved = ctx.mask
    if type(s) is N.WarpSpec:
        m = saved
        if ctx.simt is not None and ctx.rules is not None and ctx.rank == 1:
            t = ctx.env[ctx.simt.tid.uid]
            m = mask_and(saved, np.isin(t // WARP_GROUP, s.groups))
        return [(frozenset(s.groups), m, s.body)]
    c = ev(s.cond, ctx)
    if not isinstance(c, np.ndarray) or c.ndim == 0:
        return [(None, saved, s.then if bool(c) else s.orelse)]
    out = [(None, mask_and(saved, c), s.then)]
    if s.orelse:
        out.append((None, mask_and(saved, np.logical_not(c)), s.orelse))
    return out


def _overlap(a, b) -> bool:
    if a[0] is not None and b[0] is not None and not (a[0] & b[0]):
        return False
    ma, mb = a[1], b[1]
    if ma is None or mb is None:
        return True
    return bool(np.logical_and(ma, mb).any())


# ------------------------------------------------------------------------------------------ scheduler
class _Abort(BaseException):
    """Unwinds a task when another task has failed (never seen outside this module)."""


class _Task:
    __slots__ = ("pred", "done", "why")

    def __init__(self, pred=None):
        self.pred = pred  # None: runnable; else a predicate that says when it can run
        self.done = False
        self.why = None  # (describe(), loc) while blocked at a barrier wait


class _Scheduler:
    def __init__(self):
        self.cv = threading.Condition()
        self.root = _Task()
        self.tasks = [self.root]
        self.current = self.root
        self.error: BaseException | None = None
        self.threads: list[threading.Thread] = []

    def _pick(self):
        for t in self.tasks:
            if not t.done and (t.pred is None or t.pred()):
                return t
        return None

    def _deadlock(self, batched: bool) -> KernelRuntimeError:
        waiting = [t.why for t in self.tasks if not t.done and t.why is not None]
        what = "; ".join(w[0]() for w in waiting) or "tasks wait for each other"
        note = (" (a chunk of several blocks runs its warp groups in one interleaving; if the blocks need "
                "different ones, mode='serial' runs each block on its own)") if batched else ""
        return KernelRuntimeError(f"deadlock: every warp group of the block waits — {what}{note}",
                                  waiting[0][1] if waiting else None,
                                  hint="each barrier phase a group waits for needs its arrive count of arrivals "
                                       "from groups that can still run; check the parities and arrive counts")

    def switch(self, me: _Task, batched: bool) -> None:
        """Hand over from ``me`` (blocked with a predicate, or done) to the first runnable task; return when
        ``me`` runs again (at once if it is the first runnable). Called with ``cv`` held."""
        nxt = self._pick()
        if nxt is me:
            me.pred = me.why = None
            return
        if nxt is None:
            if self.error is None:
                self.error = self._deadlock(batched)
        else:
            self.current = nxt
        self.cv.notify_all()
        if me.done:
            return
        self.wait_turn(me)

    def wait_turn(self, me: _Task) -> None:
        while self.current is not me and self.error is None:
            self.cv.wait()
        if self.error is not None:
            raise _Abort
        me.pred = me.why = None


def _task_main(sc: _Scheduler, task: _Task, body, sub: Ctx, runner) -> None:
    try:
        with sc.cv:
            sc.wait_turn(task)
        runner(body, sub)
    except _Abort:
        pass
    except BaseException as e:  # noqa: BLE001 - handed to the root, which raises it
        with sc.cv:
            if sc.error is None:
                sc.error = e
    finally:
        with sc.cv:
            task.done = True
            if sc.error is None:
                sc.switch(task, sub.nb > 1)
            else:
                sc.cv.notify_all()


def run(members, ctx: Ctx, runner) -> None:
    """Run a planned run's branches as concurrent tasks and join them (``runner`` is ``rules.run_body``).
    The caller restores ``ctx.mask``."""
    specs = [b for s in members for b in _branches(s, ctx) if b[2] and not none_active(b[1])]
    if len(specs) <= 1:
        for _, m, body in specs:
            ctx.mask = m
            runner(body, ctx)
        return
    sc = getattr(ctx, "sched", None)
    root = sc is None
    if root:
        sc = ctx.sched = _Scheduler()
        ctx.task = sc.root
    me = ctx.task
    try:
        with sc.cv:
            tasks = []
            for k, spec in enumerate(specs):
                before = [tasks[i] for i in range(k) if _overlap(specs[i], spec)]
                t = _Task((lambda before=before: all(b.done for b in before)) if before else None)
                sub = copy.copy(ctx)
                sub.mask, sub.loops, sub.pvars, sub.task = spec[1], list(ctx.loops), dict(ctx.pvars), t
                th = threading.Thread(target=_task_main, args=(sc, t, spec[2], sub, runner), daemon=True)
                tasks.append(t)
                sc.tasks.append(t)
                sc.threads.append(th)
                th.start()
            me.pred = lambda: all(t.done for t in tasks)
            sc.switch(me, ctx.nb > 1)
        for t in tasks:
            sc.tasks.remove(t)
    except _Abort:
        if not root:
            raise
    finally:
        if root:
            for th in sc.threads:
                th.join()
            ctx.sched = ctx.task = None
    if root and sc.error is not None:
        raise sc.error


def block(ctx: Ctx, pred, describe, loc) -> None:
    """Block the running task until ``pred()`` holds; ``describe()`` says what it waits for (for a deadlock
    report). Outside a run nothing else can arrive: a deadlock error at once."""
    sc = getattr(ctx, "sched", None)
    if sc is None:
        raise KernelRuntimeError(
            f"deadlock: {describe()}, and no other warp group can run to arrive on it (the waiting code is not "
            "divided among warp groups, or the arrivals come later in the same warp group's program order)", loc,
            hint="a wait returns once its phase has completed: arrive on the barrier before waiting, from another "
                 "warp group (`if tx < 128: ... else: ...` or `with T.ws(g):`) or earlier in this one")
    me = ctx.task
    with sc.cv:
        me.pred, me.why = pred, (describe, loc)
        sc.switch(me, ctx.nb > 1)
