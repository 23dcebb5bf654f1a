#!/usr/bin/env bash
# Sets up everything and runs one task in the terminal with the scripted demo model.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
exec .venv/bin/python -m agent_py demo "${1:-How many words does this sentence have?}"
