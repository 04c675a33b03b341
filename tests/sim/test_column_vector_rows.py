"""``column_vector_rows`` (docs/simulator.md §3l; tried, off in tensorcore): rows laid out as their 1-D column vector.

Every sigmoid-scored MoE router TileLang 0.1.15 compiled for us loads ``bias[k] = Bias[k * threads + tid]`` and
reduces the top-k rows with ``AllReduce<threads, 1>``: ``b[i, e] = s[i, e] + bias[e]`` puts column ``e`` on thread
``e mod threads``, so ``min(threads, E)`` threads share a row, not the flat rule's ``E / 4``.
"""

import dataclasses
import types

import kernels.registry as reg
from tilesim.analysis import get_profile
from tilesim.analysis.owner_rules import column_vector_paired
from tilesim.ir import nodes as N
from tilesim.ir.traverse import walk_stmts
from tilesim.sim import simulate


def _launch(kern):
    return next(s for s in walk_stmts(list(kern.prim_func.body)) if isinstance(s, N.Launch))


def _frag(launch, name):
    for st in walk_stmts(list(launch.body)):
        if isinstance(st, N.Parallel):
            for inner in walk_stmts(list(st.body)):
                if isinstance(inner, N.Store) and inner.buffer.name == name:
                    return inner.buffer.uid
    raise AssertionError(name)


def _router(threads=128, block_T=8):
    spec = reg.get("moe_topk_route")
    shape = {k: v for k, v in spec.shapes[0].items() if k != "label"}
    shape.update(num_tokens=1024, block_T=block_T, threads=threads)
    params = spec.params(shape)
    return spec.build(**params), (spec.data_hints(**params) if spec.data_hints else {})


def test_the_router_rows_pair_with_the_bias_vector_and_a_norms_reduced_rows_do_not():
    kern, _ = _router()
    a = types.SimpleNamespace(launch=_launch(kern))
    assert column_vector_paired(a, _frag(a.launch, "b"), 1)
    assert not column_vector_paired(a, _frag(a.launch, "b"), 0)  # the row variable is not the bias's
    spec = reg.get("rmsnorm")
    shape = {k: v for k, v in spec.shapes[0].items() if k != "label"}
    norm = spec.build(**spec.params(shape))
    an = types.SimpleNamespace(launch=_launch(norm))
    reduced = [(r.src.buffer.uid, r.dim) for r in walk_stmts(list(an.launch.body)) if isinstance(r, N.Reduce)]
    assert reduced and not any(column_vector_paired(an, u, d) for u, d in reduced)  # its rows stay 16-byte vectors


def test_128_thread_router_reductions_get_longer_with_the_rule():
    kern, hints = _router()
    # the flat rule that column_vector_rows modifies (tensorcore's inferred layouts replace both since §3n)
    base = dataclasses.replace(get_profile("tensorcore"), fragment_layout_inference=False)
    off = simulate(kern.prim_func, "h200_sxm_141gb", base, name="r", **hints).time_s
    on = simulate(kern.prim_func, "h200_sxm_141gb", dataclasses.replace(base, column_vector_rows=True), name="r",
                  **hints).time_s
    assert on > off * 1.05  # P 64 -> 128: one more step through shared memory per row reduction
