"""The CPU engine (web/worker/engines/cpu.js: llama.cpp built for WebAssembly by us) with the real
bundled models, in headless Chromium.

No GPU here: this is the engine the page falls back to. One harness page
(web/dev/cpu_engine_harness.html) serves the module, from our loopback server with COOP/COEP so
llama.cpp gets threads (two on two cores). Gemma 3 270M is loaded first (by id); the SmolLM2
tests come last, so the module switches models once. The models decode a few tokens per second
on two cores, so every reply budget is small and every schema tightly bounded. Assertions are about
structure (valid JSON, schema, streaming, counts, templates), and wording only where the
instruct model answers a one-word question. Waits end on events (tests/web/cpu_harness.py).
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import jsonschema
import pytest

from agent_py.cli.checkout import load_browser_config
from agent_py.core.grammar import compact_grammar, fenced_code_grammar
from agent_py.core.parsing import parse_plan
from agent_py.core.plan import PlanShape, plan_json_schema
from agent_py.core.profiles import TINY
from agent_py.core.step_action import fenced_block
from tests.web.cpu_harness import INSTRUCT_MODEL, MODEL, CPUHarness, open_harness

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
# The engine's default on a cross-origin isolated page is the reported cores less one, two on
# two cores (web/worker/engines/cpu-threads.js, tests/web/test_cpu_threads.py). On a machine
# whose cores are busy with other work, threads that wait for each other are several times
# slower than one: AGENT_PY_CPU_THREADS=1 runs this module on one thread.
THREADS = int(os.environ.get("AGENT_PY_CPU_THREADS", "0")) or None


@pytest.fixture(scope="module")
def cpu(browser: Any, base_url: str, cpu_model: Path) -> Iterator[CPUHarness]:
    # A fixed seed: the same replies every run.
    with open_harness(browser, base_url, seed=7, threads=THREADS) as harness:
        yield harness


def _json_reply(reply: dict[str, Any]) -> Any:
    assert reply["finish_reason"] == "stop", f"cut off before the JSON ended: {reply['text']!r}"
    return json.loads(reply["text"])


def test_loads_the_model_with_threads_when_cross_origin_isolated(cpu: CPUHarness) -> None:
    info = cpu.call("() => cpu.info()")
    assert (info["isolated"], info["usable"]) == (True, True)
    assert info["defaultThreads"] > 1 or info["hardwareConcurrency"] == 1
    loaded = cpu.call("model => cpu.reload(model)", MODEL)
    assert (loaded["loadedModel"], loaded["threads"]) == (MODEL, THREADS or info["defaultThreads"])
    assert loaded["template"]["source"] == "builtin"
    progress = cpu.call("() => cpu.progress")
    assert progress[-1]["progress"] == 1
    assert all(0 <= p["progress"] <= 1 for p in progress)


TEMPLATE_PROBE = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Count from one to ten."},
]


def test_prompts_use_the_gemma_chat_template(cpu: CPUHarness) -> None:
    # The GGUF has no template of its own, so the engine picks llama.cpp's built-in "gemma"
    # for its architecture. Measured prompt sizes for these two messages: 19 tokens with it
    # (system text folded into the user turn), 46 with the ChatML fallback.
    template = cpu.ensure_loaded()["template"]
    assert (template["source"], template["name"], template["option"]) == (
        "builtin",
        "gemma",
        "gemma",
    )
    assert template["architecture"] == "gemma3"
    reply = cpu.chat(TEMPLATE_PROBE, max_tokens=1)
    assert 12 <= reply["usage"]["prompt_tokens"] <= 26


def test_a_second_call_reuses_the_kv_cache_of_a_shared_prefix(cpu: CPUHarness) -> None:
    # Agent calls share long prefixes. Gemma 3 has a sliding attention window: without a
    # full-size window cache (swa_full) llama.cpp computed the whole prompt again.
    cpu.ensure_loaded()
    rules = " ".join(f"Rule {i}: keep each step short." for i in range(16))
    system = {"role": "system", "content": f"You plan work for an agent. {rules}"}
    first = cpu.chat([system, {"role": "user", "content": "Compute 6 * 7."}], max_tokens=1)
    second = cpu.chat([system, {"role": "user", "content": "Compute 8 * 9."}], max_tokens=1)
    prompt = second["usage"]["prompt_tokens"]
    assert prompt >= 100
    assert first["usage"]["cached_prompt_tokens"] < prompt  # other tests' prompts differ early
    assert second["usage"]["cached_prompt_tokens"] >= prompt - 12


def test_a_prefilled_prompt_is_reused_by_the_next_call_with_progress_on_the_way(
    cpu: CPUHarness,
) -> None:
    # What the page does while the user types: the planner's fixed prompt goes into the KV
    # cache, and the task's own words are all the first call computes.
    cpu.ensure_loaded()
    rules = " ".join(f"Rule {i}: check each result twice." for i in range(40))
    system = {"role": "system", "content": f"You plan work for an agent. {rules}"}
    prefix = [system, {"role": "user", "content": "Task: "}]
    call = {"model": MODEL, "purpose": "plan", "max_tokens": 64}
    prefilled = cpu.call("([m, c]) => cpu.prefill(m, c)", [prefix, call])
    total = prefilled["usage"]["prompt_tokens"]
    assert total > 300
    done = [report["done"] for report in prefilled["progress"]]
    assert done[-1] == total and len(set(done)) >= 3  # reported batch by batch
    assert done == sorted(done)

    task = [system, {"role": "user", "content": "Task: compute 6 * 7."}]
    reply = cpu.chat(task, max_tokens=1)
    assert reply["usage"]["cached_prompt_tokens"] >= total - 8


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
    # The schema bounds the plan (two ids of 16 characters, five texts of 24, whitespace bounded
    # by the grammar): 320 tokens hold the longest, so the JSON is cut only if the grammar fails.
    reply = cpu.chat(messages, purpose="plan", schema=schema, max_tokens=320)
    plan_json = _json_reply(reply)
    jsonschema.validate(plan_json, schema)
    plan = parse_plan(f"<plan>{reply['text']}</plan>")
    steps = plan.steps()
    assert (len(plan.tasks), len(steps)) == (1, 1)
    assert steps[0].tool_name in ("llm_generator", "javascript_execute")
    assert reply["usage"]["completion_tokens"] <= 320


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
    cpu.wait_for_streamed(3)
    streamed_before = cpu.call(
        "() => { const n = cpu.streamed.length; cpu.interrupt(); return n; }"
    )
    reply = cpu.call("() => window.longChat")
    assert reply["finish_reason"] == "abort"
    assert reply["text"] == "".join(t["text"] for t in reply["tokens"])
    # It stops at the next token or so, however slow tokens come: measured 0-1 more pieces.
    assert streamed_before <= len(reply["tokens"]) <= streamed_before + 4
    assert reply["usage"]["completion_tokens"] < 400
    # The engine is still usable after an interrupt.
    after = cpu.chat([{"role": "user", "content": "Hi"}], max_tokens=2)
    assert after["finish_reason"] in ("stop", "length")


def test_a_crash_of_the_engines_worker_fails_the_call_and_the_next_load_starts_afresh(
    cpu: CPUHarness,
) -> None:
    """The engine's worker dies mid-generation (an uncaught trap, as llama.cpp's abort
    would raise, thrown inside the real worker): the call fails at once as a crash, the
    engine forgets the worker and its model, and a reload gets a working one."""
    cpu.ensure_loaded()
    cpu.page.evaluate(
        """() => { window.crashedChat = cpu.chat(
            [{role: "user", content: "Write a long story about the sea."}],
            {model: "gemma3-270m-q4_k_m", purpose: "generate", max_tokens: 400},
        ).then(() => null, (error) => [error.kind, error.message]); }"""
    )
    cpu.wait_for_streamed(2)
    engine_worker = next(
        w for w in cpu.page.workers if w.url.split("?")[0].endswith("/cpu-worker.js")
    )
    engine_worker.evaluate(
        """() => { setTimeout(() => {
            throw new WebAssembly.RuntimeError("unreachable (a trap in llama.cpp)");
        }); }"""
    )

    kind, message = cpu.call("() => window.crashedChat")
    assert kind == "crashed"
    assert message.startswith("The CPU engine crashed (the engine's worker stopped: ")
    assert "a trap in llama.cpp" in message
    assert message.endswith("the next call loads the model again.")
    assert cpu.counts()["loadedModel"] is None
    with pytest.raises(Exception, match="no model loaded"):
        cpu.chat([{"role": "user", "content": "Hi"}], max_tokens=2)

    cpu.call("model => cpu.reload(model)", MODEL)
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
    cpu.wait_for_streamed(2)
    cpu.call("() => cpu.unload()")
    assert cpu.call("() => window.strandedChat")["finish_reason"] == "abort"
    unloaded = cpu.counts()
    assert unloaded["unloads"] == before["unloads"] + 1
    assert (unloaded["loadedModel"], unloaded["threads"]) == (None, None)
    with pytest.raises(Exception, match="no model loaded"):
        cpu.chat([{"role": "user", "content": "Hi"}], max_tokens=2)
    with pytest.raises(Exception, match='not "Qwen3-4B-q4f16_1-MLC"'):
        cpu.call("() => cpu.reload('Qwen3-4B-q4f16_1-MLC')")
    # Its errors carry their kind (read by errors.js), not a name to match by prefix.
    refused = "() => cpu.reload('Qwen3-4B-q4f16_1-MLC').then(() => null, e => [e.name, e.kind])"
    assert cpu.call(refused) == ["EngineError", "config"]
    with pytest.raises(Exception, match=r"could not load the model from http://.*/missing\.gguf"):
        cpu.call("() => cpu.reload('/models/missing.gguf')")
    # The engine has no default model (that is a setting, with Python's default).
    with pytest.raises(Exception, match='not "undefined"'):
        cpu.call("() => cpu.reload()")
    loaded = cpu.call("model => cpu.reload(model)", INSTRUCT_MODEL)
    assert loaded["loadedModel"] == INSTRUCT_MODEL
    after = cpu.counts()
    assert after["reloads"] == before["reloads"] + 1
    assert after["unloads"] == before["unloads"] + 1
    hello = cpu.chat([{"role": "user", "content": "Hi"}], model=INSTRUCT_MODEL, max_tokens=2)
    assert hello["text"] != ""


def test_a_reload_joins_the_preload_of_its_model_and_replaces_another(cpu: CPUHarness) -> None:
    # The page preloads the last boot's model while Python starts (web/worker/engine-early.js);
    # Python's first reload then waits for that load instead of starting its own.
    cpu.call("() => cpu.unload()")
    before = cpu.counts()
    cpu.call("model => cpu.preload(model)", INSTRUCT_MODEL)
    loaded = cpu.call("model => cpu.reload(model)", INSTRUCT_MODEL)
    assert loaded["loadedModel"] == INSTRUCT_MODEL
    assert cpu.counts()["reloads"] == before["reloads"] + 1  # one load, not two
    hello = cpu.chat([{"role": "user", "content": "Hi"}], model=INSTRUCT_MODEL, max_tokens=2)
    assert hello["text"] != ""

    # A reload of another model waits for the preload to settle, then loads its own.
    cpu.call("model => cpu.preload(model)", INSTRUCT_MODEL)
    assert cpu.call("model => cpu.reload(model)", MODEL)["loadedModel"] == MODEL
    assert cpu.counts()["reloads"] == before["reloads"] + 3
    # A failed preload is tried again by the reload, which reports its own error.
    cpu.call("() => cpu.preload('/models/missing.gguf')")
    with pytest.raises(Exception, match=r"could not load the model from http://.*/missing\.gguf"):
        cpu.call("() => cpu.reload('/models/missing.gguf')")
    assert cpu.call("model => cpu.reload(model)", INSTRUCT_MODEL)["loadedModel"] == INSTRUCT_MODEL


def test_chat_template_rule_for_a_gguf_without_one(cpu: CPUHarness) -> None:
    # The rule itself, without loading a model: a template in the GGUF wins; none and a Gemma
    # architecture gets the built-in; none and an unknown architecture gets llama.cpp's
    # default (ChatML), with a warning.
    choices = cpu.call(
        """async () => {
            const { chatTemplateFor } = await import("/worker/engines/cpu-gguf.js");
            return [
                chatTemplateFor({ architecture: "qwen2", chatTemplate: "{{ '<|im_start|>' }}" }),
                chatTemplateFor({ architecture: "gemma2", chatTemplate: null }),
                chatTemplateFor({ architecture: "qwen2", chatTemplate: null }),
            ];
        }"""
    )
    described = [(c["source"], c["name"], c["option"]) for c in choices]
    # "": llama.cpp applies the GGUF's own template (recognised by its markers).
    assert described == [
        ("gguf", "chatml", ""),
        ("builtin", "gemma", "gemma"),
        ("default", "chatml", "chatml"),
    ]
    assert "qwen2" in choices[2]["warning"] and "no chat template" in choices[2]["warning"]
    assert "warning" not in choices[0] and "warning" not in choices[1]


def test_the_instruct_model_uses_the_template_in_its_gguf(cpu: CPUHarness) -> None:
    template = cpu.ensure_loaded(INSTRUCT_MODEL)["template"]
    assert (template["source"], template["name"], template["option"]) == ("gguf", "chatml", "")
    assert template["architecture"] == "llama"
    # Reading the template from the GGUF header costs tens of ms, not a second load.
    assert template["detect_ms"] < 1000
    # SmolLM2's own template (ChatML): 23 tokens for these two messages.
    reply = cpu.chat(TEMPLATE_PROBE, model=INSTRUCT_MODEL, max_tokens=1)
    assert 20 <= reply["usage"]["prompt_tokens"] <= 26


def test_token_counts_come_from_the_models_own_tokenizer(cpu: CPUHarness) -> None:
    """What the agent's prompt budget counts with (ManagedLLM.measure): each message's text
    by the model's tokenizer; with the template's own tokens they make the prompt's count."""
    cpu.ensure_loaded(INSTRUCT_MODEL)
    texts = [message["content"] for message in TEMPLATE_PROBE]
    counts = cpu.call("texts => cpu.countTokens(texts)", texts)
    assert all(isinstance(n, int) and n > 0 for n in counts), counts
    reply = cpu.chat(TEMPLATE_PROBE, model=INSTRUCT_MODEL, max_tokens=1)
    # ChatML adds "<|im_start|>role\n" and "<|im_end|>\n" per message, and the reply's
    # "<|im_start|>assistant\n": 3 to 6 tokens a message.
    template_tokens = reply["usage"]["prompt_tokens"] - sum(counts)
    assert 3 * len(texts) <= template_tokens <= 6 * len(texts) + 3, (counts, reply["usage"])
    assert cpu.call("texts => cpu.countTokens(texts)", ["", "Paris"])[0] == 0


