"""Kernel library II through the registry: every spec's test shapes against its reference, batched and
serial runs equal, and the report shapes the seeds talk about (8K/32K/128K, DeepSeek-V3.2, Llama GQA)."""

import numpy as np
import pytest

import tilesim
from kernels import registry
from tilesim.ir.verify import verify
from tilesim.testing import assert_matches_reference, compare_arrays

SERIAL = tilesim.InterpOptions(mode="serial")
LIB2 = ("flash_attention_fwd", "flash_attention_bwd", "paged_decode", "dsa_indexer", "dsa_topk",
        "dsa_sparse_attention", "mla_decode")
CASES = [(n, s) for n in LIB2 for s in registry.get(n).test_shapes]


def _as_list(x):
    return list(x) if isinstance(x, (list, tuple)) else [x]


@pytest.mark.parametrize("name,shape", CASES, ids=[f"{n}-{s['label']}" for n, s in CASES])
def test_test_shapes_match_reference_in_both_modes(name, shape):
    spec = registry.get(name)
    p = spec.params(shape)
    k = spec.build(**p)
    assert verify(k.prim_func) == []
    inputs = spec.make_inputs(np.random.default_rng(7), **p)

    def ref(*a):
        return spec.reference(*a, **p)

    if spec.compare is not None:
        outs = _as_list(k(*inputs))
        spec.compare(outs, _as_list(ref(*inputs)), p)  # the runner passes params positionally
    else:
        tol = dict(spec.tolerance)
        outs = assert_matches_reference(k, inputs, ref, name=name, **tol)
    serial = _as_list(k.run(*inputs, options=SERIAL))
    for o, s in zip(outs, serial):
        problem = compare_arrays(s, o, rtol=1e-6, atol=1e-6, name="serial vs batched")
        assert problem is None, problem


def test_test_shapes_are_not_tile_divisible():
    for name in LIB2:
        spec = registry.get(name)
        sizes = []
        for s in spec.test_shapes:
            sizes += [v for k, v in s.items() if k in ("seq_q", "seq_kv", "max_len", "topk") and isinstance(v, int)]
        assert any(v % 16 for v in sizes), name


def _labels(name):
    return " ".join(s["label"] for s in registry.get(name).shapes)


@pytest.mark.parametrize("name", LIB2)
def test_report_shapes_cover_the_seed_contexts(name):
    spec = registry.get(name)
    assert spec.shapes and all("label" in s for s in spec.shapes)
    labels = _labels(name)
    for ctx in ("8K", "32K", "128K"):
        assert ctx in labels, (name, ctx)
    for s in spec.shapes:  # cost functions are pure Python and must cover the big shapes
        p = spec.params(s)
        assert spec.flops(**p) > 0 and spec.bytes(**p) > 0


def test_report_shapes_use_the_model_dims():
    for name in ("dsa_indexer",):
        assert all(s["index_heads"] == 64 and s["index_dim"] == 128 for s in registry.get(name).shapes)
    assert all(s["topk"] == 2048 for s in registry.get("dsa_topk").shapes)
    assert all(s["heads"] == 128 and s["topk"] == 2048 for s in registry.get("dsa_sparse_attention").shapes)
    mla = registry.get("mla_decode")
    assert all(mla.params(s)["dim"] == 512 and mla.params(s)["pe_dim"] == 64 and s["heads"] == 128
               for s in mla.shapes)
    for name in ("flash_attention_fwd", "paged_decode"):
        assert any(s["heads"] == 32 and s["groups"] == 4 and s["dim"] == 128 for s in registry.get(name).shapes)
    ctx = {s["seq_kv"] for s in registry.get("dsa_sparse_attention").shapes}
    assert {8192, 32768, 131072} <= ctx
