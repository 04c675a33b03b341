"""Compiling and running a program on the CPU target.

Contract
--------
``CpuProgram(pf)`` generates one function per launch (:mod:`.codegen`) and compiles it with Numba on the
first call (Numba caches the machine code per argument types for the life of the process). If any part of
the program is outside what the target compiles (``codegen.Unsupported``) the program runs on the
interpreter instead, and says so once through the ``tilesim`` logger at debug level; ``fallback`` holds
the reason (``None`` when compiled). Interpreter-only checking options (``oob`` other than ``"zero"``, ``races``)
also run on the interpreter.

``run(pf, arrays, scalars, options)`` has the interpreter's contract (``backends/interp/runtime.py``):
arrays of the declared dtypes, outputs written in place. A launch runs its blocks on Numba's thread pool
(``prange``) unless it has atomics (then in launch order, as the interpreter applies them). An integer
division by zero is a ``KernelRuntimeError`` located at the launch.
"""

from __future__ import annotations

import concurrent.futures
import functools
import hashlib
import importlib.util
import logging
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from ... import dtypes as dt
from ... import optional
from ...errors import KernelRuntimeError
from ...ir import nodes as N
from .. import Program
from ..interp import gemm_loop
from ..interp import run as interp_run
from ..interp.exprs import ev
from ..interp.options import InterpOptions
from ..interp.rules import STMT_RULES as INTERP_STMTS
from ..interp.state import Ctx
from . import codegen_rules as _rules  # noqa: F401 - fills the rule tables
from . import codegen_simt as _simt  # noqa: F401
from . import codegen_tiles as _tiles  # noqa: F401
from . import narrow
from .codegen import Unsupported, gen_launch

__all__ = ["CpuProgram"]

log = logging.getLogger("tilesim")

#: bump when the generated code's meaning changes (the disk cache is keyed by it)
CODEGEN_VERSION = 5


def cache_dir() -> Path:
    """Where generated kernel modules and Numba's machine code are kept (``TILESIM_CACHE_DIR``, else
    ``~/.cache/tilesim/cpu``; a temporary directory when that is not writable)."""
    root = os.environ.get("TILESIM_CACHE_DIR")
    d = Path(root) / "cpu" if root else Path.home() / ".cache" / "tilesim" / "cpu"
    try:
        d.mkdir(parents=True, exist_ok=True)
        if os.access(d, os.W_OK):
            return d
    except OSError:
        pass
    return _temp_cache()


@functools.cache
def _temp_cache() -> Path:
    return Path(tempfile.mkdtemp(prefix="tilesim_cpu_"))


def load_module(source: str):
    """Write ``source`` to a file named by its hash (atomically, once) and import it: Numba's
    ``cache=True`` then keeps the compiled code beside it, so a later process compiles nothing."""
    numba = optional.require("numba", "the compiled CPU target (target='cpu')")
    key = hashlib.sha1(f"{CODEGEN_VERSION}\n{numba.__version__}\n{_helpers_digest()}\n{source}".encode()).hexdigest()[:20]
    name = f"tilesim_cpu_{key}"
    if name in sys.modules:
        return sys.modules[name]
    path = cache_dir() / f"{name}.py"
    if not path.exists():
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            f.write(source)
        os.replace(tmp, path)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    sys.modules[name] = mod
    return mod


@functools.cache
def _helpers_digest() -> str:
    """A digest of the helper modules generated code calls (``prelude``, ``prelude_tiles``, ``prelude_ew``, ``prelude_simd``, ``prelude_blas``, ``narrow``): Numba's cache of a
    generated module does not notice a change in the functions it calls (or inlined), so the module's name,
    and with it its cache, changes with them."""
    here = Path(__file__).parent
    return hashlib.sha1(b"".join((here / f).read_bytes() for f in ("prelude.py", "prelude_tiles.py", "prelude_ew.py", "prelude_simd.py", "prelude_blas.py", "narrow.py"))).hexdigest()


@functools.cache
def _pool() -> concurrent.futures.ThreadPoolExecutor:
    return concurrent.futures.ThreadPoolExecutor(max_workers=_workers(), thread_name_prefix="tilesim-cpu")


@functools.cache
def _workers() -> int:
    """The pool's thread count: the CPUs this process may run on (asked once: ~2 us a call), at most 8."""
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:
        n = os.cpu_count() or 1
    return max(1, min(8, n))