def test_the_instruct_model_answers_a_short_question(cpu: CPUHarness) -> None:
    cpu.ensure_loaded(INSTRUCT_MODEL)
    answer = cpu.capital_of_france()
    assert "paris" in answer.lower(), answer


def test_sampling_options_reach_llama_cpp(cpu: CPUHarness) -> None:
    cpu.ensure_loaded(INSTRUCT_MODEL)
    messages = [{"role": "user", "content": "Write a list of fruits: apple, apple, apple,"}]

    def text(**sampling: Any) -> str:
        return cpu.chat(messages, model=INSTRUCT_MODEL, max_tokens=6, sampling=sampling)["text"]

    # temperature and seed: hot sampling differs by seed and repeats for the same seed.
    hot = [text(temperature=1.5, seed=seed) for seed in (1, 2, 3)]
    assert len(set(hot)) >= 2, hot
    assert text(temperature=1.5, seed=1) == hot[0]
    # top_k: one candidate left, so the seed no longer matters.
    greedy = text(temperature=1.5, top_k=1, seed=2)
    assert text(temperature=1.5, top_k=1, seed=3) == greedy
    # Penalties change even a greedy reply (the prompt is full of "apple").
    penalised = text(
        temperature=1.5,
        top_k=1,
        repeat_penalty=2.0,
        frequency_penalty=2.0,
        presence_penalty=2.0,
        dry_multiplier=None,  # null keys are ignored
    )
    assert penalised != greedy


