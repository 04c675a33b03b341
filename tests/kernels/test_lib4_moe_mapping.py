"""The fused-layout kernel (kernels/moe_mapping.py): bitwise against the NumPy mapping, and the layout
invariants TileKernels' own test checks (each pair once, inside its expert's padded range, both maps
consistent, padding rows -1), on ragged routings with unused slots and experts without pairs."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilesim
from kernels.moe_dispatch import routed_topk
from kernels.moe_mapping import get_fused_mapping, ref_get_fused_mapping


def check_invariants(idx, E, align, outs):
    p2e, p2t, p2tt, t2p, start, end, size = (np.asarray(o) for o in outs)
    k = idx.shape[1]
    counts = np.bincount(idx[idx >= 0], minlength=E)
    assert np.array_equal(size, -(-counts // align) * align) and np.array_equal(end - start, size)
    assert start[0] == 0 and np.array_equal(start[1:], end[:-1]) and end[-1] <= p2e.shape[0]
    for e in range(E):
        seg = p2e[start[e]:end[e]]
        assert ((seg == e) | (seg == -1)).all() and (seg == e).sum() == counts[e]
    valid = p2e >= 0
    assert np.array_equal(valid, p2t >= 0) and np.array_equal(valid, p2tt >= 0)
    assert valid[end[-1]:].sum() == 0
    t, s = p2tt[valid] // k, p2tt[valid] % k
    assert np.array_equal(t2p[t, s], np.nonzero(valid)[0])
    assert np.array_equal(idx[t, s], p2e[valid]) and np.array_equal(t, p2t[valid])
    assert np.array_equal(t2p < 0, idx < 0)


@settings(max_examples=8)
@given(T_=st.integers(1, 60), E=st.integers(1, 40), data=st.data(), align=st.sampled_from([1, 4, 16, 128]),
       chunk=st.sampled_from([8, 32, 256]), drop=st.sampled_from([0.0, 0.3, 1.0]), seed=st.integers(0, 99))
def test_fused_mapping(T_, E, data, align, chunk, drop, seed):
    k = data.draw(st.integers(1, E))
    idx = routed_topk(np.random.default_rng(seed), T_, E, k, drop=drop)
    outs = get_fused_mapping(T_, k, E, align, chunk=chunk)(idx)
    for o, r in zip(outs, ref_get_fused_mapping(idx, E, align), strict=True):
        assert np.array_equal(o, r)
    check_invariants(idx, E, align, outs)


def test_skewed_routing_and_larger_buffer():
    idx = np.zeros((50, 4), np.int32)  # every token: expert 0 in slot 0, then 1, 2, 3; 10 rows unused
    idx[:] = [0, 1, 2, 3]
    idx[::5, 2] = -1
    outs = get_fused_mapping(50, 4, 6, 16, num_pos=400, chunk=32)(idx)
    assert outs[0].shape == (400,)
    check_invariants(idx, 6, 16, outs)
    assert outs[6].tolist() == [64, 64, 48, 64, 0, 0]


def test_invalid():
    with pytest.raises(ValueError, match="below"):
        get_fused_mapping(10, 2, 4, 8, num_pos=8)
    with pytest.raises(ValueError, match="alignment"):
        get_fused_mapping(10, 2, 4, 0)


def test_serial_equals_batched():
    idx = routed_topk(np.random.default_rng(4), 23, 9, 3, drop=0.2)
    kern = get_fused_mapping(23, 3, 9, 4, chunk=16)
    for a, b in zip(kern(idx), kern.run(idx, options=tilesim.InterpOptions(mode="serial")), strict=True):
        assert np.array_equal(a, b)
