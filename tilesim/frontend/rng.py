"""Builders of ``tilesim.language.rng``: the thread's Philox stream as hidden variables and a pure draw.

Contract
--------
* ``T.rng_init(seed, seq, off)`` (inside a launch, outside ``T.Parallel``) allocates three hidden ``T.alloc_var``
  variables of the launch (int64: seed, subsequence, position; per thread in per-thread code) on first use
  and stores the arguments (``seq`` defaults to ``tx + bx * threads_x``).
* ``T.rng_rand()`` outside ``T.Parallel``: ``Let v = Call("philox", (seed, seq, pos), uint32)`` then
  ``pos += 1``; it evaluates to ``v``. Inside ``T.Parallel`` (a one-thread block only): the element's value
  ``philox(seed, seq, pos + e)`` with ``e`` the element's row-major index over the enclosing parallel loops,
  and ``pos += elements`` is emitted after the outermost parallel loop (``tr.launch["after_parallel"]``);
  a second draw in the same loop nest is refused.
* ``T.rng_rand_float()`` is ``float32(draw) * 2**-32 + 2**-33`` (``curand_uniform``).
* A draw before ``T.rng_init``, another generator, ``dist="normal"`` or ``bit=64`` are located errors.
"""

from __future__ import annotations

from ..errors import KernelSyntaxError, KernelTypeError
from ..ir import nodes as N
from . import exprs as X
from . import simt as S
from .builders import BUILDERS, builder

_PHILOX = "curandStatePhilox4_32_10_t"


def _state(tr, loc, create=False):
    st = tr.launch.get("rng")
    if st is None and create:
        saved = tr.assign_name
        try:
            st = []
            for name in ("rng_seed", "rng_seq", "rng_pos"):
                tr.assign_name = name
                st.append(BUILDERS["alloc_var"](tr, loc, "int64", None, None))
        finally:
            tr.assign_name = saved
        tr.launch["rng"] = st = tuple(st)
    return st


def _store(tr, buf, value, loc):
    tr.emit(N.Store(buf, (), X.cast_to(X.to_expr(value, loc, like="int64"), "int64", loc), loc))


@builder("rng_init")
def _b_rng_init(tr, loc, seed, seq, off, generator):
    if not tr.in_launch():
        raise KernelSyntaxError("T.rng_init outside `with T.Kernel(...)`", loc)
    if tr.parallel_depth:
        raise KernelSyntaxError("T.rng_init inside T.Parallel", loc, hint="start the stream before the loop")
    if generator != _PHILOX:
        raise KernelTypeError(f"T.rng_init: generator {generator!r} is not supported by tilesim", loc,
                              hint=f"use the default {_PHILOX!r}")
    if seq is None:
        seq = X.binop("add", S.thread_index(tr, loc, 0), X.binop("mul", _bx(tr, loc), tr.launch["threads"][0], loc),
                      loc)
    seed_v, seq_v, pos_v = _state(tr, loc, create=True)
    for buf, v in ((seed_v, seed), (seq_v, seq), (pos_v, off)):
        _store(tr, buf, v, loc)


def _bx(tr, loc):
    bv = tr.launch.get("block_vars")
    if not bv:
        raise KernelTypeError("T.rng_init: give seq (the default names the block index bx)", loc)
    return bv[0]


def _load(buf, loc):
    return N.Load(buf, (), buf.dtype, loc)


def _draw(tr, loc, what):
    st = _state(tr, loc)
    if st is None:
        raise KernelSyntaxError(f"{what} before T.rng_init", loc, hint="call T.rng_init(seed, seq, off) first")
    seed_v, seq_v, pos_v = st
    pos = _load(pos_v, loc)
    if not tr.parallel_depth:
        v = N.Var("rng", "uint32", kind="let", loc=loc)
        tr.emit(N.Let(v, N.Call("philox", (_load(seed_v, loc), _load(seq_v, loc), pos), "uint32", loc), loc))
        _store(tr, pos_v, X.binop("add", pos, 1, loc), loc)
        return v
    nt = 1
    for t in tr.launch["threads"]:
        nt *= t
    if nt != 1:
        raise KernelTypeError(f"{what} inside T.Parallel in a block of {nt} threads: which thread draws which "
                              "element is a compiler layout decision", loc,
                              hint="draw in per-thread code (outside T.Parallel), or launch threads=1")
    if tr.launch.get("after_parallel"):
        raise KernelTypeError(f"a second {what} in one T.Parallel loop nest is not supported", loc,
                              hint="draw once per element (keep the value in a variable)")
    lin, total = 0, 1
    for vars_, exts in tr.parallel_axes:
        for v, e in zip(vars_, exts):
            lin = X.binop("add", X.binop("mul", lin, e, loc), v, loc)
            total *= e
    tr.launch["after_parallel"] = [N.Store(pos_v, (), X.binop("add", pos, total, loc), loc)]
    return N.Call("philox", (_load(seed_v, loc), _load(seq_v, loc), X.binop("add", pos, X.cast_to(
        X.index_expr(lin, loc), "int64", loc), loc)), "uint32", loc)


@builder("rng_rand")
def _b_rng_rand(tr, loc):
    return _draw(tr, loc, "T.rng_rand()")


@builder("rng_rand_float")
def _b_rng_rand_float(tr, loc, bit, dist):
    if bit != 32 or dist != "uniform":
        raise KernelTypeError(f"T.rng_rand_float(bit={bit!r}, dist={dist!r}) is not supported by tilesim", loc,
                              hint="only 32-bit uniform floats (curand_uniform) are modelled")
    u = X.cast_to(_draw(tr, loc, "T.rng_rand_float()"), "float32", loc)
    return X.binop("add", X.binop("mul", u, 2.0 ** -32, loc), 2.0 ** -33, loc)
