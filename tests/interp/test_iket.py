"""``tilelang.tools.cuda.iket`` on tilesim: events in kernels change no value on any backend, the registry and
session behave as TileLang's, and misuse is a located KernelError."""

import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilesim as tilelang
import tilesim.language as T
from tilesim.ir import nodes as N
from tilesim.ir.traverse import walk_stmts
from tilesim.tools.cuda import iket

THREADS = 128


def instrumented(n, threads=THREADS, events=True):
    @T.prim_func
    def main(A: T.Tensor((n,), T.float32), B: T.Tensor((n,), T.float32), Scale: T.Tensor((1,), T.float32),
             C: T.Tensor((n,), T.float32)):
        with T.Kernel(T.ceildiv(n, threads), threads=threads) as bx, iket.range("block_total"):
            if events:
                iket.mark("block_enter", payload=iket.payload(bx, dtype="int32"))
            for i in T.Parallel(threads):
                idx = bx * threads + i
                if idx < n:
                    if events:
                        iket.mark("load_inputs")
                    v = (A[idx] + B[idx]) * Scale[0]
                    if events:
                        iket.mark("store_index", payload=iket.payload(idx, dtype="int32"))
                    C[idx] = v
                    if events:
                        iket.mark("value", payload=v)  # dtype inferred: float32
            iket.range_push("tail", payload=7)
            iket.range_pop("tail")

    return main


def _events(pf):
    return [s for s in walk_stmts(pf.body) if isinstance(s, N.Event)]


@settings(max_examples=6, deadline=None)
@given(st.integers(1, 700))
def test_events_change_no_value(n):
    rng = np.random.default_rng(n)
    a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    s = np.array([0.5], np.float32)
    with iket.session():
        kern = tilelang.compile(instrumented(n), out_idx=-1)
    np.testing.assert_allclose(kern(a, b, s), (a + b) * 0.5, rtol=1e-6)
    plain = tilelang.compile(instrumented(n, events=False), out_idx=-1)
    np.testing.assert_array_equal(kern(a, b, s), plain(a, b, s))


@pytest.mark.parametrize("target", ["interp", "cpu"])
def test_events_run_on_each_cpu_target(target):
    n = 300  # not a multiple of the 128-thread block
    a, b, s = np.arange(n, dtype=np.float32), np.full(n, 3.0, np.float32), np.array([2.0], np.float32)
    kern = tilelang.compile(instrumented(n), out_idx=-1, target=target)
    np.testing.assert_array_equal(kern(a, b, s), (a + b) * 2.0)


def test_ir_printer_and_cuda_lowering():
    pytest.importorskip("numba")
    with iket.session(runtime_payloads=True):
        pf = instrumented(256)
    ev = _events(pf)
    assert [(e.kind, e.name) for e in ev] == [
        ("range_start", "block_total"), ("mark", "block_enter"), ("mark", "load_inputs"), ("mark", "store_index"),
        ("mark", "value"), ("range_start", "tail"), ("range_end", "tail"), ("range_end", "block_total")]
    assert [e.payload_dtype for e in ev] == ["NoPayload", "int32", "NoPayload", "int32", "float32", "int32",
                                             "NoPayload", "NoPayload"]
    assert {e.event_id for e in ev if e.kind == "range_end"} == {iket.RANGE_END_EVENT_ID}
    src = tilelang.compile(pf, target="interp").get_kernel_source()
    assert "iket.mark('store_index', payload=iket.payload(idx, dtype='int32'))" in src
    assert "iket.range_pop('block_total')" in src
    cuda_src = tilelang.compile(pf, target="cuda").get_kernel_source()
    assert cuda_src.count("# iket ") == len(ev)
    from tilesim.backends.cuda import compile_cuda

    assert compile_cuda(pf).compile_ptx((9, 0))  # the lowered kernel compiles for sm_90 (no GPU needed)


def test_cost_model_charges_nothing_for_events():
    hw = pytest.importorskip("hwmodels").load("h200_sxm_141gb")
    from tilesim.analysis import analyze

    with_ev = analyze(instrumented(1024), hw)
    without = analyze(instrumented(1024, events=False), hw)
    assert len(with_ev) == len(without) == 1 and len(with_ev[0].body) == len(without[0].body)
    t_ev = tilelang.compile(instrumented(1024), out_idx=-1).simulate(hw="h200_sxm_141gb").time_s
    t_plain = tilelang.compile(instrumented(1024, events=False), out_idx=-1).simulate(hw="h200_sxm_141gb").time_s
    assert t_ev == t_plain > 0


def test_event_table_ids_kinds_and_payload_ids():
    iket.reset()
    with iket.session(runtime_payloads=True):
        instrumented(128)
        table = iket.event_table()
    by = {(r["kind"], r["name"]): r for r in table}
    assert [r["event_id"] for r in table] == [1, 2, 3, 4, 5, 6]
    assert by[("range", "block_total")]["range_id"] != 0 and by[("mark", "load_inputs")]["range_id"] == 0
    assert by[("mark", "store_index")]["payload_iket_id"] == 5
    assert by[("mark", "value")]["payload_type"] == "float32" and by[("mark", "value")]["payload_iket_id"] == 13
    assert by[("mark", "store_index")]["runtime_payload_iket_id"] == 5
    # outside the payload-mode session the same registry reports no runtime payloads
    assert all(r["runtime_payload_iket_id"] == 0 for r in iket.event_table())


def test_event_ids_skip_the_range_end_id():
    iket.reset()
    names = [f"m{j}" for j in range(33)]

    @T.prim_func
    def k(A: T.Tensor((32,), T.float32)):
        with T.Kernel(1, threads=32):
            for name in names:
                iket.mark(name)
            A[0] = 1.0

    ids = [r["event_id"] for r in iket.event_table()]
    assert len(ids) == 33 and iket.RANGE_END_EVENT_ID not in ids and ids[-1] == 34


