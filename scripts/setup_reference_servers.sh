#!/usr/bin/env bash
# The MCP project's reference servers (mcp-server-time, -fetch, -git: stdio) and mcp-proxy, which
# puts each on Streamable HTTP with CORS for the page, for the real-task suite and tests/mcp. Two
# venvs under .artifacts/mcp-reference, since mcp-proxy needs mcp<2 and the servers mcp>=2.3,
# installed from scripts/reference_servers/*.txt: every package pinned with its sha256, for
# Linux x86_64 and CPython 3.11. Idempotent: a venv is made again only when its file changed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

python=${PYTHON:-python3}
root=.artifacts/mcp-reference
echo "MCP reference servers and mcp-proxy: $root (pins in scripts/reference_servers/)"
version=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
if [ "$version" != "3.11" ]; then
  # Only the suite's server tasks and tests/mcp need them: the rest of set-up goes on.
  echo "skipped: the reference servers' pins are for CPython 3.11, not $version (set" \
    "PYTHON=python3.11 for the suite's server tasks and their tests)" >&2
  exit 0
fi
for kind in servers proxy; do
  requirements=scripts/reference_servers/$kind.txt
  venv=$root/$kind
  if cmp -s "$requirements" "$venv/installed.txt"; then
    continue
  fi
  rm -rf "$venv"
  "$python" -m venv "$venv"
  "$python" scripts/setup_phase.py "installing $venv from $requirements (pip)" --about "30 s" -- \
    "$venv/bin/python" -m pip install -q --require-hashes --no-deps --only-binary=:all: \
    -r "$requirements"
  "$venv/bin/python" -m pip check >/dev/null
  cp "$requirements" "$venv/installed.txt"  # the stamp: what this venv was made from
done