def test_dry_penalises_a_reply_that_repeats_itself_not_one_that_copies_the_prompt(
    cpu: CPUHarness,
) -> None:
    """DRY looks at the reply alone (scripts/cpu_engine/agent_llama.cpp): an answer must
    copy what it was given (a URL, a name, a number), and over the prompt a strong DRY cut
    such copies; a reply that repeats itself is still penalised."""
    cpu.ensure_loaded(INSTRUCT_MODEL)
    strong = {"temperature": 0.0, "dry_multiplier": 5.0, "dry_allowed_length": 2}

    def text(prompt: str, **sampling: Any) -> str:
        messages = [{"role": "user", "content": prompt}]
        return cpu.chat(messages, model=INSTRUCT_MODEL, max_tokens=40, sampling=sampling)["text"]

    url = "http://127.0.0.1:40835/tuning/menu-of-the-week.html"
    copy = f"The menu is at {url}. Where is the menu? Answer with the address."
    assert url in text(copy, temperature=0.0)
    assert url in text(copy, **strong)
    # The reply says "The apple is a fruit." twice: a run of its own that DRY cuts.
    loop = "Say apple apple apple apple apple apple apple apple apple apple apple apple"
    plain = text(loop, temperature=0.0)
    assert plain.count("The apple is a fruit.") == 2, plain
    assert text(loop, **strong).count("The apple is a fruit.") < 2


