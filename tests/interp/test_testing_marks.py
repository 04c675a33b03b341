"""``tilelang.testing``'s hardware marks and ``main`` (``tilesim/testing/gpu_marks.py``)."""

import subprocess
import sys
import types

import pytest

import tilesim.testing as tt


def _fake_torch(monkeypatch, cuda=True, capability=(9, 0), hip=None):
    fake = types.SimpleNamespace(
        cuda=types.SimpleNamespace(is_available=lambda: cuda, get_device_capability=lambda: capability),
        version=types.SimpleNamespace(hip=hip))
    monkeypatch.setitem(sys.modules, "torch", fake)


def _skip_reason(fn):
    marks = [m for m in getattr(fn, "pytestmark", []) if m.name == "skipif"]
    return marks[0].kwargs["reason"] if marks else None


def _f():
    return 42


def _fresh():
    """A new named function per use: pytest's marks take named functions only (a lambda becomes a mark
    argument), and they accumulate on the function object."""
    def body():
        return 1
    return body


def test_requires_cuda_runs_where_torch_can_make_cuda_tensors(monkeypatch):
    _fake_torch(monkeypatch, cuda=True)
    assert _skip_reason(tt.requires_cuda(_fresh())) is None
    _fake_torch(monkeypatch, cuda=False)
    reason = _skip_reason(tt.requires_cuda(_fresh()))
    assert "device='cuda'" in reason and "tilesim runs the kernel" in reason


@pytest.mark.parametrize("mode, want, runs", [("eq", (9, 0), True), ("eq", (8, 0), False), ("ge", (8, 9), True),
                                              ("ge", (10, 0), False), ("lt", (10, 0), True), ("le", (8, 0), False),
                                              ("gt", (8, 9), True)])
def test_compute_version_compares_with_the_device(monkeypatch, mode, want, runs):
    _fake_torch(monkeypatch, capability=(9, 0))
    fn = getattr(tt, f"requires_cuda_compute_version_{mode}")(*want)(_fresh())
    reason = _skip_reason(fn)
    assert (reason is None) == runs
    if not runs:
        assert f"{mode} {want[0]}.{want[1]}" in reason and "9.0" in reason


def test_compute_version_without_cuda_skips_and_a_bad_mode_is_an_error(monkeypatch):
    _fake_torch(monkeypatch, cuda=False)
    assert "device='cuda'" in _skip_reason(tt.requires_cuda_compute_version(8, 0)(_fresh()))
    with pytest.raises(ValueError, match="mode must be one of"):
        tt.requires_cuda_compute_version(9, 0, mode="approx")


def test_rocm_marks(monkeypatch):
    _fake_torch(monkeypatch, cuda=True, hip=None)
    assert "AMD GPU" in _skip_reason(tt.requires_gfx950(_fresh()))
    assert _skip_reason(tt.requires_cuda(_fresh())) is None
    _fake_torch(monkeypatch, cuda=True, hip="6.2")
    assert _skip_reason(tt.requires_rocm(_fresh())) is None
    assert "device='cuda'" in _skip_reason(tt.requires_cuda(_fresh()))  # a ROCm torch is not CUDA


def test_a_direct_call_runs_without_pytest(monkeypatch):
    _fake_torch(monkeypatch, cuda=False)
    real = tt.gpu_marks.loaded
    monkeypatch.setattr(tt.gpu_marks, "loaded", lambda name: None if name == "pytest" else real(name))
    fn = tt.requires_cuda(_f)  # no pytest: nothing is marked
    assert fn is _f and fn() == 42


def test_main_runs_pytest_on_the_calling_file(tmp_path):
    test_file = tmp_path / "test_wrapper.py"
    test_file.write_text("import tilesim.testing\n\n\ndef test_ok():\n    assert True\n\n\n"
                         "def test_bad():\n    assert False\n\n\nif __name__ == '__main__':\n"
                         "    tilesim.testing.main()\n")
    proc = subprocess.run([sys.executable, str(test_file), "-q", "-p", "no:cacheprovider"], capture_output=True,
                          text=True, cwd=tmp_path)
    assert proc.returncode == 1 and "1 failed, 1 passed" in proc.stdout
