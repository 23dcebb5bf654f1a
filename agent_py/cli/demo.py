"""A scripted demonstration model: shows the whole loop without a language model.

It plans two tasks for any question (measure the question's text with JavaScript, then
summarise the measurements), so the real tools, events and history can be seen working.
Its replies are canned; it is labelled wherever it is used.
"""

from __future__ import annotations

import json
import re

from agent_py.core.llm import CallInfo, Message
from agent_py.core.scripted_llm import ScriptedLLM

DEMO_LABEL = "scripted demo model (canned replies, no language model)"

_MEASURE_JS = """
const text = %s;
const words = text.split(/\\s+/).filter(Boolean);
const longest = words.reduce((a, b) => (b.length > a.length ? b : a), "");
console.log(`measured ${words.length} words`);
return { words: words.length, characters: text.length, longest_word: longest };
"""


def demo_llm() -> ScriptedLLM:
    def plan(messages: list[Message], call: CallInfo) -> str:
        question = messages[-1]["content"].removeprefix("Task: ")
        measure = {
            "step_id": "s1",
            "step_goal": "Measure the text of the task",
            "tool_name": "javascript_execute",
            "tool_intent": "counting is exact in code",
            "expected_output": "word and character counts",
            "arguments": {"code": _MEASURE_JS % json.dumps(question)},
        }
        summarise = {
            "step_id": "s2",
            "step_goal": "Summarise the measurements",
            "tool_name": "llm_generator",
            "tool_intent": "turn numbers into a sentence",
            "expected_output": "one sentence",
            "arguments": {"prompt": "Summarise these measurements in one sentence: ${s1}"},
        }
        tasks = [
            {"task_id": "t1", "task_goal": "Measure the task text", "steps": [measure]},
            {"task_id": "t2", "task_goal": "Summarise", "steps": [summarise]},
        ]
        return f"<plan>{json.dumps({'tasks': tasks})}</plan>"

    def generate(messages: list[Message], call: CallInfo) -> str:
        found = re.search(r"\{.*\}", messages[-1]["content"])
        facts = json.loads(found.group(0)) if found else {}
        return (
            f"<think>The facts are {facts}.</think>The task has {facts.get('words', '?')} words "
            f"and {facts.get('characters', '?')} characters; its longest word is "
            f"“{facts.get('longest_word', '?')}”."
        )

    def rethink(messages: list[Message], call: CallInfo) -> str:
        if "(none: this was the last task)" not in messages[-1]["content"]:
            return "<status>continue</status>"
        summary = re.search(r"\[s2\] llm_generator \(ok\): (.*)", messages[-1]["content"])
        sentence = summary.group(1) if summary else "(no summary)"
        return f"<status>done</status><final>## Demo answer\n\n{sentence}</final>"

    return ScriptedLLM.replaying({"plan": plan, "generate": generate, "rethink": rethink})
