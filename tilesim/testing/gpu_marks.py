"""``tilelang.testing``'s hardware marks and ``main``: what TileLang's example tests are decorated with.

TileLang skips a test marked ``requires_cuda`` where no CUDA GPU is present, because its kernels need one.
tilesim runs the kernels anywhere; what such a test still needs is what its body allocates: torch tensors on
``device="cuda"``. So here:

* ``requires_cuda(fn)``: skipped unless torch is installed and ``torch.cuda.is_available()`` (a real GPU, or a
  CUDA-on-CPU shim such as the conformance harness's). The reason says tilesim would run the kernel and that
  the test's torch tensors are what is missing.
* ``requires_cuda_compute_version(major, minor=0, mode="ge")`` and its ``_ge``/``_gt``/``_eq``/``_lt``/``_le``
  forms: also skipped unless ``torch.cuda.get_device_capability()`` compares as asked with
  ``(major, minor)`` (no CUDA: ``(0, 0)``, so skipped).
* ``requires_rocm``, ``requires_cdna``, ``requires_gfx950``, ``requires_gfx`` (AMD GPUs): skipped unless
  torch is a ROCm build with a device.
* ``main()``: runs pytest on the calling file with the command line's arguments and exits with its status,
  as ``tilelang.testing.main()`` does.

Every mark returns the function itself when pytest is not imported (a program's ``main()`` may call a test
function directly: it then runs), and a ``pytest.mark.skipif`` of it inside a test session. Nothing here
imports torch or pytest: each is used only when the caller has imported it (:func:`tilesim.optional.loaded`)
— a test file using torch tensors imports torch itself, and one that has not cannot make CUDA tensors.
"""

from __future__ import annotations

import inspect
import sys

from ..optional import loaded, require

__all__ = ["main", "requires_cdna", "requires_cuda", "requires_cuda_compute_version",
           "requires_cuda_compute_version_eq", "requires_cuda_compute_version_ge",
           "requires_cuda_compute_version_gt", "requires_cuda_compute_version_le",
           "requires_cuda_compute_version_lt", "requires_gfx", "requires_gfx950", "requires_rocm"]

_COMPARE = {"ge": lambda a, b: a >= b, "gt": lambda a, b: a > b, "le": lambda a, b: a <= b,
            "lt": lambda a, b: a < b, "eq": lambda a, b: a == b}


def _cuda_available() -> bool:
    torch = loaded("torch")
    return bool(torch is not None and torch.cuda.is_available() and not getattr(torch.version, "hip", None))


def _capability() -> tuple:
    if not _cuda_available():
        return (0, 0)
    return tuple(loaded("torch").cuda.get_device_capability())


def _mark(fn, skip: bool, reason: str):
    pytest = loaded("pytest")
    if pytest is None or not skip:
        return fn
    return pytest.mark.skipif(True, reason=reason)(fn)


def requires_cuda(fn):
    return _mark(fn, not _cuda_available(),
                 "the test allocates torch tensors on device='cuda', which this torch cannot (tilesim runs the "
                 "kernel itself on any machine)")


def requires_cuda_compute_version(major_version, minor_version=0, mode="ge"):
    if mode not in _COMPARE:
        raise ValueError(f"mode must be one of {', '.join(_COMPARE)}, got {mode!r}")
    want = (int(major_version), int(minor_version))

    def decorate(fn):
        have = _capability()
        if not _cuda_available():
            return requires_cuda(fn)
        return _mark(fn, not _COMPARE[mode](have, want),
                     f"needs CUDA compute capability {mode} {want[0]}.{want[1]}, the device reports "
                     f"{have[0]}.{have[1]}")

    return decorate


def requires_cuda_compute_version_ge(major_version, minor_version=0):
    return requires_cuda_compute_version(major_version, minor_version, "ge")


def requires_cuda_compute_version_gt(major_version, minor_version=0):
    return requires_cuda_compute_version(major_version, minor_version, "gt")


def requires_cuda_compute_version_eq(major_version, minor_version=0):
    return requires_cuda_compute_version(major_version, minor_version, "eq")


def requires_cuda_compute_version_lt(major_version, minor_version=0):
    return requires_cuda_compute_version(major_version, minor_version, "lt")


def requires_cuda_compute_version_le(major_version, minor_version=0):
    return requires_cuda_compute_version(major_version, minor_version, "le")


def _rocm_available() -> bool:
    torch = loaded("torch")
    return bool(torch is not None and getattr(torch.version, "hip", None) and torch.cuda.is_available())


def requires_rocm(fn):
    return _mark(fn, not _rocm_available(), "needs an AMD GPU through a ROCm build of torch")


requires_cdna = requires_gfx950 = requires_gfx = requires_rocm


def main():
    """Run pytest on the calling test file (``tilelang.testing.main()``) and exit with its status."""
    pytest = require("pytest", "tilelang.testing.main()")
    caller = inspect.getsourcefile(sys._getframe(1))
    sys.exit(pytest.main([caller] + sys.argv[1:]))
