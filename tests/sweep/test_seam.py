"""The sweep seam without a cluster: packing, chunking, completion order, failures, executor choice.

``_Shuffled`` is an executor whose workers finish chunks in a seeded random order and sometimes "die"
(raise instead of answering): it exercises everything :class:`tilesim.sweep.Executor` does around an
engine (pickling with :func:`pack`, chunking, reassembly in item order, a lost chunk failing only its
items) deterministically and in this process.
"""

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

import hwmodels
from kernels.registry import get
from tilesim import sweep
from tilesim.errors import KernelError
from tilesim.sweep import Executor, LocalExecutor, Outcome, make_executor, pack, unpack
from tilesim.tune import Trial, run_trials, search_space


def square_or_fail(x):
    if x % 7 == 3:
        raise ValueError(f"bad point {x}")
    return x * x


class _Shuffled(Executor):
    name = "shuffled"

    def __init__(self, seed=0, lose=()):
        super().__init__(workers=3)
        self.rng, self.lose = random.Random(seed), set(lose)

    def _submit(self, blobs):
        order = list(range(len(blobs)))
        self.rng.shuffle(order)
        for k in order:
            yield k, (RuntimeError("worker died") if k in self.lose else sweep._run_packed(blobs[k]))


@given(n=st.integers(0, 60), chunk=st.one_of(st.none(), st.integers(1, 9)), seed=st.integers(0, 99),
       reorder=st.booleans())
def test_outcomes_come_back_in_item_order_whatever_the_completion_order(n, chunk, seed, reorder):
    items = [(x,) for x in range(n)]
    seen = []
    order = random.Random(seed).sample(range(n), n) if reorder else None
    outs = _Shuffled(seed).run(square_or_fail, items, chunk=chunk, on_result=seen.append, order=order)
    assert [o.index for o in outs] == list(range(n))
    assert sorted(o.index for o in seen) == list(range(n))  # each reported once, as it completed
    for x, o in enumerate(outs):
        if x % 7 == 3:
            assert not o.ok and o.error == f"ValueError: bad point {x}" and "square_or_fail" in o.traceback
        else:
            assert o.ok and o.value == x * x
    assert outs == LocalExecutor().run(square_or_fail, items)  # identical to the in-process run


def test_a_lost_chunk_fails_only_its_items():
    items = [(x,) for x in range(20)]
    outs = _Shuffled(1, lose={2}).run(square_or_fail, [(x,) for x in range(20)], chunk=4)
    lost = [o.index for o in outs if o.error and "lost with its worker" in o.error]
    assert lost == [8, 9, 10, 11] and "RuntimeError: worker died" in outs[8].error
    assert all(o.ok for o in outs if o.index not in lost and o.index % 7 != 3)
    assert len(outs) == len(items)


def test_progress_counts_up_to_the_total():
    calls = []
    _Shuffled(2).run(square_or_fail, [(x,) for x in range(10)], chunk=3, progress=lambda i, n, w: calls.append((i, n)))
    assert calls[0] == (0, 10) and calls[-1] == (10, 10)
    assert [i for i, _ in calls] == sorted(i for i, _ in calls)


def test_specs_travel_by_name_and_hardware_models_by_value():
    spec, model = get("gemm"), hwmodels.load("h200_sxm_141gb")
    blob = pack((spec, model))
    assert len(blob) < 50_000  # the spec's functions are not in it
    spec2, model2 = unpack(blob)
    assert spec2 is spec  # looked up in the registry
    assert model2 == model and model2 is not model


def test_tuning_trials_through_a_packing_executor_equal_the_in_process_ones():
    spec, model = get("rmsnorm"), hwmodels.load("ascend_910b2")
    shape = spec.shapes[0]
    tasks = [(spec, shape, model, None, cfg) for cfg in search_space(spec.tunables, spec.defaults, 9)]
    here = run_trials(tasks)
    tasks.append((spec, shape, model, None, {"block_M": "x"}))  # not a TilesimError: raises TypeError
    with pytest.raises(TypeError):
        run_trials(tasks[-1:])
    there = run_trials(tasks, _Shuffled(3))
    assert here == there[:-1] and all(isinstance(t, Trial) for t in there)
    assert sum(t.error is None for t in here) >= 5
    assert there[-1].error.startswith("TypeError") and there[-1].time_s is None


def test_executor_choice_errors():
    with pytest.raises(KernelError, match="unknown executor 'spark'") as e:
        make_executor("spark")
    assert "local, dask, ray" in e.value.hint
    with pytest.raises(KernelError, match="--address joins a cluster"):
        make_executor("local", address="tcp://127.0.0.1:8786")


def test_a_missing_engine_names_its_install_command(monkeypatch):
    monkeypatch.setitem(sweep.optional._cache, "ray", None)
    with pytest.raises(KernelError, match="--executor ray needs the optional package 'ray'") as e:
        make_executor("ray", workers=2)
    assert e.value.hint == 'install it: pip install -e ".[ray]"'


def test_executor_from_args_defaults_to_none():
    class A:
        executor, workers, address = "local", None, None

    assert sweep.executor_from_args(A()) is None
    A.workers = 2
    ex = sweep.executor_from_args(A())
    assert isinstance(ex, LocalExecutor) and ex.workers == 2 and ex.chunk_size(1000) == 63
    ex.close()


def test_outcome_ok():
    assert Outcome(0, 1).ok and not Outcome(0, None, "E: x").ok
