"""kernels.tiling: the padded gemm tiles and thread counts the decode/DSA kernels use so that real TileLang
compiles them at every shape, and the full-size kernels keeping their launch as it was."""

import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernels import registry
from kernels.tiling import fit_threads, gemm_rows, mma_k, pow2_at_least, round_up
from tilesim.warp_partition import warp_partition


def test_sizes():
    assert [gemm_rows(r) for r in (1, 5, 16, 17, 64)] == [16, 16, 16, 32, 64]
    assert (mma_k("bfloat16"), mma_k("float16"), mma_k("float8_e4m3fn"), mma_k("float32")) == (16, 16, 32, 8)
    assert (round_up(8, 16), round_up(16, 16), round_up(0, 16)) == (16, 16, 0)
    assert [pow2_at_least(n) for n in (1, 2, 3, 5, 8, 9, 64)] == [1, 2, 4, 8, 8, 16, 64]


@pytest.mark.parametrize("threads,gemms,want", [
    (128, [(16, 32), (16, 16)], 64),      # paged_decode at dim 16: a 16 x 16 tile takes at most 2 warps
    (128, [(16, 32), (16, 128)], 128),    # paged_decode at its report shapes: unchanged
    (256, [(16, 64), (16, 16)], 64),      # mla_decode b2-h20-bh16
    (256, [(64, 64), (64, 512)], 256),    # mla_decode / sparse MLA at 128 heads: WGMMA, 4 x 2 warps
    (256, [(80, 64)], 64),                # 80 rows: 8 warps have no WGMMA split, 4 neither; 2 warps (mma) do
    (128, [(16, 20)], 128),               # N % 8 != 0: no thread count helps, left to the lint
    (96, [(16, 8)], 32),
])
def test_fit_threads(threads, gemms, want):
    assert fit_threads(threads, gemms) == want


def test_fit_threads_needs_whole_warps():
    with pytest.raises(ValueError, match="multiple of 32"):
        fit_threads(100, [(16, 16)])


def _splits(m, n, warps):
    ok = warp_partition(m, n, warps) is not None
    return ok and not (m >= 64 and warps % 4 == 0 and warp_partition(m, n, warps, wgmma=True) is None)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from([32, 64, 128, 256, 512]),
       st.lists(st.tuples(st.integers(1, 8).map(lambda x: 16 * x), st.integers(1, 16).map(lambda x: 8 * x)),
                min_size=1, max_size=3))
def test_fit_threads_is_the_largest_halving_that_splits_every_tile(threads, gemms):
    t = fit_threads(threads, gemms)
    assert 32 <= t <= threads and threads % t == 0
    assert all(_splits(m, n, t // 32) for m, n in gemms)
    bigger = threads
    while bigger > t:
        assert not all(_splits(m, n, bigger // 32) for m, n in gemms)
        bigger //= 2


#: the first launch's thread count each padded kernel asks for (the factory default)
DEFAULT_THREADS = {"paged_decode": 128, "mla_decode": 256, "dsa_sparse_attention": 256, "dsa_indexer": 128}


def _threads(name, shape):
    spec = registry.get(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return spec.build(**spec.params(shape)).prim_func.launches[0].num_threads


@pytest.mark.parametrize("name", sorted(DEFAULT_THREADS))
def test_report_shapes_keep_their_launch(name):
    for shape in registry.get(name).shapes:
        assert _threads(name, shape) == DEFAULT_THREADS[name], shape["label"]


def test_small_test_shapes_take_fewer_threads():
    shapes = {s["label"]: s for s in registry.get("mla_decode").test_shapes}
    assert _threads("mla_decode", shapes["b2-h20-bh16"]) == 64  # 16 x 16 output tile: 2 warps
    shapes = {s["label"]: s for s in registry.get("paged_decode").test_shapes}
    assert _threads("paged_decode", shapes["mha-b3"]) == 64