class _Compiled:
    def __init__(self, launch: N.Launch, src):
        self.launch = launch
        self.src = src
        self.fn = None
        self.trials = {True: [], False: []}  # wall seconds of warm calls with and without the thread pool
        self.decided = None  # the pool choice once both ways have TRIALS timings
        grid = launch.grid
        self.grid = tuple(int(g.value) for g in grid) if all(isinstance(g, N.Const) for g in grid) else None
        if self.grid is not None and any(x < 0 for x in self.grid):
            self.grid = None  # evaluated (and refused) per call, where the error is raised

    def pooled(self) -> bool:
        """Whether this call runs its blocks on the thread pool. A launch that may (no atomics) tries both ways on
        its first warm calls, alternating, then keeps the faster (median of ``TRIALS`` each): dealing out blocks
        costs a wake-up per thread, and where the machine's cores are shared or each block calls BLAS (whose own
        threads compete) one thread can be the faster — a causal attention over 256 tokens ran 1.4-1.7x slower
        on two threads here. Blocks are independent, so the choice changes no value."""
        if self.decided is not None:
            return self.decided
        pool, alone = self.trials[True], self.trials[False]
        if len(pool) < TRIALS or len(alone) < TRIALS:
            return len(pool) <= len(alone)
        self.decided = statistics.median(pool) <= statistics.median(alone)
        return self.decided

    def record(self, pooled: bool, seconds: float) -> None:
        if len(self.trials[pooled]) < TRIALS:
            self.trials[pooled].append(seconds)

    def function(self):
        if self.fn is None:
            self.fn = load_module(self.src.source).launch
        return self.fn


#: warm calls timed each way before a launch settles on running its blocks on the pool or on one thread
TRIALS = 3


class CpuProgram(Program):
    """A program compiled for the CPU, or the interpreter's when it cannot be (``fallback``)."""

    def __init__(self, pf: N.PrimFunc, pass_configs=None, uninit: str = "nan", tf32: bool = False):
        self.pf = pf
        self.fallback: str | None = None
        self.launches: list = []
        self._key = (uninit, tf32)
        self._variants: dict = {}
        workspaces, lets = [], []
        try:
            for s in pf.body:
                if isinstance(s, N.Alloc) and s.buffer.scope == "global":
                    workspaces.append(s.buffer)
                elif isinstance(s, N.Let):
                    lets.append(s.var)
                elif isinstance(s, N.Launch):
                    self.launches.append(_Compiled(s, gen_launch(pf, s, uninit, tf32, workspaces, lets)))
                else:
                    raise Unsupported(f"a top-level {type(s).__name__} outside T.Kernel", s.loc)
        except Unsupported as e:
            self.fallback = str(e)
            self.launches = []
            log.debug("tilesim: %s runs on the interpreter, not the compiled CPU target: %s", pf.name, e)
        self.source = None if self.fallback else "\n".join(c.src.source for c in self.launches)

    def run(self, pf, arrays, scalars, options, progress=None):
        options = options or InterpOptions()
        if self.fallback or options.oob != "zero" or options.races or options.uninit == "check":
            return interp_run(pf, arrays, scalars, options, progress=progress)
        key = (options.uninit, options.tf32)
        if key != self._key:  # code generated for other options
            if key not in self._variants:
                self._variants[key] = CpuProgram(pf, uninit=options.uninit, tf32=options.tf32)
            return self._variants[key].run(pf, arrays, scalars, options, progress)
        self._walk(pf, arrays, scalars, options, progress, run_blocks=True)

    def prepare(self, pf, arrays, scalars, options) -> None:
        """Compile every launch for the types of these arguments (or load it from the disk cache) and run no
        block: the arguments are read for their types only. The tiered target calls it on a worker thread."""
        self._walk(pf, arrays, scalars, options or InterpOptions(), None, run_blocks=False)

    def _walk(self, pf, arrays, scalars, options, progress, run_blocks: bool) -> None:
        top = Ctx(1, options, dict(scalars), dict(arrays), np.zeros(1, dtype=np.int64))
        launches = iter(self.launches)
        index = 0
        for stmt in pf.body:
            if not isinstance(stmt, N.Launch):
                INTERP_STMTS(stmt)(stmt, top)  # workspaces and lets: the interpreter's meaning, on the host
                continue
            c = next(launches)
            total = self._launch(c, top, run_blocks)
            if progress is not None:
                progress(index, total, total)
            index += 1

    @staticmethod
    def _launch(c: _Compiled, top: Ctx, run_blocks: bool = True) -> int:
        if c.grid is not None:
            grid = list(c.grid)
        else:
            grid = [int(ev(gx, top)) for gx in c.launch.grid]
            if any(x < 0 for x in grid):
                raise KernelRuntimeError(f"negative grid extent {tuple(grid)}", c.launch.loc)
        args = [_array_arg(top.storage[b.uid], b.dtype) for b in c.src.buffers]
        for d in c.src.narrow:
            args += [narrow.decode_table(d), narrow.encode_args(d)[0]]
        args += [_scalar_arg(top.env[v.uid], v.dtype) for v in c.src.scalars]
        args += _group_products(c, grid, top, run_blocks)
        total = math.prod(grid) if grid else 1
        if not run_blocks:
            c.function()(*args, *grid, 0, 0, 1)  # compiles (or loads from the disk cache) and runs no block
            return total
        # a launch whose K loops were fused runs its (light) blocks on this thread: BLAS's threads, just used
        # for the products, keep spinning on the other cores for a while and a pool there would fight them
        fused = any(a[0] for a in args[len(args) - 2 * len(c.src.fused) + 1::2]) if c.src.fused else False
        fn = c.function()
        parallel = c.src.parallel and not fused and total >= 2 * _workers() > 2
        pooled = parallel and c.pooled()
        compiled = len(fn.overloads)  # a call that compiles is not timed (Numba's `signatures` costs ~10 us to ask)
        t0 = time.perf_counter()
        try:
            _run_blocks(fn, args + grid, total, pooled)
        except ZeroDivisionError as e:
            raise KernelRuntimeError(str(e), c.launch.loc) from None
        except AssertionError as e:
            s = c.src.asserts[int(e.args[0])]
            raise KernelRuntimeError(f"T.device_assert failed: {s.message}", s.loc,
                                     hint="the program's own check on its data failed (a GPU would trap here)") from None
        if parallel and c.decided is None and len(fn.overloads) == compiled:
            c.record(pooled, time.perf_counter() - t0)
        return total


