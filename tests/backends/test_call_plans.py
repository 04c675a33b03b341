"""The CUDA target's per-signature call plans (``tilesim/backends/cuda/plans.py``).

Under numba's CUDA simulator (one subprocess: ``NUMBA_ENABLE_CUDASIM`` must be set before ``numba.cuda`` is
imported): repeated calls hit the plan and give the interpreter's values, a changed shape, dtype, stride or
scalar misses it, every error of the full path is still raised, workspaces of multi-launch programs, shapes
the tiles do not divide, and ``TILESIM_CUDA_CALL_PLANS=0`` bypasses the plans. In this process (no GPU): the
key, and the GPU launcher's argument lists checked against numba-cuda's own ``_Kernel._prepare_args``.
"""

import json
import os
import subprocess
import sys
import textwrap
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilesim
import tilesim.language as T
from tilesim.backends.cuda import plans as P
from tilesim.backends.cuda.caps import cuda_module, numba_types
from tilesim.optional import require

from ._util import ROOT, have_numba_cuda

needs_numba = pytest.mark.skipif(not have_numba_cuda(), reason="numba-cuda is not installed")


@tilesim.jit(out_idx=[-1])
def scaled(bm=16, bn=8):
    """``B = A * s + n`` through a global workspace: two launches, a float and an int scalar."""
    M = T.dynamic("m")

    @T.prim_func
    def main(A: T.Tensor((M, 8), "float32"), s: T.float32, n: T.int32, B: T.Tensor((M, 8), "float32")):
        W = T.alloc_global((M, 8), "float32")
        with T.Kernel(T.ceildiv(M, bm), threads=32) as bx:
            for i, j in T.Parallel(bm, bn):
                if bx * bm + i < M:
                    W[bx * bm + i, j] = A[bx * bm + i, j] * s
        with T.Kernel(T.ceildiv(M, bm), threads=32) as bx:
            for i, j in T.Parallel(bm, bn):
                if bx * bm + i < M:
                    B[bx * bm + i, j] = W[bx * bm + i, j] + T.cast(n, "float32")
    return main


SCRIPT = textwrap.dedent("""
    import json, os, sys
    sys.path.append("tests")
    import numpy as np
    import tilesim
    import tilesim.language as T
    import core_kernels as ck
    from tests.backends.test_call_plans import scaled
    from tilesim.backends.cuda.caps import cuda_module

    cuda = cuda_module()
    out = {}

    def err(fn, *args, **kw):
        try:
            fn(*args, **kw)
        except tilesim.KernelRuntimeError as e:
            return e.message
        return "no error"

    def stats(kc):
        return dict(kc.program.plans.stats)

    rng = np.random.default_rng(0)
    k = ck.matmul_dynamic(block_M=16, block_N=16, block_K=8, threads=32)
    kc = tilesim.compile(k.prim_func, out_idx=k.out_idx, target="cuda")
    a = rng.standard_normal((20, 13)).astype(np.float16)
    b = rng.standard_normal((13, 18)).astype(np.float16)
    ref = k(a, b)
    da, db = cuda.to_device(a), cuda.to_device(b)
    diffs, outs = [], []
    for _ in range(3):
        c = kc(da, db)
        outs.append(c)
        diffs.append(float(np.abs(c.copy_to_host() - ref).max()))
    out["hit_diffs"] = diffs
    out["fresh_outputs"] = len({id(c) for c in outs})
    out["hit_stats"] = stats(kc)
    # new inputs (other pointers), same signature: a hit, the new values
    a2 = rng.standard_normal((20, 13)).astype(np.float16)
    out["new_values_diff"] = float(np.abs(kc(cuda.to_device(a2), db).copy_to_host() - k(a2, b)).max())
    # another shape: a miss, then its own plan
    a3 = rng.standard_normal((37, 13)).astype(np.float16)
    out["shape_diffs"] = [float(np.abs(kc(cuda.to_device(a3), db).copy_to_host() - k(a3, b)).max()) for _ in range(2)]
    out["shape_stats"] = stats(kc)
    # errors after the plan exists: the full path's messages, no plan stored for them
    bad_b = np.zeros((12, 18), np.float16)
    out["conflict"] = [err(k, a, bad_b), err(kc, da, cuda.to_device(bad_b))]
    out["dtype"] = [err(k, a.astype(np.float32), b), err(kc, cuda.to_device(a.astype(np.float32)), db)]
    out["rank"] = [err(k, a[..., None], b), err(kc, cuda.to_device(a[..., None]), db)]
    wide = cuda.to_device(np.zeros((20, 26), np.float16))
    out["stride"] = err(kc, wide[:, ::2], db)
    out["count"] = [err(k, a), err(kc, da)]
    out["error_stats"] = stats(kc)
    out["after_errors_diff"] = float(np.abs(kc(da, db).copy_to_host() - ref).max())

    # scalars, a workspace, two launches, M not a multiple of the tile
    sk = scaled()
    sc = tilesim.compile(sk.prim_func, out_idx=sk.out_idx, target="cuda")
    x = rng.standard_normal((50, 8)).astype(np.float32)
    dx = cuda.to_device(x)
    res = []
    for s, n in [(1.5, 2), (1.5, 2), (-0.5, 2), (1.5, 3), (1.5, 2), (-0.0, 0), (0.0, 0)]:
        got = sc(dx, s, n).copy_to_host()
        res.append(float(np.abs(got - sk(x, s, n)).max()))
    out["scalar_diffs"] = res
    out["scalar_stats"] = stats(sc)
    out["scalar_error"] = [err(sk, x, "a", 1), err(sc, dx, "a", 1)]
    empty = sc(cuda.to_device(np.zeros((0, 8), np.float32)), 1.0, 1)
    out["empty"] = [list(empty.shape), list(sc(cuda.to_device(np.zeros((0, 8), np.float32)), 1.0, 1).shape)]

    # a raw launcher asked for where it cannot be built (the simulator has no driver): the plan dispatches, says why
    from tilesim.backends.cuda import plans as P
    prog = kc.program
    vals = [da, db, None]
    bound = prog._bind_device(prog.pf, kc.out_idx, vals)
    prog._finish_device(bound)
    plan = P.build_plan(prog, prog.pf, kc.out_idx, vals, bound, prog._flat_view(prog.pf), raw=True)
    out["fallback"] = [type(plan.launcher).__name__, plan.note[:40],
                       float(np.abs(plan(vals).copy_to_host() - ref).max())]

    # the switch
    os.environ["TILESIM_CUDA_CALL_PLANS"] = "0"
    off = tilesim.compile(k.prim_func, out_idx=k.out_idx, target="cuda")
    d_off = [float(np.abs(off(da, db).copy_to_host() - ref).max()) for _ in range(2)]
    out["off"] = [d_off, stats(off)]
    print(json.dumps(out))
""")


