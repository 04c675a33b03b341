"""TileLang 0.1.15's compile-time checks that the tile IR decides, as lint rules (target: H200, sm_90).

Contract
--------
* :data:`LINT_RULES` is a :class:`~tilesim.ir.rules.RuleTable`: one function per node class
  (``Gemm``, ``Reduce``, ``Cumsum``, ``Parallel``, ``Launch``); each yields :class:`Finding` objects
  and calls the small ``_check_*`` functions below, one per rule. Every check's docstring names the
  TileLang source it mirrors (file in the ``tilelang==0.1.15`` wheel, which ships ``src/``, and the
  message TileLang raises); a check flags only what that source rejects for the H200 target.
* :func:`check_launch` ``(launch, ctx)`` runs the table over one launch (walks through
  :mod:`tilesim.ir.traverse`). ``ctx`` (:class:`Ctx`) carries the block's thread count and whether
  the ``tl.disable_wgmma`` pass config is set (TileLang then never picks WGMMA).
* A :class:`Finding` is ``(rule, message, loc, hint, level)``; the message quotes TileLang's own; every
  finding of this module is ``level="error"``.
* Gemm instruction selection follows ``src/cuda/op/gemm.cc`` (``Gemm::SelectInst``) for Hopper:
  WGMMA when M >= 64, the warp count is a multiple of 4, B is in shared memory and the
  dtype/transpose/K pattern is one WGMMA takes (``CheckWgmma``); otherwise ``mma.sync``.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import dtypes as dt
from .errors import Loc, render_snippet
from .ir import nodes as N
from .ir.rules import RuleTable
from .ir.traverse import bodies, loads_in, regions, stmt_exprs, walk_exprs, walk_stmts
from .warp_partition import POLICIES, warp_partition

#: where the quoted sources live (the PyPI wheel of TileLang 0.1.15 ships its C++ under tilelang/src/)
SOURCE = "tilelang 0.1.15"
#: H200 (sm_90) opt-in dynamic shared memory per block: 227 KB (CUDA C Programming Guide, compute
#: capability 9.0 technical specifications, "maximum amount of shared memory per thread block").
SMEM_LIMIT_BYTES = 227 * 1024


@dataclass(frozen=True)
class Finding:
    """``level`` is ``"error"`` for a check read in TileLang's source (the compile fails for certain) and
    ``"advice"`` for a pattern seen failing on the H200 that the rule may over-approximate."""

    rule: str
    message: str
    loc: Loc | None
    hint: str
    level: str = "error"

    def __str__(self) -> str:
        parts = [f"[{self.rule}]{' (advice)' if self.level == 'advice' else ''} {self.message}"]
        if self.loc is not None:
            parts.append(render_snippet(self.loc))
        parts.append(f"hint: {self.hint}")
        return "\n".join(parts)


@dataclass(frozen=True)
class Ctx:
    threads: int
    disable_wgmma: bool = False


LINT_RULES = RuleTable("TileLang 0.1.15 lint")
rule = LINT_RULES.register


def _shared(scope: str) -> bool:
    return scope.startswith("shared")


# ------------------------------------------------------------------------------------------- gemm
_F8 = ("float8_e4m3fn", "float8_e5m2")
#: (A, B, C) dtypes -> the instruction K values of the ``tl::mma_sync`` dispatchers
#: (src/tl_templates/cuda/instruction/mma.h, TL_DEFINE_MMA_DISPATCHER); float32 operands with a
#: float32 accumulator run as tf32 (mma_macro_generator.py ``_should_use_tf32_mma_operand``).
_MMA_K = {
    ("float16", "float16", "float16"): (16, 8),
    ("float16", "float16", "float32"): (16, 8),
    ("bfloat16", "bfloat16", "float32"): (16,),
    ("int8", "int8", "int32"): (32,),
    ("uint8", "uint8", "int32"): (32,),
    ("float32", "float32", "float32"): (8,),  # tf32 m16n8k8 (k4 would take the fp64 m8n8k4 path)
    ("float64", "float64", "float64"): (4,),
    **{(a, b, c): (32,) for a in _F8 for b in _F8 for c in ("float16", "float32")},
}
#: dtypes TensorCoreIntrinEmitter.dtype_abbrv knows (others: "Unsupported dtype")
_ABBRV = {"float16", "bfloat16", "float32", "float64", "int8", "uint8", "int32", *_F8}


def _gemm_dims(g: N.Gemm):
    def two(r):
        ext = list(r.extents)
        while len(ext) > 2 and ext[0] == 1:
            ext.pop(0)
        return ext
    sa, sb = two(g.a), two(g.b)
    m, k = (sa[1], sa[0]) if g.trans_a else (sa[0], sa[1])
    n = sb[0] if g.trans_b else sb[1]
    return m, n, k


def _wgmma_ok(g: N.Gemm, m: int, k: int, ctx: Ctx) -> bool:
    """``AllowWgmma`` + ``CheckWgmma`` (src/cuda/op/gemm.cc) for sm_90."""
    if ctx.disable_wgmma or m < 64 or (ctx.threads // 32) % 4 or not _shared(g.b.scope):
        return False
    a, b, c = g.a.dtype, g.b.dtype, g.c.dtype
    nt = not g.trans_a and g.trans_b
    if c == "float16":
        return (a == b == "float16" and k % 16 == 0) or (a in _F8 and b in _F8 and nt and k % 32 == 0)
    if c == "float32":
        return (a == b and a in ("float16", "bfloat16") and k % 16 == 0) or (
            a in _F8 and b in _F8 and nt and k % 32 == 0)
    if c == "int32":
        return a in ("int8", "uint8") and b in ("int8", "uint8") and nt and k % 32 == 0
    return False


def _full(r: N.Region) -> bool:
    return (all(isinstance(s, N.Const) and s.value == 0 for s in r.starts)
            and tuple(r.extents) == tuple(r.buffer.shape))


def _check_gemm_scope(g):
    """A and B must be shared or fragment buffers, C a fragment.

    Source: tilelang/cuda/op/gemm/gemm_mma.py ``GemmMMA.infer_layout`` ("Unsupported gemm
    combination, A: {scope}, B: {scope}") and cuda/intrinsics/macro/mma_macro_generator.py
    ``make_mma_store_layout`` ("local_buf ... must be a fragment, but got {scope}").
    Blackwell's tensor memory (``tmem``, TileLang's ``shared.tmem``) is a valid operand and accumulator
    (tilelang/cuda/op/gemm/gemm_tcgen05.py).
    """
    for r, name in ((g.a, "A"), (g.b, "B")):
        if not (_shared(r.scope) or r.scope in ("fragment", "tmem")):
            yield ("gemm-scope", f"T.gemm operand {name} ({r.buffer.name}) is a '{r.scope}' buffer; TileLang: "
                   f"\"Unsupported gemm combination, A: {g.a.scope}, B: {g.b.scope}\"",
                   "put gemm operands in T.alloc_shared or T.alloc_fragment buffers")
    if g.c.scope not in ("fragment", "tmem"):
        yield ("gemm-scope", f"T.gemm accumulator C ({g.c.buffer.name}) is a '{g.c.scope}' buffer; TileLang: "
               f"\"local_buf must be a fragment, but got {g.c.scope}\"", "allocate C with T.alloc_fragment")


def _check_gemm_full_region(g):
    """C, and an A or B held in a fragment, must be the whole buffer (start 0, full extents).

    Source: tilelang/cuda/op/gemm/gemm_mma.py ``lower`` and cuda/intrinsics/macro/wgmma_macro_generator.py
    ``wgmma``/``wgmma_rs``: "Fragment output C must be a full region", "Fragment input A must be a
    full region", "Fragment input B must be a full region".
    """
    for r, name, what in ((g.c, "C", "output"), (g.a, "A", "input"), (g.b, "B", "input")):
        if r.scope == "fragment" and not _full(r):
            yield ("gemm-full-region", f"T.gemm {name} is a slice of fragment {r.buffer.name}; TileLang: "
                   f"\"Fragment {what} {name} must be a full region\"",
                   f"give {name} its own T.alloc_fragment of the tile's shape (fragments cannot be sliced)")


def _check_gemm_dtype(g, wgmma: bool):
    """(A, B, C) dtypes must have a tensor-core instruction on the selected path.

    Source (mma.sync path): src/tl_templates/cuda/instruction/mma.h, ``MmaDispatcher``
    ("tl::mma_sync: unsupported configuration", a static_assert when the generated CUDA is
    compiled) and cuda/intrinsics/macro/mma_macro_generator.py ``_get_dtype_abbrv`` ("Unsupported
    dtype: {dtype}"). The WGMMA path is taken only for combinations ``CheckWgmma`` accepts.
    """
    a, b, c = g.a.dtype, g.b.dtype, g.c.dtype
    if wgmma or (a, b, c) in _MMA_K:
        return
    bad = next((d for d in (a, b, c) if d not in _ABBRV), None)
    said = f"Unsupported dtype: {bad}" if bad else "tl::mma_sync: unsupported configuration"
    yield ("gemm-dtype", f"T.gemm with A {a}, B {b}, accumulator {c} has no tensor-core instruction; "
           f"TileLang: \"{said}\"",
           "supported: f16xf16->f16/f32, bf16xbf16->f32, f32xf32->f32 (tf32), fp8xfp8->f16/f32, "
           "int8xint8->int32, f64xf64->f64; cast the operands or change the accumulator dtype")


def _check_gemm_shape(g, m, n, ctx, wgmma: bool):
    """M must be a multiple of 16 and N of 8, and the block's warps must tile (M, N).

    Source: src/cuda/op/gemm.cc ``ComputeDefaultWarpPartition`` / ``ComputeWgmmaWarpPartition``:
    "M must be divisible by 16, but got {M}", "N must be divisible by 8, but got {N}", and
    "No valid warp partition for T.gemm: M=.., N=.. cannot be evenly covered by {w} warps" (each
    warp owns a multiple of 16 rows and 8 columns; with Warp-Group MMA m_warp is a multiple of 4);
    the search is :func:`tilesim.warp_partition.warp_partition`.
    """
    if m % 16:
        yield ("gemm-shape", f"T.gemm M={m} is not a multiple of 16; TileLang: \"M must be divisible by 16, "
               f"but got {m}\"", "make the tile's M (rows of C) a multiple of 16; pad the tile and mask the edge")
        return
    if n % 8:
        yield ("gemm-shape", f"T.gemm N={n} is not a multiple of 8; TileLang: \"N must be divisible by 8, "
               f"but got {n}\"", "make the tile's N (columns of C) a multiple of 8")
        return
    warps = ctx.threads // 32
    policy = g.policy if g.policy in POLICIES else "Square"
    if warps < 1 or warp_partition(m, n, warps, policy, wgmma) is None:
        inst = " (Warp-Group MMA)" if wgmma else ""
        yield ("gemm-warp-partition", f"T.gemm M={m}, N={n} with {ctx.threads} threads: TileLang: \"No valid warp "
               f"partition for T.gemm{inst}: M={m}, N={n} cannot be evenly covered by {warps} warps "
               f"(policy={policy})\"",
               "each warp must own a multiple of 16 rows and 8 columns" + (", with m_warp a multiple of 4 "
               "(WGMMA is picked for M >= 64)" if wgmma else "") + "; the policy does not matter (every policy "
               "searches the same splits): use fewer threads, a wider N or a taller M (pad the tile and mask "
               "the edge)")


def _check_gemm_k(g, k: int, wgmma: bool):
    """K must be a multiple of the instruction's K (mma.sync path; WGMMA is only picked when it is).

    Source: tilelang/cuda/op/gemm/gemm_mma.py ``lower``: "block_K ({K}) must be a multiple of
    micro_size_k ({k})", with micro_size_k = min(256 // bits(A), K) (mma_macro_generator.py
    ``_initialize_k_dim``); a K below 256 // bits must itself be an instruction K of the dtype
    (mma.h dispatchers: "tl::mma_sync: unsupported configuration").
    """
    ks = _MMA_K.get((g.a.dtype, g.b.dtype, g.c.dtype))
    if wgmma or ks is None:
        return
    micro = min(256 // dt.bits(g.a.dtype), k)
    if k % micro == 0 and micro in ks:
        return
    said = (f"block_K ({k}) must be a multiple of micro_size_k ({micro})" if k % micro
            else "tl::mma_sync: unsupported configuration")
    yield ("gemm-k", f"T.gemm K={k} does not fit the {g.a.dtype} tensor-core instruction (K step "
           f"{max(ks)}); TileLang: \"{said}\"", f"make block_K a multiple of {max(ks)} for {g.a.dtype}")


@rule(N.Gemm)
def _gemm(g: N.Gemm, ctx: Ctx):
    """The gemm checks, on the instruction TileLang would pick.

    Source: src/cuda/op/gemm.cc ``Gemm::SelectInst`` (WGMMA or mma.sync on sm_90, see
    :func:`_wgmma_ok`); each ``_check_gemm_*`` names the check it mirrors.
    """
    found = list(_check_gemm_scope(g))
    if found:
        yield from found
        return
    yield from _check_gemm_full_region(g)
    m, n, k = _gemm_dims(g)
    if not all(isinstance(x, int) for x in (m, n, k)):
        return
    wgmma = _wgmma_ok(g, m, k, ctx)
    yield from _check_gemm_dtype(g, wgmma)
    yield from _check_gemm_shape(g, m, n, ctx, wgmma)
    yield from _check_gemm_k(g, k, wgmma)


# ------------------------------------------------------------------------------- reduce / cumsum
@rule(N.Reduce)
def _check_reduce_scope(s: N.Reduce, ctx: Ctx):
    """A reduction runs fragment/shared -> fragment/shared, or local -> local/var.

    Source: tilelang/language/reduce_op.py ``reduce``: "Invalid buffer scopes: {src} and {dst}"
    (and src/backend/common/op/reduce.h: "Reduce for buffers in scope (..) is not implemented.").
    """
    a, b = s.src.scope, s.dst.scope
    tile = ("fragment", "shared", "shared.dyn")
    if (a in tile and b in tile) or (a == "local" and b in ("local", "var")):
        return
    yield ("reduce-scope", f"T.reduce_{s.kind} from a '{a}' buffer into a '{b}' buffer; TileLang: "
           f"\"Invalid buffer scopes: {a} and {b}\"",
           "reduce fragments or shared tiles (copy a global tile in first, copy the result out after)")


@rule(N.Cumsum)
def _check_cumsum(s: N.Cumsum, ctx: Ctx):
    """T.cumsum takes a shared (into shared) or fragment source of rank 1 or 2.

    Source: src/backend/common/op/scan.h ``LowerSharedScan``: "CumSum currently supports only 1D or
    2D buffers, got {n}D.", ``ICHECK(IsSharedBuffer(op.dst))`` for a shared source, and "Cannot lower
    cumsum for {src} and {dst}"; tilelang/language/scan_op.py stages fragment sources through shared.
    """
    a, b = s.src.scope, s.dst.scope
    if not (a == "fragment" or (_shared(a) and _shared(b))):
        said = "Check failed: IsSharedBuffer(op.dst)" if _shared(a) else f"Cannot lower cumsum for {a} and {b}"
        yield ("cumsum", f"T.cumsum from a '{a}' buffer into a '{b}' buffer; TileLang: \"{said}\"",
               "scan a shared tile into a shared tile (in place is fine), or scan a fragment")
    nd = len(s.src.extents)
    if nd not in (1, 2):
        yield ("cumsum", f"T.cumsum over a {nd}-D buffer; TileLang: \"CumSum currently supports only 1D or 2D "
               f"buffers, got {nd}D.\"", "reshape the tile to 2-D (T.view) or scan each 2-D slice")


# ------------------------------------------------------------------------------------- parallel
@rule(N.Parallel)
def _check_parallel_fragment_indices(p: N.Parallel, ctx: Ctx):
    """Inside one T.Parallel nest, every access to a fragment uses the same indices.

    Source: src/op/parallel.cc ``ParallelOpNode::RecordBufferAccess``:
    ``ICHECK(StructuralEqual()(it->second.indices, indices)) << buffer << ": " << indices << " and "
    << ...`` (a fragment's layout is inferred from the one index pattern of the loop).
    """
    seen: dict[int, tuple] = {}
    flagged: set[int] = set()
    for s in walk_stmts((p,)):
        accesses = [(x.buffer, x.indices, x.loc) for x in loads_in(stmt_exprs(s))]
        if type(s) is N.Store:
            accesses.append((s.buffer, s.indices, s.loc))
        for buf, idx, loc in accesses:
            if buf.scope != "fragment" or buf.uid in flagged:
                continue
            first = seen.setdefault(buf.uid, idx)
            if first != idx:
                flagged.add(buf.uid)
                yield ("parallel-fragment-indices", f"fragment {buf.name} is accessed with two different index "
                       f"patterns in one T.Parallel loop; TileLang: ICHECK(StructuralEqual()(indices, ...)) "
                       f"\"{buf.name}: [...] and [...]\"",
                       "access each fragment through one index pattern per T.Parallel loop; stage shifted or "
                       "transposed reads through a shared buffer (or a second fragment filled by T.copy)", loc)


# --------------------------------------------------------------------------------------- launch
def _versions(loop: N.For) -> dict[int, int]:
    """Shared buffers a ``T.Pipelined`` loop multi-buffers: the destinations of its global -> shared
    copies that a later statement of the loop reads get ``num_stages`` versions (pipeline_planning.cc
    puts copies in stage 0 and their consumers in the last stage; inject_pipeline.cc
    ``ComputeBufferVersions``)."""
    stages = loop.annotation("num_stages") or 0
    if not isinstance(stages, int) or stages < 2:
        return {}
    out = {}
    body = loop.body
    for i, s in enumerate(body):
        if type(s) is N.Copy and s.src.scope == "global" and _shared(s.dst.scope):
            uid = s.dst.buffer.uid
            if any(uid in {getattr(r, "buffer", r).uid for r in regions(t)[0]}
                   for t in walk_stmts(body[i + 1:])):
                out[uid] = stages
    return out


def _smem_lower_bound(launch: N.Launch) -> int:
    """Bytes of shared memory that must be live at once: at each statement, the shared buffers it
    touches plus the multi-buffered stages of every enclosing pipelined loop (alignment ignored)."""
    size = {}
    for s in walk_stmts(launch.body):
        if type(s) is N.Alloc and _shared(s.buffer.scope) and s.buffer.alias_of is None:
            shape = s.buffer.static_shape()
            if shape is not None:
                n = 1
                for d in shape:
                    n *= d
                size[s.buffer.uid] = int(n * dt.itemsize(s.buffer.dtype))
    if not size:
        return 0
    best = 0
    stack = [(s, {}, 0) for s in reversed(launch.body)]
    while stack:
        s, pinned, base = stack.pop()
        reads, writes = regions(s)
        used = {getattr(r, "buffer", r).uid for r in reads + writes} & size.keys()
        best = max(best, base + sum(size[u] for u in used - pinned.keys()))
        inner, inner_base = pinned, base
        if type(s) is N.For and s.kind == "pipelined":
            inner = {**pinned, **{u: v for u, v in _versions(s).items() if u in size}}
            inner_base = sum(size[u] * v for u, v in inner.items())
        for b in reversed(bodies(s)):
            stack.extend((c, inner, inner_base) for c in reversed(b))
    return best


def _check_shared_memory(launch: N.Launch, ctx: Ctx):
    """The shared memory a block needs fits the H200's 227 KB per block.

    Source: tilelang/jit/adapter/wrapper.py ``PREDEF_ATTRIBUTE_SET_DYNAMIC_MEMORY`` — the kernel's
    init calls cudaFuncSetAttribute(MaxDynamicSharedMemorySize) and fails with "Failed to set the
    allowed dynamic shared memory size to {n} with error: ..." above the device limit. The lint
    counts a lower bound (see :func:`_smem_lower_bound`), so it never flags a kernel that fits.
    """
    need = _smem_lower_bound(launch)
    if need > SMEM_LIMIT_BYTES:
        yield ("shared-memory", f"this block needs at least {need} bytes ({need / 1024:.1f} KB) of shared memory, "
               f"over the H200's {SMEM_LIMIT_BYTES // 1024} KB per block; TileLang: \"Failed to set the allowed "
               f"dynamic shared memory size to {need}\"",
               "use smaller tiles or fewer pipeline stages (T.Pipelined num_stages multiplies the copied tiles)")


def _tile_op(s) -> bool:
    """A statement TileLang counts as a tile operation: a ``T.Parallel`` loop or a ``T.Pipelined`` one
    (its ``num_stages`` annotation)."""
    return type(s) is N.Parallel or (type(s) is N.For and s.kind == "pipelined")


def _check_fragment_scalar_index(launch: N.Launch, ctx: Ctx):
    """Outside tile operations, a store that touches a fragment may index it only with 0 (or a non-constant).

    Source: tilelang/transform/add_bufstore_wrapper.py ``AddWrapperForSingleBufStore``: a ``BufferStore``
    outside every ``T.Parallel`` / ``T.Pipelined`` loop whose expressions name no thread-bound variable
    (block or thread index) and that accesses a ``local.fragment`` buffer is wrapped in a one-trip
    ``T.Parallel``; first, for each fragment it accesses (the last access in TVM's post-order: loads of the
    value, then of the indices, then the store), a constant index other than 0 raises ``ValueError:
    "Fragment buffer access with non-zero index [{i}] is not supported. Only fragment[0] access is
    allowed."`` (seen on the H200, 2026-12-02, for ``n_out + pos[block_N - 1]`` in serial code).
    """
    bound = {v.uid for v in (*launch.block_vars, *launch.thread_vars)}
    for s in walk_stmts(launch.body, enter=lambda s: not _tile_op(s)):
        if type(s) is not N.Store or _tile_op(s):
            continue
        exprs = (s.value, *s.indices)
        if any(type(x) is N.Var and x.uid in bound for x in walk_exprs(exprs)):
            continue
        last = {}
        for x in (*loads_in(s.value), *loads_in(tuple(s.indices)), s):
            if x.buffer.scope == "fragment":
                last[x.buffer.uid] = (x.buffer, x.indices, getattr(x, "loc", None))
        for buf, idx, loc in last.values():
            bad = next((i.value for i in idx if isinstance(i, N.Const) and i.value != 0), None)
            if bad is not None:
                yield ("fragment-scalar-index", f"fragment {buf.name} is accessed at index [{bad}] outside "
                       f"T.Parallel; TileLang: \"Fragment buffer access with non-zero index [{bad}] is not "
                       f"supported. Only fragment[0] access is allowed.\"",
                       "a fragment is spread over the threads: read one element inside T.Parallel (e.g. copy "
                       f"it to a shared scalar under `if i == {bad}`), or reduce into a (1,) fragment and read "
                       "element 0", loc or s.loc)


@rule(N.Launch)
def _launch(launch: N.Launch, ctx: Ctx):
    """The launch-wide checks: shared memory per block, fragment indices of per-thread stores.

    Source: each ``_check_*`` called here names the TileLang file and message it mirrors.
    """
    yield from _check_shared_memory(launch, ctx)
    yield from _check_fragment_scalar_index(launch, ctx)


def check_launch(launch: N.Launch, ctx: Ctx) -> list[Finding]:
    """The findings of every rule of :data:`LINT_RULES` over ``launch`` (a ``T.Parallel`` nest is checked
    as one loop, as TileLang builds one ParallelOp from its outermost loop)."""
    out: list[Finding] = []

    def emit(node, items):
        for item in items:
            name, message, hint, *loc = item
            out.append(Finding(name, message, (loc[0] if loc and loc[0] is not None else node.loc), hint))

    emit(launch, LINT_RULES[N.Launch](launch, ctx))
    for s in walk_stmts(launch.body, enter=lambda s: type(s) is not N.Parallel):
        fn = LINT_RULES.get(type(s))
        if fn is not None:
            emit(s, fn(s, ctx))
    return out
