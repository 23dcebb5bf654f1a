"""What the terminal reads from the source checkout it runs in, where ``web/``, ``scripts/``
and ``playwright.config.py`` sit beside the package: the browser settings, the page's catalog
of CPU models, and the sources the page's bundle is older than.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

from agent_py.core.errors import SetupError

ROOT = Path(__file__).resolve().parents[2]


def load_browser_config() -> ModuleType:
    """playwright.config.py at the repository root: the browser settings the terminal runner,
    the tests and the benchmarks share. Loaded by path: its name has a dot in it."""
    path = ROOT / "playwright.config.py"
    if not path.exists():
        raise SetupError(f"{path} is missing: run this from a source checkout of agent_py")
    spec = importlib.util.spec_from_file_location("agent_py_playwright_config", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def bundled_cpu_models(root: Path = ROOT) -> list[str]:
    """The ids of the CPU engine's bundled models (web/models.json, the page's catalog)."""
    catalog = json.loads((root / "web" / "models.json").read_text(encoding="utf-8"))
    return [model["id"] for model in catalog["models"]]


def stale_sources(root: Path = ROOT) -> list[Path]:
    """The agent_py sources newer than the page's vendored bundle: the page runs the bundle
    (scripts/vendor.py builds it), so a run after an edit would otherwise test old code."""
    manifest = root / "web" / "vendor" / "manifest.json"
    built = manifest.stat().st_mtime
    return [
        path
        for path in sorted((root / "agent_py").rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts and path.stat().st_mtime > built
    ]
