"""Follow-up turns: a task of the same session sees the earlier turns (each task, the plan the
model made for it and its result, as turns of the plan call's conversation), also when the
session is continued from its recorded history, and never more of them than its share of the
context window."""

from __future__ import annotations

import re
from pathlib import Path

from support import EchoTool, default_tools, make_agent, plan_reply, step

from agent_py import Agent, AgentConfig, AgentState, FileSink, ScriptedLLM, read_history_file
from agent_py.core.agent import EARLIER_TURNS_SHARE
from agent_py.core.budget import estimate_tokens, prompt_tokens
from agent_py.core.conversation import TurnDigest, digests_from_events, turns_that_fit
from agent_py.core.llm import CallInfo, CallPurpose, Message
from agent_py.core.profiles import SMALL
from agent_py.tools.python import PythonExecutor
from agent_py.tools.python_runner import SubprocessPyRunner

FIRST = "Use JavaScript to compute 6 times 7."
FOLLOW_UP = "Add 8 to that result."


def follow_up_model() -> ScriptedLLM:
    """A model that can do the follow-up only with the earlier result in its prompt: it adds
    8 to the last "Result:" it was told about, and plans 6 * 7 when there is none."""

    def script(messages: list[Message], call: CallInfo) -> str:
        if call.purpose is CallPurpose.PLAN:
            told = re.findall(r"Result: (\d+)", str(messages[-1]["content"]))
            code = f"return {told[-1]} + 8;" if told else "return 6 * 7;"
            return plan_reply([step("s1", "javascript_execute", {"code": code})])
        value = re.findall(r"result: (\d+)", str(messages[-1]["content"]))[-1]
        return f"<status>done</status><final>{value}</final>"

    return ScriptedLLM(script)


async def test_a_follow_up_uses_the_earlier_result() -> None:
    llm = follow_up_model()
    agent, sink = make_agent(llm)

    first = await agent.task(FIRST)
    second = await agent.task(FOLLOW_UP)

    assert (first.state, first.answer) == (AgentState.COMPLETED, "42")
    assert (second.state, second.answer) == (AgentState.COMPLETED, "50")
    plans = [m for m, c in llm.calls if c.purpose is CallPurpose.PLAN]
    assert plans[0][-1]["content"] == f"Task: {FIRST}"  # as a first turn's always was
    # The second call is the first one's conversation, then the turn as it went.
    assert plans[1][: len(plans[0])] == plans[0]
    assert [m["role"] for m in plans[1][len(plans[0]) :]] == ["assistant", "user"]
    assert "return 6 * 7;" in plans[1][-2]["content"]  # the plan the model made
    assert plans[1][-1]["content"] == f"Result: 42\n\nTask: {FOLLOW_UP}"
    ends = [e for e in sink.events if e.type == "turn_end"]
    assert [e.meta["digest"]["answer"] for e in ends] == ["42", "50"]
    await agent.close()


async def test_a_follow_ups_own_step_calls_are_told_the_last_result_first() -> None:
    """A step's arguments call sees the task with the last turn's result, not the earlier
    tasks, whose values a small model otherwise took (6 + 8 for "add 8 to that", the words
    of "convert the word 'agent' to upper case" reversed for "reverse that text")."""
    seen: list[str] = []

    def script(messages: list[Message], call: CallInfo) -> str:
        if call.purpose is CallPurpose.PLAN:
            follow_up = "Result: 42" in str(messages[-1]["content"])
            tool, text = (
                ("echo", "8 more") if follow_up else ("javascript_execute", "return 6 * 7;")
            )
            return plan_reply(
                [{"step_id": "s1", "step_goal": "go", "tool_name": tool, "input": text}]
            )
        seen.append(str(messages[-1]["content"]))
        return '{"text": "50", "times": 1}'

    config = AgentConfig(plan_shape=SMALL.plan_shape, strategy=SMALL.strategy)
    agent, _ = make_agent(ScriptedLLM(script), *default_tools(), EchoTool(), config=config)
    await agent.task(FIRST)
    seen.clear()  # the first turn's own calls (its number computed twice)
    second = await agent.task(FOLLOW_UP)

    assert second.answer == "50"
    assert f"{FOLLOW_UP}\n(The last result: 42)\n" in seen[0]
    assert FIRST not in seen[0]
    await agent.close()