def test_a_gguf_given_by_url_loads_with_its_own_template(cpu: CPUHarness) -> None:
    url = f"/models/{INSTRUCT_MODEL}.gguf"
    loaded = cpu.call("url => cpu.reload(url)", url)
    assert loaded["loadedModel"] == url
    assert (loaded["template"]["source"], loaded["template"]["name"]) == ("gguf", "chatml")
    reply = cpu.chat(TEMPLATE_PROBE, model=url, max_tokens=1)
    assert 20 <= reply["usage"]["prompt_tokens"] <= 26


def test_a_code_call_under_the_fenced_grammar_is_one_block_that_ends_at_its_fence(
    cpu: CPUHarness,
) -> None:
    cpu.ensure_loaded(INSTRUCT_MODEL)
    messages = [
        {"role": "system", "content": "You write JavaScript. Reply with one code block."},
        {"role": "user", "content": "Use JavaScript to add 2 and 3."},
    ]
    grammar = fenced_code_grammar("javascript")

    reply = cpu.chat(messages, model=INSTRUCT_MODEL, max_tokens=120, grammar=grammar)

    assert reply["finish_reason"] == "stop"  # the closing fence ended it, not the budget
    assert reply["text"].startswith("```javascript\n") and reply["text"].endswith("\n```")
    assert reply["text"].count("```") == 2
    assert fenced_block(reply["text"]).strip()


