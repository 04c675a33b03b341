"""MoE routing (kernels/moe.py): indices bitwise (order included) against a stable-argsort reference,
weights to rtol 1e-5. Logits come from a coarse grid so exact ties are frequent (ties → smaller index)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilesim
from kernels.moe import compare_routing, moe_route, ref_moe_route, router_inputs

CONFIGS = {  # name: (experts, topk, n_groups, topk_groups)
    "deepseek_v3": (256, 8, 8, 4),
    "grouped_64": (64, 6, 4, 2),
    "one_group_kept": (32, 3, 4, 1),
    "plain_top2_of_8": (8, 2, 1, 1),
    "all_groups_kept": (24, 4, 8, 8),  # 3 per group, all kept: plain top-k (no grouping step)
}


def _route(logits, bias, cfg, scoring, factor=2.5, block_T=4):
    E, k, G, TG = CONFIGS[cfg]
    kern = moe_route(logits.shape[0], num_experts=E, topk=k, n_groups=G, topk_groups=TG, scoring=scoring,
                     routed_scaling_factor=factor, block_T=block_T)
    out = kern(logits, bias)
    ref = ref_moe_route(logits, bias, topk=k, n_groups=G, topk_groups=TG, scoring=scoring,
                        routed_scaling_factor=factor)
    compare_routing(out, ref)
    return out


@settings(max_examples=8)
@given(T=st.integers(1, 20), cfg=st.sampled_from(sorted(CONFIGS)), scoring=st.sampled_from(["sigmoid", "sqrtsoftplus", "softmax"]),
       grid=st.sampled_from([2.0, 8.0, 64.0]), span=st.sampled_from([1.0, 4.0, 30.0]),
       block_T=st.sampled_from([1, 4, 8]))
def test_routing(T, cfg, scoring, grid, span, block_T):
    E, k, G, TG = CONFIGS[cfg]
    logits, bias = router_inputs(np.random.default_rng(T * 31 + E), T, E, grid=grid, span=span)
    idx, w = _route(logits, bias, cfg, scoring, block_T=block_T)
    # invariants: distinct experts, from at most topk_groups groups, weights sum to the factor
    assert all(len(set(r)) == k for r in idx.tolist())
    assert all(len({e // (E // G) for e in r}) <= TG for r in idx.tolist())
    assert np.allclose(w.sum(axis=1), 2.5, rtol=1e-5)


def test_softmax_ranks_on_logits_plus_bias():
    """TileKernels' softmax routing ranks on ``logits + bias``, not ``softmax(logits) + bias``: with logits
    (2, 0) and bias (0, 1.5) expert 0 wins (2 > 1.5) although softmax + bias would pick expert 1 (0.12 + 1.5);
    the weights still come from the softmax."""
    logits = np.zeros((2, 8), np.float32)
    logits[:, 0] = 2.0
    bias = np.zeros(8, np.float32)
    bias[1] = 1.5
    idx, w = _route(logits, bias, "plain_top2_of_8", "softmax", factor=1.0)
    assert idx.tolist() == [[0, 1]] * 2
    p = np.exp(logits[0].astype(np.float64) - 2.0)
    p /= p.sum()
    assert np.allclose(w[0], p[[0, 1]] / p[[0, 1]].sum(), rtol=1e-6)


@pytest.mark.parametrize("scoring", ["sigmoid", "sqrtsoftplus"])
def test_all_zero_selected_scores_give_zero_weights(scoring):
    """Logits ≤ -89 make fp32 sigmoid (and sqrt(softplus)) exactly 0: the sum is floored at 1e-20, so the
    weights are 0 instead of 0/0 = NaN; selection is then decided by the bias alone."""
    logits = np.full((3, 256), -200.0, np.float32)
    bias = np.zeros(256, np.float32)
    bias[[7, 100, 255]] = 0.25
    idx, w = _route(logits, bias, "deepseek_v3", scoring)
    assert np.array_equal(w, np.zeros_like(w)) and not np.isnan(w).any()
    assert set(idx[0].tolist()) >= {7, 100, 255}


def test_all_ties():
    """Equal scores everywhere: groups 0..topk_groups-1 are kept and the first k experts are chosen."""
    logits = np.zeros((3, 256), dtype=np.float32)
    bias = np.zeros(256, dtype=np.float32)
    idx, w = _route(logits, bias, "deepseek_v3", "sigmoid")
    assert idx.tolist() == [list(range(8))] * 3 and np.allclose(w, 2.5 / 8)


def test_bias_selects_but_does_not_weight():
    """The bias moves selection (and group choice) but weights come from the unbiased scores."""
    T, E = 2, 256
    logits = np.zeros((T, E), dtype=np.float32)
    logits[:, 5] = 3.0  # strongest unbiased expert, in group 0
    bias = np.zeros(E, dtype=np.float32)
    bias[200:202] = 1.0  # group 6 gets the best top-2 sum through the bias only
    bias[40] = 0.5
    idx, w = _route(logits, bias, "deepseek_v3", "sigmoid")
    # biased: 200, 201 (1.5), 40 (1.0), 5 (0.95), then ties at 0.5 broken towards the smaller index
    assert idx[0, :4].tolist() == [200, 201, 40, 5] and idx[0, 4:].tolist() == [0, 1, 2, 3]
    s = 1 / (1 + np.exp(-logits[0, idx[0]].astype(np.float64)))
    assert np.allclose(w[0], s / s.sum() * 2.5, rtol=1e-6)


def test_group_limit_changes_the_answer():
    """Sanity of the test data: with the group limit the choice differs from a plain top-k."""
    logits, bias = router_inputs(np.random.default_rng(1), 16, 256)
    idx, _ = _route(logits, bias, "deepseek_v3", "sigmoid")
    plain = ref_moe_route(logits, bias, topk=8, n_groups=1, topk_groups=1)[0]
    assert not np.array_equal(idx, plain)


@pytest.mark.parametrize("bad", [dict(n_groups=3), dict(topk=200), dict(topk_groups=9), dict(scoring="relu")])
def test_invalid_configs(bad):
    kw = dict(num_experts=256, topk=8, n_groups=8, topk_groups=4, scoring="sigmoid") | bad
    with pytest.raises(ValueError):
        moe_route(4, **kw)


def test_serial_equals_batched():
    logits, bias = router_inputs(np.random.default_rng(2), 11, 256)
    k = moe_route(11, block_T=4)
    a = k(logits, bias)
    b = k.run(logits, bias, options=tilesim.InterpOptions(mode="serial"))
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1].view(np.uint32), b[1].view(np.uint32))
