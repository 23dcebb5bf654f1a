"""The Python side of the page's worker (Pyodide): the agent's session (``session``), its
settings (``settings``), the contracts of the JavaScript objects it calls (``ports``) and the
adapters over them: the engine and sandbox (``engine``), MCP's HTTP (``http``), the user's
sign-in and forms (``user``), and the event loop (``loop``, Pyodide only).

Nothing is imported here: ``http`` and ``user`` import the MCP package, which a page without
servers never loads.
"""