def test_the_text_a_grammar_forces_is_written_without_sampling(cpu: CPUHarness) -> None:
    """Where the plan's grammar allows one text only (its keys and separators, the rest of a
    tool's name), the engine writes that text itself and decodes it in one batch with the
    token before it (scripts/cpu_engine/agent_llama.cpp): a plan takes far fewer decode steps,
    each one streamed piece, than it has tokens. The reply still meets the schema, written
    as json.dumps writes JSON (the worked examples' form, agent_py/core/grammar.py)."""
    cpu.ensure_loaded(INSTRUCT_MODEL)
    schema = plan_json_schema(["llm_generator", "javascript_execute"], TINY.plan_shape)
    messages = [
        {
            "role": "system",
            "content": "You plan work for an agent. Tools: javascript_execute runs JavaScript, "
            "llm_generator writes text. Reply with the JSON plan only.",
        },
        {"role": "user", "content": "Compute 17 * 23 with JavaScript."},
    ]
    budget = TINY.budgets.plan
    reply = cpu.chat(
        messages,
        model=INSTRUCT_MODEL,
        purpose="plan",
        schema=schema,
        grammar=compact_grammar(schema, max_chars=budget * 4, spaced=True),
        max_tokens=budget,
        sampling={"temperature": 0, "top_k": 1},
    )

    plan_json = _json_reply(reply)
    jsonschema.validate(plan_json, schema)
    assert json.dumps(plan_json, ensure_ascii=False) == reply["text"]
    usage = reply["usage"]
    forced, total = usage["forced_tokens"], usage["completion_tokens"]
    # One task of one step has at least 8 keys, each with its separators and quotes.
    assert 16 <= forced < total, usage
    steps = len(reply["tokens"])  # one streamed piece a decode step
    assert steps <= total - forced + 1, (steps, usage)
    assert "".join(t["text"] for t in reply["tokens"]) == reply["text"]


def _planner_prefix(rule: str) -> list[dict[str, str]]:
    rules = " ".join(f"Rule {i}: {rule}" for i in range(30))
    return [
        {"role": "system", "content": f"You plan work for an agent. {rules}"},
        {"role": "user", "content": "Task: "},
    ]


def _fresh_engine(cpu: CPUHarness) -> None:
    """A new engine and worker with the module's options, as after a reload of the page."""
    cpu.call("threads => cpu.create({seed: 7, threads})", THREADS)
    cpu.ensure_loaded(INSTRUCT_MODEL)


