"""The package's Pyodide path imports no thread, subprocess or blocking network code.

Pyodide has no threads or processes and no sockets; the page reaches the network through
fetch. Modules that are CPython-only (the Node runner, the terminal entry points, the httpx
transport) are listed here and must never be imported by the rest.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import agent_py

PACKAGE = Path(agent_py.__file__).parent
CPYTHON_ONLY = {
    "agent_py/__main__.py",
    "agent_py/cli/main.py",
    "agent_py/cli/terminal.py",
    "agent_py/cli/browser_launch.py",
    "agent_py/cli/run_command.py",
    "agent_py/cli/mcp_servers.py",
    "agent_py/cli/web_server.py",
    "agent_py/tools/node_runner.py",
    "agent_py/mcp/__main__.py",
    "agent_py/mcp/httpx_transport.py",
    "agent_py/evals/runner.py",
    "agent_py/evals/atlas_server.py",
    "agent_py/evals/reference_servers.py",
}
FORBIDDEN = {
    "threading",
    "_thread",
    "subprocess",
    "multiprocessing",
    "concurrent",
    "socket",
    "selectors",
    "urllib.request",
    "http.client",
    "httpx",
    "requests",
    "asyncio.subprocess",
}


def module_level_nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node outside function bodies: lazy imports inside a function that only runs
    in CPython (behind a platform check) are allowed; the import probe below covers them."""
    found: list[ast.AST] = []
    pending = list(ast.iter_child_nodes(tree))
    while pending:
        node = pending.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            continue
        found.append(node)
        pending.extend(ast.iter_child_nodes(node))
    return found


def imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in module_level_nodes(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def pyodide_path_modules() -> list[Path]:
    root = PACKAGE.parent
    return [
        p for p in sorted(PACKAGE.rglob("*.py")) if str(p.relative_to(root)) not in CPYTHON_ONLY
    ]


def test_no_forbidden_imports_on_the_pyodide_path() -> None:
    offenders = {}
    for path in pyodide_path_modules():
        bad = {
            name
            for name in imported_modules(path)
            if any(name == f or name.startswith(f + ".") for f in FORBIDDEN)
        }
        cpython_only = {
            name
            for name in imported_modules(path)
            if name.replace(".", "/") + ".py" in CPYTHON_ONLY
        }
        if bad or cpython_only:
            offenders[str(path.relative_to(PACKAGE.parent))] = sorted(bad | cpython_only)
    assert offenders == {}


def test_no_blocking_sleep_on_the_pyodide_path() -> None:
    for path in pyodide_path_modules():
        assert "time.sleep(" not in path.read_text(encoding="utf-8"), path


def test_importing_the_package_loads_no_cpython_only_module() -> None:
    probe = (
        "import sys, agent_py, agent_py.tools, agent_py.core.planner;"
        "import importlib.util as u;"
        "mcp = u.find_spec('agent_py.mcp') and __import__('agent_py.mcp');"
        "bad = [m for m in sys.modules if m in ('agent_py.tools.node_runner', 'httpx',"
        " 'agent_py.mcp.httpx_transport', 'agent_py.cli.main')];"
        "print(','.join(bad))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == ""
