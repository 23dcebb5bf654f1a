"""Plan review in the core: the run waits for the reviewer after planning, then runs the plan
as approved or edited (held to the plan's rules), or ends cancelled with nothing run."""

from __future__ import annotations

from typing import Any

from support import EchoTool, make_agent, of_type, plan_reply, step

from agent_py import AgentConfig, AgentState, ScriptedLLM
from agent_py.core.plan import PlanSchema
from agent_py.core.review import ReviewAnswer
from agent_py.core.tool import ToolContext, ToolResult


class RemoteEcho(EchoTool):
    """An echo that stands for a remote server's tool (an MCP tool)."""

    name = "atlas__echo"
    remote = True

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return await super().run(arguments, ctx)


class Reviewer:
    """Answers in turn; records what it was shown."""

    def __init__(self, *answers: ReviewAnswer) -> None:
        self.answers = list(answers)
        self.shown: list[tuple[PlanSchema, str | None]] = []

    async def review(self, plan: PlanSchema, *, question: str, problem: str | None) -> ReviewAnswer:
        self.shown.append((plan, problem))
        return self.answers.pop(0)


TWO_STEPS = plan_reply(
    [
        step("s1", "atlas__echo", {"text": "a", "times": 2}),
        step("s2", "echo", {"text": "b", "times": 1}),
    ]
)
DONE = "<status>done</status><final>done</final>"


def agent_with(reviewer: Reviewer, review: str = "remote") -> tuple[Any, Any, Any, Any]:
    remote, local = RemoteEcho(), EchoTool()
    llm = ScriptedLLM.replaying({"plan": TWO_STEPS, "rethink": DONE})
    agent, sink = make_agent(
        llm, remote, local, config=AgentConfig(review=review), reviewer=reviewer
    )
    return agent, sink, remote, local


async def test_an_approved_plan_runs_as_the_model_made_it() -> None:
    reviewer = Reviewer(ReviewAnswer(action="approve"))
    agent, sink, remote, local = agent_with(reviewer)
    result = await agent.task("echo twice")
    assert result.state is AgentState.COMPLETED
    assert (remote.calls, local.calls) == ([{"text": "a", "times": 2}], [{"text": "b", "times": 1}])
    assert [e.content for e in of_type(sink.events, "plan_reviewed")] == ["approved"]
    states = [e.content for e in of_type(sink.events, "state")]
    assert states.index("reviewing") < states.index("executing")


async def test_an_edited_plan_runs_as_edited_and_the_history_says_what_changed() -> None:
    edited = PlanSchema.model_validate_json(
        TWO_STEPS.removeprefix("<plan>").removesuffix("</plan>")
    )
    edited.tasks[0].steps[0].arguments = {"text": "z", "times": 3}
    edited.tasks[0].steps[0].step_goal = "echo z"
    del edited.tasks[0].steps[1]
    reviewer = Reviewer(ReviewAnswer(action="approve", plan=edited.model_dump(exclude_none=True)))
    agent, sink, remote, local = agent_with(reviewer)
    result = await agent.task("echo twice")
    assert result.state is AgentState.COMPLETED
    assert (remote.calls, local.calls) == ([{"text": "z", "times": 3}], [])
    [reviewed] = of_type(sink.events, "plan_reviewed")
    assert reviewed.meta["changes"] == [
        "deleted s2",
        "s1: step goal changed",
        "s1: arguments changed",
    ]
    assert reviewed.meta["plan"]["tasks"][0]["steps"][0]["arguments"] == {"text": "z", "times": 3}


async def test_an_edit_that_breaks_the_plan_is_offered_again_with_the_reason() -> None:
    bad_tool = {"tasks": [{"task_id": "t1", "task_goal": "g", "steps": [step("s1", "nope", {})]}]}
    dangling = {
        "tasks": [
            {
                "task_id": "t1",
                "task_goal": "g",
                "steps": [step("s2", "echo", {"text": "${s1}", "times": 1})],
            }
        ]
    }
    wrong_args = {
        "tasks": [{"task_id": "t1", "task_goal": "g", "steps": [step("s1", "echo", {"text": 1})]}]
    }
    reviewer = Reviewer(
        ReviewAnswer(action="approve", plan=bad_tool),
        ReviewAnswer(action="approve", plan=dangling),
        ReviewAnswer(action="approve", plan=wrong_args),
        ReviewAnswer(action="approve"),
    )
    agent, _, remote, _ = agent_with(reviewer)
    result = await agent.task("echo twice")
    problems = [problem for _, problem in reviewer.shown]
    assert problems[0] is None
    assert "nope" in str(problems[1])
    assert "refers to ${s1}, which no step gives" in str(problems[2])
    assert "the arguments of step s1 are wrong" in str(problems[3])
    assert result.state is AgentState.COMPLETED and remote.calls == [{"text": "a", "times": 2}]


async def test_a_cancelled_plan_ends_the_run_cancelled_with_nothing_run() -> None:
    reviewer = Reviewer(ReviewAnswer(action="cancel"))
    agent, sink, remote, local = agent_with(reviewer)
    result = await agent.task("echo twice")
    assert result.state is AgentState.CANCELLED
    assert result.error == "you cancelled the plan at its review: nothing ran"
    assert remote.calls == [] and local.calls == []
    assert [e.content for e in of_type(sink.events, "plan_reviewed")] == ["cancelled"]


async def test_remote_review_shows_only_plans_with_remote_tools_and_records_always_allow() -> None:
    local_only = Reviewer()
    llm = ScriptedLLM.replaying(
        {"plan": plan_reply([step("s1", "echo", {"text": "b", "times": 1})]), "rethink": DONE}
    )
    agent, sink = make_agent(
        llm, EchoTool(), RemoteEcho(), config=AgentConfig(review="remote"), reviewer=local_only
    )
    assert (await agent.task("echo")).state is AgentState.COMPLETED
    assert local_only.shown == [] and of_type(sink.events, "plan_reviewed") == []

    auto = Reviewer(ReviewAnswer(action="approve", auto=True))
    agent, sink, _, _ = agent_with(auto)
    assert (await agent.task("echo twice")).state is AgentState.COMPLETED
    [reviewed] = of_type(sink.events, "plan_reviewed")
    assert reviewed.content == "approved (always allowed: atlas__echo)"

    never = Reviewer()
    agent, sink, _, _ = agent_with(never, review="off")
    assert (await agent.task("echo twice")).state is AgentState.COMPLETED
    assert never.shown == []