async def test_a_follow_ups_step_that_names_itself_uses_the_last_turns_result() -> None:
    """``And half of that?`` planned as ``return ${s1} / 2;`` in step s1 itself: a step cannot
    use its own result, so the reference is the last turn's (the 0.5B model's habit)."""
    plans = iter(
        [
            plan_reply([step("s1", "javascript_execute", {"code": "return 25 * 4;"})]),
            plan_reply([step("s1", "javascript_execute", {"code": "return ${s1} / 2;"})]),
        ]
    )
    llm = ScriptedLLM.replaying({"plan": lambda messages, call: next(plans)})
    config = AgentConfig(plan_shape=SMALL.plan_shape, strategy=SMALL.strategy)
    agent, sink = make_agent(llm, *default_tools(), config=config)

    assert (await agent.task("What's 25 times 4?")).answer == "100"
    second = await agent.task("And half of that?")

    assert (second.state, second.answer) == (AgentState.COMPLETED, "50")
    said = [e.content for e in sink.events if e.type == "step_progress"]
    assert "${s1} in step s1 itself: read as the last turn's result" in said
    # In a first turn there is no earlier result: the reference fails as before.
    itself = plan_reply([step("s1", "javascript_execute", {"code": "return ${s1} / 2;"})])
    fresh, _ = make_agent(ScriptedLLM.replaying({"plan": itself}), config=config)
    first = await fresh.task("Half of that?")
    assert first.state is AgentState.FAILED
    assert "which has no result yet" in (first.error or "")
    await agent.close()
    await fresh.close()


async def test_a_follow_ups_result_that_is_the_last_result_unchanged_fails_its_step() -> None:
    """Seen (the 0.5B model): "Now use Python to reverse that text." after "AGENT", planned as
    ``return 'agent'.upper();``, the earlier task done again. Its result is not the answer:
    the step fails, and the corrected plan is told why."""
    plans = iter(
        [
            plan_reply(
                [step("s1", "javascript_execute", {"code": "return 'agent'.toUpperCase();"})]
            ),
            plan_reply([step("s1", "python_execute", {"code": "return 'agent'.upper()"})]),
            plan_reply([step("s2", "python_execute", {"code": "return 'AGENT'[::-1]"})]),
        ]
    )
    seen: list[str] = []

    def plan(messages: list[Message], call: CallInfo) -> str:
        seen.append(str(messages[-1]["content"]))
        return next(plans)

    config = AgentConfig(
        plan_shape=SMALL.plan_shape,
        strategy=SMALL.strategy.model_copy(update={"code_call_after_failure": False}),
    )
    tools = [*default_tools(), PythonExecutor(SubprocessPyRunner(), timeout_s=10)]
    agent, _ = make_agent(ScriptedLLM.replaying({"plan": plan}), *tools, config=config)

    assert (
        await agent.task("Use JavaScript to convert the word 'agent' to upper case.")
    ).answer == "AGENT"
    second = await agent.task("Now use Python to reverse that text.")

    assert (second.state, second.answer) == (AgentState.COMPLETED, "TNEGA")
    assert (
        "s1 (python_execute): its result AGENT is the last result unchanged, and the task asks "
        "for something done with it" in seen[2]
    )
    await agent.close()


def test_a_result_unlike_the_last_one_or_in_a_first_turn_is_not_held_to_it() -> None:
    from agent_py.core.execution import NOT_A_FOLLOW_UP, FollowUp, StepOutcome
    from agent_py.core.history import EventRecorder
    from agent_py.core.plan import StepSchema, TaskSchema
    from agent_py.core.rescues import changes_the_last_result
    from agent_py.core.tool import ToolResult

    task = TaskSchema(
        task_id="t1",
        task_goal="go",
        steps=[StepSchema(step_id="s1", step_goal="go", tool_name="javascript_execute")],
    )

    def outcome(text: str) -> list[StepOutcome]:
        return [StepOutcome(step=task.steps[0], task_id="t1", result=ToolResult(text))]

    recorder = EventRecorder()
    after_agent = FollowUp(last_result=ToolResult("agent"), questions=("Say agent.",))
    # Upper case is a change; in a first turn there is nothing to compare with.
    assert changes_the_last_result(after_agent, outcome("AGENT"), task, recorder)[0].ok
    assert changes_the_last_result(NOT_A_FOLLOW_UP, outcome("agent"), task, recorder)[0].ok
    assert not changes_the_last_result(after_agent, outcome(" agent "), task, recorder)[0].ok


async def test_a_follow_ups_code_that_takes_an_earlier_task_as_its_data_fails() -> None:
    """Seen (the 0.5B model): "Now use Python to reverse that text." after "Use JavaScript to
    convert the word 'agent' to upper case." (→ AGENT) ran code that reversed the earlier
    task's own words, and the run completed with them backwards."""
    first = "Use JavaScript to convert the word 'agent' to upper case."
    plans = iter(
        [
            plan_reply(
                [step("s1", "javascript_execute", {"code": "return 'agent'.toUpperCase();"})]
            ),
            plan_reply(
                [
                    step(
                        "s1",
                        "javascript_execute",
                        {"code": f'return "{first}".split("").reverse().join("");'},
                    )
                ]
            ),
        ]
    )
    llm = ScriptedLLM.replaying({"plan": lambda messages, call: next(plans)})
    # The refusal itself: no code call writes the refused code again.
    strategy = SMALL.strategy.model_copy(update={"code_call_after_failure": False})
    config = AgentConfig(plan_shape=SMALL.plan_shape, strategy=strategy)
    agent, _ = make_agent(llm, *default_tools(), config=config)

    assert (await agent.task(first)).answer == "AGENT"
    second = await agent.task("Now reverse that text.")

    assert second.state is AgentState.FAILED
    assert second.steps[0].output == (
        "javascript_execute was not run: the code takes the words of an earlier task "
        f"({first!r}) as its data; in a follow-up, 'that' is the last result"
    )
    # In a first turn, the task's own words may be its data ("Count the words of this
    # sentence."): only an earlier task's are refused.
    own = plan_reply([step("s1", "javascript_execute", {"code": f'return "{first}".length;'})])
    fresh, _ = make_agent(ScriptedLLM.replaying({"plan": own}), *default_tools(), config=config)
    assert (await fresh.task(first)).state is AgentState.COMPLETED
    await agent.close()
    await fresh.close()


