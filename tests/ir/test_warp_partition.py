"""tilesim.warp_partition against TileLang's rules (src/cuda/op/gemm.cc, ComputeDefaultWarpPartition and
ComputeWgmmaWarpPartition): the pair each policy picks, None exactly when no split is valid, and the lint's
gemm-warp-partition finding exactly when there is none."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilesim.language as T
from tests.ir.test_lint_tilelang import gemm
from tilesim.lint import lint
from tilesim.warp_partition import POLICIES, warp_partition


def _valid(M, N, warps, wgmma):
    g = 4 if wgmma else 1
    return [(m, warps // m) for m in range(1, warps + 1) if warps % m == 0 and m % g == 0
            and M % (16 * m) == 0 and N % (8 * (warps // m)) == 0]


@pytest.mark.parametrize("M,N,warps,wgmma,policy,want", [
    (16, 16, 4, False, "FullCol", None),        # the H200 refusal of paged_decode's small shapes (2026-12-02)
    (16, 16, 8, False, "Square", None),         # mla_decode b2-h20-bh16 with 256 threads
    (16, 16, 2, False, "FullCol", (1, 2)),
    (16, 32, 4, False, "FullCol", (1, 4)),
    (64, 64, 4, False, "FullRow", (4, 1)),
    (64, 64, 4, False, "FullCol", (1, 4)),
    (64, 64, 4, False, "Square", (2, 2)),       # per-warp 2 x 2 tiles: aspect 1 = M / N
    (128, 32, 4, False, "Square", (2, 2)),      # per-warp 4 x 2 tiles: |2 - 4| beats (1, 4)'s 4, (4, 1)'s 3.5
    (64, 64, 4, True, "FullCol", (4, 1)),       # a warp group along M
    (128, 128, 8, True, "FullCol", (4, 2)),     # FullCol takes n_warp <= warps / 4
    (128, 128, 8, True, "FullRow", (8, 1)),
    (80, 64, 4, True, "Square", None),          # WGMMA: 80 rows cannot take 4 warps of 16
    (80, 64, 4, False, "Square", (1, 4)),
    (64, 64, 6, True, "Square", None),          # "Warp-Group MMA requires 128*k threads."
])
def test_known_picks(M, N, warps, wgmma, policy, want):
    assert warp_partition(M, N, warps, policy, wgmma) == want
    assert warp_partition(M, N, warps, getattr(T.GemmWarpPolicy, policy), wgmma) == want


def test_bad_arguments():
    with pytest.raises(ValueError, match="unknown GemmWarpPolicy"):
        warp_partition(16, 16, 1, "Diagonal")
    with pytest.raises(ValueError, match="at least one warp"):
        warp_partition(16, 16, 0)


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 16).map(lambda x: 16 * x), st.integers(1, 32).map(lambda x: 8 * x),
       st.sampled_from([1, 2, 3, 4, 6, 8, 12, 16]), st.booleans())
def test_every_policy_picks_from_the_valid_splits(M, N, warps, wgmma):
    valid = _valid(M, N, warps, wgmma) if not (wgmma and warps % 4) else []
    got = {p: warp_partition(M, N, warps, p, wgmma) for p in POLICIES}
    if not valid:
        assert set(got.values()) == {None}
        return
    assert all(g in valid for g in got.values())
    assert got["FullRow"] == max(valid)
    assert got["FullCol"] == min(valid)  # the most warps along N
    ideal = np.float32(M) / np.float32(N)

    def score(mn):
        m, n = mn
        return np.float32(abs(np.float32(M) / np.float32(16 * m) / (np.float32(N) / np.float32(8 * n)) - ideal))
    best = min(score(v) for v in valid)
    assert got["Square"] == min(v for v in valid if score(v) == best)


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 4).map(lambda x: 16 * x), st.integers(1, 8).map(lambda x: 8 * x),
       st.sampled_from([32, 64, 128, 256]))
def test_lint_flags_exactly_the_tiles_without_a_split(M, N, threads):
    wgmma = M >= 64 and (threads // 32) % 4 == 0  # fp16 x fp16 -> fp32 from shared memory, K = 32
    found = {f.rule for f in lint(gemm(M=M, N=N, K=32, threads=threads).prim_func)}
    assert ("gemm-warp-partition" in found) == (warp_partition(M, N, threads // 32, "Square", wgmma) is None)
