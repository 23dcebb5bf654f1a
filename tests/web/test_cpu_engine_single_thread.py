"""The CPU engine on a page served without COOP/COEP headers, in headless Chromium.

Such a page is not cross-origin isolated: no SharedArrayBuffer, so no pthread build. The
engine's worker then loads llama.cpp's build without threads (web/vendor/llama/agent-llama-st.*,
scripts/cpu_engine/build.sh) and runs the bundled instruct model on one thread. The model
decodes a few tokens per second there, so every reply budget is a few tokens.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from agent_py.cli import web_server as serve
from tests.web.cpu_harness import INSTRUCT_MODEL, CPUHarness, open_harness

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(scope="module")
def plain_url(vendored: Path) -> Iterator[str]:
    """web/ served without COOP/COEP headers, as a host that knows nothing of them would."""
    server, url = serve.start_server(port=0, isolation=False)
    yield url
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def cpu(browser: Any, plain_url: str, cpu_model: Path) -> Iterator[CPUHarness]:
    with open_harness(browser, plain_url, seed=7) as harness:
        yield harness


def test_a_page_without_isolation_runs_one_thread_and_answers(cpu: CPUHarness) -> None:
    info = cpu.call("() => cpu.info()")
    assert (info["isolated"], info["defaultThreads"], info["usable"]) == (False, 1, True)
    loaded = cpu.call("model => cpu.reload(model)", INSTRUCT_MODEL)
    assert (loaded["loadedModel"], loaded["threads"]) == (INSTRUCT_MODEL, 1)
    assert cpu.counts()["threads"] == 1
    answer = cpu.capital_of_france()
    assert "paris" in answer.lower(), answer


def test_a_prefilled_prompt_is_saved_and_reused_without_threads(cpu: CPUHarness) -> None:
    cpu.ensure_loaded(INSTRUCT_MODEL)
    rules = " ".join(f"Rule {i}: keep each step short." for i in range(8))
    system = {"role": "system", "content": f"You plan work for an agent. {rules}"}
    prefix = [system, {"role": "user", "content": "Task: "}]
    call = {"model": INSTRUCT_MODEL, "purpose": "plan", "max_tokens": 8}
    usage = cpu.call("([m, c]) => cpu.prefill(m, c)", [prefix, call])["usage"]
    # Saved: the state's key found this build's id (build.json's build_id_single_thread).
    assert usage["state"] == "saved"
    total = usage["prompt_tokens"]
    task = [system, {"role": "user", "content": "Task: compute 6 * 7."}]
    reply = cpu.chat(task, model=INSTRUCT_MODEL, max_tokens=1)
    assert reply["usage"]["cached_prompt_tokens"] >= total - 8 > 0


def test_only_the_build_without_threads_is_fetched(cpu: CPUHarness) -> None:
    cpu.ensure_loaded(INSTRUCT_MODEL)
    fetched = {urlsplit(u).path for u in cpu.urls if not u.startswith("blob:")}
    assert {path for path in fetched if path.endswith(".wasm")} == {
        "/vendor/llama/agent-llama-st.wasm"
    }
    assert "/vendor/llama/agent-llama-st.js" in fetched
    threaded = {f"/vendor/llama/agent-llama{b}.{e}" for b in ("", "-rs") for e in ("js", "wasm")}
    assert not threaded & fetched
    assert cpu.foreign() == []
    assert cpu.errors == []
