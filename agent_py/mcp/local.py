"""The HTTP transport of CPython (the terminal, the tests), imported on first use.

It lives apart from transport.py, which httpx_transport.py builds on, so that the two do
not import each other; and apart from httpx_transport.py, whose httpx the page lacks.
"""

from __future__ import annotations

import sys

from agent_py.mcp.errors import MCPConfigError
from agent_py.mcp.transport import HTTPTransport


def cpython_transport() -> HTTPTransport:
    """The httpx transport. Not available in the browser."""
    if sys.platform == "emscripten":
        raise MCPConfigError(
            "The 'http' transport needs CPython; in the page, use the 'fetch' or 'bridge' "
            "transport."
        )
    from agent_py.mcp.httpx_transport import HttpxTransport

    return HttpxTransport()
