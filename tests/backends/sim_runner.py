"""Run the registry's kernels at their toy sizes under numba's CUDA simulator (the subprocess of the
``cudasim`` executor, ``tests/executors.py``: ``NUMBA_ENABLE_CUDASIM=1`` must be set before ``numba.cuda``
is imported).

Prints one JSON object per case on stdout. Registry kernels: ``name``, ``ok`` (it ran), ``error``, and with
``--out DIR`` the path of an ``.npz`` holding the inputs (``in0``...; before the call) and the outputs
(``out0``...: returned ones, then inputs written in place), compared by the test process. Library kernels
(``--library NAME...``) are compared with the interpreter here (``check.run_case``'s row, with
``"library": true``).
``--only NAME...`` restricts the registry kernels.
"""

import argparse
import json
import os
import sys
import time

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402

from tests import registry  # noqa: E402
from tests.executors import outputs_of  # noqa: E402
from tilesim.backends.cuda.check import cuda_twin, library_cases, run_case  # noqa: E402


def run_kernel(tk, out_dir):
    inputs = tk.inputs(np.random.default_rng(tk.seed()), tk.toy)
    args = [x.copy() for x in inputs]
    outs = outputs_of(cuda_twin(tk.build(tk.toy))(*args), args, tk.inplace)
    row = {"name": tk.name, "ok": True}
    if out_dir:
        path = os.path.join(out_dir, tk.name + ".npz")
        np.savez(path, **{f"in{i}": x for i, x in enumerate(inputs)}, **{f"out{i}": np.asarray(o) for i, o in enumerate(outs)})
        row.update(npz=path, n_in=len(inputs), n_out=len(outs))
    return row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--out", default=None, help="folder for the inputs/outputs of each registry kernel (.npz)")
    ap.add_argument("--library", nargs="*", default=None,
                    help="registered kernel names to run too (fp32/fp16 ones; default: none)")
    a = ap.parse_args()
    jobs = [(name, (lambda tk=tk: run_kernel(tk, a.out))) for name, tk in registry.REGISTRY.items()
            if "cudasim" in tk.executors and (not a.only or name in a.only)]
    if a.library:
        from kernels.registry import all_specs

        specs = [s for s in all_specs() if s.name in a.library]
        over = {"*": {"dtype": "float16"}}
        rng = np.random.default_rng(1234)
        jobs += [(c.name, (lambda c=c: {**run_case(c, rng), "library": True}))
                 for c in library_cases(specs, allow_dtypes={"float32", "float16"}, overrides=over) if c.kernel is not None]
    for name, job in jobs:
        t = time.time()
        try:
            r = job()
        except Exception as e:  # noqa: BLE001
            r = {"name": name, "ok": False, "error": f"{type(e).__name__}: {e}"[:2000]}
            if a.library and name not in registry.REGISTRY:
                r["library"] = True
        r["seconds"] = round(time.time() - t, 2)
        print(json.dumps(r), flush=True)


if __name__ == "__main__":
    main()
