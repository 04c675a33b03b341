"""The simulator's TileLang lowering rules against facts read from TileLang 0.1.15's generated CUDA.

``tests/sim/data/tilelang_0115_source_facts.json`` (``benchmarks/tilelang_source_facts.py``) holds, per configuration of
the sealed sets whose sources came back from the H200, whether TileLang warp-specialised the kernel and its
``AllReduce`` instantiations. The rules under test are profile options (docs/simulator.md §3j).
"""

import dataclasses
import importlib.util
import json
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FACTS = json.loads((ROOT / "tests" / "sim" / "data" / "tilelang_0115_source_facts.json").read_text())["configs"]
LOWERING = {"guarded_copies_sync": True, "parallel_copies_sync": True}


def _bench(name):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", ROOT / "benchmarks" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def built():
    v = _bench("tilelang_h200_validation")
    th, _ = v._helpers()
    cfgs = {c["id"]: c for s in ("fresh", "third", "fourth", "fifth") for c in v.config_set(s)}
    return {i: v.build(cfgs[i], "tilesim", th)[:2] for i in FACTS}


def _warp_specialised(kern, hints, profile):
    import hwmodels
    from tilesim.analysis import analyze
    progs = analyze(kern.prim_func, hwmodels.load("h200_sxm_141gb"), profile, **hints)
    return any(p.has_async_copies and p.warp_specialized for p in progs)


def test_facts_table_covers_the_latency_bound_kinds():
    assert len(FACTS) >= 55
    assert {"p_paged_decode_gqa4_b16_8k_split2_n32_s2", "p_dsa_indexer_1kx8k_bm2_n128",
            "p_dsa_indexer_decode2_16k_bm2_n64", "p_mla_decode_b4_h128_64k_split16"} <= set(FACTS)
    assert not any(f["cp_async"] for f in FACTS.values())  # TileLang 0.1.15 made no T.Parallel copy a cp.async


def test_warp_specialisation_matches_every_source(built):
    """Only unconditional ``T.copy``s in pipelined loops become TMA loads with a producer warpgroup."""
    from tilesim.analysis import get_profile
    prof = dataclasses.replace(get_profile("tensorcore"), **LOWERING)
    wrong = [i for i, (k, h) in built.items() if _warp_specialised(k, h, prof) != FACTS[i]["warp_specialised"]]
    assert wrong == []


def test_without_the_rules_gathers_and_guarded_copies_are_taken_for_tma(built):
    from tilesim.analysis import get_profile
    prof = dataclasses.replace(get_profile("tensorcore"), guarded_copies_sync=False, parallel_copies_sync=False)
    wrong = {i for i, (k, h) in built.items() if _warp_specialised(k, h, prof) != FACTS[i]["warp_specialised"]}
    assert {"p_paged_decode_gqa4_b16_8k_split2_n32_s2", "p_dsa_indexer_1kx8k_bm2_n128",
            "t_dsa_indexer_8k_bm2_n64", "p_dsa_sparse_prefill_256_bh32_bk64"} <= wrong
    assert "p_dsa_indexer_decode2_16k_bm2_n64" not in wrong  # one query block: the causal if always holds


def _source_rules():
    """``tensorcore`` with the rules read from the generated sources on (the sixth set's variant predictions)."""
    from tilesim.analysis import get_profile
    return dataclasses.replace(get_profile("tensorcore"), **LOWERING, gather_index_latency=True,
                               replicated_owner_loops=True, chain_latency=True)


def test_the_rules_are_on_in_tensorcore_since_the_sixth_set():
    """On in ``tensorcore`` since the sixth sealed set decided (docs/simulator.md §3k; profiles.py says why)."""
    from tilesim.analysis import get_profile
    p = get_profile("tensorcore")
    assert all(getattr(p, k) for k in LOWERING)
    assert p.gather_index_latency and p.replicated_owner_loops and p.chain_latency
    assert p == _source_rules()


