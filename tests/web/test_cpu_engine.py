"""The CPU engine (web/engines/wllama.js) with the real Gemma 3 270M model, in headless Chromium.

No GPU here: this is the engine the page falls back to. One harness page
(web/dev/cpu_engine_harness.html) loads the model once for the whole module, served by our
loopback server with COOP/COEP so llama.cpp gets two threads. The model decodes a few tokens
per second on two cores, so every reply budget is small and every schema tightly bounded.
Assertions are about structure (valid JSON, schema, streaming, counts), never wording.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import jsonschema
import pytest

from agent_py.parsing import parse_plan
from agent_py.plan import PlanShape, plan_json_schema

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
HARNESS = "dev/cpu_engine_harness.html"
MODEL = "gemma3-270m-q4_k_m"
# The engine's default is two threads on a cross-origin isolated page. On a machine whose
# cores are busy with other work, two threads that wait for each other are several times
# slower than one: AGENT_PY_CPU_THREADS=1 runs this module on one thread.
THREADS = int(os.environ.get("AGENT_PY_CPU_THREADS", "0")) or None
# page.evaluate has no time limit of its own. These deadlines only catch an engine that hangs:
# they allow for a machine whose cores are busy with other work (well under 1 token/s).
DEADLINE_MS = 120_000
DEADLINE_MS_PER_TOKEN = 4_000


def _origin(url: str) -> str | None:
    if url.startswith("blob:"):
        url = url[len("blob:") :]
    parts = urlsplit(url)
    return None if parts.scheme in ("data", "about") else f"{parts.scheme}://{parts.netloc}"


@dataclass
class CPUHarness:
    page: Any
    origin: str
    urls: list[str] = field(default_factory=list)  # every request, workers included
    errors: list[str] = field(default_factory=list)

    def call(self, expression: str, arg: Any = None, deadline_ms: int = DEADLINE_MS) -> Any:
        """Await `expression(arg)` in the page; past the deadline, interrupt the engine (so the
        next test finds it free) and fail."""
        return self.page.evaluate(
            """([source, arg, deadline]) => Promise.race([
                (0, eval)(source)(arg),
                new Promise((_, reject) => setTimeout(() => {
                    cpu.interrupt();
                    reject(new Error(`the CPU engine did not answer within ${deadline} ms`));
                }, deadline)),
            ])""",
            [expression, arg, deadline_ms],
        )

    def chat(self, messages: list[dict[str, str]], **call: Any) -> dict[str, Any]:
        call = {"model": MODEL, "purpose": "generate", **call}
        deadline_ms = DEADLINE_MS + DEADLINE_MS_PER_TOKEN * call.get("max_tokens", 0)
        return self.call("([m, c]) => cpu.chat(m, c)", [messages, call], deadline_ms)

    def counts(self) -> dict[str, Any]:
        return self.call("() => cpu.counts()")

    def ensure_loaded(self) -> None:
        if self.counts()["loadedModel"] != MODEL:
            self.call("() => cpu.reload()")

    def foreign(self) -> list[str]:
        return [u for u in self.urls if _origin(u) not in (None, self.origin)]


@pytest.fixture(scope="module")
def cpu(browser: Any, base_url: str, cpu_model: Path) -> Iterator[CPUHarness]:
    context = browser.new_context()
    context.set_default_timeout(60_000)
    page = context.new_page()
    harness = CPUHarness(page, origin=_origin(base_url) or "")
    context.on("request", lambda request: harness.urls.append(request.url))
    page.on("pageerror", lambda error: harness.errors.append(str(error)))
    page.goto(base_url + HARNESS)
    page.wait_for_selector("body:not([data-status='starting'])")
    assert page.get_attribute("body", "data-status") == "ready", page.text_content("#status")
    # A fixed seed: the same replies every run.
    harness.call("threads => cpu.create({seed: 7, threads})", THREADS)
    yield harness
    context.close()


def _json_reply(reply: dict[str, Any]) -> Any:
    assert reply["finish_reason"] == "stop", f"cut off before the JSON ended: {reply['text']!r}"
    return json.loads(reply["text"])


def test_loads_the_model_with_two_threads_when_cross_origin_isolated(cpu: CPUHarness) -> None:
    info = cpu.call("() => cpu.info()")
    assert (info["isolated"], info["defaultThreads"], info["usable"]) == (True, 2, True)
    loaded = cpu.call("() => cpu.reload()")
    assert (loaded["loadedModel"], loaded["threads"]) == (MODEL, THREADS or 2)
    progress = cpu.call("() => cpu.progress")
    assert progress[-1]["progress"] == 1
    assert all(0 <= p["progress"] <= 1 for p in progress)


def test_prompts_use_the_gemma_chat_template(cpu: CPUHarness) -> None:
    # The GGUF has no template of its own. Measured prompt sizes for these two messages: 19
    # tokens with llama.cpp's "gemma" template (system text folded into the user turn), 3 when
    # jinja renders the word "gemma" as the whole prompt, 46 with the ChatML fallback.
    cpu.ensure_loaded()
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Count from one to ten."},
    ]
    reply = cpu.chat(messages, max_tokens=1)
    assert 12 <= reply["usage"]["prompt_tokens"] <= 26


def test_plan_schema_gives_a_plan_the_agent_accepts(cpu: CPUHarness) -> None:
    cpu.ensure_loaded()
    schema = plan_json_schema(
        ["llm_generator", "javascript_execute"],
        PlanShape(max_tasks=1, max_steps_per_task=1, max_text_chars=24, with_arguments=False),
    )
    messages = [
        {
            "role": "system",
            "content": "You plan work for an agent. Tools: javascript_execute runs JavaScript, "
            "llm_generator writes text. Reply with the JSON plan only.",
        },
        {"role": "user", "content": "Compute 17 * 23 with JavaScript."},
    ]
    reply = cpu.chat(messages, purpose="plan", schema=schema, max_tokens=160)
    plan_json = _json_reply(reply)
    jsonschema.validate(plan_json, schema)
    plan = parse_plan(f"<plan>{reply['text']}</plan>")
    steps = plan.steps()
    assert (len(plan.tasks), len(steps)) == (1, 1)
    assert steps[0].tool_name in ("llm_generator", "javascript_execute")
    assert reply["usage"]["completion_tokens"] <= 160


TOOL_SCHEMAS = {
    "scalars": {
        "type": "object",
        "properties": {
            "city": {"type": "string", "minLength": 1, "maxLength": 24},
            "days": {"type": "integer", "minimum": 1, "maximum": 14},
            "budget_eur": {"type": "number"},
            "vegetarian": {"type": "boolean"},
        },
        "required": ["city", "days", "budget_eur", "vegetarian"],
        "additionalProperties": False,
    },
    "enum_and_optional": {
        "type": "object",
        "properties": {
            "unit": {"type": "string", "enum": ["metric", "imperial"]},
            "precision": {"type": "integer", "minimum": 0, "maximum": 4},
            "note": {"type": "string", "maxLength": 8},
        },
        "required": ["unit"],
        "additionalProperties": False,
    },
    "bounded_array_and_nested_object": {
        "type": "object",
        "properties": {
            "tags": {
                "type": "array",
                "items": {"type": "string", "minLength": 1, "maxLength": 10},
                "minItems": 1,
                "maxItems": 2,
            },
            "owner": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "minLength": 1, "maxLength": 16},
                    "age": {"type": "integer", "minimum": 0, "maximum": 120},
                },
                "required": ["name"],
                "additionalProperties": False,
            },
        },
        "required": ["tags", "owner"],
        "additionalProperties": False,
    },
    # javascript_execute's own input schema, with a bound on the code.
    "javascript_execute": {
        "type": "object",
        "properties": {
            "code": {
                "type": "string",
                "minLength": 1,
                "maxLength": 40,
                "description": "JavaScript function body; use return for the result",
            }
        },
        "required": ["code"],
        "additionalProperties": False,
    },
}

TOOL_REQUESTS = {
    "scalars": "Plan a trip: Lisbon for 5 days, 900 euros, vegetarian food.",
    "enum_and_optional": "Convert 3 miles to kilometres.",
    "bounded_array_and_nested_object": "Tag this photo of Ana, 34, at the beach in summer.",
    "javascript_execute": "Compute 17 * 23.",
}


@pytest.mark.parametrize("name", list(TOOL_SCHEMAS))
def test_tool_arguments_follow_the_schema(cpu: CPUHarness, name: str) -> None:
    cpu.ensure_loaded()
    schema = TOOL_SCHEMAS[name]
    messages = [
        {"role": "system", "content": "Give the tool's arguments as a JSON object."},
        {"role": "user", "content": TOOL_REQUESTS[name]},
    ]
    reply = cpu.chat(messages, purpose="arguments", tool=name, schema=schema, max_tokens=96)
    arguments = _json_reply(reply)
    jsonschema.validate(arguments, schema)
    assert set(schema["required"]) <= set(arguments)


def test_tokens_stream_while_the_reply_is_generated(cpu: CPUHarness) -> None:
    cpu.ensure_loaded()
    reply = cpu.chat([{"role": "user", "content": "Count from one to ten."}], max_tokens=12)
    tokens = reply["tokens"]
    assert len(tokens) >= 3
    assert "".join(t["text"] for t in tokens) == reply["text"]
    assert tokens[0]["ms"] < tokens[-1]["ms"]  # pieces arrived over time, not all at the end
    usage = reply["usage"]
    assert usage["completion_tokens"] == 12 and reply["finish_reason"] == "length"
    assert usage["prompt_tokens"] > 0
    assert usage["prefill_tokens_per_s"] > 0 and usage["decode_tokens_per_s"] > 0
    assert 0 < usage["time_to_first_token_s"] <= reply["seconds"]


def test_interrupt_stops_a_long_generation_early(cpu: CPUHarness) -> None:
    cpu.ensure_loaded()
    cpu.page.evaluate(
        """() => { window.longChat = cpu.chat(
            [{role: "user", content: "Write a long story about the sea."}],
            {model: "gemma3-270m-q4_k_m", purpose: "generate", max_tokens: 400}); }"""
    )
    cpu.page.wait_for_function("() => cpu.streamed.length >= 3", timeout=DEADLINE_MS)
    interrupted_at = time.monotonic()
    cpu.call("() => cpu.interrupt()")
    reply = cpu.call("() => window.longChat")
    stopped_after = time.monotonic() - interrupted_at
    assert reply["finish_reason"] == "abort"
    assert 3 <= reply["usage"]["completion_tokens"] < 400
    assert reply["text"] == "".join(t["text"] for t in reply["tokens"])
    assert stopped_after < 15, f"took {stopped_after:.1f} s to stop"
    # The engine is still usable after an interrupt.
    after = cpu.chat([{"role": "user", "content": "Hi"}], max_tokens=2)
    assert after["finish_reason"] in ("stop", "length")


def test_unload_then_reload_counts_and_clear_errors(cpu: CPUHarness) -> None:
    cpu.ensure_loaded()
    before = cpu.counts()
    # Unloading under a running generation ends that generation instead of stranding it.
    cpu.page.evaluate(
        """() => { window.strandedChat = cpu.chat(
            [{role: "user", content: "Write a long story about the sea."}],
            {model: "gemma3-270m-q4_k_m", purpose: "generate", max_tokens: 400}); }"""
    )
    cpu.page.wait_for_function("() => cpu.streamed.length >= 2", timeout=DEADLINE_MS)
    cpu.call("() => cpu.unload()")
    assert cpu.call("() => window.strandedChat")["finish_reason"] == "abort"
    unloaded = cpu.counts()
    assert unloaded["unloads"] == before["unloads"] + 1
    assert (unloaded["loadedModel"], unloaded["threads"]) == (None, None)
    with pytest.raises(Exception, match="no model loaded"):
        cpu.chat([{"role": "user", "content": "Hi"}], max_tokens=2)
    with pytest.raises(Exception, match='not "Qwen3-4B-q4f16_1-MLC"'):
        cpu.call("() => cpu.reload('Qwen3-4B-q4f16_1-MLC')")
    with pytest.raises(Exception, match=r"could not load the model from http://.*/missing\.gguf"):
        cpu.call("() => cpu.reload('/models/missing.gguf')")
    loaded = cpu.call("() => cpu.reload()")
    assert loaded["loadedModel"] == MODEL
    after = cpu.counts()
    assert after["reloads"] == before["reloads"] + 1
    assert after["unloads"] == before["unloads"] + 1
    assert cpu.chat([{"role": "user", "content": "Hi"}], max_tokens=2)["text"] != ""


def test_nothing_is_requested_from_other_origins(cpu: CPUHarness) -> None:
    cpu.ensure_loaded()
    cpu.chat([{"role": "user", "content": "Hi"}], max_tokens=2)
    assert cpu.foreign() == []
    fetched = {urlsplit(u).path for u in cpu.urls if not u.startswith("blob:")}
    assert {"/vendor/wllama/wllama.wasm", "/models/gemma3-270m-q4_k_m.gguf"} <= fetched
    assert cpu.errors == []
