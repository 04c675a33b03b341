"""The Ray executor against the in-process run (opt-in: ``TILESIM_TEST_RAY=1`` with ``ray`` installed).

Ray is not in the ``test`` extra (Dask is the engine CI runs; see docs/sweeps.md), and a local Ray
takes 10-20 s to start, so this runs only when asked for.
"""

import os

import pytest

if not os.environ.get("TILESIM_TEST_RAY"):
    pytest.skip("set TILESIM_TEST_RAY=1 (and pip install ray) to run the Ray executor test", allow_module_level=True)
pytest.importorskip("ray")

import hwmodels  # noqa: E402
from kernels.registry import get  # noqa: E402
from tilesim.sweep import make_executor  # noqa: E402
from tilesim.tune import run_trials, search_space  # noqa: E402


def test_ray_trials_equal_the_in_process_ones_and_keep_going_after_a_failure():
    spec, model = get("rmsnorm"), hwmodels.load("h200_sxm_141gb")
    tasks = [(spec, spec.shapes[0], model, None, c) for c in search_space(spec.tunables, spec.defaults, 10)]
    bad = (spec, spec.shapes[0], model, None, {"block_M": "x"})
    with make_executor("ray", workers=2) as ex:
        trials = run_trials(tasks[:5] + [bad] + tasks[5:], ex)
    assert trials[:5] + trials[6:] == run_trials(tasks)
    assert trials[5].error.startswith("TypeError")