def test_a_prefilled_state_is_saved_and_a_new_engine_restores_it(cpu: CPUHarness) -> None:
    # What makes the next visit (or the terminal's next run) start warm: the state of the
    # planner's prompt is kept in the origin's storage and restored instead of computed.
    cpu.ensure_loaded(INSTRUCT_MODEL)
    prefix = _planner_prefix("name each result.")
    call = {"model": INSTRUCT_MODEL, "purpose": "plan", "max_tokens": 64}
    first = cpu.call("([m, c]) => cpu.prefill(m, c)", [prefix, call])["usage"]
    assert (first["state"], first["restored_tokens"]) == ("saved", 0)
    total = first["prompt_tokens"]
    assert total > 200

    _fresh_engine(cpu)
    again = cpu.call("([m, c]) => cpu.prefill(m, c)", [prefix, call])
    assert again["usage"]["state"] == "restored"
    assert again["usage"]["restored_tokens"] == total
    # Only the prompt's last two tokens are computed again: the last one's logits are not in the
    # state, and a prompt is never computed in a batch of one token (its floats would differ).
    assert again["usage"]["cached_prompt_tokens"] == total - 2
    assert [p["done"] for p in again["progress"]] == [total - 2, total]

    task = [prefix[0], {"role": "user", "content": "Task: compute 6 * 7."}]
    reply = cpu.chat(task, model=INSTRUCT_MODEL, max_tokens=1)
    assert reply["usage"]["cached_prompt_tokens"] >= total - 8


def test_the_prefilled_prompt_comes_back_after_another_call_took_the_cache(
    cpu: CPUHarness,
) -> None:
    # A code call or a generation between two plan calls fills the one cache with its own
    # prompt; the engine puts the prefilled state back rather than compute the planner's
    # prompt again, with the same floats, so the same reply.
    cpu.ensure_loaded(INSTRUCT_MODEL)
    prefix = _planner_prefix("check each answer.")
    call = {"model": INSTRUCT_MODEL, "purpose": "plan", "max_tokens": 64}
    total = cpu.call("([m, c]) => cpu.prefill(m, c)", [prefix, call])["usage"]["prompt_tokens"]
    task = [prefix[0], {"role": "user", "content": "Task: compute 6 * 7."}]
    in_place = cpu.chat(task, model=INSTRUCT_MODEL, max_tokens=8)

    other = cpu.chat(
        [{"role": "user", "content": "Say one word."}], model=INSTRUCT_MODEL, max_tokens=4
    )
    assert other["usage"]["cached_prompt_tokens"] < 10  # it took the cache
    again = cpu.chat(task, model=INSTRUCT_MODEL, max_tokens=8)

    assert again["usage"]["cached_prompt_tokens"] >= total - 8
    assert again["text"] == in_place["text"]


SHIPPED = ROOT / "web" / "vendor" / "llama" / "state"
TAKE_OUT = """async (key) => {
    const cache = await caches.open("agent-py-kv-state-v1");
    const bytes = new Uint8Array(await (await cache.match(key)).arrayBuffer());
    await cache.delete(key);
    let text = "";
    for (let i = 0; i < bytes.length; i += 0x8000) {
        text += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
    }
    return btoa(text);
}"""


def test_a_state_shipped_with_the_page_is_restored_on_a_first_visit_and_kept(
    cpu: CPUHarness,
) -> None:
    """What scripts/ship_prompt_states.py sets up: a state listed in the page's
    vendor/llama/state/index.json is fetched when this browser has none, restored, and kept
    in its storage for the next visit."""
    cpu.ensure_loaded(INSTRUCT_MODEL)
    prefix = _planner_prefix("ship the state.")
    call = {"model": INSTRUCT_MODEL, "purpose": "plan", "max_tokens": 64}
    computed = cpu.call("([m, c]) => cpu.prefill(m, c)", [prefix, call])["usage"]
    key = cpu.call("m => cpu.stateKeyOf(m)", prefix)
    name = key.rsplit("/", 1)[-1]
    # As set-up leaves it: the state in the page's folder and its index, not in the browser.
    state = base64.b64decode(cpu.page.evaluate(TAKE_OUT, key))
    index = SHIPPED / "index.json"
    kept_index = index.read_bytes() if index.exists() else None
    shipped = json.loads(kept_index) if kept_index else {"states": []}
    SHIPPED.mkdir(parents=True, exist_ok=True)
    try:
        (SHIPPED / name).write_bytes(state)
        index.write_text(json.dumps({"states": [*shipped["states"], name]}))
        _fresh_engine(cpu)
        first = cpu.call("([m, c]) => cpu.prefill(m, c)", [prefix, call])["usage"]
    finally:
        (SHIPPED / name).unlink(missing_ok=True)
        if kept_index is None:
            index.unlink(missing_ok=True)
        else:
            index.write_bytes(kept_index)
    assert (first["state"], first["state_source"]) == ("restored", "shipped")
    assert first["restored_tokens"] == computed["prompt_tokens"]
    _fresh_engine(cpu)  # the page's copy is gone: the browser kept its own
    again = cpu.call("([m, c]) => cpu.prefill(m, c)", [prefix, call])["usage"]
    assert again["state"] == "restored" and "state_source" not in again


