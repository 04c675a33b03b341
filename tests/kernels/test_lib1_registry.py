"""Registry entries of kernel library I: every test shape matches its reference with the spec's own
tolerance (or ``compare``), serial and batched interpretation agree, and the metadata keeps the contract
of ``kernels/registry.py`` (labelled LLM shapes, tunables that contain the defaults, positive costs)."""

import numpy as np
import pytest

import tilesim
from kernels import registry
from tilesim.testing.compare import compare_arrays

FAMILIES = ("gemm", "fp8_gemm", "norms", "fp8_cast", "swiglu", "transpose", "moe", "sinkhorn", "mhc", "mhc_bwd", "engram")
SPECS = [s for s in registry.all_specs() if s.family in FAMILIES]
CASES = [(s, ts) for s in SPECS for ts in s.test_shapes]


def _list(x):
    return list(x) if isinstance(x, (list, tuple)) else [x]


def _bits(a):
    a = np.ascontiguousarray(a)
    return a.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize])


def test_library_is_registered():
    names = {s.name for s in SPECS}
    assert names >= {"gemm", "gemm_nt", "gemm_epilogue", "gemm_splitk", "fp8_gemm", "layernorm", "rmsnorm", "gelu",
                     "layernorm_gelu", "layernorm_gelu_unfused", "softmax", "fp8_cast_per_token",
                     "fp8_cast_per_block", "fp8_dequant_per_token", "fp8_dequant_per_block", "swiglu_fp8",
                     "batched_transpose", "moe_topk_route", "sinkhorn"}


@pytest.mark.parametrize("spec,shape", CASES, ids=[f"{s.name}-{ts['label']}" for s, ts in CASES])
def test_test_shapes_match_reference(spec, shape):
    p = spec.params(shape)
    kernel = spec.build(**p)
    inputs = spec.make_inputs(np.random.default_rng(0), **p)
    outs = _list(kernel(*inputs))
    refs = _list(spec.reference(*inputs, **p))
    if spec.compare is not None:
        spec.compare(outs, refs, p)  # the calling convention of tilesim.runner
    else:
        tol = spec.tolerance
        for i, (o, r) in enumerate(zip(outs, refs, strict=True)):
            msg = compare_arrays(o, r, exact=tol.get("exact", False), rtol=tol.get("rtol"), atol=tol.get("atol"),
                                 name=f"output {i}")
            assert msg is None, msg
            if tol.get("exact"):
                assert np.array_equal(_bits(o), _bits(np.asarray(r).astype(o.dtype))), f"output {i} not bitwise"


@pytest.mark.parametrize("spec", SPECS, ids=[s.name for s in SPECS])
def test_serial_equals_batched(spec):
    p = spec.params(spec.test_shapes[0])
    kernel = spec.build(**p)
    inputs = spec.make_inputs(np.random.default_rng(1), **p)
    a = _list(kernel(*inputs))
    b = _list(kernel.run(*inputs, options=tilesim.InterpOptions(mode="serial")))
    for u, v in zip(a, b, strict=True):
        assert np.array_equal(_bits(u), _bits(v))


@pytest.mark.parametrize("spec", SPECS, ids=[s.name for s in SPECS])
def test_metadata(spec):
    assert spec.description and spec.shapes and spec.test_shapes
    for shape in spec.shapes + spec.test_shapes:
        assert shape.get("label"), shape
        p = spec.params(shape)
        assert spec.flops(**p) >= 0 and spec.bytes(**p) > 0
    for shape in spec.shapes:
        assert isinstance(spec.bytes(**spec.params(shape)), int)
    for name, values in spec.tunables.items():
        assert name in spec.defaults and spec.defaults[name] in values, name
    for shape in spec.test_shapes:  # inputs are fresh random data, never all zeros
        ins = spec.make_inputs(np.random.default_rng(2), **spec.params(shape))
        assert any(np.any(np.asarray(x).astype(np.float32) != 0) for x in ins)
