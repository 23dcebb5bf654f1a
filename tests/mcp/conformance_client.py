"""The client the MCP conformance suite runs: ``python conformance_client.py SERVER_URL``.

The suite names its scenario in ``MCP_CONFORMANCE_SCENARIO``, the revision to speak in
``MCP_CONFORMANCE_PROTOCOL_VERSION`` (passed on as ``--protocol-version``: 2026-07-28 is
stateless, the earlier ones open a session with initialize) and passes credentials or the
calls to make in ``MCP_CONFORMANCE_CONTEXT``; everything goes through
``python -m agent_py.mcp``, the terminal command a user has. The authorization page is
visited by browser_stand_in.py (as ``$BROWSER``); tokens go to a fresh file per run.

What each scenario needs called (the rest of what it checks is the client's own doing):
- tools_call: ``add_numbers`` with a and b; elicitation-sep1034-client-defaults and
  sse-retry: their one tool (CALLS).
- http-custom-headers: the context's ``toolCalls``, with their arguments, as given.
- json-schema-ref-no-deref: only the listing (its server answers nothing else).
- json-schema-2020-12-preservation: the focal tool's schema, as the client keeps it, sent
  back to ``json_schema_echo``. The terminal command prints a summary of each schema, so
  this one scenario reads the schema through the library (:func:`echo_schema`).
- Every other scenario: every tool the server lists, each called with no arguments.
  sep-2322-client-request-state lists four, each a different input_required round
  (answered with the schema's defaults under ``--yes``); http-invalid-tool-headers lists
  one valid tool among ten the client must leave out of its listing; request-metadata
  and http-standard-headers check the headers and ``_meta`` of whatever is sent; the
  authorization scenarios list one tool.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from agent_py.mcp.client import MCPClient
from agent_py.mcp.handshake import AUTO
from agent_py.mcp.local import cpython_transport

HERE = Path(__file__).parent
CLIENT_METADATA_URL = "https://conformance-test.local/client-metadata.json"
CALLS = {
    "tools_call": ["call", "add_numbers", '{"a": 5, "b": 3}'],
    "elicitation-sep1034-client-defaults": ["call", "test_client_elicitation_defaults"],
    "sse-retry": ["call", "test_reconnection"],
    "json-schema-ref-no-deref": ["tools"],
}
SCHEMA_TOOL, ECHO_TOOL = "json_schema_2020_12_tool", "json_schema_echo"


def cli(url: str, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "agent_py.mcp", url, *args]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    sys.stdout.write(done.stdout)
    sys.stderr.write(done.stderr)
    return done


async def echo_schema(url: str, version: str) -> int:
    """Send the focal tool's input schema, as the client parsed and kept it, to the echo
    tool: the suite diffs it against what it served."""
    async with MCPClient(url, transport=cpython_transport(), protocol=version) as client:
        tools = {tool.name: tool for tool in await client.refresh_tools()}
        schema = tools[SCHEMA_TOOL].input_schema
        result = await client.call_tool(ECHO_TOOL, {"schema": schema})
    return 1 if result.is_error else 0


def main() -> int:
    url = sys.argv[-1]
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    version = os.environ.get("MCP_CONFORMANCE_PROTOCOL_VERSION")
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    if scenario == "json-schema-2020-12-preservation":
        return asyncio.run(echo_schema(url, version or AUTO))
    with tempfile.TemporaryDirectory() as home:
        env = {
            **os.environ,
            "XDG_CONFIG_HOME": home,
            "BROWSER": f"{sys.executable} {HERE / 'browser_stand_in.py'} %s",
        }
        options = ["--yes", "--timeout", "20", "--client-metadata-url", CLIENT_METADATA_URL]
        if context.get("client_id"):
            options += ["--client-id", context["client_id"]]
        if context.get("client_secret"):
            env["MCP_CLIENT_SECRET"] = context["client_secret"]
        if scenario.startswith("auth/client-credentials"):
            options.append("--client-credentials")
        if version:
            options += ["--protocol-version", version]
        if context.get("idp_token_endpoint"):
            options += ["--idp-token-endpoint", context["idp_token_endpoint"]]
            options += ["--idp-client-id", context["idp_client_id"]]
            env["MCP_IDP_ID_TOKEN"] = context["idp_id_token"]
        if scenario in CALLS:
            return cli(url, *options, *CALLS[scenario], env=env).returncode
        calls = [(c["name"], c.get("arguments") or {}) for c in context.get("toolCalls") or []]
        if not calls:
            listed = cli(url, *options, "tools", env=env)
            if listed.returncode != 0:
                return listed.returncode
            names = [line for line in listed.stdout.splitlines() if line and not line[0].isspace()]
            calls = [(n, {}) for n in names if not n.startswith("The server offers no tools")]
        codes = [cli(url, *options, "call", n, json.dumps(a), env=env).returncode for n, a in calls]
        # A tool's own error (1) is the scenario's business; 2 is the client's failure.
        return 2 if 2 in codes else 0


if __name__ == "__main__":
    sys.exit(main())