@pytest.fixture(scope="module")
def sim():
    if not have_numba_cuda():
        pytest.skip("numba-cuda is not installed")
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1", PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("TILESIM_CUDA_CALL_PLANS", None)
    p = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=900, cwd=ROOT)
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    assert lines, p.stderr[-3000:]
    return json.loads(lines[-1])


@pytest.mark.cudasim
def test_repeated_calls_hit_the_plan_with_fresh_outputs(sim):
    assert max(sim["hit_diffs"]) < 1e-3
    assert sim["fresh_outputs"] == 3
    assert sim["hit_stats"] == {"hits": 2, "misses": 1, "built": 1, "refused": 0}
    assert sim["new_values_diff"] < 1e-3


@pytest.mark.cudasim
def test_a_new_shape_misses_and_gets_its_own_plan(sim):
    assert max(sim["shape_diffs"]) < 1e-3
    assert sim["shape_stats"]["built"] == 2 and sim["shape_stats"]["hits"] == 4


@pytest.mark.cudasim
@pytest.mark.parametrize("case, text", [
    ("conflict", "argument 'B' of main: dimension 0 (k) is 12 but another argument set k = 13"),
    ("dtype", "argument 'A' of main: expected dtype float16, got float32"),
    ("rank", "argument 'A' of main: expected 2 dimension(s) (m, k), got shape (20, 13, 1)"),
    ("count", "kernel main takes 2 argument(s) (A, B), got 1"),
])
def test_errors_are_the_full_paths_after_a_plan_exists(sim, case, text):
    host, device = sim[case]
    assert host == device and host.startswith(text), (host, device)


@pytest.mark.cudasim
def test_a_changed_stride_takes_the_full_path_and_its_error(sim):
    assert "is not C-contiguous" in sim["stride"]
    st_ = sim["error_stats"]
    assert st_["built"] == 2 and st_["refused"] == 0  # no plan for a call that failed
    assert sim["after_errors_diff"] < 1e-3


@pytest.mark.cudasim
def test_scalars_workspaces_and_untiled_shapes(sim):
    assert max(sim["scalar_diffs"]) < 1e-5
    # (1.5, 2) twice and once more later: 2 hits; -0.0 and 0.0 are different plans
    assert sim["scalar_stats"]["hits"] == 2 and sim["scalar_stats"]["built"] == 5
    host, device = sim["scalar_error"]
    assert host == device and "is a scalar float32, got a str" in host
    assert sim["empty"] == [[0, 8], [0, 8]]


