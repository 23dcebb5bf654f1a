#!/usr/bin/env python3
"""Serve web/ on 127.0.0.1: ``python scripts/serve.py [--port 8765] [--no-isolation]``.

The server lives in agent_py/cli/web_server.py so that tests, benchmarks and
``python -m agent_py run`` share it.
"""

import sys

from agent_py.cli.web_server import main

if __name__ == "__main__":
    sys.exit(main())
