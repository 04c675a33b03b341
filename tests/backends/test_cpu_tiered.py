"""``target="auto"`` without a GPU: the interpreter, tiering up to the compiled CPU target
(``tilesim/backends/cpu/tiered.py``)."""

import logging

import numpy as np
import pytest

from tests.backends import cpu_kernels as K
from tilesim.backends import get_target
from tilesim.backends.cpu import available
from tilesim.backends.cpu.tiered import DEFAULT_TIER_UP_S, TieredProgram, tier_up_seconds
from tilesim.backends.interp import InterpOptions
from tilesim.backends.interp import run as interp_run
from tilesim.kernel import JITKernel

pytestmark = pytest.mark.skipif(not available(), reason="numba and scipy are not installed")


def on(kernel, target):
    return JITKernel(kernel.prim_func, out_idx=kernel.out_idx, target=target)


def _inputs(m, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(m).astype(np.float32), rng.standard_normal(m).astype(np.float32)


def test_auto_picks_the_tiered_target_without_a_gpu():
    t = get_target("auto")
    assert t.name in ("tiered", "cuda")  # cuda only where a GPU is present
    if t.name == "tiered":
        assert on(K.cast_ops(), "auto").target == "tiered"


@pytest.mark.parametrize("raw, want", [("", DEFAULT_TIER_UP_S), ("0", 0.0), ("2.5", 2.5), ("off", None),
                                       ("-1", None), ("never", None)])
def test_tier_up_threshold_from_the_environment(monkeypatch, raw, want):
    monkeypatch.setenv("TILESIM_TIER_UP_S", raw)
    assert tier_up_seconds() == want


def test_a_bad_threshold_warns_and_uses_the_default(monkeypatch, caplog):
    monkeypatch.setenv("TILESIM_TIER_UP_S", "soon")
    with caplog.at_level(logging.WARNING, logger="tilesim"):
        assert tier_up_seconds() == DEFAULT_TIER_UP_S
    assert "TILESIM_TIER_UP_S" in caplog.text


def test_tiers_up_after_a_long_call_and_keeps_the_interpreters_results(monkeypatch):
    """With a zero threshold the first call runs on the interpreter and starts the compilation; once it has
    ended, calls run compiled, bit for bit equal to the interpreter (element-wise conversions)."""
    monkeypatch.setenv("TILESIM_TIER_UP_S", "0")
    k = K.cast_ops("float32", "float16", block=64)
    kt, ki = on(k, "tiered"), on(k, "interp")
    a, b = _inputs(200)
    first = kt(a, b)
    assert kt.program.state in ("compiling", "compiled")
    assert kt.program.wait(120) == "compiled"
    assert kt.program.source is not None and "def launch" in kt.program.source
    again = kt(a, b)
    want = ki(a, b)
    np.testing.assert_array_equal(first.view(np.uint16), want.view(np.uint16))
    np.testing.assert_array_equal(again.view(np.uint16), want.view(np.uint16))
    a2, b2 = _inputs(37, seed=3)  # another size: the compiled code, no tile divides it
    np.testing.assert_array_equal(kt(a2, b2).view(np.uint16), ki(a2, b2).view(np.uint16))


def test_short_calls_never_compile(monkeypatch):
    monkeypatch.setenv("TILESIM_TIER_UP_S", "30")
    kt = on(K.cast_ops(), "tiered")
    a, b = _inputs(64)
    for _ in range(3):
        kt(a, b)
    assert kt.program.state == "interp" and kt.program.source is None


def test_off_never_compiles(monkeypatch):
    monkeypatch.setenv("TILESIM_TIER_UP_S", "off")
    kt = on(K.cast_ops(), "tiered")
    kt(*_inputs(64))
    assert kt.program.wait(1) == "interp"


def test_unsupported_program_stays_on_the_interpreter(monkeypatch, caplog):
    monkeypatch.setenv("TILESIM_TIER_UP_S", "0")
    k = K.viewed_bits()
    kt = on(k, "tiered")
    x = np.random.default_rng(0).standard_normal((37, 4)).astype(np.float32)
    with caplog.at_level(logging.DEBUG, logger="tilesim"):
        got = kt(x)
        assert kt.program.wait(60) == "fallback"
    assert "view of another buffer" in kt.program.fallback
    assert "stays on the interpreter" in caplog.text
    np.testing.assert_array_equal(got, on(k, "interp")(x))
    np.testing.assert_array_equal(kt(x), on(k, "interp")(x))


def test_a_compilation_that_raises_keeps_the_interpreter(monkeypatch):
    monkeypatch.setenv("TILESIM_TIER_UP_S", "0")
    k = K.cast_ops()

    def broken(pf, uninit, tf32):
        raise RuntimeError("no compiler today")

    kt = on(k, "interp")
    kt.program = TieredProgram(k.prim_func, compile_program=broken)
    a, b = _inputs(50)
    first = kt(a, b)
    assert kt.program.wait(60) == "fallback"
    assert "RuntimeError: no compiler today" in kt.program.fallback
    np.testing.assert_array_equal(kt(a, b).view(np.uint16), first.view(np.uint16))


def test_checking_options_run_on_the_interpreter_after_tier_up(monkeypatch):
    """An out-of-bounds check is the interpreter's: a compiled program must not be used for it."""
    monkeypatch.setenv("TILESIM_TIER_UP_S", "0")
    k = K.cast_ops()
    kt = on(k, "tiered")
    a, b = _inputs(64)
    kt(a, b)
    assert kt.program.wait(120) == "compiled"

    def refuse(*args, **kwargs):
        raise AssertionError("the compiled program ran a checking call")

    monkeypatch.setattr(kt.program._compiled, "run", refuse)
    out = kt.run(a, b, options=InterpOptions(oob="check"))
    np.testing.assert_array_equal(out.view(np.uint16), on(k, "interp")(a, b).view(np.uint16))


# ------------------------------------------------------------------ the trigger: interpreter time summed per signature
class _Clock:
    """Each interpreter call lasts ``step`` seconds: ``TieredProgram`` reads the clock before and after a call."""

    def __init__(self, step):
        self.t, self.step, self.reads = 0.0, step, 0

    def __call__(self):
        self.reads += 1
        if self.reads % 2 == 0:
            self.t += self.step
        return self.t


class _Stub:
    """A stand-in compiled program (no Numba): records its preparation, runs calls on the interpreter."""

    fallback = None
    source = "stub"

    def __init__(self):
        self.prepared = 0

    def prepare(self, pf, arrays, scalars, options):
        self.prepared += 1

    def run(self, pf, arrays, scalars, options, progress=None):
        interp_run(pf, arrays, scalars, options, progress=progress)


def _tiered(k, step):
    stubs = []

    def compile_program(pf, uninit, tf32):
        stubs.append(_Stub())
        return stubs[-1]

    kt = on(k, "interp")
    kt.program = TieredProgram(k.prim_func, compile_program=compile_program, clock=_Clock(step))
    return kt, stubs


@pytest.mark.parametrize("step, calls_before", [(0.1, 4), (0.2, 2), (0.5, 0), (0.7, 0), (0.12, 4)])
def test_interpreter_time_summed_over_calls_triggers_the_compilation(monkeypatch, step, calls_before):
    """Short calls add up: the call that brings the sum to the threshold (0.5 s here) starts the compilation."""
    monkeypatch.setenv("TILESIM_TIER_UP_S", "0.5")
    k = K.cast_ops()
    kt, stubs = _tiered(k, step)
    a, b = _inputs(64)
    for i in range(calls_before):
        kt(a, b)
        assert kt.program.state == "interp", i
    assert kt.program.interpreted_seconds() == pytest.approx(step * calls_before)
    kt(a, b)
    assert kt.program.wait(30) == "compiled"
    assert len(stubs) == 1 and stubs[0].prepared == 1
    kt(a, b)  # later calls run the compiled program and start nothing more
    assert len(stubs) == 1


def test_calls_of_other_signatures_do_not_add_up(monkeypatch):
    """Interpreter time is summed per signature (here the options the code is generated for)."""
    monkeypatch.setenv("TILESIM_TIER_UP_S", "0.5")
    kt, stubs = _tiered(K.cast_ops(), 0.3)
    a, b = _inputs(64)
    kt(a, b)
    kt.run(a, b, options=InterpOptions(uninit="zero"))
    assert kt.program.state == "interp" and not stubs  # 0.3 s each, 0.6 s in all
    kt.run(a, b, options=InterpOptions(uninit="zero"))  # 0.6 s for this signature
    assert kt.program.wait(30) == "compiled" and len(stubs) == 1


def test_checking_calls_do_not_count(monkeypatch):
    monkeypatch.setenv("TILESIM_TIER_UP_S", "0.5")
    kt, stubs = _tiered(K.cast_ops(), 0.3)
    a, b = _inputs(64)
    for _ in range(4):
        kt.run(a, b, options=InterpOptions(oob="check"))
    assert kt.program.state == "interp" and not stubs
    kt(a, b)
    kt(a, b)
    assert kt.program.wait(30) == "compiled"


def test_off_ignores_the_sum(monkeypatch):
    monkeypatch.setenv("TILESIM_TIER_UP_S", "off")
    kt, stubs = _tiered(K.cast_ops(), 10.0)
    a, b = _inputs(64)
    for _ in range(3):
        kt(a, b)
    assert kt.program.state == "interp" and not stubs