@pytest.mark.cudasim
def test_a_raw_launcher_that_cannot_be_built_falls_back_to_dispatch(sim):
    name, note, diff = sim["fallback"]
    assert name == "DispatchLauncher" and note.startswith("raw launcher unavailable") and diff < 1e-3


@pytest.mark.cudasim
def test_the_switch_bypasses_the_plans(sim):
    diffs, stats = sim["off"]
    assert max(diffs) < 1e-3
    assert stats == {"hits": 0, "misses": 0, "built": 0, "refused": 0}


# ------------------------------------------------------------------------------------------ no GPU, this process
IS_VAR = (False, True, False)


class _Cai:
    """A device array as ``__cuda_array_interface__`` describes it."""

    def __init__(self, shape, typestr="<f4", strides=None, ptr=4096, stream=None):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "strides": strides,
                                         "data": (ptr, False), "version": 3, "stream": stream}


def test_key_ineligible_arguments():
    assert P.call_key(IS_VAR, (2,), [np.zeros(3), 1.0, None]) is None  # a host array
    assert P.call_key(IS_VAR, (2,), [_Cai((3,)), "x", None]) is None  # a str scalar
    assert P.call_key(IS_VAR, (2,), [_Cai((3,)), np.zeros(()), None]) is None  # a 0-d array as a scalar


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 70), st.integers(1, 9), st.sampled_from(["<f4", "<f2", "<i2"]),
       st.sampled_from([0.0, -0.0, 1.0, 2.5]), st.sampled_from([1, True, 1.0, np.float32(1.0)]))
def test_key_separates_what_the_checks_depend_on(m, n, typestr, s, s2):
    base = P.call_key(IS_VAR, (2,), [_Cai((m, n), typestr), s, None])
    assert base == P.call_key(IS_VAR, (2,), [_Cai((m, n), typestr, ptr=8192), s, None])  # only the pointer moved
    assert base != P.call_key(IS_VAR, (2,), [_Cai((m + 1, n), typestr), s, None])
    assert base != P.call_key(IS_VAR, (2,), [_Cai((m, n), "<f8"), s, None])
    assert base != P.call_key(IS_VAR, (2,), [_Cai((m, n), typestr, strides=(8 * n, 8)), s, None])
    assert base != P.call_key(IS_VAR, (2,), [_Cai((m, n), typestr, stream=7), s, None])
    assert base != P.call_key(IS_VAR, (2,), [_Cai((m, n), typestr), s + 1.0, None])
    assert base != P.call_key(IS_VAR, (2,), [_Cai((m, n), typestr), -s, None]) or s != s  # -0.0 is not 0.0
    k2 = {type(x): P.call_key(IS_VAR, (2,), [_Cai((m, n), typestr), x, None]) for x in (1, True, 1.0, np.float32(1))}
    assert len(set(k2.values())) == 4  # 1, True, 1.0 and float32(1) are different calls
    assert P.call_key(IS_VAR, (2,), [_Cai((m, n), typestr), s2, None]) == k2[type(s2)]


def test_key_of_torch_tensors():
    torch = pytest.importorskip("torch")
    x = torch.zeros(6, 4)
    k = P.call_key(IS_VAR, (2,), [x, 1.0, None])
    assert k == P.call_key(IS_VAR, (2,), [torch.ones(6, 4), 1.0, None])
    assert k != P.call_key(IS_VAR, (2,), [torch.zeros(4, 6).t(), 1.0, None])  # same shape, other strides
    assert k != P.call_key(IS_VAR, (2,), [torch.zeros(6, 4, dtype=torch.float64), 1.0, None])
    assert k != P.call_key(IS_VAR, (2,), [torch.zeros(6, 4, requires_grad=True), 1.0, None])
    assert P.call_key(IS_VAR, (2,), [torch.nn.Parameter(x), 1.0, None]) is None  # a subclass: full path


class _FakeOverload:
    """A compiled overload as :class:`RawLauncher` sees it, marshalling with numba-cuda's own ``_prepare_args``."""

    debug = False
    cooperative = False
    extensions = []

    def __init__(self, argument_types, prepare):
        self.argument_types = argument_types
        self._prepare = prepare
        self._codelibrary = SimpleNamespace(get_cufunc=lambda: SimpleNamespace(kernel="KERNEL"))

    def _prepare_args(self, ty, val, stream, retr, kernelargs):
        return self._prepare(self, ty, val, stream, retr, kernelargs)


def _devarray(ptr, n, itemsize):
    """What numba's argument marshalling reads from a device array (its strided memory view)."""
    smv = SimpleNamespace(size=n, dtype=np.dtype(f"i{itemsize}"), ptr=ptr, shape=(n,),
                          _layout=SimpleNamespace(strides_in_bytes=(itemsize,)))
    return SimpleNamespace(__cuda_memory__=True, _strided_memory_view_shim=smv)


