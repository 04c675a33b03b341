"""An interrupted report leaves the output folder untouched but its finished groups on disk; --resume
continues from them and writes what a clean run writes. The checkpoint file's own contract too."""

import json

import pytest

import hwmodels
from kernels.registry import get
from tilesim.report import collect as C
from tilesim.report.checkpoint import Checkpoint
from tilesim.report.main import run_report

ARGS = dict(hw=["h200_sxm_141gb"], kernels=["rmsnorm", "gelu", "softmax"], quick=True, progress=False,
            tune_budget=2)


def test_checkpoint_skips_a_torn_line_and_discards_cleanly(tmp_path):
    ck = Checkpoint(tmp_path / ".partial" / "x.jsonl")
    assert ck.load() == {}
    ck.add("a", [1.5, {"b": None}])
    ck.close()
    with open(ck.path, "a") as f:
        f.write('{"key": "c", "val')  # a crash mid-line
    ck.add("d", 0.1 + 0.2)
    ck.close()
    assert ck.load() == {"a": [1.5, {"b": None}], "d": 0.1 + 0.2}
    ck.discard()
    assert not (tmp_path / ".partial").exists()


def test_interrupted_report_resumes_to_the_clean_result(tmp_path, monkeypatch):
    clean = tmp_path / "clean"
    assert run_report(out=str(clean), **ARGS) == 0

    out = tmp_path / "rep"
    real, calls = C.collect_group, []

    def dies_on_the_third(*a):
        calls.append(a[0].name)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(*a)

    monkeypatch.setattr(C, "collect_group", dies_on_the_third)
    with pytest.raises(KeyboardInterrupt):
        run_report(out=str(out), **ARGS)
    assert not (out / "summary.json").exists()  # nothing half-written
    assert len(Checkpoint(out / ".partial" / "report.jsonl").load()) == 2

    seen = []
    monkeypatch.setattr(C, "collect_group", lambda *a: seen.append(a[0].name) or real(*a))
    assert run_report(out=str(out), resume=True, **ARGS) == 0
    assert seen == ["softmax"]  # only the group the interrupted run had not finished
    a, b = (json.loads((d / "summary.json").read_text()) for d in (clean, out))
    a.pop("generated"), b.pop("generated")
    assert a == b
    assert not (out / ".partial").exists() and not list(out.glob(".*"))


def test_a_stale_checkpoint_is_not_reused(tmp_path):
    out = tmp_path / "rep"
    ck = Checkpoint(out / ".partial" / "report.jsonl")
    spec, model = get("rmsnorm"), hwmodels.load("h200_sxm_141gb")
    shapes = list(spec.shapes[:1])
    fake = [[{"kernel": "rmsnorm", "fake": True}], [], []]
    ck.add(C.group_key(spec, model, "tensorcore", shapes, 5), fake)  # another tune budget
    ck.close()
    pts, _, _ = C.collect([spec], [model], shapes_per_kernel=1, tune_budget=2, checkpoint=ck)
    assert not any(p.get("fake") for p in pts)
    ck.add(C.group_key(spec, model, "tensorcore", shapes, 2), fake)  # the same inputs: reused as is
    ck.close()
    pts, _, _ = C.collect([spec], [model], shapes_per_kernel=1, tune_budget=2, checkpoint=ck)
    assert pts == fake[0]
