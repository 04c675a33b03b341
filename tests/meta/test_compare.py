"""The comparison helper has tests of its own: it must fail when it should, and say why."""

import numpy as np
import pytest

from tilesim.testing import assert_matches_reference, compare_arrays


def test_identical_arrays_pass():
    a = np.random.default_rng(0).standard_normal((4, 5)).astype(np.float32)
    assert compare_arrays(a, a.astype(np.float64)) is None


def test_nan_where_reference_is_finite_fails_as_unwritten():
    a = np.ones(4, np.float32)
    a[2] = np.nan
    msg = compare_arrays(a, np.ones(4))
    assert msg and "unwritten" in msg


def test_tolerance_depends_on_dtype():
    ref = np.full(3, 1.0)
    assert compare_arrays(np.full(3, 1.001, np.float16), ref) is None  # within fp16 tolerance
    assert compare_arrays(np.full(3, 1.001, np.float32), ref) is not None  # not within fp32's


def test_exact_mode_and_integers():
    assert compare_arrays(np.array([1, 2], np.int32), np.array([1, 3])) is not None
    assert compare_arrays(np.array([1.0, 2.0], np.float32), np.array([1.0, 2.0 + 1e-7]), exact=True) is not None


def test_shape_mismatch_is_reported():
    assert "shape" in compare_arrays(np.zeros(3, np.float32), np.zeros(4))


def test_assert_matches_reference_attaches_repro():
    def kernel(x):
        return x + 1

    with pytest.raises(AssertionError) as info:
        assert_matches_reference(kernel, (np.zeros(3, np.float32),), lambda x: x + 2, name="plus_one",
                                 repro="kernel(np.zeros(3))")
    text = str(info.value)
    assert "plus_one does not match" in text and "arg0: shape=(3,) dtype=float32" in text
    assert "reproduce with:\nkernel(np.zeros(3))" in text
