"""The package's layers (see ``tilesim/hw.py``): the core never imports ``kernels`` or ``hwmodels``.

* the core, every ``tilesim`` module outside :data:`APP`, imports and runs a kernel on the interpreter
  with both packages blocked (a meta-path finder that refuses them, installed before ``import tilesim``);
* ``import tilesim`` loads neither matplotlib nor either package;
* no import statement in a core module names ``kernels``, ``hwmodels`` or an app module; the core's one
  way to a hardware model is :func:`tilesim.hw.resolve`.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import hwmodels
from tilesim import hw

ROOT = Path(__file__).resolve().parents[2]

#: The app layer: may import kernels/hwmodels at module level (tilesim/hw.py lists the same modules).
APP = ("tilesim.__main__", "tilesim.cli", "tilesim.cli_args", "tilesim.report", "tilesim.tune",
       "tilesim.bench", "tilesim.runner", "tilesim.sim.cli", "tilesim.sim.validation")
ABOVE_CORE = ("kernels", "hwmodels")

BLOCK = """
import sys

class _Blocked:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("kernels", "hwmodels"):
            raise ImportError(f"blocked by test_layers: {name}")
        return None

sys.meta_path.insert(0, _Blocked())
"""


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)


def _is_app(module: str) -> bool:
    return any(module == a or module.startswith(a + ".") for a in APP)


def _modules():
    for path in sorted((ROOT / "tilesim").rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        yield name, path


def _imported(name: str, path: Path):
    """(line, dotted module) of every import statement in the file, at any depth, relative ones resolved."""
    is_pkg = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")
                base = base[: len(base) - node.level + (1 if is_pkg else 0)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module
            if target == "__future__":
                continue
            yield node.lineno, target
            for alias in node.names:  # `from . import report` names a module
                yield node.lineno, f"{target}.{alias.name}"


def test_core_runs_with_kernels_and_hwmodels_blocked():
    res = _run(BLOCK + """
import importlib, pkgutil

import numpy as np

import tilesim, tilesim.language, tilesim.frontend, tilesim.backends.interp, tilesim.analysis, tilesim.sim
from tilesim.examples import matmul

APP = %r
for m in pkgutil.walk_packages(tilesim.__path__, "tilesim."):
    if not any(m.name == a or m.name.startswith(a + ".") for a in APP):
        importlib.import_module(m.name)

k = matmul(48, 40, 24, 16, 16, 8, dtype="float32")
rng = np.random.default_rng(0)
a = rng.standard_normal((48, 24), dtype=np.float32)
b = rng.standard_normal((24, 40), dtype=np.float32)
np.testing.assert_allclose(k(a, b), a @ b, rtol=1e-5, atol=1e-5)
assert not any(m.split(".")[0] in ("kernels", "hwmodels") for m in sys.modules), "kernels/hwmodels loaded"
try:
    tilesim.hw.resolve("h100")
except ImportError as e:
    assert "blocked by test_layers: hwmodels" in str(e), e
else:
    raise AssertionError("a hardware model name was resolved with hwmodels blocked")
print("core ok")
""" % (APP,))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "core ok" in res.stdout


def test_the_blocker_blocks():
    """The blocked-import test above could pass vacuously if the finder did not work."""
    res = _run(BLOCK + "import tilesim.cli\n")
    assert res.returncode != 0 and "blocked by test_layers" in res.stderr


def test_import_tilesim_loads_no_plotting_kernels_or_hardware_models():
    res = _run("""
import sys
import tilesim
import tilesim.language as T
heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("matplotlib", "kernels", "hwmodels"))
print("loaded:", heavy)
""")
    assert res.returncode == 0, res.stderr
    assert "loaded: []" in res.stdout, res.stdout


def test_core_modules_import_neither_package_nor_the_app_layer():
    problems = []
    for name, path in _modules():
        if _is_app(name):
            continue
        for line, target in _imported(name, path):
            if target.split(".")[0] in ABOVE_CORE or (target.startswith("tilesim.") and _is_app(target)):
                problems.append(f"{path.relative_to(ROOT)}:{line} imports {target}")
    assert not problems, "core modules reach above the core:\n" + "\n".join(problems)


def test_app_list_names_existing_modules():
    names = {name for name, _ in _modules()}
    assert set(APP) <= names, set(APP) - names


def test_resolve_passes_models_through_and_resolves_names():
    model = hwmodels.load("h100")
    assert hw.is_model(model) and hw.resolve(model) is model
    assert hw.resolve("h100") is model and not hw.is_model("h100") and not hw.is_model(ROOT / "x.toml")
    with pytest.raises(hwmodels.HardwareModelError, match="no built-in hardware model"):
        hw.resolve("no_such_gpu")


def test_set_resolver_installs_and_restores():
    model = hwmodels.load("a100")
    seen = []
    previous = hw.set_resolver(lambda name: seen.append(name) or model)
    try:
        assert hw.resolve("my-device") is model and seen == ["my-device"]
        assert hw.resolve(model) is model and seen == ["my-device"]  # a model never reaches the resolver
    finally:
        hw.set_resolver(previous)
    assert hw.resolve("h100").name == "h100_sxm5_80gb"
