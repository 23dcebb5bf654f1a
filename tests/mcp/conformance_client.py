"""The client the MCP conformance suite runs: ``python conformance_client.py SERVER_URL``.

The suite names its scenario in ``MCP_CONFORMANCE_SCENARIO`` and passes credentials in
``MCP_CONFORMANCE_CONTEXT``; everything goes through ``python -m agent_py.mcp``, the
terminal command a user has. The authorization page is visited by browser_stand_in.py
(as ``$BROWSER``); tokens go to a fresh file per run.
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
        if context.get("idp_token_endpoint"):
            options += ["--idp-token-endpoint", context["idp_token_endpoint"]]
            options += ["--idp-client-id", context["idp_client_id"]]
            env["MCP_IDP_ID_TOKEN"] = context["idp_id_token"]
        if scenario in CALLS:
            return cli(url, *options, *CALLS[scenario], env=env).returncode
        listed = cli(url, *options, "tools", env=env)
        if listed.returncode != 0:
            return listed.returncode
        names = [line for line in listed.stdout.splitlines() if line and not line[0].isspace()]
        if names and not names[0].startswith("The server offers no tools"):
            return cli(url, *options, "call", names[0], env=env).returncode
        return 0


if __name__ == "__main__":
    sys.exit(main())