@needs_numba
@pytest.mark.parametrize("shift", [0, 1])
def test_raw_launcher_patches_only_the_pointers(shift):
    cuda_module()
    prepare = require("numba.cuda.dispatcher", "test")._Kernel._prepare_args
    types = numba_types()
    argtypes = (types.Array(types.int16, 1, "C"), types.float32, types.Array(types.float32, 1, "C"),
                types.Array(types.float32, 1, "C"), types.int64)
    ov = _FakeOverload(argtypes, prepare)
    cfg = SimpleNamespace(dispatcher=SimpleNamespace(overloads={"sig": ov}), stream="S", griddim=(3, 1, 1),
                          blockdim=(32, 1, 1), sharedmem=0)
    n = 37  # no tile divides it
    ws = _devarray(9000, 5, 4)
    first = [_devarray(1000, n, 2), _devarray(2000 + shift, n, 4)]
    specs = [("src", 0, None), ("val", np.float32(2.5), None), ("src", 1, None), ("fixed", ws, None),
             ("val", np.int64(7), None)]
    args = [first[0], np.float32(2.5), first[1], ws, np.int64(7)]
    objs = [SimpleNamespace(p=1000), SimpleNamespace(p=2000)]
    calls = []
    api = (lambda *a: calls.append(a), lambda g, b, s: ("CFG", g, b, s))
    ov2 = _FakeOverload(argtypes[2:3], prepare)  # a second launch (its own configuration object and stream)
    cfg2 = SimpleNamespace(dispatcher=SimpleNamespace(overloads={"sig": ov2}), stream="S2", griddim=(1, 1, 1),
                           blockdim=(64, 1, 1), sharedmem=128)
    launches = [(cfg, specs, args), (cfg2, [("src", 1, None)], [first[1]])]
    launcher = P.RawLauncher.build(launches, objs, [lambda o: o.p] * 2, api)
    if shift:  # a pointer slot that does not hold the first call's pointer: no raw launcher
        assert launcher is None
        return
    assert launcher.keep == [ws]
    launcher([SimpleNamespace(p=5000), SimpleNamespace(p=6000)])
    (stream, config, kernel, *got), (stream2, config2, _, *got2) = calls
    assert (stream, config, kernel) == ("S", ("CFG", (3, 1, 1), (32, 1, 1), 0), "KERNEL")
    assert (stream2, config2) == ("S", ("CFG", (1, 1, 1), (64, 1, 1), 128))  # one stream, in order
    assert got2 == [0, 0, n, 4, 6000, n, 4]
    want = []
    new_args = [_devarray(5000, n, 2), np.float32(2.5), _devarray(6000, n, 4), ws, np.int64(7)]
    for ty, v in zip(argtypes, new_args):
        prepare(ov, ty, v, "S", [], want)
    assert [getattr(x, "value", x) for x in got] == [getattr(x, "value", x) for x in want]


def test_torch_stream_prefers_the_raw_handle():
    t = SimpleNamespace(get_device=lambda: 3, device="cuda:3")
    raw = SimpleNamespace(_C=SimpleNamespace(_cuda_getCurrentRawStream=lambda i: 100 + i))
    assert P.torch_stream(raw, t) == 103
    public = SimpleNamespace(_C=SimpleNamespace(), cuda=SimpleNamespace(
        current_stream=lambda d: SimpleNamespace(cuda_stream=0 if d == "cuda:3" else 1)))
    assert P.torch_stream(public, t) == 0


@pytest.mark.parametrize("fails", [False, True])
def test_a_raw_launch_refused_on_its_first_call_dispatches_from_then_on(fails):
    calls = []

    def launch(stream, config, kernel, *args):
        if fails:
            raise TypeError("unsupported kernel argument")
        calls.append(("raw", kernel, args))

    raw = P.RawLauncher(launch, "S", [("K1", "C1", [0, 7, 0], ((0, 0), (2, 1))), ("K2", "C2", [0], ((0, 1),))],
                        [lambda o: o.p] * 2, [])
    dispatch = lambda objs: calls.append(("dispatch", [o.p for o in objs]))  # noqa: E731
    plan = P.CallPlan((0,), (lambda: SimpleNamespace(p=20),), raw, fallback=dispatch)
    for _ in range(2):
        out = plan([SimpleNamespace(p=10)])
        assert out.p == 20
    if fails:  # nothing ran raw; both calls dispatched, and the plan says why
        assert calls == [("dispatch", [10, 20])] * 2 and plan.note.startswith("raw launch failed: TypeError")
    else:
        assert calls == [("raw", "K1", (10, 7, 20)), ("raw", "K2", (20,))] * 2 and raw.proven and plan.note == ""