async def test_a_session_continued_from_its_history_file(tmp_path: Path) -> None:
    """The terminal's --session FILE: a new agent (a new process) resumes the recorded
    session, under its id, as its next turn, and appends to the same file."""
    history = tmp_path / "s.jsonl"
    agent = Agent(llm=follow_up_model(), tools=default_tools(), sinks=[FileSink(history)])
    assert (await agent.task(FIRST)).answer == "42"
    await agent.close()
    session = agent.session

    later = Agent(llm=follow_up_model(), tools=default_tools(), sinks=[FileSink(history)])
    later.start_session(read_history_file(history))
    result = await later.task(FOLLOW_UP)
    await later.close()

    assert result.answer == "50"
    events = read_history_file(history)
    assert {e.session for e in events} == {session}
    assert [e.turn for e in events if e.type == "turn_start"] == [1, 2]
    assert [e.type for e in events].count("session_start") == 1
    assert digests_from_events(events)[1:] == (2, digests_from_events(events)[2])
    assert [d.answer for d in digests_from_events(events)[2]] == ["42", "50"]


async def test_twenty_earlier_turns_stay_within_their_share_of_the_window() -> None:
    """Twenty long turns: the plan call keeps the newest turns that fit in 1/8 of the window,
    oldest first, and every call stays within the engine's context."""
    config = AgentConfig(context_window=8192)
    calls: list[list[Message]] = []

    def script(messages: list[Message], call: CallInfo) -> str:
        if call.purpose is CallPurpose.PLAN:
            calls.append(messages)
            # Long replies of distinct words (a phrase over and over is not an answer).
            words = "Array.from({length: 300}, (_, i) => 'w' + i).join(' ')"
            code = f"return '{len(calls)}: ' + {words};"
            return plan_reply([step("s1", "javascript_execute", {"code": code})])
        words = " ".join(f"w{i}" for i in range(200))
        return f"<status>done</status><final>turn {len(calls)}: {words}</final>"

    llm = ScriptedLLM(script)
    agent, _ = make_agent(llm, config=config)
    for turn in range(1, 22):
        result = await agent.task(f"Task number {turn}: " + "please " * 60)
        assert result.state is AgentState.COMPLETED, result.error

    first, last = calls[0], calls[-1]
    earlier = last[len(first) - 1 : -1]  # the turns between the fixed part and the task
    shown = [int(n) for m in earlier for n in re.findall(r"Task: Task number (\d+)", m["content"])]
    assert shown and shown == list(range(21 - len(shown), 21))  # the newest, in order
    assert len(shown) < 20  # the oldest gave way
    assert prompt_tokens(earlier, estimate_tokens) <= 8192 // EARLIER_TURNS_SHARE
    assert last[-1]["content"].startswith("Result: turn 20: w0 w1 w2")
    assert last[-1]["content"].endswith("Task: Task number 21: " + "please " * 60)
    assert max(prompt_tokens(m, estimate_tokens) for m, _ in llm.calls) <= 8192
    await agent.close()


def test_an_older_history_without_digests_gives_question_and_answer() -> None:
    """Histories written before digests: the turn is rebuilt from turn_start and final."""
    from agent_py.core.events import Event, EventType

    events = [
        Event(session="s", turn=1, type=EventType.TURN_START, content="What is 6 times 7?"),
        Event(session="s", turn=1, type=EventType.FINAL, content="42", meta={"state": "completed"}),
        Event(session="s", turn=1, type=EventType.TURN_END, meta={"state": "completed"}),
        Event(session="s", turn=2, type=EventType.TURN_START, content="never ended"),
    ]
    session, last_turn, digests = digests_from_events(events)
    assert (session, last_turn) == ("s", 2)
    assert digests == [
        TurnDigest(turn=1, question="What is 6 times 7?", state="completed", answer="42")
    ]
    long = TurnDigest(turn=2, question="Summarise the report.", state="failed", answer="x" * 300)
    assert turns_that_fit([*digests, long], 1000) == [*digests, long]
    assert turns_that_fit([*digests, long], long.tokens()) == [long]  # the newest first
    assert turns_that_fit([*digests, long], 10) == []
    assert long.outcome() == f"not done ({'x' * 300})"
