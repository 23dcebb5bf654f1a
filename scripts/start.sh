#!/usr/bin/env bash
# Sets up everything and serves the page on 127.0.0.1 (the URL is printed). Ctrl-C stops it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
exec .venv/bin/python scripts/serve.py --port "${PORT:-8765}"
