"""The model server engine (agent_py.engines.model_server) against servers that misbehave.

A scripted server on loopback (tests/mcp/scripted_server.py) answers what a real one will
not do on demand: malformed events, a 500, an empty choice, a reply cut off mid-JSON, a
server that refuses or ignores the reply format. The real server (llama-cpp-python's) is
tested in tests/web/test_model_server_page.py and tests/core/test_model_server_real.py.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from agent_py.core.agent import Agent, AgentConfig
from agent_py.core.events import AgentState
from agent_py.core.llm import CallInfo, CallPurpose, LLMError, Sampling
from agent_py.core.managed_llm import ModelRoles
from agent_py.core.profiles import profile_for
from agent_py.engines import model_server
from agent_py.engines.model_server import ModelServerLLM
from agent_py.engines.model_server_discovery import ServerKind
from agent_py.engines.model_server_request import OutputFormat
from agent_py.mcp.httpx_transport import HttpxTransport
from agent_py.tools import LLMGenerator
from tests.fake_model_server import DONE, MODEL, FakeModelServer, chunk, stream
from tests.mcp.scripted_server import Reply, Request, ScriptedServer, json_reply, sse_reply


@pytest.fixture
async def serve() -> AsyncIterator[Callable[[FakeModelServer], Any]]:
    servers: list[ScriptedServer] = []

    async def start(fake: FakeModelServer) -> ModelServerLLM:
        server = ScriptedServer(fake)
        await server.start()
        servers.append(server)
        base = server.url.removesuffix("/mcp") + "/v1"
        return ModelServerLLM(HttpxTransport(), base)

    yield start
    for server in servers:
        await server.stop()


def call(purpose: CallPurpose = CallPurpose.GENERATE, **options: Any) -> CallInfo:
    return CallInfo(purpose=purpose, model=MODEL, max_tokens=64, **options)


MESSAGES = [{"role": "user", "content": "hello"}]
SCHEMA = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}


async def test_a_streamed_reply_comes_back_whole_with_its_usage_and_tokens(serve) -> None:
    llm = await serve(
        FakeModelServer(stream("Hel", "lo", usage={"prompt_tokens": 9, "completion_tokens": 2}))
    )
    await llm.reload(MODEL)
    tokens: list[str] = []
    reply = await llm.chat(MESSAGES, call(), tokens.append)
    assert reply.text == "Hello"
    assert tokens == ["Hel", "lo"]
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (9, 2)
    assert reply.finish_reason == "stop"


async def test_reasoning_comes_back_as_a_leading_think_block(serve) -> None:
    thinking = f"data: {json.dumps({'choices': [{'delta': {'reasoning_content': 'hmm'}}]})}\n\n"
    llm = await serve(
        FakeModelServer(sse_reply(thinking.encode(), chunk("42"), chunk(finish="stop"), DONE))
    )
    await llm.reload(MODEL)
    reply = await llm.chat(MESSAGES, call())
    assert reply.text == "<think>hmm</think>42"


@pytest.mark.parametrize(
    ("reply", "words"),
    [
        (sse_reply(b"data: {not json\n\n"), "not JSON"),
        (json_reply({"error": {"message": "out of memory"}}, status=500), "HTTP 500"),
        (sse_reply(b'data: {"choices": []}\n\n', DONE), "no choices"),
        (sse_reply(chunk('{"x": '), chunk("4")), "stopped before it was complete"),
        (sse_reply(b'data: {"error": {"message": "slot unavailable"}}\n\n'), "slot unavailable"),
    ],
    ids=["malformed-sse", "http-500", "empty-choice", "cut-mid-json", "error-event"],
)
async def test_a_broken_reply_ends_the_call_with_a_clear_reason(
    serve, reply: Reply, words: str
) -> None:
    llm = await serve(FakeModelServer(reply))
    await llm.reload(MODEL)
    with pytest.raises(LLMError, match=words):
        await asyncio.wait_for(llm.chat(MESSAGES, call()), 60)


async def test_an_unknown_model_is_refused_at_reload_naming_what_the_server_has(serve) -> None:
    llm = await serve(FakeModelServer(stream("x")))
    with pytest.raises(LLMError, match=r"no model called 'nope'; it serves: tiny"):
        await llm.reload("nope")


async def test_an_unreachable_server_says_so_and_what_to_check() -> None:
    llm = ModelServerLLM(HttpxTransport(), "http://127.0.0.1:9/v1")
    with pytest.raises(LLMError, match=r"cannot be reached.*running at that URL"):
        await llm.reload(MODEL)


async def test_a_server_that_stops_after_answering_is_said_to_have_stopped() -> None:
    server = ScriptedServer(FakeModelServer(stream("x")))
    await server.start()
    llm = ModelServerLLM(HttpxTransport(), server.url.removesuffix("/mcp") + "/v1")
    await llm.reload(MODEL)
    await server.stop()  # as a server that crashes between two calls

    with pytest.raises(LLMError) as caught:
        await asyncio.wait_for(llm.chat(MESSAGES, call()), 60)

    said = str(caught.value)
    assert f"the model server at {llm.base_url} stopped answering" in said
    assert "stopped or crashed" in said and "OLLAMA_ORIGINS" not in said


async def test_the_format_follows_the_kind_of_server(serve) -> None:
    grammar = 'root ::= "{}"'
    for kind, expected, with_grammar in [
        ("llama.cpp", ServerKind.LLAMA_CPP, True),
        ("ollama", ServerKind.OLLAMA, False),
        ("", ServerKind.OPENAI, False),
    ]:
        fake = FakeModelServer(stream('{"x": 1}'), kind=kind)
        llm = await serve(fake)
        await llm.reload(MODEL)
        assert llm.server is not None and llm.server.kind is expected
        await llm.chat(MESSAGES, call(CallPurpose.ARGUMENTS, schema=SCHEMA, grammar=grammar))
        sent = fake.chats[-1]
        if with_grammar:
            assert sent["grammar"] == grammar and "response_format" not in sent
        else:
            assert sent["response_format"]["type"] == "json_schema"
            assert sent["response_format"]["json_schema"]["schema"] == SCHEMA
            assert "grammar" not in sent
        # A grammar alone (a code call's fenced block) goes where a grammar is understood.
        await llm.chat(MESSAGES, call(CallPurpose.ARGUMENTS, grammar=grammar))
        sent = fake.chats[-1]
        assert ("grammar" in sent) is with_grammar and "response_format" not in sent
        assert sent.get("grammar", grammar) == grammar
    assert llm.server.context_window is None
    llama = await serve(FakeModelServer(stream("x"), kind="llama.cpp"))
    await llama.reload(MODEL)
    assert llama.context_window == 2048, "llama.cpp's /props"
    ollama = await serve(FakeModelServer(stream("x"), kind="ollama"))
    await ollama.reload(MODEL)
    assert ollama.context_window == 8192, "the model's num_ctx in Ollama's /api/show"


async def test_sampling_reaches_the_server_by_its_names(serve) -> None:
    fake = FakeModelServer(stream("x"), kind="llama.cpp")
    llm = await serve(fake)
    await llm.reload(MODEL)
    sampling = Sampling(temperature=0.0, seed=7, repeat_penalty=1.1, dry_multiplier=0.8)
    await llm.chat(MESSAGES, call(sampling=sampling))
    sent = fake.chats[-1]
    assert (sent["temperature"], sent["seed"], sent["repeat_penalty"], sent["dry_multiplier"]) == (
        0.0,
        7,
        1.1,
        0.8,
    )
    plain = FakeModelServer(stream("x"))
    other = await serve(plain)
    await other.reload(MODEL)
    await other.chat(MESSAGES, call(sampling=sampling))
    assert "repeat_penalty" not in plain.chats[-1] and plain.chats[-1]["seed"] == 7


async def test_a_server_that_refuses_the_format_is_asked_again_without_it(serve) -> None:
    refused = json_reply(
        {"detail": [{"loc": ["body", "response_format"], "msg": "bad"}]}, status=422
    )
    fake = FakeModelServer(refused, stream('{"x": 3}'))
    notes: list[str] = []
    llm = await serve(fake)
    llm._on_note = notes.append
    await llm.reload(MODEL)
    reply = await llm.chat(MESSAGES, call(CallPurpose.ARGUMENTS, schema=SCHEMA))
    assert reply.text == '{"x": 3}'
    assert "response_format" in fake.chats[0] and "response_format" not in fake.chats[1]
    assert notes and "refused the reply format" in notes[0]
    await llm.chat(MESSAGES, call(CallPurpose.ARGUMENTS, schema=SCHEMA))
    assert "response_format" not in fake.chats[2], "the refusal is remembered"


async def test_a_forced_format_is_sent_as_chosen(serve) -> None:
    fake = FakeModelServer(stream("{}"), kind="llama.cpp")
    llm = await serve(fake)
    llm._format = OutputFormat.NONE
    await llm.reload(MODEL)
    await llm.chat(MESSAGES, call(CallPurpose.ARGUMENTS, schema=SCHEMA, grammar="root ::= x"))
    assert "grammar" not in fake.chats[-1] and "response_format" not in fake.chats[-1]


async def test_the_api_key_is_sent_as_a_bearer_token_and_never_shown(serve) -> None:
    seen: list[str] = []

    def needs_key(request: Request) -> Reply:
        seen.append(request.headers.get("authorization", ""))
        return stream("ok")

    server = ScriptedServer(FakeModelServer(needs_key))
    await server.start()
    try:
        base = server.url.removesuffix("/mcp") + "/v1"
        llm = ModelServerLLM(HttpxTransport(), base, api_key="sk-secret")
        await llm.reload(MODEL)
        await llm.chat(MESSAGES, call())
        assert seen == ["Bearer sk-secret"]
        assert "sk-secret" not in repr(llm)
    finally:
        await server.stop()


async def test_an_interrupt_ends_the_stream_with_what_had_arrived(serve) -> None:
    release = asyncio.Event()
    llm = await serve(
        FakeModelServer(sse_reply(chunk("par"), chunk("tial"), release, chunk(finish="stop"), DONE))
    )
    await llm.reload(MODEL)
    tokens: list[str] = []
    both_arrived = asyncio.Event()

    def on_token(text: str) -> None:
        tokens.append(text)
        if "".join(tokens) == "partial":
            both_arrived.set()

    chat = asyncio.create_task(llm.chat(MESSAGES, call(), on_token))
    await asyncio.wait_for(both_arrived.wait(), 30)
    await llm.interrupt()
    reply = await asyncio.wait_for(chat, 30)
    release.set()
    assert (reply.text, reply.finish_reason) == ("partial", "interrupted")


def silent_server(before_headers: bool, never: asyncio.Event) -> FakeModelServer:
    """A server that goes silent on every chat request: before its reply's headers, or
    after the headers and one chunk of text."""

    async def held(request: Request) -> Reply:
        await never.wait()
        return stream("late")

    if before_headers:
        return FakeModelServer(held)
    return FakeModelServer(sse_reply(chunk("par"), never))


@pytest.mark.parametrize("before_headers", [True, False], ids=["before-headers", "mid-reply"])
async def test_a_silent_server_fails_the_call_naming_the_server_and_the_call(
    before_headers: bool,
) -> None:
    """Past ``silence_s`` with nothing from the server, the call ends with who was silent,
    for how long, while answering what, and where to raise the limit; the page is told what
    the engine waited for, and that the wait is over."""
    never = asyncio.Event()
    server = ScriptedServer(silent_server(before_headers, never))
    await server.start()
    waits: list[str | None] = []
    base = server.url.removesuffix("/mcp") + "/v1"
    llm = ModelServerLLM(HttpxTransport(), base, silence_s=1.0, on_wait=waits.append)
    try:
        await llm.reload(MODEL)
        with pytest.raises(LLMError) as raised:
            await asyncio.wait_for(llm.chat(MESSAGES, call(CallPurpose.PLAN)), 60)
        message = str(raised.value)
        assert (
            f"the model server at {base} sent nothing for 1 s while answering the "
            "request for a plan" in message
        )
        assert ("its reply not begun" if before_headers else "3 characters in") in message
        assert "Settings → Model server → Silence limit" in message
        assert "openai_silence_s" in message
        assert waits == [f"the model server at {base} to answer the request for a plan", None]
    finally:
        never.set()
        await server.stop()


async def test_a_silent_server_fails_the_preparation_naming_it() -> None:
    never = asyncio.Event()
    fake = FakeModelServer(stream("unused"))

    def held_chats(request: Request) -> Reply:  # the one-token request included
        return sse_reply(never) if request.path.endswith("/chat/completions") else fake(request)

    server = ScriptedServer(held_chats)
    await server.start()
    base = server.url.removesuffix("/mcp") + "/v1"
    llm = ModelServerLLM(HttpxTransport(), base, silence_s=1.0)
    try:
        await llm.reload(MODEL)
        with pytest.raises(LLMError, match=r"while answering the planner's prompt \(the model's"):
            await asyncio.wait_for(llm.prefill(MESSAGES, call(CallPurpose.PLAN)), 60)
    finally:
        never.set()
        await server.stop()


async def test_a_server_that_ignores_the_format_meets_the_repair_path(serve) -> None:
    """The plan comes back as prose first (the format was ignored); the agent's one repair
    call gets JSON, and the run completes on the server's model."""
    plan = {
        "tasks": [
            {
                "task_id": "t1",
                "task_goal": "greet",
                "steps": [
                    {
                        "step_id": "s1",
                        "step_goal": "say hello",
                        "tool_name": "llm_generator",
                        "expected_output": "a greeting",
                    }
                ],
            }
        ]
    }
    fake = FakeModelServer(
        stream("Sure! I will greet."),  # plan: not JSON
        stream(f"<plan>{json.dumps(plan)}</plan>"),  # the repair
        stream('{"prompt": "Say hello."}'),  # the step's arguments
        stream("Hello!"),  # the step
        stream('{"status": "continue", "reason": "done"}'),  # rethink
        stream("Hello!"),  # answer
    )
    llm = await serve(fake)
    agent = Agent(
        llm=llm,
        tools=[LLMGenerator()],
        config=AgentConfig(models=ModelRoles(planner=MODEL)),
    )
    result = await asyncio.wait_for(agent.task("Say hello."), 120)
    await agent.close()
    assert result.state is AgentState.COMPLETED, result.error
    assert "Hello" in (result.answer or "")
    repair = fake.chats[1]["messages"]
    assert any("Sure! I will greet." in m["content"] for m in repair), (
        "the repair shows the bad reply"
    )


