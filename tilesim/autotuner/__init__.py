"""TileLang's ``tilelang.autotuner``: ``AutoTuner``, ``autotune``, ``AutotuneResult``, ``set_autotune_inputs``.

See :mod:`.tuner` for the meaning (oracles, checks, caching) and :mod:`.decorator` for ``@autotune``.
"""

from .decorator import AutoTuneImpl, autotune
from .tuner import AutoTuner, AutotuneResult, get_autotune_inputs, set_autotune_inputs

__all__ = ["AutoTuner", "AutoTuneImpl", "AutotuneResult", "autotune", "get_autotune_inputs",
           "set_autotune_inputs"]
