"""The house rules of the layout, as imports (every import counts, lazy ones and those only
for type checking included):

- the core (``agent_py.core``: the loop, plans, the model layer, what a tool is, records) is a
  leaf: it imports nothing of ``agent_py`` outside itself;
- the adapters beside it (``tools``, ``mcp``, ``engines``, ``page``, ``evals``) never import the
  command line (``agent_py.cli``, CPython only);
- ``agent_py.tools`` (the built-in tools) never imports MCP, the page, or the executor that
  calls tools;
- ``agent_py.mcp`` never imports the page;
- ``agent_py.engines`` never imports the page or the executor;
- in ``web/``, a file of the UI thread (``ui/``) never imports a file of the agent's worker
  (``worker/``).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import agent_py

PACKAGE = Path(agent_py.__file__).parent
WEB = PACKAGE.parent / "web"

# The adapters beside the core; the package's own face (``agent_py/__init__.py``,
# ``__main__.py``) and the command line (``cli``) may use any part.
ADAPTERS = {"page", "mcp", "tools", "evals", "engines"}
CLI = {"agent_py.cli", "agent_py.__main__"}
EXECUTOR = {
    "agent_py.core.agent",
    "agent_py.core.planner",
    "agent_py.core.execution",
    "agent_py.core.step_action",
}

# web/: ui/ runs on the UI thread, worker/ in the agent's worker; protocol.js (the message
# names) and workspace.js (the user's files in OPFS: the worker's tools read them, the Files
# panel shows them) are shared, and the files addressed by URL stay at the root.
UI = "ui"
WORKER = "worker"
ROOT_FILES = {"protocol.js", "sw.js", "oauth-callback.js", "workspace.js"}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> set[str]:
    """Every module ``path`` imports, at any depth of its code, relative imports resolved."""
    names: set[str] = set()
    package = module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package[: len(package) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def room_of(module: str) -> str:
    parts = module.split(".")
    if len(parts) > 1 and parts[1] in ADAPTERS:
        return parts[1]
    if len(parts) > 1 and parts[1] == "core":
        return "core"
    return "entry"  # agent_py itself, __main__, cli


def within(name: str, prefixes: set[str]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def broken_rules(modules: dict[str, set[str]]) -> list[str]:
    """``module imports name: rule`` for every import that breaks a rule."""
    outside_core = {f"agent_py.{name}" for name in ADAPTERS} | CLI
    cli = CLI
    forbidden = {
        "core": (outside_core, "the core imports nothing of agent_py outside itself"),
        "tools": (
            {"agent_py.page", "agent_py.mcp", *EXECUTOR, *cli},
            "tools never import MCP, the page, the executor or the command line",
        ),
        "mcp": ({"agent_py.page", *cli}, "MCP never imports the page or the command line"),
        "engines": (
            {"agent_py.page", *EXECUTOR, *cli},
            "engines never import the page, the executor or the command line (they may use "
            "MCP's transports)",
        ),
        "page": (cli, "the page's side never imports the command line"),
        "evals": (
            {"agent_py.cli.main", "agent_py.__main__"},
            "the suite never imports the command line's entry point (it drives the page "
            "through agent_py.cli.terminal)",
        ),
    }
    broken = []
    for module, names in sorted(modules.items()):
        rule = forbidden.get(room_of(module))
        if rule is None:
            continue
        prefixes, why = rule
        broken += [
            f"{module} imports {name}: {why}"
            for name in sorted(names)
            if within(name, prefixes) or (room_of(module) == "core" and name == "agent_py")
        ]
    return broken


def python_modules() -> dict[str, set[str]]:
    return {module_name(path): imports_of(path) for path in PACKAGE.rglob("*.py")}


_JS_IMPORT = re.compile(
    r"""(?:^|\s)(?:import|export)\s[^'"]*?['"](\.{1,2}/[^'"]+)['"]"""
    r"""|import\(\s*['"](\.{1,2}/[^'"]+)['"]""",
    re.M,
)


def web_imports(name: str) -> set[str]:
    """The web/ files ``name`` imports (static and dynamic imports of relative paths)."""
    path = WEB / name
    found = set()
    for match in _JS_IMPORT.finditer(path.read_text(encoding="utf-8")):
        target = (path.parent / (match.group(1) or match.group(2))).resolve()
        if target.is_relative_to(WEB):
            found.add(str(target.relative_to(WEB)))
    return found


def test_the_python_rooms_keep_their_rules() -> None:
    assert broken_rules(python_modules()) == []


def test_a_broken_rule_is_found() -> None:
    """The check itself: imports that break each rule are reported, and allowed ones are not."""
    modules = {
        "agent_py.core.planner": {"agent_py.mcp.host", "agent_py.core.plan"},
        "agent_py.core.execution": {"agent_py.tools.javascript", "agent_py.core.tool"},
        "agent_py.core.history": {"agent_py.cli.terminal"},
        "agent_py.core.llm": {"agent_py", "agent_py.ScriptedLLM"},
        "agent_py.tools.code": {"agent_py.core.step_action", "agent_py.core.tool"},
        "agent_py.mcp.client": {"agent_py.page.http"},
        "agent_py.page.session": {"agent_py.mcp.host", "agent_py.core.agent", "agent_py.cli"},
        "agent_py.engines.model_server": {"agent_py.mcp.transport"},
        "agent_py.cli.terminal": {"agent_py.page.settings", "agent_py.evals.suite"},
        "agent_py": {"agent_py.tools", "agent_py.core.agent"},
    }
    core_rule = "the core imports nothing of agent_py outside itself"
    assert broken_rules(modules) == [
        f"agent_py.core.execution imports agent_py.tools.javascript: {core_rule}",
        f"agent_py.core.history imports agent_py.cli.terminal: {core_rule}",
        f"agent_py.core.llm imports agent_py: {core_rule}",
        f"agent_py.core.planner imports agent_py.mcp.host: {core_rule}",
        "agent_py.mcp.client imports agent_py.page.http: "
        "MCP never imports the page or the command line",
        "agent_py.page.session imports agent_py.cli: "
        "the page's side never imports the command line",
        "agent_py.tools.code imports agent_py.core.step_action: "
        "tools never import MCP, the page, the executor or the command line",
    ]


def web_scripts() -> set[str]:
    return {
        str(path.relative_to(WEB))
        for path in WEB.rglob("*.js")
        if path.relative_to(WEB).parts[0] not in {"vendor", "dev"}
    }


def test_ui_files_import_no_worker_file() -> None:
    ui_files = {name for name in web_scripts() if name.startswith(UI + "/")}
    assert ui_files  # the rule checks something
    broken = {
        name: sorted(found for found in web_imports(name) if found.startswith(WORKER + "/"))
        for name in sorted(ui_files)
    }
    assert {name: found for name, found in broken.items() if found} == {}


def test_every_web_script_is_in_its_room() -> None:
    """A script is the UI's, the worker's, or one of the few the page addresses by URL."""
    placed = {name for name in web_scripts() if name.split("/")[0] in {UI, WORKER}}
    assert web_scripts() - placed == ROOT_FILES
