#!/usr/bin/env bash
# Sets up everything and runs one task with the agent: the page in headless Chromium, with
# WebLLM when the browser has a WebGPU adapter, else the CPU engine. Prints the plan, each step
# and the answer; writes the session's JSONL history to .artifacts/history/run.jsonl.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh --browser
exec .venv/bin/python -m agent_py run "$@"