DAMAGE = """async ([key, damage]) => {
    const cache = await caches.open("agent-py-kv-state-v1");
    const saved = await (await cache.match(key)).arrayBuffer();
    const broken = damage === "cut in half"
        ? saved.slice(0, saved.byteLength >> 1)
        : new TextEncoder().encode("not a model state at all");
    await cache.put(key, new Response(broken));
}"""


@pytest.mark.parametrize("damage", ["cut in half", "replaced by text"])
def test_a_broken_saved_state_is_ignored_with_a_warning(cpu: CPUHarness, damage: str) -> None:
    cpu.ensure_loaded(INSTRUCT_MODEL)
    prefix = _planner_prefix("say which tool you use.")
    call = {"model": INSTRUCT_MODEL, "purpose": "plan", "max_tokens": 64}
    cpu.call("([m, c]) => cpu.prefill(m, c)", [prefix, call])  # saved (or restored)
    key = cpu.call("m => cpu.stateKeyOf(m)", prefix)
    cpu.page.evaluate(DAMAGE, [key, damage])

    _fresh_engine(cpu)
    usage = cpu.call("([m, c]) => cpu.prefill(m, c)", [prefix, call])["usage"]
    assert usage["restored_tokens"] == 0
    assert "saved model state was ignored" in usage["state_warning"]
    assert usage["state"] == "saved"  # computed again, and saved whole for the next time
    assert usage["cached_prompt_tokens"] == 0
    # The engine works on, and the next engine restores the good state.
    reply = cpu.chat([{"role": "user", "content": "Hi"}], model=INSTRUCT_MODEL, max_tokens=2)
    assert reply["text"] != ""
    _fresh_engine(cpu)
    assert cpu.call("([m, c]) => cpu.prefill(m, c)", [prefix, call])["usage"]["state"] == "restored"


def test_nothing_is_requested_from_other_origins(cpu: CPUHarness) -> None:
    cpu.ensure_loaded()
    cpu.chat([{"role": "user", "content": "Hi"}], max_tokens=2)
    assert cpu.foreign() == []
    fetched = {urlsplit(u).path for u in cpu.urls if not u.startswith("blob:")}
    models = {f"/models/{MODEL}.gguf", f"/models/{INSTRUCT_MODEL}.gguf"}
    # Chromium has relaxed SIMD: the worker runs that build, and fetches no other.
    assert {"/vendor/llama/agent-llama-rs.wasm"} | models <= fetched
    wasm = {path for path in fetched if path.endswith(".wasm")}
    assert wasm == {"/vendor/llama/agent-llama-rs.wasm"}
    assert cpu.errors == []


def test_the_build_without_relaxed_simd_answers_the_same(browser: Any, base_url: str) -> None:
    """The pthread build for browsers without relaxed SIMD (asked for by name here, since
    Chromium has it) loads, runs its threads and gives the relaxed build's greedy answer: the
    two kernels compute the same integers (scripts/cpu_engine/kernel_check.sh)."""
    answers = {}
    for build in ("threads", "relaxed"):
        with open_harness(browser, base_url, seed=7, build=build) as harness:
            automatic = harness.call("() => cpu.info()")["defaultThreads"]
            loaded = harness.call("model => cpu.reload(model)", INSTRUCT_MODEL)
            assert loaded["threads"] == (THREADS or automatic)
            answers[build] = harness.capital_of_france()
            fetched = {urlsplit(u).path for u in harness.urls if u.endswith(".wasm")}
            wasm = "agent-llama.wasm" if build == "threads" else "agent-llama-rs.wasm"
            assert fetched == {f"/vendor/llama/{wasm}"}
            assert harness.errors == []
    assert "Paris" in answers["threads"]
    assert answers["threads"] == answers["relaxed"]


