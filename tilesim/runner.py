"""``tilesim run NAME``: run one registered kernel on the interpreter (or CUDA) and check it.

``check_shape_values(spec, shape)`` is the check of ``--shape KEY=VALUE`` values shared with ``tilesim
tune``: a parameter the kernel does not take, or a value of another kind than the kernel's own values
for it (a size or tile that is not a positive integer, ``causal=3``, ``dtype=1``) → ``KernelTypeError``.
"""

from __future__ import annotations

import sys
import time

import numpy as np

from kernels.registry import get

from .errors import KernelTypeError
from .kernel import JITKernel
from .testing.compare import compare_arrays


class ProgressBar:
    """A one-line progress bar for long interpreter runs (drawn only after the first second)."""

    def __init__(self, out=sys.stderr, width=30, delay=1.0):
        self.out, self.width, self.delay = out, width, delay
        self.t0 = time.perf_counter()
        self.drawn = False

    def __call__(self, launch, done, total):
        if time.perf_counter() - self.t0 < self.delay or not self.out.isatty():
            return
        frac = done / max(total, 1)
        fill = int(self.width * frac)
        self.out.write(f"\r  launch {launch}: [{'#' * fill}{'.' * (self.width - fill)}] {done}/{total} blocks")
        self.out.flush()
        self.drawn = True

    def close(self):
        if self.drawn:
            self.out.write("\n")


def check_shape_values(spec, shape: dict) -> dict:
    """``shape`` if every value fits the registered kernel ``spec`` (see the module docstring)."""
    seen: dict = {}
    for sh in (spec.defaults, *spec.test_shapes, *spec.shapes):
        for k, v in sh.items():
            if k != "label":
                seen.setdefault(k, []).append(v)
    unknown = sorted(set(shape) - set(seen))
    if unknown:
        raise KernelTypeError(f"kernel {spec.name} has no parameter {', '.join(unknown)}",
                              hint="parameters it takes: " + ", ".join(sorted(seen)))
    for k, v in shape.items():
        own = seen[k]
        if all(isinstance(x, bool) for x in own):
            ok, want = isinstance(v, bool), "true or false"
        elif all(isinstance(x, int) and not isinstance(x, bool) and x > 0 for x in own):
            ok, want = isinstance(v, int) and not isinstance(v, bool) and v > 0, "a positive integer"
        elif all(isinstance(x, int) and not isinstance(x, bool) for x in own):
            ok, want = isinstance(v, int) and not isinstance(v, bool), "an integer"
        elif all(isinstance(x, str) for x in own):
            ok, want = isinstance(v, str), f"a name like {own[0]!r}"
        else:
            continue
        if not ok:
            raise KernelTypeError(f"kernel {spec.name}: {k} must be {want}, got {v!r}",
                                  hint=f"its registered values: {', '.join(sorted({repr(x) for x in own}))}")
    return shape


def run_registered(name: str, shape: dict, target: str = "interp", seed: int = 0, out=sys.stdout) -> int:
    spec = get(name)
    check_shape_values(spec, shape)
    base = dict(spec.test_shapes[0]) if spec.test_shapes else {}
    params = spec.params(base, **shape)
    rng = np.random.default_rng(seed)
    try:
        inputs = spec.make_inputs(rng, **params)
        kernel = spec.build(**params)
    except TypeError as e:
        known = sorted(set(spec.defaults) | {k for s in spec.test_shapes for k in s if k != "label"})
        raise KernelTypeError(f"kernel {name}: cannot build it with {params}: {e}",
                              hint="parameters it takes: " + ", ".join(known)) from None
    if target != "interp":
        kernel = JITKernel(kernel.prim_func, target=target, outputs=[kernel.prim_func.params[i] for i in kernel.out_idx])
    print(f"{name}: {', '.join(f'{k}={v}' for k, v in params.items())}  [target={kernel.target}]", file=out)
    bar = ProgressBar(out=sys.stderr)
    t0 = time.perf_counter()
    outs = kernel.run(*inputs, progress=bar) if kernel.target in ("interp", "tiered") else kernel(*inputs)
    t1 = time.perf_counter()
    bar.close()
    refs = spec.reference(*inputs, **params)
    outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
    refs = list(refs) if isinstance(refs, (list, tuple)) else [refs]
    ok = True
    if spec.compare is not None:
        try:
            spec.compare(outs, refs, params)
        except AssertionError as e:
            print(f"  MISMATCH: {e}", file=out)
            ok = False
    else:
        tol = spec.tolerance
        for i, (o, r) in enumerate(zip(outs, refs)):
            p = compare_arrays(o, r, rtol=tol.get("rtol"), atol=tol.get("atol"), exact=tol.get("exact", False),
                               name=f"output {i}")
            if p:
                print(f"  MISMATCH: {p}", file=out)
                ok = False
    print(f"  {'OK' if ok else 'FAILED'}: ran in {t1 - t0:.3f} s, matched the NumPy reference"
          if ok else f"  FAILED after {t1 - t0:.3f} s", file=out)
    return 0 if ok else 1
