"""The ``python -c`` sources with which the conformance harness (``tilelang_examples.py``) runs a program at
smaller sizes without editing it: module-level names pinned, a function's keyword arguments replaced, or
constants of ``main``'s code object replaced. Harness only; each returns Python source as a string."""

from __future__ import annotations


def small_globals_command(script: str, pins: dict, argv=()) -> str:
    """``python -c`` source that runs ``script`` (command-line ``argv``) as ``__main__`` with the module-level
    names ``pins`` pinned (a string value is Python source evaluated first)."""
    return (f"import collections.abc, sys\n"
            f"pins = {{k: eval(v) if isinstance(v, str) else v for k, v in {pins!r}.items()}}\n"
            f"class Pinned(collections.abc.MutableMapping):  # module namespace: writes to pinned names are skipped\n"
            f"    def __init__(self, g): self.g = g\n"
            f"    def __getitem__(self, k): return self.g[k]\n"
            f"    def __setitem__(self, k, v):\n"
            f"        if k not in pins: self.g[k] = v\n"
            f"    def __delitem__(self, k): del self.g[k]\n"
            f"    def __iter__(self): return iter(self.g)\n"
            f"    def __len__(self): return len(self.g)\n"
            f"g = {{'__name__': '__main__', '__file__': {script!r}, '__builtins__': __builtins__, **pins}}\n"
            f"sys.argv = [{script!r}, *{list(argv)!r}]\n"
            f"exec(compile(open({script!r}).read(), {script!r}, 'exec'), g, Pinned(g))\n")


def small_consts_command(script: str, consts: dict, argv=()) -> str:
    """``python -c`` source that runs ``script``'s main() (command-line ``argv``) with the constants ``consts``
    (old value -> new value) of main's code object replaced."""
    return (f"import importlib.util, sys\n"
            f"sys.argv = [{script!r}, *{list(argv)!r}]\n"
            f"spec = importlib.util.spec_from_file_location('__example__', {script!r})\n"
            f"mod = sys.modules['__example__'] = importlib.util.module_from_spec(spec)\n"
            f"spec.loader.exec_module(mod)\n"
            f"swap = {consts!r}\n"
            f"code = mod.main.__code__\n"
            f"missing = [c for c in swap if c not in code.co_consts]\n"
            f"assert not missing, f'main() has no constant {{missing}}'\n"
            f"mod.main.__code__ = code.replace(co_consts=tuple(swap.get(c, c) if type(c) in (int, tuple) else c "
            f"for c in code.co_consts))\n"
            f"mod.main()\n")


def small_call_command(script: str, function: str, sizes: dict) -> str:
    """``python -c`` source that runs ``script``'s main() with ``function``'s keyword arguments ``sizes``."""
    return (f"import functools, importlib.util, sys\n"
            f"spec = importlib.util.spec_from_file_location('__example__', {script!r})\n"
            f"mod = sys.modules['__example__'] = importlib.util.module_from_spec(spec)\n"
            f"spec.loader.exec_module(mod)\n"
            f"fn = getattr(mod, {function!r})\n"
            f"setattr(mod, {function!r}, functools.wraps(fn)(lambda *a, **k: fn(*a, **{{**k, **{sizes!r}}})))\n"
            f"mod.main()\n")