def x86_with_avx_vnni() -> bool | None:
    """Whether this CPU has AVX-VNNI (V8 then lowers relaxed SIMD's 32-bit dot product to one
    vpdpbusd); None off x86-64 Linux."""
    if os.uname().machine != "x86_64" or not Path("/proc/cpuinfo").is_file():
        return None
    flags = next(
        (
            line.split(":", 1)[1].split()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("flags")
        ),
        [],
    )
    return "avx_vnni" in flags


def test_a_prompts_greedy_answer_does_not_depend_on_how_it_is_cut_into_batches(
    browser: Any, base_url: str
) -> None:
    """llama.cpp computes a prompt in batches: the page's 256 tokens, or what a prefilled prefix
    leaves for the task's words. Flash attention used to take another path for batches under
    64 tokens, with other floats, so the same prompt could answer otherwise (here, in batches
    of 100 the last 7 tokens went that way). Every prompt batch takes one path now
    (FLASH_ATTENTION_ONE_PROMPT_PATH in scripts/cpu_engine/patch_llama.py), and no prompt batch
    is a single token (that one still goes row by row): in batches of 403 the last one would be,
    and the same prompt met again recomputes two tokens, not one (MIN_PROMPT_BATCH)."""
    town = (
        "The harbour town wakes before dawn: fishing boats leave the quay, the bakery lights "
        "its ovens, and the ferry to the islands sounds its horn twice. Market stalls fill the "
        "square by seven. "
    )
    messages = [
        {"role": "system", "content": town * 20},
        {"role": "user", "content": "List ten things the town does, as a numbered list."},
    ]
    greedy = {"temperature": 0, "top_k": 1}
    answers = {}
    for batch in (512, 403, 100, 17):
        with open_harness(browser, base_url, promptBatch=batch) as harness:
            harness.call("model => cpu.reload(model)", INSTRUCT_MODEL)
            reply = harness.chat(messages, model=INSTRUCT_MODEL, max_tokens=80, sampling=greedy)
            assert reply["usage"]["prompt_tokens"] == 807
            answers[batch] = reply["text"]
            if batch == 512:
                again = harness.chat(messages, model=INSTRUCT_MODEL, max_tokens=80, sampling=greedy)
                assert again["usage"]["cached_prompt_tokens"] == 805
                answers["again"] = again["text"]
            assert harness.errors == []
    assert len(answers[512]) > 100
    assert {key: text for key, text in answers.items() if text != answers[512]} == {}


def test_the_relaxed_build_picks_its_dot_product_for_the_cpu_and_both_answer_alike(
    playwright: Any, browser: Any, base_url: str
) -> None:
    """The relaxed build's Q4_1 kernels come in two forms (scripts/cpu_engine/patch_llama.py):
    the 32-bit dot product where V8 lowers it to one instruction (AVX-VNNI), the 16-bit one
    where it goes through pmaddubsw. The engine tells which from the instruction's own answer;
    V8 without AVX-VNNI (--no-enable-avx-vnni, as on a CPU without it) gets the 16-bit form.
    Forced either way, the greedy answer is the same: the integers are exact."""
    vnni = x86_with_avx_vnni()
    answers = {}
    for dot in ("i16", "i32", None):
        with open_harness(
            browser, base_url, seed=7, build="relaxed", **({"dot": dot} if dot else {})
        ) as harness:
            loaded = harness.call("model => cpu.reload(model)", INSTRUCT_MODEL)
            if dot:
                assert loaded["dotForm"] == dot
            elif vnni is not None:
                assert loaded["dotForm"] == ("i32" if vnni else "i16")
            answers[dot] = harness.capital_of_france()
            assert harness.errors == []
    assert "Paris" in answers["i16"]
    assert answers["i16"] == answers["i32"] == answers[None]
    if vnni is None:
        return
    without_vnni = playwright.chromium.launch(
        **load_browser_config().launch_options(extra_args=["--js-flags=--no-enable-avx-vnni"])
    )
    try:
        with open_harness(without_vnni, base_url, seed=7, build="relaxed") as harness:
            assert harness.call("model => cpu.reload(model)", INSTRUCT_MODEL)["dotForm"] == "i16"
    finally:
        without_vnni.close()
