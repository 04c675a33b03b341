"""Bodies of the elementwise helpers (``row_op``, ``exp_affine``, ``mask_select``) that :mod:`.prelude_tiles`
compiles as external functions and :mod:`.codegen_ew` calls for ``T.Parallel`` loops of those shapes (imports
numba).

Contract (pointers and sizes as :mod:`.prelude_tiles` passes a tile: data pointer, first extent, product of the
others; ``d`` the destination, ``x`` a tile of ``d``'s size, ``r`` a vector of its first extent):

* ``_row_op(d, n0, n1, x, .., r, .., op, same)``: ``d[i, j] = x[i, j] OP r[i]`` with ``OP`` ``+ - * /``, ``fmax``,
  ``fmin`` for ``op`` 0..5;
* ``_exp_affine(d, .., x, .., r, .., a, b, mode, base2, same)``: ``d[i, j] = f(x[i, j] * a - r[i] * b)``
  (``mode`` 0), ``f(x[i, j] - r[i])`` (1), ``f((x[i, j] - r[i]) * a)`` (2), ``f`` ``exp2f`` when ``base2``
  else ``expf`` (:mod:`.prelude`);
* ``_mask_select(d, n0, n1, k1, a1, b1, k2, a2, b2, op, va, vb)``: ``d[i, j] = va if (k1 + a1*i + b1*j) CMP
  (k2 + a2*i + b2*j) else vb`` in int64, ``CMP`` ``< <= == !=`` for ``op`` 0..3.

``same`` says that ``x`` is ``d`` (an in-place update): the loops then read through ``d`` itself, since two
pointer arguments make LLVM guard its vectorised loop with an overlap check that fails for an in-place update
(the exponential loop ran 8x slower). Every operation is the element loop's, in its order and type.
"""

from __future__ import annotations

import numba

from .prelude import exp2f, expf, fmax, fmin


@numba.njit(inline="always")  # inlined into the helper's two calls (Numba IR), so LLVM sees one pointer
def _row_op_rows(d, x, r, n0, n1, op):
    for i in range(n0):
        ri = r[i]
        lo = i * n1
        if op == 0:
            for j in range(lo, lo + n1):
                d[j] = x[j] + ri
        elif op == 1:
            for j in range(lo, lo + n1):
                d[j] = x[j] - ri
        elif op == 2:
            for j in range(lo, lo + n1):
                d[j] = x[j] * ri
        elif op == 3:
            for j in range(lo, lo + n1):
                d[j] = x[j] / ri
        elif op == 4:
            for j in range(lo, lo + n1):
                d[j] = fmax(x[j], ri)
        else:
            for j in range(lo, lo + n1):
                d[j] = fmin(x[j], ri)


def _row_op(d, n0, n1, x, m0, m1, r, q0, q1, op, same):
    if same:  # in place: one pointer, so LLVM vectorises without a runtime overlap check (which would fail)
        _row_op_rows(d, d, r, n0, n1, op)
    else:
        _row_op_rows(d, x, r, n0, n1, op)


@numba.njit(inline="always")
def _exp_column(d, x, r, n0, a, b, mode, base2):
    """``_exp_rows`` of a 1-D tile (one element per row): one loop over the elements, which vectorises (a row
    loop of one element does not; an attention step's rescale factors cost 0.54 us per 64 this way before).
    ``mode`` and ``base2`` are loop-invariant: LLVM unswitches them."""
    for i in range(n0):
        t = x[i] * a - r[i] * b if mode == 0 else (x[i] - r[i] if mode == 1 else (x[i] - r[i]) * a)
        d[i] = exp2f(t) if base2 else expf(t)


@numba.njit(inline="always")
def _exp_rows(d, x, r, n0, n1, a, b, mode, base2):
    if n1 == 1:
        _exp_column(d, x, r, n0, a, b, mode, base2)
        return
    for i in range(n0):
        ri = r[i]
        rb = ri * b
        lo = i * n1
        if base2:
            if mode == 0:
                for j in range(lo, lo + n1):
                    d[j] = exp2f(x[j] * a - rb)
            elif mode == 1:
                for j in range(lo, lo + n1):
                    d[j] = exp2f(x[j] - ri)
            else:
                for j in range(lo, lo + n1):
                    d[j] = exp2f((x[j] - ri) * a)
        elif mode == 0:
            for j in range(lo, lo + n1):
                d[j] = expf(x[j] * a - rb)
        elif mode == 1:
            for j in range(lo, lo + n1):
                d[j] = expf(x[j] - ri)
        else:
            for j in range(lo, lo + n1):
                d[j] = expf((x[j] - ri) * a)


def _exp_affine(d, n0, n1, x, m0, m1, r, q0, q1, a, b, mode, base2, same):
    if same:  # in place (see _row_op)
        _exp_rows(d, d, r, n0, n1, a, b, mode, base2)
    else:
        _exp_rows(d, x, r, n0, n1, a, b, mode, base2)


def _mask_select(d, n0, n1, k1, a1, b1, k2, a2, b2, op, va, vb):
    for i in range(n0):
        p = k1 + a1 * i
        q = k2 + a2 * i
        lo = i * n1
        if op == 0:
            for j in range(n1):
                d[lo + j] = va if p + b1 * j < q + b2 * j else vb
        elif op == 1:
            for j in range(n1):
                d[lo + j] = va if p + b1 * j <= q + b2 * j else vb
        elif op == 2:
            for j in range(n1):
                d[lo + j] = va if p + b1 * j == q + b2 * j else vb
        else:
            for j in range(n1):
                d[lo + j] = va if p + b1 * j != q + b2 * j else vb
