"""The page starts the CPU engine while Python starts (web/worker/engine-early.js): the engine
of the last boot with the same user settings, kept in Cache Storage, loads its model meanwhile,
and is dropped when Python's settings turn out to differ. Real model, headless Chromium."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent_py.page.settings import PageSettings

pytestmark = [pytest.mark.browser, pytest.mark.slow]

# Hang guards for a busy two-core machine, never a measure of speed.
GUARD_MS = 300_000
# The quickest bundled model: what is tested is which engine is used, not the model, and each
# boot prefills the planner's prompt before it is ready.
SMALL = "smollm2-135m-instruct-q4_1"
CPU = {"engine": "cpu", "cpu_model": SMALL}
LAST_ENGINE = "worker/last-engine.json"  # beside web/worker/engine-early.js


def boot(page: Any) -> dict[str, Any]:
    """Waits for ready and the model's preparation; the ready message's timings."""
    page.wait_for_function("document.body.dataset.status === 'ready'", timeout=GUARD_MS)
    page.wait_for_function("window.agentApp.prepared !== undefined", timeout=GUARD_MS)
    assert page.evaluate("window.agentApp.prepared.prefilled") is True, page.evaluate(
        "window.agentApp.prepared"
    )
    return dict(page.evaluate("window.agentApp.timings"))


def open_with(page: Any, url: str, settings: dict[str, Any]) -> dict[str, Any]:
    page.add_init_script(
        f"localStorage.setItem('agent_py.settings', {json.dumps(json.dumps(settings))});"
    )
    page.goto(url)
    return boot(page)


def kept_record(page: Any) -> dict[str, Any]:
    return dict(
        page.evaluate(
            """async path => {
                const cache = await caches.open("agent-py-boot-v1");
                const stored = await cache.match(new URL(path, location.href).href);
                return stored ? stored.json() : null;
            }""",
            LAST_ENGINE,
        )
    )


def test_a_second_boot_loads_the_model_while_python_starts(
    page: Any, page_url: Any, cpu_model: Path
) -> None:
    first = open_with(page, page_url("index.html"), CPU)
    assert first["engine_early"] is None  # nothing kept yet
    record = kept_record(page)
    assert record["choice"] == "cpu"
    assert record["settings"]["cpu_model"] == SMALL

    page.reload()
    second = boot(page)
    assert second["engine_early"] == "used"
    # The model's load began while Python started, not after.
    assert second["phases"]["engine_early_at"] < second["phases"]["python_started_at"]
    assert page.evaluate("window.agentApp.engine.name") == "cpu"


def test_an_engine_started_with_other_settings_than_pythons_is_dropped(
    page: Any, page_url: Any, cpu_model: Path
) -> None:
    open_with(page, page_url("index.html"), CPU)
    default_window = PageSettings().context_window
    # A kept record whose user settings match but whose resolved settings do not (as after an
    # update that changed a default): the early engine must not be the one used.
    page.evaluate(
        """async ([path, window]) => {
            const cache = await caches.open("agent-py-boot-v1");
            const key = new URL(path, location.href).href;
            const record = await (await cache.match(key)).json();
            record.settings.context_window = window;
            await cache.put(key, new Response(JSON.stringify(record)));
        }""",
        [LAST_ENGINE, default_window // 2],
    )
    page.reload()
    timings = boot(page)
    assert timings["engine_early"] == "dropped"
    assert page.evaluate("window.agentApp.engine.context_window") == default_window
    assert kept_record(page)["settings"]["context_window"] == default_window


def test_other_user_settings_start_no_engine_early(
    page: Any, page_url: Any, cpu_model: Path
) -> None:
    # No engine chosen: "auto", the CPU engine here. Set once, before the first boot (an init
    # script that set it on every load would undo the change below).
    page.add_init_script(
        "if (!localStorage.getItem('agent_py.settings')) localStorage.setItem("
        f"'agent_py.settings', {json.dumps(json.dumps({'cpu_model': SMALL}))});"
    )
    page.goto(page_url("index.html"))
    first = boot(page)
    assert first["engine_early"] is None
    assert kept_record(page)["choice"] == "auto"

    larger = PageSettings().context_window * 2
    page.evaluate(
        "larger => localStorage.setItem('agent_py.settings', JSON.stringify("
        f"{{cpu_model: {json.dumps(SMALL)}, context_window: larger}}))",
        larger,
    )
    page.reload()
    second = boot(page)
    assert second["engine_early"] is None  # the kept engine was for other settings
    assert page.evaluate("window.agentApp.engine.context_window") == larger
