"""The command line (CPython only): ``main`` (``python -m agent_py``), ``terminal`` (serves the
page on loopback and drives it in headless Chromium; ``browser_launch`` starts what it needs,
``checkout`` reads the source checkout), ``run_command`` (``python -m agent_py run``),
``run_report`` (what a run prints and the history it writes), ``web_server`` (the page's
server), ``demo`` (the scripted demo model)."""
