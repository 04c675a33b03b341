"""Node-class families. Rule tables (interpreter, CUDA lowering, cost analysis) are keyed by node
class; tests check each table covers the families below."""

from __future__ import annotations

from . import nodes as N

#: Expressions every element-level consumer must handle.
EXPRS = frozenset({N.Const, N.Var, N.Binary, N.Compare, N.Logical, N.Unary, N.Call, N.Select,
                   N.Cast, N.Reinterpret, N.Load, N.WarpShuffle})
#: Tile operations (whole-tile, block-level work).
TILE_OPS = frozenset({N.Copy, N.Gemm, N.Reduce, N.Fill, N.Atomic, N.Cumsum})
#: Loops.
LOOPS = frozenset({N.For, N.Parallel, N.While})
#: Control flow, bindings, run-time checks and instrumentation events (``N.Event``: no effect on values).
CONTROL = frozenset({N.If, N.Break, N.Continue, N.Let, N.Launch, N.DeviceAssert, N.Event})
#: Memory declarations and element stores.
MEMORY = frozenset({N.Alloc, N.Store, N.PtrTensor})
#: Per-thread (SIMT) statements: a barrier and an atomic that returns the previous value.
SIMT = frozenset({N.SyncThreads, N.AtomicFetch})
#: Warp-specialised code: mbarrier operations, ``T.ws`` warp-group bodies and cluster launch control.
WS = frozenset({N.MBarrier, N.WarpSpec, N.ClusterCancel, N.PairIssue})
#: Every statement class.
STMTS = TILE_OPS | LOOPS | CONTROL | MEMORY | SIMT | WS