def test_a_gather_after_a_replicated_index_fragment_runs_on_its_owner_threads(built):
    """The DSA sparse prefill's KV gather: 16 of 256 threads in the generated source (4 lanes x 4 column warps of
    the score accumulator under FullRow: ``if (((tid & 31) >> 2) * 2 + ((tid & 63) >> 5) == 0)``)."""
    prof = _source_rules()
    ops = _ops(*built["p_dsa_sparse_prefill_256_bh32_bk64"], prof)
    kv = [o for o in ops if o.kind == "load" and {g.buffer.name for g in o.gaccess} == {"KV"}]
    assert len(kv) == 2 and all(o.label.endswith("[16 threads]") for o in kv)
    # 64 x 512 bf16 = 64 KiB over 16 threads, 256 bytes in flight each: 16 rounds; the 64 x 64 rope part: 2
    assert sorted(o.load_rounds for o in kv) == [2.0, 16.0]
    off = _ops(*built["p_dsa_sparse_prefill_256_bh32_bk64"], dataclasses.replace(prof, replicated_owner_loops=False))
    assert all(o.load_rounds == 1.0 for o in off)
    # no other configuration with a source has such a loop (its generated code has no owner guard in the hot loop)
    for i in ("p_paged_decode_gqa4_b16_8k_split2_n32_s2", "p_mla_decode_b4_h128_64k_split16", "p_dsa_indexer_1kx8k_bm2_n128"):
        assert all(o.load_rounds == 1.0 for o in _ops(*built[i], prof))


def _ops(kern, hints, profile):
    import hwmodels
    from tilesim.analysis import analyze, walk_ops
    return [o for p in analyze(kern.prim_func, hwmodels.load("h200_sxm_141gb"), profile, **hints)
            for o in walk_ops(p.body)]


def test_a_block_table_gather_waits_its_index_load(built):
    from tilesim.analysis import get_profile
    prof = dataclasses.replace(get_profile("tensorcore"), gather_index_latency=True, **LOWERING)
    ops = _ops(*built["p_paged_decode_gqa4_b16_8k_split2_n32_s2"], prof)
    kv = [o for o in ops if o.kind == "load" and o.gaccess and {g.buffer.name for g in o.gaccess} >= {"K_cache"}]
    assert kv and all(o.gather for o in kv)
    plain = _ops(*built["p_gelu_8kx8k_bm16_n256_t128"], prof)
    assert not any(o.gather for o in plain)
    off = _ops(*built["p_paged_decode_gqa4_b16_8k_split2_n32_s2"], dataclasses.replace(prof, gather_index_latency=False))
    assert not any(o.gather for o in off)


def test_gathered_load_latency_adds_the_l2_latency():
    import hwmodels
    from tilesim.analysis import get_profile
    from tilesim.analysis.program import Op
    from tilesim.sim.engine import BlockModel
    from tilesim.sim.machine import Machine
    m = Machine(hwmodels.load("h200_sxm_141gb"), dataclasses.replace(get_profile("tensorcore"), **LOWERING))
    bm = BlockModel(m, l2_share=1e12, dram_share=1e12, threads=128)

    def op(gather):
        o = Op(kind="load", label="x", node="Parallel", loc=None, side="vector", reads=frozenset(), writes=frozenset())
        o.work["global"] = 1024.0
        o.latency = "global"
        o.gather = gather
        return o
    gathered, plain = op(True), op(False)  # both alive: the model caches parts by object id
    assert bm.parts(gathered)[0] - bm.parts(plain)[0] == pytest.approx(m.l2_lat_s)


@pytest.mark.parametrize("outputs,P,steps,smem", [(2, 128, 7, 2), (32, 16, 4, 2), (8, 4, 2, 0)])
def test_butterfly_issue_counts_every_participating_thread(outputs, P, steps, smem):
    from tilesim.analysis import get_profile
    from tilesim.analysis.tile_rules import _butterfly_slots
    on = types.SimpleNamespace(profile=dataclasses.replace(get_profile("tensorcore"), reduce_issue_all_threads=True))
    off = types.SimpleNamespace(profile=get_profile("tensorcore"))
    assert _butterfly_slots(on, outputs, P, steps, smem) == outputs * P * (2 * steps + smem)
    assert _butterfly_slots(off, outputs, P, steps, smem) == outputs * 2 * steps
