#!/usr/bin/env bash
# Sets up everything and runs all checks: lint, format, types, tests (CPython and Chromium).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh --browser
# The tests' OpenAI-compatible model server (llama.cpp's llama-server, native): built once
# per machine (about 5 minutes) into .artifacts/model-server; only the tests use it.
bash scripts/setup_model_server.sh
# strace for the loopback-only check (tests/web/test_loopback_only.py), which also needs user
# namespaces (unshare -rn); in CI a check that cannot run fails (tests/needs.py).
if ! command -v strace >/dev/null; then
  if [ "$(id -u)" -eq 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq strace >/dev/null
  else
    echo "strace is missing: run 'sudo apt-get install -y strace' once, or the loopback-only check cannot run" >&2
  fi
fi

echo "== ruff"
.venv/bin/ruff check agent_py tests scripts playwright.config.py
.venv/bin/ruff format --check agent_py tests scripts playwright.config.py
echo "== mypy (strict on agent_py)"
.venv/bin/mypy agent_py
echo "== pytest"
.venv/bin/python -m pytest -q "$@"