_MISUSE = [
    (tilelang.KernelTypeError, "at most 32 UTF-8 bytes"),
    (tilelang.KernelTypeError, "non-empty"),
    (tilelang.KernelTypeError, "int64"),
    (tilelang.KernelTypeError, "cannot infer"),
    (tilelang.KernelSyntaxError, "without a matching"),
    (tilelang.KernelSyntaxError, "does not match"),
    (tilelang.KernelSyntaxError, "with iket.range"),
    (tilelang.KernelTypeError, "iket.mark: missing a required argument: 'name'"),
]


def _misuse(case):
    @T.prim_func
    def k(A: T.Tensor((32,), T.int32)):
        with T.Kernel(1, threads=32):
            if case == 0:
                iket.mark("x" * 33)
            if case == 1:
                iket.mark("")
            if case == 2:
                iket.mark("m", payload=iket.payload(A[0], dtype="int64"))
            if case == 3:
                iket.mark("m", payload="text")
            if case == 4:
                iket.range_pop()
            if case == 5:
                iket.range_push("a")
                iket.range_pop("b")
            if case == 6:
                iket.range("r")
            if case == 7:
                iket.mark()
            A[0] = 1
    return k


@pytest.mark.parametrize("case", range(len(_MISUSE)))
def test_misuse_is_a_located_kernel_error(case):
    exc, match = _MISUSE[case]
    with pytest.raises(exc, match=match) as e:
        tilelang.compile(_misuse(case))
    assert "test_iket.py" in str(e.value)  # file:line:col of the call


def test_payload_dtype_must_not_change():
    iket.reset()

    @T.prim_func
    def k(A: T.Tensor((32,), T.int32)):
        with T.Kernel(1, threads=32):
            iket.mark("m", payload=iket.payload(A[0], dtype="int32"))
            iket.mark("m")

    with pytest.raises(tilelang.KernelTypeError, match="first registered with payload type 'int32'"):
        tilelang.compile(k)


def test_events_outside_a_launch_or_a_kernel():
    @T.prim_func
    def k(A: T.Tensor((32,), T.int32)):
        iket.mark("early")
        with T.Kernel(1, threads=32):
            A[0] = 1

    with pytest.raises(tilelang.KernelSyntaxError, match=r"iket.mark outside `with T.Kernel"):
        tilelang.compile(k)
    with pytest.raises(tilelang.KernelSyntaxError, match="only be used inside a kernel"):
        iket.mark("host")


def test_session_restores_state_even_on_error(tmp_path):
    before = os.environ.get("TL_IKET_OUTPUT_DIR")
    assert not iket.is_enabled() and not iket.runtime_payloads_enabled()
    with pytest.raises(ValueError):
        with iket.session(output_dir=tmp_path / "out", runtime_payloads=True):
            assert iket.is_enabled() and iket.runtime_payloads_enabled()
            assert iket.output_dir() == (tmp_path / "out").absolute() and (tmp_path / "out").is_dir()
            assert os.environ["TL_IKET_OUTPUT_DIR"] == str(tmp_path / "out")
            with iket.session(runtime_payloads=False):
                assert not iket.runtime_payloads_enabled()
            assert iket.runtime_payloads_enabled() and iket.is_enabled()
            raise ValueError
    assert not iket.is_enabled() and not iket.runtime_payloads_enabled()
    assert os.environ.get("TL_IKET_OUTPUT_DIR") == before


def test_path_helpers(tmp_path):
    (tmp_path / "small.trace.json").write_text("{}")
    (tmp_path / "big.trace.json").write_text('{"launches": []}')
    (tmp_path / "other.json").write_text("{}")
    assert [p.name for p in iket.trace_files(directory=tmp_path)] == ["big.trace.json", "small.trace.json"]
    assert iket.trace_files(directory=tmp_path / "missing") == []
    assert iket.output_path("k.cu", directory=tmp_path / "sub") == tmp_path / "sub" / "k.cu"
    cmd = iket.profile_command(["python", "my prog.py"], directory=tmp_path)
    assert cmd.startswith("python -m iket.cli.main --output-dir") and "'my prog.py'" in cmd and "--clobber" in cmd


@T.prim_func
def _per_thread(A: T.Tensor((300,), T.float32), C: T.Tensor((300,), T.float32)):
    with T.Kernel(3, threads=128) as bx:
        tx = T.get_thread_binding()
        s = T.alloc_shared((128,), T.float32)
        with iket.range("load"):
            if bx * 100 + tx < 300 and tx < 100:
                s[tx] = A[bx * 100 + tx]
        T.sync_threads()
        iket.mark("synced", payload=tx)
        if tx < 100:
            if bx * 100 + tx < 300:
                iket.mark("w")  # the only statement before the store: generated code keeps the block valid
                C[bx * 100 + tx] = s[99 - tx] * 2


@pytest.mark.parametrize("target, mode", [("interp", "batched"), ("interp", "serial"), ("cpu", None)])
def test_events_in_per_thread_code_around_a_barrier(target, mode):
    a = np.arange(300, dtype=np.float32)
    ref = np.concatenate([a[i * 100:(i + 1) * 100][::-1] * 2 for i in range(3)])
    opts = {"options": tilelang.InterpOptions(mode=mode)} if mode else {}
    kern = tilelang.compile(_per_thread, out_idx=-1, target=target, **opts)
    np.testing.assert_array_equal(kern(a), ref)


def test_sanitizer_finds_nothing_in_events():
    from tilesim.sanitize import check_kernel

    rep = check_kernel(tilelang.compile(_per_thread, out_idx=-1))
    assert rep.ok, rep.findings
