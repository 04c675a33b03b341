"""The tile IR: every node class, as frozen dataclasses.

Contract
--------
* Nodes are immutable (``frozen=True, slots=True``) and carry a ``loc`` (:class:`~tilesim.errors.Loc`)
  pointing at the kernel source that produced them (``None`` only for nodes synthesised by a pass).
* Dtypes are canonical strings (``tilesim.dtypes``). Every :class:`Expr` has a ``dtype``.
* Shapes and extents are tuples whose items are ``int`` (static) or an integer :class:`Expr`
  (symbolic, e.g. a ``T.dynamic`` dimension :class:`Var`). On-chip buffers (``shared``, ``fragment``,
  ``local``, ``var``) always have static shapes; global buffers may be symbolic.
* Identity of variables and buffers is by ``uid`` (names may repeat, e.g. two macros' ``i``).
* A :class:`Region` is a rectangular window ``buffer[starts[d] : starts[d] + extents[d]]``; tile
  operations read and write regions. Out-of-range parts of a **global** region are zero-filled on read
  and skipped on write (TileLang's edge semantics); on-chip regions must be in range.
* Statement bodies are tuples of statements. :class:`Let` binds its variable for the statements after
  it in the same body.

Consumers (interpreter, Numba CUDA lowering, cost analysis) dispatch on the node class through rule
tables; ``tilesim.ir.groups`` lists the classes each table must cover.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Union

from ..errors import Loc

_uids = itertools.count(1)


def fresh_uid() -> int:
    return next(_uids)


# ----------------------------------------------------------------------------------------------
# Expressions
# ----------------------------------------------------------------------------------------------


class Expr:
    """Base class of element/index expressions. Subclasses define ``dtype`` and ``loc``."""

    __slots__ = ()


Dim = Union[int, Expr]


@dataclass(frozen=True, slots=True)
class Const(Expr):
    value: int | float | bool
    dtype: str
    loc: Loc | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class Var(Expr):
    """A scalar variable: block index, loop variable, ``T.dynamic`` dimension or a ``Let`` name.

    ``kind`` is one of ``"block"``, ``"loop"``, ``"parallel"``, ``"dynamic"``, ``"let"``, ``"param"``,
    ``"thread"`` (a thread index of a launch's block: :attr:`Launch.thread_vars`).
    """

    name: str
    dtype: str
    kind: str = "let"
    uid: int = field(default_factory=fresh_uid)
    loc: Loc | None = field(default=None, compare=False)


#: Binary arithmetic operators. ``div`` is true division for floats and truncating for integers;
#: ``floordiv``/``floormod`` are Python's ``//`` and ``%``.
BINARY_OPS = frozenset({
    "add", "sub", "mul", "div", "floordiv", "floormod", "truncmod", "min", "max", "pow",
    "bitand", "bitor", "bitxor", "shl", "shr",
})
COMPARE_OPS = frozenset({"lt", "le", "gt", "ge", "eq", "ne"})
LOGICAL_OPS = frozenset({"and", "or"})
UNARY_OPS = frozenset({"neg", "not", "bitnot"})
#: Math intrinsics of ``Call`` (the name is the function; all are elementwise).
MATH_FUNCS = frozenset({
    "exp", "exp2", "exp10", "log", "log2", "log10", "log1p", "expm1", "sqrt", "rsqrt", "tanh",
    "sigmoid", "abs", "sin", "cos", "tan", "erf", "floor", "ceil", "round", "trunc", "isnan",
    "isinf", "isfinite", "fabs", "atan", "asin", "acos", "sinh", "cosh", "pow", "fmod",
    "philox",  # (seed, seq, pos) -> uint32: the pos-th value of a Philox4x32-10 stream (tilesim/philox.py)
})
#: Math functions evaluated on special-function units (SFU) on GPUs; the rest are ALU/FMA work.
SFU_FUNCS = frozenset({
    "exp", "exp2", "exp10", "log", "log2", "log10", "log1p", "expm1", "sqrt", "rsqrt", "tanh",
    "sigmoid", "sin", "cos", "tan", "erf", "atan", "asin", "acos", "sinh", "cosh", "pow",
})


@dataclass(frozen=True, slots=True)
class Binary(Expr):
    op: str
    a: Expr
    b: Expr
    dtype: str
    loc: Loc | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class Compare(Expr):
    op: str
    a: Expr
    b: Expr
    dtype: str = "bool"
    loc: Loc | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class Logical(Expr):
    op: str
    a: Expr
    b: Expr
    dtype: str = "bool"
    loc: Loc | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class Unary(Expr):
    op: str
    a: Expr
    dtype: str
    loc: Loc | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class Call(Expr):
    """A math intrinsic (``MATH_FUNCS``) applied elementwise."""

    func: str
    args: tuple[Expr, ...]
    dtype: str
    loc: Loc | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class Select(Expr):
    """``T.if_then_else(cond, a, b)``: only the taken branch is evaluated (safe to guard loads)."""

    cond: Expr
    a: Expr
    b: Expr
    dtype: str
    loc: Loc | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class Cast(Expr):
    value: Expr
    dtype: str
    loc: Loc | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class Reinterpret(Expr):
    """Bit-cast between dtypes of the same width."""

    value: Expr
    dtype: str
    loc: Loc | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class WarpShuffle(Expr):
    """A warp shuffle (``T.shfl_sync/xor/down/up``, ``T.tvm_warp_shuffle``): each thread reads ``value`` as
    evaluated by another lane of its group of ``width`` lanes. ``kind`` picks the source lane from ``lane``:
    ``"idx"`` lane ``lane % width``, ``"xor"`` own lane XOR ``lane``, ``"down"``/``"up"`` own lane
    plus/minus ``lane`` (a source outside the group gives the thread its own value). Per-thread code only."""

    kind: str
    value: Expr
    lane: Expr
    width: int
    dtype: str
    loc: Loc | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class Load(Expr):
    """``buffer[indices]``. Global loads are guarded (out of range reads give 0)."""

    buffer: Buffer
    indices: tuple[Expr, ...]
    dtype: str
    loc: Loc | None = field(default=None, compare=False)


# ----------------------------------------------------------------------------------------------
# Buffers and regions
# ----------------------------------------------------------------------------------------------

#: ``"tmem"`` is Blackwell's tensor memory (``T.alloc_tmem``): on-chip accumulator tiles of the block.
SCOPES = ("global", "shared", "fragment", "local", "var", "tmem")
#: How on-chip a scope is; a tile copy iterates over the operand with the higher rank.
SCOPE_RANK = {"global": 0, "shared": 1, "shared.dyn": 1, "fragment": 2, "local": 2, "var": 2, "tmem": 2}


@dataclass(frozen=True, slots=True)
class Buffer:
    """A tensor: a kernel parameter or workspace (``global``) or an on-chip allocation.

    ``alias_of`` is set for ``T.view``/``T.reshape`` results: the buffer shares the storage of
    another buffer (same number of bytes, row-major).
    """

    name: str
    shape: tuple[Dim, ...]
    dtype: str
    scope: str
    uid: int = field(default_factory=fresh_uid)
    alias_of: Buffer | None = None
    loc: Loc | None = field(default=None, compare=False)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def static_shape(self) -> tuple[int, ...] | None:
        return tuple(self.shape) if all(isinstance(d, int) for d in self.shape) else None


@dataclass(frozen=True, slots=True)
class Region:
    """``buffer[starts[d] : starts[d] + extents[d]]`` for every dimension ``d``."""

    buffer: Buffer
    starts: tuple[Expr, ...]
    extents: tuple[Dim, ...]
    loc: Loc | None = field(default=None, compare=False)

    @property
    def dtype(self) -> str:
        return self.buffer.dtype

    @property
    def scope(self) -> str:
        return self.buffer.scope

    def tile_shape(self) -> tuple[Dim, ...]:
        """Extents with the unit ones dropped: the shape the region presents to a tile op."""
        return tuple(e for e in self.extents if e != 1)


# ----------------------------------------------------------------------------------------------
# Statements
# ----------------------------------------------------------------------------------------------


class Stmt:
    __slots__ = ()


Body = tuple  # tuple[Stmt, ...]


@dataclass(frozen=True, slots=True)
class Alloc(Stmt):
    """Declare an on-chip buffer (or a ``T.alloc_global`` workspace). ``init`` fills ``var`` scalars."""

    buffer: Buffer
    init: Expr | None = None
    loc: Loc | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class PtrTensor(Stmt):
    """``buffer = T.make_tensor(addr, shape, dtype)``: the global ``buffer`` (no ``alias_of``) is the memory at
    device address ``addr`` (an ``int64`` expression, e.g. an element of a ``T.Tensor([n], T.ptr)`` pointer
    table), row-major, ``buffer.shape`` elements of ``buffer.dtype``; bound anew each time the statement runs."""

    buffer: Buffer
    addr: Expr
    loc: Loc | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class Copy(Stmt):
    """Element-wise copy ``dst[...] = convert(src[...], dst.dtype)`` over the paired regions.

    ``src`` and ``dst`` extents pair as LANGUAGE.md says; the frontend has already checked that they
    pair and stored both regions with the same number of elements in the iteration order.
    """

    src: Region
    dst: Region
    loc: Loc | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class Gemm(Stmt):
    """``C (+)= op(A) @ op(B)`` with products and accumulation in C's dtype."""

    a: Region
    b: Region
    c: Region
    trans_a: bool = False
    trans_b: bool = False
    clear_accum: bool = False
    policy: str = "Square"
    loc: Loc | None = field(default=None, compare=False)
    #: a 2-CTA gemm (``T.tcgen05_gemm(..., use_2cta=True)``), issued by one block of a 2-block cluster: each
    #: block ``r`` of the pair gets ``C_r (+)= op(A_r) @ [op(B_0) | op(B_1)]`` (the halves of B joined along N)
    pair: bool = False


#: Reduction kinds of :class:`Reduce`.
REDUCE_KINDS = frozenset({"sum", "max", "min", "absmax", "abssum"})


@dataclass(frozen=True, slots=True)
class Reduce(Stmt):
    """``dst = reduce(src, dim)``; with ``clear=False`` folded into dst's current values."""

    kind: str
    src: Region
    dst: Region
    dim: int
    clear: bool = True
    loc: Loc | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class Fill(Stmt):
    dst: Region
    value: Expr
    loc: Loc | None = field(default=None, compare=False)


ATOMIC_KINDS = frozenset({"add", "max", "min"})


@dataclass(frozen=True, slots=True)
class Atomic(Stmt):
    """Atomic read-modify-write of ``dst`` with ``value`` (a region of the same shape or a scalar)."""

    kind: str
    dst: Region
    value: Region | Expr
    loc: Loc | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class AtomicFetch(Stmt):
    """``var = T.atomic_<kind>(buffer[indices], value, return_prev=True)``: one element's atomic
    read-modify-write; ``var`` is bound to the element's value *before* the update for the rest of the
    enclosing body (as a :class:`Let`). Per-thread code: the updates of the threads of a block are
    applied in some order, each thread seeing the value left by the ones before it."""

    kind: str
    buffer: Buffer
    indices: tuple[Expr, ...]
    value: Expr
    var: Var
    loc: Loc | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class SyncThreads(Stmt):
    """``T.sync_threads()`` (every thread of the block) or ``T.sync_threads(barrier_id, count)`` (a named
    barrier of ``count`` threads): every participating thread waits there until all have arrived; the
    shared-memory writes made before it are visible to every participant after it. ``grid=True`` is
    ``T.sync_grid()``: every thread of every block of the launch (annotated ``("sync_grid", True)``)
    waits there, and every global write before it is visible to every block after it."""

    barrier_id: int | None = None
    count: int | None = None
    grid: bool = False
    loc: Loc | None = field(default=None, compare=False)


#: Operations of :class:`MBarrier`.
MBARRIER_OPS = ("init", "arrive", "cp_async_arrive", "commit", "commit_pair", "wait")


@dataclass(frozen=True, slots=True)
class MBarrier(Stmt):
    """An mbarrier operation on ``buffer`` (scope ``"shared.barrier"``, one barrier per element).

    ``op`` is ``"init"`` (``T.alloc_barrier``: declares ``buffer`` and gives each barrier its arrival count
    ``counts[i]``; phase 0 in progress), ``"arrive"`` (``T.barrier_arrive``/``T.mbarrier_arrive``) or
    ``"cp_async_arrive"`` (``T.cp_async_barrier_noinc``): every executing thread arrives once at barrier
    ``index``; ``"commit"`` (``T.tcgen05_mma_arrive``, a ``T.tcgen05_gemm``'s ``mbar``): **one** arrival per
    executing block, when the gemms issued before it complete (at once); ``"wait"``
    (``T.barrier_wait``/``T.mbarrier_wait_parity``): the threads wait until the phase
    of parity ``parity`` of barrier ``index`` has completed. ``threads`` is how many threads execute the
    statement at tile level (the block's, or those of the enclosing ``T.ws`` warp groups); ``docs/language.md``
    ("Warp-specialised code") gives the semantics. In a cluster launch, ``cta`` (an integer expression) sends
    an ``"arrive"`` to barrier ``index`` of the block of that rank in the cluster (``T.mbarrier_arrive(b, cta_id)``),
    and ``"commit_pair"`` (``arrive_2cta=True``, a 2-CTA gemm's ``mbar``) is a ``"commit"`` that arrives once in
    both blocks of the 2-block cluster (``docs/language.md``, "Thread-block clusters").
    """

    op: str
    buffer: Buffer
    index: Expr | None = None
    parity: Expr | None = None
    counts: tuple[int, ...] = ()
    threads: int = 0
    loc: Loc | None = field(default=None, compare=False)
    cta: Expr | None = None


@dataclass(frozen=True, slots=True)
class ClusterCancel(Stmt):
    """``T.clc_try_cancel_multicast(result, barrier[index])`` (cluster launch control): the executing block asks
    for a cluster of the launch that has not started; the answer (4 ``uint32`` words along the last axis of
    ``result``: 1 and the first block's x, y, z when one was taken, else 0) is written into ``result`` in
    every block of the asking block's cluster. The barrier receives the answer's bytes (its arrivals are the
    program's own). ``docs/language.md`` ("Thread-block clusters") gives the order in which clusters start."""

    result: Region
    barrier: Buffer
    index: Expr
    loc: Loc | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class PairIssue(Stmt):
    """Statements issued by one block of a 2-block cluster that take effect in **both** blocks of the pair
    (Blackwell ``cta_group::2`` instructions: ``T.tcgen05_cp_warpx4(..., use_2cta=True)``, the scaling step of
    ``T.tcgen05_gemm_blockscaled(..., use_2cta=True)``). ``body`` runs in every block of each cluster with an
    executing block, on that block's own on-chip memory, with the issuing block's values of every variable
    except the launch's block indices (the instruction names the same addresses in both blocks). ``body``
    holds tile-level statements only (no barriers, no control flow that differs between the pair)."""

    body: Body
    loc: Loc | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class WarpSpec(Stmt):
    """``with T.ws(*groups):``: ``body`` is executed by the threads of warp groups ``groups`` (group ``g`` is
    threads ``128 g .. 128 g + 127`` of the block). At tile level the body runs where it stands, in program
    order (one legal schedule of the warp groups); see ``docs/language.md`` ("Warp-specialised code")."""

    groups: tuple[int, ...]
    threads: int
    body: Body
    loc: Loc | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class Cumsum(Stmt):
    src: Region
    dst: Region
    dim: int
    reverse: bool = False
    loc: Loc | None = field(default=None, compare=False)


LOOP_KINDS = ("serial", "pipelined", "unroll", "vectorized")


@dataclass(frozen=True, slots=True)
class For(Stmt):
    """A sequential loop ``for var in range(start, stop, step)``.

    ``kind`` is ``serial``, ``pipelined`` (``T.Pipelined``; ``annotations`` carry ``num_stages``,
    ``order``, ``stage``), ``unroll`` or ``vectorized``. All run in order; kinds only guide scheduling.
    """

    var: Var
    start: Expr
    stop: Expr
    step: int
    kind: str
    body: Body
    annotations: tuple[tuple[str, object], ...] = ()
    loc: Loc | None = field(default=None, compare=False)

    def annotation(self, key: str, default=None):
        for k, v in self.annotations:
            if k == key:
                return v
        return default


@dataclass(frozen=True, slots=True)
class Parallel(Stmt):
    """``T.Parallel(*extents)``: independent iterations over a tile; no tile ops inside."""

    vars: tuple[Var, ...]
    extents: tuple[int, ...]
    body: Body
    loc: Loc | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class Store(Stmt):
    buffer: Buffer
    indices: tuple[Expr, ...]
    value: Expr
    loc: Loc | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class If(Stmt):
    cond: Expr
    then: Body
    orelse: Body = ()
    loc: Loc | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class While(Stmt):
    cond: Expr
    body: Body
    loc: Loc | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class DeviceAssert(Stmt):
    """``T.device_assert(cond, msg)``: a run-time check; an active element (block, thread or ``T.Parallel``
    element) for which ``cond`` is false stops the kernel with ``msg``."""

    cond: Expr
    message: str
    loc: Loc | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class Event(Stmt):
    """An instrumentation event of ``tilelang.tools.cuda.iket`` (:mod:`tilesim.tools.cuda.iket`): ``kind``
    ``"mark"`` (``iket.mark``), ``"range_start"`` or ``"range_end"`` (``iket.range`` / ``range_push`` /
    ``range_pop``) named ``name``, registered as ``event_id``, with an optional 32-bit scalar ``payload`` of
    ``payload_dtype`` (int32, uint32 or float32; ``"NoPayload"`` without one). It changes no value: on a GPU
    it is a timestamp store that only the external IKET profiler reads."""

    name: str
    kind: str
    event_id: int
    payload: Expr | None = None
    payload_dtype: str = "NoPayload"
    loc: Loc | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class Break(Stmt):
    loc: Loc | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class Continue(Stmt):
    loc: Loc | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class Let(Stmt):
    """Bind ``var`` to ``value`` for the rest of the enclosing body."""

    var: Var
    value: Expr
    loc: Loc | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class Launch(Stmt):
    """``with T.Kernel(*grid, threads=...) as (bx, by, bz)``: one grid launch.

    ``block_vars[d]`` ranges over ``range(grid[d])``. ``annotations`` hold scheduling hints such as
    ``("swizzle", (panel_size, order))`` from ``T.use_swizzle`` and the grid barrier's
    ``("sync_grid", True)`` from ``T.sync_grid``. ``thread_vars`` (kind ``"thread"``) are
    the thread indices the body names (``T.get_thread_binding(d)``), one per dimension of ``threads``,
    ``thread_vars[d]`` ranging over ``range(threads[d])``; a launch with thread variables holds
    **per-thread code** (see ``docs/language.md``, "Per-thread code").
    """

    grid: tuple[Expr, ...]
    block_vars: tuple[Var, ...]
    threads: tuple[int, ...]
    body: Body
    annotations: tuple[tuple[str, object], ...] = ()
    loc: Loc | None = field(default=None, compare=False)
    thread_vars: tuple[Var, ...] = ()

    def annotation(self, key: str, default=None):
        for k, v in self.annotations:
            if k == key:
                return v
        return default

    @property
    def num_threads(self) -> int:
        n = 1
        for t in self.threads:
            n *= t
        return n


@dataclass(frozen=True, slots=True)
class PrimFunc:
    """A whole program: parameters and a body of launches (and top-level allocations/lets).

    ``params`` are global :class:`Buffer` objects or scalar :class:`Var` parameters, in call order.
    ``dyn_vars`` are the symbolic dimensions (``T.dynamic``) that appear in parameter shapes; they
    are bound from the actual tensors' shapes at call time.
    """

    name: str
    params: tuple[Buffer | Var, ...]
    body: Body
    dyn_vars: tuple[Var, ...] = ()
    loc: Loc | None = field(default=None, compare=False)

    @property
    def launches(self) -> tuple[Launch, ...]:
        return tuple(s for s in self.body if isinstance(s, Launch))


def full_region(buf: Buffer, loc: Loc | None = None) -> Region:
    return Region(buf, tuple(Const(0, "int32") for _ in buf.shape), tuple(buf.shape), loc)
