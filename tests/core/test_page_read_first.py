"""A plan that reads no page for a task that holds a web address gets a first step that reads
it with fetch_page (plan_adoption.page_read_first), over an explicit test fetcher: the
address is structure, found the same in any language's text."""

from __future__ import annotations

from typing import Any

import pytest
from support import StoredPages, make_agent, of_type, plan_reply, step, stored_page

from agent_py import AgentConfig, AgentState, ScriptedLLM
from agent_py.core.answer_checks import web_addresses
from agent_py.core.profiles import SMALL
from agent_py.tools.fetch_page import FetchPage
from agent_py.tools.javascript import JavascriptExecutor
from agent_py.tools.llm_generator import LLMGenerator
from agent_py.tools.node_runner import NodeRunner

TEA = "https://tea.test/prices.html"
PAGE = "Tea prices this week. Assam: 3.20 per 100 g. Darjeeling: 5.10 per 100 g."


def page_agent(llm: ScriptedLLM, fetcher: StoredPages) -> tuple[Any, Any]:
    """An agent of the small profile with the page's tools for a task with an address."""
    return make_agent(
        llm,
        LLMGenerator(),
        JavascriptExecutor(NodeRunner()),
        FetchPage(fetcher),
        config=AgentConfig(
            plan_shape=SMALL.plan_shape, strategy=SMALL.strategy, budgets=SMALL.budgets
        ),
    )


def tea_pages(**options: Any) -> StoredPages:
    return StoredPages({TEA: stored_page(TEA, PAGE)}, **options)


@pytest.mark.parametrize(
    ("text", "found"),
    [
        (f"How much is Assam according to {TEA}?", [TEA]),
        (f"根据{TEA}上的通知，哪天开放？", [TEA]),
        (f"Compare {TEA}, and {TEA}.", [TEA]),
        ("See http://a.test/x?q=1&r=2#top.", ["http://a.test/x?q=1&r=2#top"]),
        ("No address here, nor in http:// alone.", []),
    ],
)
def test_web_addresses_end_where_an_address_does(text: str, found: list[str]) -> None:
    assert web_addresses(text) == found


async def test_the_writer_given_a_pages_address_is_given_the_page_read_first() -> None:
    """The default model planned the writer, handed the address, to find a figure on the
    page: the page is read first and the writer gets its text after the address."""
    writer = step("s1", "llm_generator", {"prompt": f"What does Assam cost at {TEA}?"})
    llm = ScriptedLLM.replaying(
        {
            "plan": plan_reply([writer], needs="look_up"),
            "generate": "Assam costs 3.20 per 100 g.",
            "answer": "Assam costs 3.20 per 100 g.",
        }
    )
    fetcher = tea_pages()
    agent, sink = page_agent(llm, fetcher)

    result = await agent.task(f"How much does Assam cost per 100 g according to {TEA}?")

    assert result.state is AgentState.COMPLETED, result.error
    assert "3.20" in (result.answer or "")
    assert fetcher.asked == [TEA]
    assert [s.tool for s in result.steps] == ["fetch_page", "llm_generator"]
    (added,) = [event.meta["added"] for event in of_type(sink.events, "plan_to_read")]
    assert list(added.values()) == ["fetch_page"]
    prompts = [m["content"] for messages, call in llm.calls for m in messages]
    generate = [messages for messages, call in llm.calls if call.purpose.value == "generate"]
    assert generate and any("Assam: 3.20 per 100 g" in m["content"] for m in generate[0])
    assert any(TEA in text for text in prompts)


async def test_a_page_that_cannot_be_read_ends_the_run_failed_saying_why() -> None:
    """Offline, the added read fails and the writer is not asked to stand in for the page."""
    writer = step("s1", "llm_generator", {"prompt": f"What does Assam cost at {TEA}?"})
    llm = ScriptedLLM.replaying(
        {
            "plan": plan_reply([writer], needs="look_up"),
            "generate": "Assam costs 4.00 per 100 g.",
            "answer": "Assam costs 4.00 per 100 g.",
            "rethink": "<status>continue</status>",
        }
    )
    agent, _ = page_agent(llm, tea_pages(is_online=False))

    result = await agent.task(f"How much does Assam cost per 100 g according to {TEA}?")

    assert result.state is AgentState.FAILED
    assert "offline" in (result.error or ""), result.error
    assert "4.00" not in (result.answer or "")


@pytest.mark.parametrize(
    ("planned", "needs"),
    [
        (step("s1", "fetch_page", {"url": TEA}), "look_up"),
        (
            step("s1", "javascript_execute", {"code": f"return new URL('{TEA}').hostname;"}),
            "compute",
        ),
        (
            step("s1", "llm_generator", {"prompt": f"Write a line that invites people to {TEA}"}),
            "write",
        ),
    ],
    ids=["a plan that reads it", "code that holds the address", "a plan that only writes"],
)
async def test_a_plan_that_reads_the_page_or_needs_no_page_reads_nothing_more(
    planned: dict[str, Any], needs: str
) -> None:
    llm = ScriptedLLM.replaying(
        {
            "plan": plan_reply([planned], needs=needs),
            "generate": "Come and see the prices.",
            "answer": "Done.",
        }
    )
    fetcher = tea_pages()
    agent, sink = page_agent(llm, fetcher)

    result = await agent.task(f"About {TEA}: do what the plan says.")

    assert result.state is AgentState.COMPLETED, result.error
    assert not of_type(sink.events, "plan_to_read")
    assert [s.tool for s in result.steps] == [planned["tool_name"]]
    assert fetcher.asked == ([TEA] if planned["tool_name"] == "fetch_page" else [])
