"""The command line (CPython only): ``main`` (``python -m agent_py``), ``terminal`` (serves the
page on loopback and drives it in headless Chromium), ``web_server`` (that server),
``demo`` (the scripted demo model)."""
