"""MoE group kernels (kernels/moe_groups.py): bitwise against the NumPy references on ragged token counts,
group counts and sizes that are not powers of two, exact ties, -inf tokens, -1 entries and duplicates."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilesim
from kernels.moe_groups import (
    aux_fi,
    group_count,
    ref_aux_fi,
    ref_group_count,
    ref_topk_group_idx,
    ref_unique_group_indices,
    topk_group_idx,
    unique_group_indices,
)


@settings(max_examples=8)
@given(T_=st.integers(1, 40), G=st.integers(1, 16), Eg=st.integers(2, 20), s=st.sampled_from([1, 2]),
       data=st.data(), block_T=st.sampled_from([1, 8, 16]), seed=st.integers(0, 99))
def test_topk_group_idx(T_, G, Eg, s, data, block_T, seed):
    k = data.draw(st.integers(1, G))
    rng = np.random.default_rng(seed)
    sc = (rng.integers(-4, 5, (T_, G, Eg)) / 4).astype(np.float32)  # coarse grid: ties
    sc[0, rng.integers(0, G)] = -np.inf
    if T_ > 1:
        sc[1] = -np.inf  # every group -inf: ranked by index
    out = topk_group_idx(T_, G, Eg, k, s, block_T=block_T)(sc)
    ref = ref_topk_group_idx(sc, k, s)
    np.testing.assert_array_equal(out, ref)
    assert all(len(set(r)) == k for r in out.tolist())  # never a group twice


def test_topk_group_idx_top2_counts_tied_maxima_twice():
    sc = np.zeros((1, 3, 4), np.float32)
    sc[0, 0] = [5, 5, 0, 0]  # top-2 sum 10
    sc[0, 1] = [6, 3, 3, 0]  # 9
    sc[0, 2] = [9, 0, 0, 0]  # 9: tie with group 1, the smaller index first
    assert topk_group_idx(1, 3, 4, 3, 2)(sc).tolist() == [[0, 1, 2]]
    assert topk_group_idx(1, 3, 4, 3, 1)(sc).tolist() == [[2, 1, 0]]


def test_topk_group_idx_invalid():
    with pytest.raises(ValueError):
        topk_group_idx(4, 4, 1, 2, 2)
    with pytest.raises(ValueError):
        topk_group_idx(4, 4, 8, 5, 2)


@settings(max_examples=8)
@given(T_=st.integers(1, 150), k=st.integers(1, 9), n=st.integers(1, 300), aux=st.integers(1, 9),
       block_T=st.sampled_from([8, 64]), seed=st.integers(0, 99))
def test_counts_and_aux_fi(T_, k, n, aux, block_T, seed):
    rng = np.random.default_rng(seed)
    idx = rng.integers(-1, n, (T_, k)).astype(np.int32)
    c = group_count(T_, k, n, block_T=block_T)(idx)
    np.testing.assert_array_equal(c, ref_group_count(idx, n))
    assert c.sum() == (idx >= 0).sum()
    f = aux_fi(T_, k, n, aux, block_T=block_T)(idx)
    np.testing.assert_array_equal(f.view(np.uint32), ref_aux_fi(idx, n, aux).view(np.uint32))
    np.testing.assert_allclose(f, c * n / (T_ * aux), rtol=2e-7)


@settings(max_examples=8)
@given(T_=st.integers(1, 150), k=st.integers(1, 10), n=st.integers(1, 6), block_T=st.sampled_from([8, 64]),
       seed=st.integers(0, 99))
def test_unique_group_indices(T_, k, n, block_T, seed):
    rng = np.random.default_rng(seed)
    idx = rng.integers(-1, n, (T_, k)).astype(np.int32)
    out = unique_group_indices(T_, k, block_T=block_T)(idx)
    np.testing.assert_array_equal(out, ref_unique_group_indices(idx))
    for r_in, r_out in zip(idx.tolist(), out.tolist()):
        kept = [v for v in r_out if v >= 0]
        assert len(kept) == len(set(kept)) and set(kept) == {v for v in r_in if v >= 0}


def test_serial_equals_batched():
    rng = np.random.default_rng(1)
    sc = (rng.integers(-4, 5, (19, 6, 5)) / 4).astype(np.float32)
    idx = rng.integers(-1, 7, (19, 5)).astype(np.int32)
    for k, x in ((topk_group_idx(19, 6, 5, 3, block_T=8), sc), (group_count(19, 5, 7, block_T=8), idx),
                 (aux_fi(19, 5, 7, 2, block_T=8), idx), (unique_group_indices(19, 5, block_T=8), idx)):
        np.testing.assert_array_equal(k(x), k.run(x, options=tilesim.InterpOptions(mode="serial")))
