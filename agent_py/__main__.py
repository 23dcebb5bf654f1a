"""``python -m agent_py``: the command line (agent_py/cli/main.py)."""

import sys

from agent_py.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
