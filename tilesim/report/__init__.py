"""Reports: pure functions from simulator results and recorded measurements to figures and tables.

``tilesim report`` (``main.py``) collects simulator points (``collect.py``), checks the seeds' claims
(``claims.py``), and writes ``roofline_<device>.png/.svg`` (``roofline.py``), ``devices.png``
(``devices.py``), ``summary.json`` and ``summary.md`` (``summary.py``; the Markdown is rendered from
the JSON alone). Every file is written atomically (``io.py``).

Layer: app (see :mod:`tilesim.hw`): imports the kernel library and the hardware models.
"""
