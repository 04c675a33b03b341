import os

from hypothesis import HealthCheck, settings

settings.register_profile("ci", derandomize=True, database=None, deadline=None, print_blob=True,
                          max_examples=10, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", deadline=None, max_examples=25)
settings.load_profile(os.environ.get("TILESIM_HYPOTHESIS_PROFILE", "ci"))
