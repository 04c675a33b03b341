"""MoE gates (kernels/moe_gate.py): ``topk_gate`` bitwise against a stable argsort, ``top2_sum_gate`` with
TileKernels' options (mask, fixed routing, shared slots, physical map, EP/TP masking) against the NumPy
reference — indices bitwise, weights rtol 1e-5 — on token counts the block does not divide, exact ties,
-inf rows, and hand-checked option semantics."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilesim
from kernels.moe_gate import (
    compare_gate,
    gate_inputs,
    ref_top2_sum_gate,
    ref_topk_gate,
    top2_sum_gate,
    topk_gate,
)


@settings(max_examples=8)
@given(T_=st.integers(1, 30), E=st.integers(2, 80), data=st.data(), block_T=st.sampled_from([1, 4, 8]),
       seed=st.integers(0, 99))
def test_topk_gate(T_, E, data, block_T, seed):
    k = data.draw(st.integers(1, E))
    rng = np.random.default_rng(seed)
    x = (rng.integers(-4, 5, (T_, E)) / 4).astype(np.float32)  # frequent exact ties
    x[0, rng.integers(0, E)] = -np.inf
    if T_ > 1:
        x[1] = -np.inf  # all -inf: index order, never an index twice
    out = topk_gate(T_, E, k, block_T=block_T)(x)
    np.testing.assert_array_equal(out, ref_topk_gate(x, k))
    assert all(len(set(r)) == k for r in out.tolist())


def test_topk_gate_ties_and_invalid():
    x = np.array([[1, 3, 3, 2, 3]], np.float32)
    assert topk_gate(1, 5, 4)(x).tolist() == [[1, 2, 4, 3]]
    with pytest.raises(ValueError):
        topk_gate(4, 8, 9)


OPTION_SETS = [
    {},
    {"use_mask": True, "fix_routing": True},
    {"num_shared_experts": 2, "num_duplicates": 5, "map_physical": True, "num_ep_ranks": 4, "num_tp_ranks": 2},
    {"num_shared_experts": 1, "num_duplicates": 3, "map_physical": True, "use_mask": True, "fix_routing": True,
     "num_ep_ranks": 2, "num_tp_ranks": 2},
]


@settings(max_examples=8, deadline=None)
@given(T_=st.integers(1, 21), opts=st.sampled_from(OPTION_SETS), cfg=st.sampled_from([
    (64, 6, 4, 2, "sigmoid"), (36, 4, 3, 1, "sqrtsoftplus"), (24, 3, 1, 1, "softmax"), (40, 8, 4, 4, "sigmoid")]),
       tp_rank=st.integers(0, 1), ep_rank=st.integers(0, 3), block_T=st.sampled_from([1, 4, 8]),
       seed=st.integers(0, 99))
def test_top2_sum_gate_options(T_, opts, cfg, tp_rank, ep_rank, block_T, seed):
    E, k, G, TG, scoring = cfg
    kw = dict(opts, num_experts=E, topk=k, n_groups=G, topk_groups=TG, scoring=scoring, routed_scaling_factor=1.5,
              tp_rank=min(tp_rank, opts.get("num_tp_ranks", 1) - 1), ep_rank=ep_rank)
    if (E + kw.get("num_duplicates", 1) - 1) % kw.get("num_ep_ranks", 1):
        kw["num_ep_ranks"] = 1
    rng = np.random.default_rng(seed)
    ins = gate_inputs(rng, T_, **kw)
    kern = top2_sum_gate(T_, block_T=block_T, **kw)
    out = kern(*ins)
    compare_gate(out, ref_top2_sum_gate(*ins, **kw))
    assert out[0].shape == (T_, k + kw.get("num_shared_experts", 0))


def _plain(T_, E=8, k=2, **kw):
    return dict(num_experts=E, topk=k, n_groups=1, topk_groups=1, scoring="sigmoid", routed_scaling_factor=1.0, **kw)


def test_gate_option_semantics_by_hand():
    T_, E, k = 3, 8, 2
    logits = np.tile(np.arange(E, dtype=np.float32), (T_, 1))  # expert 7 then 6 win
    bias = np.zeros(E, np.float32)
    mask = np.array([1, 0, 1], np.int32)
    fix = np.array([0, 0, 1], np.int32)
    fidx = np.array([[0, 1], [0, 1], [3, -1]], np.int32)
    tph = np.array([[e, (e + 1) % 10] for e in range(E + 1)], np.int32)  # 1 shared, 1 extra: 10 physical
    cnt = np.full(E + 1, 2, np.int32)
    kern = top2_sum_gate(T_, **_plain(T_, E, k, num_shared_experts=1, num_duplicates=2, use_mask=True, fix_routing=True,
                                   map_physical=True))
    idx, w, um = kern(logits, bias, mask, fix, fidx, tph, cnt)
    assert um.tolist() == [[7, 6], [-1, -1], [3, -1]]
    # token 0: dup (0 + 0·23333) % 2 = 0 → identity; token 2: 2·23333 % 2 = 0 → identity as well
    assert idx.tolist() == [[7, 6, 8], [-1, -1, -1], [3, -1, 8]]
    assert w[1].tolist() == [0, 0, 0] and w[0, 2] == 1.0 and w[2, 2] == 1.0
    s = 1 / (1 + np.exp(-np.float32([3, 0])))  # the -1 slot reads expert 0's score (reference's clamp)
    np.testing.assert_allclose(w[2, :2], s / s.sum(), rtol=1e-6)
    # ep_rank 1 moves odd tokens' duplicates: token 0 → (1 + 0) % 2 = 1 → ToPhys[l, 1] = l + 1
    idx1 = top2_sum_gate(T_, ep_rank=1, **_plain(T_, E, k, num_shared_experts=1, num_duplicates=2,
                                                  map_physical=True))(logits, bias, mask, fix, fidx, tph, cnt)[0]
    assert idx1[0].tolist() == [8, 7, 9]


def test_gate_ep_tp_masking_matches_mask_indices_by_tp():
    # 16 experts, EP 4 (4 per rank), TP 2: rank 1 keeps ids whose EP rank is odd, renumbered locally
    T_, E = 4, 16
    logits = np.zeros((T_, E), np.float32)
    logits[:, [0, 5, 6, 12]] = 5.0
    ins = (logits, np.zeros(E, np.float32), np.ones(T_, np.int32), np.zeros(T_, np.int32),
           np.zeros((T_, 4), np.int32), np.arange(E, dtype=np.int32)[:, None], np.ones(E, np.int32))
    idx = top2_sum_gate(T_, **_plain(T_, E, 4, num_ep_ranks=4, num_tp_ranks=2, tp_rank=1))(*ins)[0]
    assert idx[0].tolist() == [-1, 1, 2, 4]  # 5, 6 → EP rank 1 (local 1, 2); 12 → EP rank 3 (local 4)


def test_gate_invalid():
    with pytest.raises(ValueError):
        top2_sum_gate(4, **_plain(4, num_shared_experts=1))  # shared slots need the map
    with pytest.raises(ValueError):
        top2_sum_gate(4, **_plain(4, num_shared_experts=2, num_duplicates=2, map_physical=True))  # 1 extra < 2
    with pytest.raises(ValueError):
        top2_sum_gate(4, **_plain(4, num_ep_ranks=3))
    with pytest.raises(ValueError):
        top2_sum_gate(4, **_plain(4, num_tp_ranks=2, tp_rank=2))


def test_serial_equals_batched():
    rng = np.random.default_rng(1)
    kw = _plain(9, 16, 3, num_shared_experts=1, num_duplicates=3, map_physical=True, use_mask=True,
                fix_routing=True, num_ep_ranks=2, num_tp_ranks=2, tp_rank=1)
    ins = gate_inputs(rng, 9, **kw)
    k = top2_sum_gate(9, block_T=4, **kw)
    for a, b in zip(k(*ins), k.run(*ins, options=tilesim.InterpOptions(mode="serial"))):
        assert np.array_equal(a, b)
    x = gate_inputs(rng, 9, 16)[0]
    g = topk_gate(9, 16, 5, block_T=4)
    assert np.array_equal(g(x), g.run(x, options=tilesim.InterpOptions(mode="serial")))