@pytest.mark.parametrize(
    ("model", "profile"),
    [
        ("smollm2-135m-instruct-q4_1", "tiny"),
        ("qwen2.5:0.5b", "small"),
        ("/models/SmolLM2-360M-Instruct.Q8_0.gguf", "small"),
        ("qwen3:4b", "full"),
        ("Qwen2.5-1.5B-Instruct", "small"),
        ("gpt-4o-mini", "full"),  # no size in the name: the full profile
    ],
)
def test_a_served_model_gets_its_profile_by_the_size_in_its_name(model: str, profile: str) -> None:
    assert profile_for("openai", model).name == profile


async def test_token_counts_come_from_the_servers_tokenizer_where_it_has_one(serve) -> None:
    llama = await serve(FakeModelServer(stream("x"), kind="llama.cpp"))
    await llama.reload(MODEL)
    assert await llama.count_tokens_exact(["one two three", "four"]) == [3, 1]
    other = await serve(FakeModelServer(stream("x")))
    await other.reload(MODEL)
    assert await other.count_tokens_exact(["one two three"]) is None


async def test_a_model_list_that_never_ends_fails_the_load_within_its_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The server's small answers (the model list, its properties) are bounded too: the
    load fails naming the server and what it did not finish."""
    monkeypatch.setattr(model_server, "ASK_TIMEOUT_S", 0.5)
    never = asyncio.Event()

    def endless_list(request: Request) -> Reply:
        body = b'{"object": "list", "data": ['
        return Reply(200, {"Content-Type": "application/json"}, [body, never])

    server = ScriptedServer(endless_list)
    await server.start()
    base = server.url.removesuffix("/mcp") + "/v1"
    try:
        llm = ModelServerLLM(HttpxTransport(), base)
        with pytest.raises(LLMError) as raised:
            await asyncio.wait_for(llm.reload(MODEL), 30)
        assert str(raised.value) == (
            f"the model server at {base} did not finish answering {base}/models within 0.5 s"
        )
    finally:
        never.set()
        await server.stop()


async def test_a_refused_key_says_to_set_it_in_settings(serve) -> None:
    refused = json_reply({"error": {"message": "invalid api key"}}, status=401)
    llm = await serve(FakeModelServer(refused))
    await llm.reload(MODEL)
    with pytest.raises(LLMError) as raised:
        await asyncio.wait_for(llm.chat(MESSAGES, call()), 60)
    assert "refused the request (HTTP 401: invalid api key): set its API key in Settings" in str(
        raised.value
    )


async def test_an_error_whose_body_never_comes_fails_at_the_silence_limit() -> None:
    never = asyncio.Event()
    server = ScriptedServer(
        FakeModelServer(Reply(500, {"Content-Type": "application/json"}, [b'{"err', never]))
    )
    await server.start()
    base = server.url.removesuffix("/mcp") + "/v1"
    llm = ModelServerLLM(HttpxTransport(), base, silence_s=1.0)
    try:
        await llm.reload(MODEL)
        with pytest.raises(
            LLMError, match=r"sent nothing for 1 s .*\(HTTP 500, its body not sent\)"
        ):
            await asyncio.wait_for(llm.chat(MESSAGES, call()), 60)
    finally:
        never.set()
        await server.stop()


def test_the_pages_silence_limit_defaults_to_the_engines_and_stops_at_15_minutes() -> None:
    from agent_py.engines.model_server import DEFAULT_SILENCE_S
    from agent_py.page.settings import PageSettings

    assert PageSettings().openai_silence_s == DEFAULT_SILENCE_S
    # The bridge extension ends any request at 15 minutes: a longer limit could not hold.
    assert PageSettings(openai_silence_s=900).openai_silence_s == 900
    with pytest.raises(ValueError, match="less than or equal to 900"):
        PageSettings(openai_silence_s=901)
