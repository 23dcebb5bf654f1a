"""The client the MCP conformance suite runs: ``python conformance_client.py SERVER_URL``.

The suite names its scenario in ``MCP_CONFORMANCE_SCENARIO``, the revision to speak in
``MCP_CONFORMANCE_PROTOCOL_VERSION`` (passed on as ``--protocol-version``: 2026-07-28 is
stateless, the earlier ones open a session with initialize) and passes credentials or the
calls to make in ``MCP_CONFORMANCE_CONTEXT``; everything goes through
``python -m agent_py.mcp``, the terminal command a user has. The authorization page is
visited by browser_stand_in.py (as ``$BROWSER``); tokens go to a fresh file per run.

What is called: the scenario's own calls (CALLS, or the context's ``toolCalls``, as
http-custom-headers gives them), else every tool the server lists, with no arguments
(sep-2322-client-request-state has four tools, each a different input_required round;
the authorization scenarios one).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).parent
CLIENT_METADATA_URL = "https://conformance-test.local/client-metadata.json"
CALLS = {
    "tools_call": ["call", "add_numbers", '{"a": 5, "b": 3}'],
    "elicitation-sep1034-client-defaults": ["call", "test_client_elicitation_defaults"],
    "sse-retry": ["call", "test_reconnection"],
    # Servers that only list their tools (the checks are about the listing).
    "json-schema-ref-no-deref": ["tools"],
    "json-schema-2020-12-preservation": ["tools"],
}


def cli(url: str, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "agent_py.mcp", url, *args]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    sys.stdout.write(done.stdout)
    sys.stderr.write(done.stderr)
    return done


def main() -> int:
    url = sys.argv[-1]
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
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
        version = os.environ.get("MCP_CONFORMANCE_PROTOCOL_VERSION")
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
