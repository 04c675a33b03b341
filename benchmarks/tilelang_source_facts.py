"""Facts read from TileLang's generated CUDA (the timing runs' source tarballs), kept as a small data table.

Contract
--------
* Reads ``.cu`` files (TileLang 0.1.15's ``kernel.get_kernel_source()`` of each configuration, named ``<id>.cu``) from
  the tarballs or folders given and writes, per id: ``launch_threads`` (the first kernel's ``__launch_bounds__``),
  ``warp_specialised`` (the kernel moves registers between warpgroups: ``setmaxnreg`` / ``warpgroup_reg``),
  ``tma`` / ``cp_async`` (asynchronous copies present), and ``allreduce``: every ``tl::AllReduce<Op, threads, scale>``
  instantiation in source order (``"op<threads,scale>"``; ``threads / scale`` threads take part in one call).
* The table (``tests/sim/data/tilelang_0115_source_facts.json``) is what the simulator's lowering rules are tested
  against (``tests/sim/test_lowering_facts.py``); the sources themselves stay in ``reports/measurements``.

Run: ``python benchmarks/tilelang_source_facts.py reports/measurements/tilelang_h200_fifth*_sources_*.tgz
reports/measurements/tilelang_sources_20261202T0440Z --out tests/sim/data/tilelang_0115_source_facts.json``
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tarfile
from pathlib import Path

_LAUNCH = re.compile(r"__launch_bounds__\((\d+)(?:, \d+)?\) main_kernel\(")
_ALLREDUCE = re.compile(r"tl::AllReduce<tl::(\w+)Op, (\d+), (\d+)")


def facts(text: str) -> dict:
    """The facts of one generated source (see the module docstring)."""
    m = _LAUNCH.search(text)
    return {"launch_threads": int(m.group(1)) if m else None,
            "warp_specialised": "setmaxnreg" in text or "warpgroup_reg" in text,
            "tma": "tma_load" in text, "cp_async": "cp_async" in text or "cp.async" in text,
            "allreduce": [f"{op.lower()}<{t},{s}>" for op, t, s in _ALLREDUCE.findall(text)]}


def _sources(path: Path):
    if path.is_dir():
        for f in sorted(path.glob("*.cu")):
            yield f.stem, f.read_text()
        return
    with tarfile.open(path) as tar:
        for mem in tar.getmembers():
            if mem.isfile() and mem.name.endswith(".cu"):
                yield Path(mem.name).stem, tar.extractfile(mem).read().decode()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="+", type=Path)
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    table = {}
    for p in a.paths:
        for i, text in _sources(p):
            table[i] = dict(facts(text), source=p.name)
    Path(a.out).write_text(json.dumps({"tilelang": "0.1.15", "configs": dict(sorted(table.items()))}, indent=1) + "\n")
    print(f"{len(table)} sources -> {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
