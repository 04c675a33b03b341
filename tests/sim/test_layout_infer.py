"""TileLang's free-mode fragment layout inference (``tilesim.analysis.layout_infer``) against the generated sources.

The slot counts are the register arrays TileLang 0.1.15 declared in the routers' generated CUDA
(``reports/measurements/tilelang_h200_sixth_sources_20261202T1506Z.tgz``, ``..._fifth_rest_sources_...``): e.g.
``s6_moe_route_12k_bt8_t128`` has ``float s[16]; float bias[2]; ... float row_max[8]; ... float m1[16];`` and
``tl::AllReduce<Max, 32, 1>`` for the group maxima, ``<128, 32>`` across the 4 group warps, ``<128, 1>`` per row.
"""

import pytest

import kernels.moe as moe
from tilesim.analysis.layout_infer import infer_layouts
from tilesim.ir import nodes as N
from tilesim.ir.traverse import walk_stmts


def _layouts(**params):
    k = moe.moe_route(**params)
    launch = next(s for s in walk_stmts(list(k.prim_func.body)) if isinstance(s, N.Launch))
    names = {s.buffer.uid: s.buffer.name for s in walk_stmts(list(launch.body)) if isinstance(s, N.Alloc)}
    lay = infer_layouts(launch, params["threads"])
    assert lay is not None
    red = {}
    for s in walk_stmts(list(launch.body)):
        if isinstance(s, N.Reduce) and id(s) in lay.reduce:
            red.setdefault((s.src.buffer.name, s.dst.buffer.name), lay.reduce[id(s)])
    return {names[u]: n for u, n in lay.slots.items()}, red


# every register array of four sigmoid routers' sources (s6_moe_route_12k_bt8_t128, p_moe_route_8k_bt4_t64,
# s6_moe_route_2k_bt2_t64, s7_moe_route_4k_bt4_t256)
SIGMOID = [
    (dict(num_tokens=12288, block_T=8, threads=128),
     dict(s=16, bias=2, b=16, bg=16, m1=16, gcand=16, gfirst=16, m2=16, gscore=16, gkeep=16, row_max=8, first=8,
          gcand2=16, row_sum=8, cand=16, w=64)),
    (dict(num_tokens=8192, block_T=4, threads=64),
     dict(s=16, bias=4, b=16, bg=16, m1=4, gcand=16, gfirst=4, m2=4, gscore=4, gkeep=4, row_max=4, first=4,
          gcand2=4, row_sum=4, cand=16, w=32)),
    (dict(num_tokens=2048, block_T=2, threads=64),
     dict(s=8, bias=4, b=8, bg=8, m1=2, gcand=8, gfirst=2, m2=2, gscore=2, gkeep=2, row_max=2, first=2,
          gcand2=2, row_sum=2, cand=8, w=16)),
    (dict(num_tokens=4096, block_T=4, threads=256),
     dict(s=4, bias=1, b=4, bg=4, m1=4, gcand=4, gfirst=4, m2=4, gscore=4, gkeep=4, row_max=4, first=4,
          gcand2=4, row_sum=4, cand=4, w=32)),
]


@pytest.mark.parametrize("params,source", SIGMOID)
def test_sigmoid_router_slots_match_the_generated_source(params, source):
    slots, _ = _layouts(**params)
    assert {k: slots[k] for k in source} == source


def test_router_allreduce_shapes_match_the_source():
    _, red = _layouts(num_tokens=12288, block_T=8, threads=128)
    assert red[("bg", "m1")] == (32, 1, 16)          # AllReduce<Max, 32, 1>, 16 calls (m1[16])
    assert red[("gscore", "row_max")] == (4, 32, 8)  # AllReduce<Max, 128, 32>: 4 participants, stride 32
    assert red[("b", "row_max")] == (128, 1, 8)      # AllReduce<Max, 128, 1>, once per row (row_max[8])


def test_a_memory_loop_reading_an_all_thread_fragment_runs_on_every_thread():
    # w[i, k] = w_shared[i, k] / max(row_sum[i], ...): row_sum is held by all 128 threads, so is w (8 x 8): w[64]
    slots, _ = _layouts(num_tokens=12288, block_T=8, threads=128)
    assert slots["w"] == 64 and slots["row_sum"] == 8


@pytest.mark.xfail(strict=True, reason="known gap: a cheaper attempt (whole 32-expert groups per thread) wins here; "
                                       "TileLang's source holds whole 256-expert rows per thread (s[256], b[256])")
def test_softmax_router_whole_rows_per_thread():
    slots, _ = _layouts(num_tokens=4096, block_T=16, threads=256, scoring="softmax")
    assert (slots["s"], slots["b"], slots["cand"], slots["bg"], slots["row_max"]) == (256, 256, 256, 32, 1)


def test_gemm_launch_is_not_laid_out():
    from kernels.registry import get
    spec = get("gemm")
    k = spec.build(**spec.params(spec.test_shapes[0]))
    launch = next(s for s in walk_stmts(list(k.prim_func.body)) if isinstance(s, N.Launch))
    assert infer_layouts(launch, int(launch.num_threads)) is None  # MMA layouts: the analysis's own rules
