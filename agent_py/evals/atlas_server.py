"""The suite's MCP server, "atlas": a real MCP server (the official SDK) on loopback.

``python -m agent_py.evals.atlas_server PORT`` serves Streamable HTTP at
``http://127.0.0.1:PORT/mcp`` with CORS headers, as a server meant for browser clients
does, so the page reaches it with its own fetch. Its facts are fictional on purpose: an
answer that has them came from the tool, not from the model's memory. CPython only; needs
the development dependencies (``mcp``, ``uvicorn``).
"""

from __future__ import annotations

import sys

CAPITALS = {
    "zubrowka": "Lutz",
    "freedonia": "Fredville",
    "genovia": "Pyrus",
    "sylvania": "Orlin",
}


def main(port: int) -> None:
    import uvicorn
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from starlette.middleware.cors import CORSMiddleware

    server = MCPServer("atlas")

    @server.tool(description="Add two numbers.")
    def add(a: float, b: float) -> float:
        return a + b

    @server.tool(description="Multiply two numbers.")
    def multiply(a: float, b: float) -> float:
        return a * b

    @server.tool(description="The capital city of a country in the atlas.")
    def capital(country: str) -> str:
        found = CAPITALS.get(country.strip().lower())
        if found is None:
            raise ToolError(f"the atlas has no country named {country!r}")
        return found

    app = CORSMiddleware(
        server.streamable_http_app(),
        allow_origins=["*"],
        allow_methods=["GET", "POST", "DELETE"],
        allow_headers=["*"],
        expose_headers=["Mcp-Session-Id"],
    )
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main(int(sys.argv[1]))
