"""Sweeps on a local 2-worker Dask cluster give exactly the in-process results (tune, report, validation).

One cluster (two worker processes of one thread) is started for the module; the CLI tests join it with
``--address``, which is how a user points tilesim at a real cluster. ``distributed`` is in the ``test``
extra, so CI (``CI`` set) fails rather than skips when it is missing.
"""

import json
import os

import pytest

if os.environ.get("CI"):
    import distributed  # noqa: F401 - CI must run these tests
else:
    pytest.importorskip("distributed")

import hwmodels
from kernels.registry import get
from tilesim import cli
from tilesim.sim.validation import Measurement, validate
from tilesim.sweep import DaskExecutor
from tilesim.tune import run_trials, search_space, tune_spec


@pytest.fixture(scope="module")
def dask():
    ex = DaskExecutor(workers=2)
    yield ex
    ex.close()


def test_the_cluster_has_two_worker_processes(dask):
    pids = dask.client.run(os.getpid)
    assert len(pids) == 2 and os.getpid() not in pids.values() and len(set(pids.values())) == 2
    infos = dask.client.scheduler_info()["workers"].values()
    assert [w["nthreads"] for w in infos] == [1, 1]  # one thread per process: the simulator holds the GIL


def test_tune_cli_on_dask_prints_the_in_process_table(dask, capsys):
    argv = ["tune", "gemm", "--hw", "a100_sxm4_80gb", "--budget", "6"]
    assert cli.main(argv) == 0
    here = capsys.readouterr().out
    assert cli.main(argv + ["--executor", "dask", "--address", dask.client.scheduler.address]) == 0
    out, err = capsys.readouterr()
    assert out == here and "6 configs" in out
    assert "6/6" in err  # progress as work completed


def test_tuning_with_failures_on_dask(dask):
    spec, model = get("layernorm"), hwmodels.load("mlu370_x8")
    a = tune_spec(spec, spec.shapes[1], model, budget=12)
    b = tune_spec(spec, spec.shapes[1], model, budget=12, executor=dask)
    assert a == b
    tasks = [(spec, spec.shapes[0], model, None, c) for c in search_space(spec.tunables, spec.defaults, 6)]
    bad = (spec, spec.shapes[0], model, None, {"block_M": "x"})  # raises TypeError (not a TilesimError)
    trials = run_trials(tasks[:3] + [bad] + tasks[3:], dask)
    assert trials[:3] + trials[4:] == run_trials(tasks)
    assert trials[3].error.startswith("TypeError") and trials[3].time_s is None


def test_report_cli_on_dask_writes_the_in_process_summary(dask, tmp_path):
    argv = ["report", "--hw", "h200_sxm_141gb", "ascend_910b2", "--kernels", "gemm", "rmsnorm", "dsa_indexer",
            "--quick", "--tune-budget", "2"]
    assert cli.main(argv + ["--out", str(tmp_path / "here")]) == 0
    assert cli.main(argv + ["--out", str(tmp_path / "dask"), "--executor", "dask",
                            "--address", dask.client.scheduler.address]) == 0
    here, there = (json.loads((tmp_path / d / "summary.json").read_text()) for d in ("here", "dask"))
    here.pop("generated"), there.pop("generated")
    assert here == there
    assert len(here["points"]) == 5 and len(here["unsupported"]) == 1  # fp8 indexer: not on the 910B
    assert (tmp_path / "dask" / "summary.md").read_text() == (tmp_path / "here" / "summary.md").read_text()
    assert not (tmp_path / "dask" / ".partial").exists()


def test_an_unreachable_scheduler_is_a_user_error(monkeypatch, capsys):
    monkeypatch.setattr(DaskExecutor, "connect_timeout", "1s")
    assert cli.main(["tune", "rmsnorm", "--budget", "2", "--executor", "dask", "--address", "tcp://127.0.0.1:9"]) == 2
    err = capsys.readouterr().err
    assert "cannot reach a Dask scheduler at 'tcp://127.0.0.1:9'" in err and "dask scheduler" in err


def test_validation_on_dask(dask):
    ms = []
    for i, name in enumerate(("gemm", "rmsnorm", "softmax", "gelu")):
        spec = get(name)
        params = spec.params(spec.shapes[0])
        ms.append(Measurement(f"{name}-{i}", spec.family, "test", spec.build(**params), {}, 1e-4 * (i + 1)))
    a = validate(ms, "h100_sxm5_80gb", {"efficiency.dram_fraction": 0.8})
    b = validate(ms, "h100_sxm5_80gb", {"efficiency.dram_fraction": 0.8}, executor=dask)
    assert a == b and a["points"] == 4
