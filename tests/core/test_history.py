"""The JSONL history, failing sinks, and hooks."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import make_agent, plan_reply, step

from agent_py import (
    Agent,
    AgentState,
    Event,
    EventType,
    FileSink,
    Hooks,
    ScriptedLLM,
    read_history_file,
)
from agent_py.tools import LLMGenerator

HISTORY_FIELDS = {"ts", "session", "turn", "step", "type", "content", "meta"}


def generator_llm() -> ScriptedLLM:
    return ScriptedLLM.replaying(
        {
            "plan": plan_reply([step("s1", "llm_generator", {"prompt": "hi"})]),
            "generate": "<think>hmm</think>hello",
            "rethink": "<status>done</status><final>said hello</final>",
        }
    )


async def test_jsonl_history_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "history" / "session.jsonl"
    agent = Agent(llm=generator_llm(), tools=[LLMGenerator()], sinks=[FileSink(path)])
    await agent.task("say hello")
    await agent.task("again")
    await agent.close()

    lines = path.read_text().splitlines()
    events = read_history_file(path)

    assert len(events) == len(lines) > 10
    assert all(set(Event.model_fields) == HISTORY_FIELDS for _ in [0])
    assert [e.model_dump_json() for e in events] == lines
    types = [e.type for e in events]
    assert types[0] == "session_start" and types[-1] == "session_end"
    assert types.count("turn_start") == types.count("turn_end") == types.count("final") == 2
    assert {e.session for e in events} == {agent.session}
    assert {e.turn for e in events if e.type == "final"} == {1, 2}
    assert "thinking" in types
    thinking = next(e for e in events if e.type == "thinking")
    assert (thinking.content, thinking.step) == ("hmm", "s1")
    assistant = [e for e in events if e.type == "assistant"]
    assert all("<think>" not in e.content for e in assistant)


class ExplodingSink:
    def __init__(self) -> None:
        self.attempts = 0

    def write(self, event: Event) -> None:
        self.attempts += 1
        raise OSError("disk full")


async def test_a_failing_sink_never_stops_a_run(caplog: pytest.LogCaptureFixture) -> None:
    sink = ExplodingSink()
    agent, memory = make_agent(generator_llm(), LLMGenerator())
    agent.recorder.sinks.insert(0, sink)

    result = await agent.task("say hello")

    assert result.state is AgentState.COMPLETED
    assert sink.attempts == len(memory.events)
    assert sum("history sink" in r.message for r in caplog.records) == 1


async def test_hooks_are_called_and_their_failures_are_not_fatal(
    caplog: pytest.LogCaptureFixture,
) -> None:
    seen: list[str] = []

    def on_turn_start(event: Event) -> None:
        seen.append(f"turn:{event.content}")

    async def on_action(event: Event) -> None:
        seen.append(f"action:{event.meta['tool']}")
        raise ValueError("hook bug")

    def on_observation(event: Event) -> None:
        raise RuntimeError("another hook bug")

    async def on_final(event: Event) -> None:
        seen.append(f"final:{event.content}")

    hooks = Hooks(
        on_turn_start=on_turn_start,
        on_action=on_action,
        on_observation=on_observation,
        on_final=on_final,
    )
    agent, _ = make_agent(generator_llm(), LLMGenerator(), hooks=hooks)

    result = await agent.task("say hello")

    assert result.state is AgentState.COMPLETED
    assert seen == ["turn:say hello", "action:llm_generator", "final:said hello"]
    messages = " ".join(r.message for r in caplog.records)
    assert "async hook failed" in messages and "hook for observation failed" in messages


async def test_a_failing_listener_never_stops_a_run() -> None:
    def listener(event: Event) -> None:
        raise KeyError("ui bug")

    agent, memory = make_agent(generator_llm(), LLMGenerator(), on_event=listener)
    result = await agent.task("say hello")
    assert result.state is AgentState.COMPLETED
    assert memory.events[-1].type == EventType.TURN_END
