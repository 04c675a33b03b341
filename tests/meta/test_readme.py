"""The README's example runs as written (docs that cannot rot silently)."""

import pathlib
import re
import runpy


def test_readme_example_runs(tmp_path, capsys):
    text = (pathlib.Path(__file__).resolve().parents[2] / "README.md").read_text()
    code = re.search(r"## A TileLang kernel, unchanged\n\n```python\n(.*?)```", text, re.S).group(1)
    script = tmp_path / "readme_example.py"
    script.write_text(code)
    ns = runpy.run_path(str(script))
    import numpy as np
    ref = ns["a"].astype(np.float64) @ ns["b"].astype(np.float64)
    assert np.abs(ns["c"] - ref).max() < 1e-3 * np.abs(ref).max()
    out = capsys.readouterr().out
    assert "@T.prim_func" in out and "on h100_sxm5_80gb (tensorcore profile)" in out
