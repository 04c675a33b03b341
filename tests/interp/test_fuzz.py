"""Issue 16's CI fuzz suite: a few hundred deterministic mutations of valid kernels (tilesim.testing.fuzz).

Every invalid case must end in a user error (``KernelError`` with a location, or Python's own error in
the kernel file), every legal variation must run and match its NumPy reference: no internal
exception, no silent acceptance, no wrong answer, no hang. The larger run is ``benchmarks/fuzz.py``.
"""

import dataclasses
import textwrap
import warnings

import pytest

from tilesim.testing.fuzz import (
    BASES,
    CALL_MUTATIONS,
    SRC_MUTATIONS,
    VALID_MUTATIONS,
    Case,
    generate,
    run_case,
    summarise,
    torch_installed,
)

N_CASES = 300


@pytest.fixture(scope="module")
def summary():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # TileLangCompatWarning on some legal variations
        return summarise([run_case(c, timeout_s=30) for c in generate(N_CASES, seed=0)])


def test_no_internal_error_silent_acceptance_wrong_answer_or_hang(summary):
    bad = {k: summary[k] for k in ("internal", "silent", "wrong", "hang")}
    assert bad == {"internal": 0, "silent": 0, "wrong": 0, "hang": 0}, summary["failures"][:10]
    assert summary["rejected"] + summary["ok"] == N_CASES


def test_every_mutation_kind_is_exercised(summary):
    seen = set(summary["per_mutation"])
    want = {f"src:{m}" for m in SRC_MUTATIONS} | {f"call:{m}" for m in CALL_MUTATIONS} | \
           {f"ok:{m}" for m in VALID_MUTATIONS}
    if not torch_installed():  # torch is optional: its mutations are generated only where it is installed
        want -= {"call:torch-dtype", "ok:torch"}
    assert want <= seen, want - seen
    assert summary["ok"] >= 30  # legal variations really ran and matched


def test_rejections_carry_a_location(summary):
    assert summary["rejected_with_location"] == summary["rejected"]


def test_generation_is_deterministic():
    a, b = generate(60, seed=3), generate(60, seed=3)
    assert [(c.base, c.mutation, c.source, c.shape, c.call) for c in a] == \
           [(c.base, c.mutation, c.source, c.shape, c.call) for c in b]
    assert [c.source for c in generate(60, seed=4)] != [c.source for c in a]


def test_the_classifier_sees_silent_acceptance_and_wrong_answers():
    """The suite can fail: a valid kernel marked invalid is 'silent'; a broken kernel marked valid is 'wrong'."""
    valid = Case(10_000, "tile", "ok:plain", textwrap.dedent(BASES["tile"][0]), True, (20, 37, 8), call="plain")
    assert run_case(valid).kind == "ok"
    assert run_case(dataclasses.replace(valid, id=10_001, valid=False)).kind == "silent"
    broken = dataclasses.replace(valid, id=10_002, source=valid.source.replace("+ 1.0", "+ 2.0"))
    assert run_case(broken).kind == "wrong"
    hang = Case(10_003, "tile", "ok:hang", valid.source.replace(
        "T.copy(A_s, B_l)", "T.copy(A_s, B_l)\n            while B_l[0, 0] < 1e30:  # a kernel loop on data: runs for"
                            "\n                B_l[0, 0] = B_l[0, 0] + 1.0  # ~2**24 iterations (a loop that stops"
                            " changing its state is a deadlock error)"), True,
        valid.shape, call="plain")
    out = run_case(hang, timeout_s=2)
    assert out.kind == "hang", out.message
