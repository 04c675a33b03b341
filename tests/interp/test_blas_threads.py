"""OpenBLAS's thread count while chunks run on threads (``backends/interp/blas.py``): limited inside, restored
after (also when limits overlap across threads), and ``run_chunks`` with several workers runs its chunks under
the limit; values do not change."""

import threading

import numpy as np
import pytest

from tilesim.backends.interp import blas, chunks

pytestmark = pytest.mark.skipif(blas.threads() is None, reason="NumPy here does not link OpenBLAS")


@pytest.fixture
def two_blas_threads():
    before = blas.threads()
    blas._api[0](2)
    yield
    blas._api[0](before)


def test_limited_sets_and_restores(two_blas_threads):
    with blas.limited(1):
        assert blas.threads() == 1
        with blas.limited(1):
            assert blas.threads() == 1
        assert blas.threads() == 1  # the outer one still holds
    assert blas.threads() == 2
    with blas.limited(4):  # never raises the count
        assert blas.threads() == 2
    assert blas.threads() == 2


def test_overlapping_limits_in_threads_restore_once_all_close(two_blas_threads):
    inside, release = threading.Event(), threading.Event()

    def other():
        with blas.limited(1):
            inside.set()
            release.wait(10)

    t = threading.Thread(target=other)
    t.start()
    inside.wait(10)
    with blas.limited(1):
        assert blas.threads() == 1
    assert blas.threads() == 1  # the other thread's limit is still open
    release.set()
    t.join()
    assert blas.threads() == 2


def test_threaded_chunks_run_with_one_blas_thread_per_cpu_share(two_blas_threads, monkeypatch):
    monkeypatch.setattr(chunks, "usable_cpus", lambda: 2)
    seen = []
    a = np.arange(64.0).reshape(8, 8)

    def fn(start):
        seen.append(blas.threads())
        return start, float((a @ a).sum())

    out = []
    chunks.run_chunks(range(4), fn, out.append, workers=2)
    assert seen == [1] * 4 and [o[0] for o in out] == [0, 1, 2, 3]
    assert len({o[1] for o in out}) == 1
    assert blas.threads() == 2
    seen.clear()
    chunks.run_chunks(range(3), fn, None, workers=1)  # sequential: BLAS keeps its threads
    assert seen == [2] * 3