def _group_products(c: _Compiled, grid: list, top: Ctx, run_blocks: bool) -> list:
    """The arguments ``FP<k>, FS<k>`` of the launch's fusable K loops (``codegen_gemm_loop.py``): every
    group's product, computed here with BLAS's threads before the blocks run, or a placeholder and
    ``use = 0`` (the blocks run the loop as written)."""
    if not c.src.fused:
        return []
    plans = gemm_loop.plan_launch(c.launch, tuple(grid), top.env) if run_blocks else {}
    top.safe = dict(c.launch.annotation("safe_value", ()))
    out = []
    for loop, gemm, *_ in c.src.fused:
        plan = plans.get(id(loop))
        got = None if plan is None or plan.barriers else gemm_loop.launch_products(plan, top)
        if got is None:
            out += [np.zeros((1, 1, 1), dtype=dt.compute_dtype(gemm.c.dtype)), np.zeros(4, dtype=np.int64)]
        else:
            out += [got[0], np.array((1,) + got[1], dtype=np.int64)]
    return out


def _run_blocks(fn, args: list, total: int, parallel: bool) -> None:
    """Blocks ``0 .. total-1``: dealt round-robin to the thread pool when the launch allows it (the compiled
    function releases the GIL; thread ``i`` of ``n`` runs blocks ``i, i + n, ...``, so a grid whose blocks grow
    with their index — a causal attention's query tiles — is shared evenly), else in launch order on this
    thread."""
    n = _workers() if parallel else 1
    if n > 1 and total >= 2 * n and not fn.signatures:
        fn(*args, 0, 0, 1)  # compile (or load from the disk cache) on this thread, running no block
    if n <= 1 or total < 2 * n:
        fn(*args, 0, total, 1)
        return
    futures = [_pool().submit(fn, *args, i, total, n) for i in range(n)]
    for f in futures:
        f.result()


def _array_arg(arr: np.ndarray, dtype: str) -> np.ndarray:
    if dtype in dt.NARROW_FLOATS:
        return narrow.storage_view(arr, dtype)
    return arr


def _scalar_arg(v, dtype: str):
    if dt.is_float(dtype):
        if dtype == "float64":
            return np.float64(v)
        return np.float32(dt.convert(np.asarray(v, dtype=np.float32), dtype).astype(np.float32))
    if dtype == "bool":
        return bool(v)
    return np.int64(v)
