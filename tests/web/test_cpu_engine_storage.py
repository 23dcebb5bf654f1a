"""A model the origin's storage cannot keep still loads: the CPU engine loads it without keeping
it and says so. The origin's quota is set below the model's size through the DevTools
protocol (Storage.overrideQuotaForOrigin), as a private window or a full disk would leave it:
Cache.put of a 491 MB model failed in Playwright's ephemeral context with "Unexpected internal
error" before. (navigator.storage.estimate() does not show the override, so the engine meets it
as a Cache.put that fails, and loads the model again without keeping it.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.web.cpu_harness import open_harness

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
LARGE_MODEL = "qwen2.5-coder-1.5b-instruct-q4_k_m"  # 1.1 GB


@pytest.fixture(scope="module")
def large_model(cpu_model: Path) -> Path:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "fetch_model.py"), "--model", LARGE_MODEL],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.fail(f"scripts/fetch_model.py failed:\n{done.stdout}{done.stderr}", pytrace=False)
    return cpu_model / f"{LARGE_MODEL}.gguf"


def test_a_1_gb_model_loads_where_the_origin_cannot_keep_it(
    browser: Any, base_url: str, large_model: Path
) -> None:
    size = large_model.stat().st_size
    assert size > 1_000_000_000
    with open_harness(browser, base_url, threads=2) as cpu:
        origin = base_url.rstrip("/")
        session = cpu.page.context.new_cdp_session(cpu.page)
        session.send("Storage.overrideQuotaForOrigin", {"origin": origin, "quotaSize": 200_000_000})
        # The origin cannot keep what the model needs: storing 300 MB fails already.
        stored = cpu.call(
            """async () => {
                try {
                    const cache = await caches.open("probe");
                    await cache.put("/probe", new Response(new Uint8Array(300_000_000)));
                    return "stored";
                } catch (error) {
                    return error.message;
                } finally {
                    await caches.delete("probe");
                }
            }"""
        )
        assert stored == "Quota exceeded."

        loaded = cpu.call("model => cpu.reload(model)", LARGE_MODEL)

        assert loaded["loadedModel"] == LARGE_MODEL and loaded["bytes"] == size
        assert loaded["storage"]["kept"] is False
        assert loaded["storage"]["why"] == "the browser's storage refused it (Quota exceeded.)"
        reports = [p["text"] for p in cpu.page.evaluate("cpu.progress")]
        # The load says how far it is, in bytes and seconds, and that the file is not kept.
        assert any(
            f"/ {round(size / 1e6)} MB" in text and " s (not kept: " in text for text in reports
        )
        assert any("not kept in this browser" in text for text in reports), reports[-3:]
        kept = cpu.call("async () => (await (await caches.open('agent-py-gguf-v1')).keys()).length")
        assert kept == 0
        # It answers: the model really is loaded.
        reply = cpu.chat(
            [{"role": "user", "content": "Say yes."}],
            model=LARGE_MODEL,
            max_tokens=3,
            sampling={"temperature": 0, "top_k": 1},
        )
        assert reply["text"].strip()
