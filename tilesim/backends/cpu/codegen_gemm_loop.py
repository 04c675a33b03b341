"""The tiled-GEMM K loop on the CPU target: the group products computed before the blocks run.

Why: a block's K loop of small tile products (16 BLAS calls of 64×32 @ 32×64 per block for a 512³ GEMM)
runs each product on one core at a small size, about 2× ``numpy.matmul`` on the same arrays. The
interpreter already forms the whole loop of a group of blocks as one product
(``backends/interp/gemm_loop.py``); here the runtime does the same on the host, with BLAS's own threads,
and each block only adds its tile of the product.

Contract
--------
:func:`fusable_loops` picks the launch's top-level loops that match the interpreter's pattern
(``gemm_loop._match``: copy A tile, copy B tile, gemm into a whole register accumulator, optionally
``if k == start: T.fill(C, 0)``; no mbarriers) and whose A tile does not depend on ``bx``. For the k-th
such loop the launch takes two more arguments: ``FP<k>``, a 3-D array of C's compute dtype holding every
group's product, and ``FS<k>`` = ``[use, kz, ky, ry]`` (int64). :func:`emit_fused` generates

    if FS<k>[0]:   # the runtime computed the products (gemm_loop.launch_products)
        C (+)= FP<k>[bz·kz + by·ky, (by·ry)·bm :+ bm, bx·bn :+ bn]
    else:
        <the loop as written>

The loop's two operand tiles are named nowhere else (the pattern's condition), so their allocation is a
1×1 placeholder when ``use`` is set. The runtime can always fall back to the loop (``use = 0``: options that ask for the plain path, an
empty loop, group products over ``gemm_loop.LAUNCH_BYTES``). Meaning: the interpreter's fused path, bit
for bit (the same products, added in C's dtype).
"""

from __future__ import annotations

from ...ir import nodes as N
from ..interp import gemm_loop
from .codegen import FUSABLE, _Gen, onchip_dtype


def fusable_loops(launch: N.Launch, outer: set) -> list:
    """``[(loop, gemm, clear, tiles)]`` (``tiles``: the uids of the two on-chip operand buffers) for the top-level loops of ``launch`` the runtime may fuse (module docstring);
    ``outer`` holds the uids of the values bound before the launch."""
    bv = [v.uid for v in launch.block_vars]
    out = []
    for st in launch.body:
        if not isinstance(st, N.For):
            continue
        m = gemm_loop._match(st, launch, outer)
        if m is None:
            continue
        ca, cb, g, used_a, _used_b, _ta, _tb, clear, barriers = m
        if barriers or (bv and bv[0] in used_a):
            continue
        out.append((st, g, clear, (ca.dst.buffer.uid, cb.dst.buffer.uid)))
    return out


def emit_fused(g: _Gen, s: N.For, k: int, plain) -> None:
    """The fused form of loop ``s`` (the k-th fusable loop) with ``plain()`` emitting the loop as written."""
    gemm, clear = g.fused_gemms[k]
    c = gemm.c.buffer
    bm, bn = (int(x) for x in c.static_shape())
    names = [g.var(v) for v in g.launch.block_vars] + ["0", "0", "0"]
    bx, by, bz = names[:3]
    key, row, col = (g.fresh(x) for x in ("k", "r", "c"))
    g.emit(f"if FS{k}[0]:")
    g.depth += 1
    g.emit(f"{key} = {bz} * FS{k}[1] + {by} * FS{k}[2]")
    g.emit(f"{row} = {by} * FS{k}[3] * {bm}")
    g.emit(f"{col} = {bx} * {bn}")
    window = f"{key}, {row}, {col}, 0, 0, 1, 2"
    dtype = str(onchip_dtype(c.dtype))
    if clear:  # C becomes its tile of the product (in bounds: no fill is read)
        g.emit(f"{g.ext('tile_in', dtype)}(FP{k}, {g.buf(c)}, {g.const(dtype, '0')}, {window})")
    else:
        g.emit(f"{g.ext('tile_add', dtype)}(FP{k}, {g.buf(c)}, {window})")
    start, stop, step = g.expr(s.start), g.expr(s.stop), int(s.step)
    last = f"({stop}) - 1" if step == 1 else f"({start}) + ((({stop}) - ({start}) + {step - 1}) // {step} - 1) * {step}"
    g.emit(f"{g.var(s.var)} = {last}")  # the loop variable's value after the loop, as the plain path leaves it
    g.depth -= 1
    g.emit("else:")
    g.depth += 1
    plain()
    g.depth -= 1


FUSABLE.append(fusable_loops)
