"""The planner's prompts: the system prompt for a plan shape, and worked examples.

The plan reply's JSON differs with the :class:`~agent_py.core.plan.PlanShape` (arguments object,
one-string input, step notes or not), so the tool list, the input rule, the reply format
and the examples are all built here from the shape, never written out twice.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from enum import Enum
from typing import Any

from agent_py.core.answer_checks import WEB_ADDRESS
from agent_py.core.decline import DECLINE_TOOL
from agent_py.core.messages import Keep, Message, stand_ins
from agent_py.core.plan import PlanShape
from agent_py.core.prompts import examples, render
from agent_py.core.registry import ToolRegistry
from agent_py.core.tool import ToolBase, main_input_property, takes_address

_NOTE_FIELDS = ("tool_intent", "expected_output")


def plan_system_prompt(
    registry: ToolRegistry,
    shape: PlanShape,
    *,
    with_examples: bool,
    detail: Callable[[ToolBase], Detail] = lambda tool: Detail.FULL,
) -> str:
    """The planner's system prompt; ``detail`` says how much of each tool it shows."""
    return render(
        "plan_system",
        tools="\n".join(_tool_entry(tool, shape, detail(tool)) for tool in registry),
        max_tasks=shape.max_tasks,
        max_steps=shape.max_steps_per_task,
        look_up_rule=_look_up_rule(registry),
        input_rule=render("plan_rule_input" if shape.step_input else "plan_rule_arguments"),
        decline_rule="\n" + render("plan_rule_decline").strip()
        if registry.get(DECLINE_TOOL)
        else "",
        reply_format=(
            render("plan_format_examples")
            if with_examples and plan_example_turns(registry, shape)
            else render("plan_format", step_format=json.dumps(_step_format(shape)))
        ),
    )


def _look_up_rule(registry: ToolRegistry) -> str:
    """Which tools can look up and act: a server's, and the tools that read the user's own
    files and pages here (named, when there are some)."""
    readers = [tool.name for tool in registry if tool.reads_data and not tool.remote]
    if not readers:
        return "Only a server's tool can look up or act."
    return (
        f"Only a server's tool can act; a server's tool or {', '.join(readers)} can look up "
        "(the user's own files and pages)."
    )


def plan_example_turns(registry: ToolRegistry, shape: PlanShape) -> list[Message]:
    """Earlier turns that show plans in this shape: a user task, then the plan as reply.
    Only examples whose tools all exist are shown. (Compact JSON here, as the small profile's
    grammar makes the model write it, cost SmolLM2 two tasks of the suite.)"""
    return [turn for _, pair in _example_pairs(registry, shape) for turn in pair]


def nearest_example_turns(registry: ToolRegistry, shape: PlanShape, question: str) -> list[Message]:
    """The worked example closest to ``question`` in words, as a task and its plan again; none
    when no example shares a word with it. Shown last, next to the question, where a small
    model copies from most: after the fixed examples, so their prefilled cache still serves.
    Closeness counts shared words (4 letters or more, a plural ``s`` dropped); a tie goes to
    the example listed first."""
    pairs = list(_example_pairs(registry, shape))
    # A word most examples share says nothing of which is closest ("what", "with").
    frequency = Counter(word for task, _ in pairs for word in _stems(task))
    common = {word for word, n in frequency.items() if n > 2}
    asked = _stems(question) - common
    best: list[Message] = []
    best_shared = 0
    for task, pair in pairs:
        shared = len(asked & _stems(task))
        if shared > best_shared:
            best, best_shared = pair, shared
    return best


def _example_pairs(registry: ToolRegistry, shape: PlanShape) -> Iterator[tuple[str, list[Message]]]:
    """Each usable example's task, with its two turns."""
    for example in examples()["plan"]:
        steps = [step for task in example["tasks"] for step in task["steps"]]
        tools = [registry.get(step["tool_name"]) for step in steps]
        if any(tool is None for tool in tools):
            continue
        plan = {
            "answer": example["answer"],
            "tasks": [
                {
                    "task_id": task["task_id"],
                    "task_goal": _bounded(task["task_goal"], shape.max_text_chars),
                    "needs": task["needs"],
                    "steps": [
                        _shaped_step(step, registry.get(step["tool_name"]), shape)
                        for step in task["steps"]
                    ],
                }
                for task in example["tasks"]
            ],
        }
        if len(plan["tasks"]) > shape.max_tasks:
            continue
        yield (
            example["task"],
            [
                {"role": "user", "content": render("plan_user", question=example["task"])},
                {"role": "assistant", "content": f"<plan>{json.dumps(plan)}</plan>"},
            ],
        )


def plan_system_message(
    registry: ToolRegistry,
    shape: PlanShape,
    *,
    with_examples: bool,
    focus: Iterable[str],
    content: str | None = None,
) -> Message:
    """The system message, with shorter stand-ins for a tight context window: full
    entries only for the tools in ``focus``, then one line per tool, then names only.
    ``content``: the full prompt, when the caller has it already (a new focus leaves it as
    it is)."""
    wanted = set(focus)

    def prompt(detail: Callable[[ToolBase], Detail]) -> str:
        return plan_system_prompt(registry, shape, with_examples=with_examples, detail=detail)

    return {
        "role": "system",
        "content": prompt(lambda tool: Detail.FULL) if content is None else content,
        "keep": Keep.TOOLS,
        "compact": stand_ins(
            lambda: [
                prompt(lambda tool: Detail.FULL if tool.name in wanted else Detail.LINE),
                prompt(lambda tool: Detail.LINE),
                prompt(lambda tool: Detail.NAME),
            ]
        ),
    }


def relevant_tools(registry: ToolRegistry, text: str) -> set[str]:
    """The tools a tight window keeps whole before there is a plan to ask: those named in
    ``text``, or sharing a distinctive word (4 letters or more, found in few tools) with it."""
    tools = list(registry)
    vocabulary = {tool.name: _words(f"{tool.name} {tool.description}") for tool in tools}
    frequency = Counter(word for words in vocabulary.values() for word in words)
    common = {word for word, n in frequency.items() if n > max(2, len(tools) // 4)}
    asked = _words(text) - common
    lowered = text.lower()
    return {
        tool.name for tool in tools if tool.name.lower() in lowered or asked & vocabulary[tool.name]
    }


def matching_tools(registry: ToolRegistry, text: str) -> list[str]:
    """The tools whose name holds a word of ``text`` (3 letters or more, a plural ``s``
    dropped; a server's prefix, shared by its tools, does not count), and, when ``text``
    holds a web address, the remote tools that take one (a parameter of format ``uri``), in
    the registry's order: a hint next to the task for a small model, which otherwise takes the
    first tool of a server whatever it does (``atlas__add`` for a capital city), or code that
    cannot reach the page."""
    tools = list(registry)
    names = {tool.name: _short_stems(tool.name) for tool in tools}
    frequency = Counter(word for words in names.values() for word in words)
    shared = {word for word, n in frequency.items() if n > 1}
    asked = _short_stems(text)
    has_address = WEB_ADDRESS.search(text) is not None
    return [
        tool.name
        for tool in tools
        if asked & (names[tool.name] - shared) or (has_address and _takes_address(tool))
    ]


def _takes_address(tool: ToolBase) -> bool:
    """A remote tool with a parameter of format ``uri`` (a fetch tool's ``url``)."""
    return tool.remote and takes_address(tool)


def _short_stems(text: str) -> set[str]:
    """Words of 3 letters or more, a plural ``s`` dropped: tool names are short (``add``)."""
    return {word.removesuffix("s") for word in re.findall(r"[a-z0-9]{3,}", text.lower())}


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]{4,}", text.lower()))


def _stems(text: str) -> set[str]:
    return {word.removesuffix("s") for word in _words(text)}


class Detail(Enum):
    FULL = "full"
    LINE = "line"  # the name and the first sentence of the description
    NAME = "name"


def _tool_entry(tool: ToolBase, shape: PlanShape, detail: Detail = Detail.FULL) -> str:
    if detail is Detail.NAME:
        return f"- {tool.name}"
    if detail is Detail.LINE:
        first = re.split(r"(?<=[.!?])\s", tool.description.strip(), maxsplit=1)[0]
        return f"- {tool.name}: {_bounded(first, 120)}"
    if not shape.step_input:
        schema = json.dumps(tool.input_schema, ensure_ascii=False)
        return f"- {tool.name}: {tool.description}\n  input schema: {schema}"
    return f"- {tool.name}: {tool.description}\n  input: {_input_description(tool)}"


def _input_description(tool: ToolBase) -> str:
    properties: dict[str, Any] = tool.input_schema.get("properties") or {}
    main = main_input_property(tool.input_schema)
    if main is not None:
        spec = properties.get(main) or {}
        # A bare name ("country") was copied as the input itself by a small model.
        return str(spec.get("description") or f"the value of {main} ({spec.get('type', 'text')})")
    values = ", ".join(
        f"{name} ({(spec or {}).get('type', 'value')})" for name, spec in properties.items()
    )
    return f"the values of {values}, in words" if values else "nothing (leave it empty)"


def _step_format(shape: PlanShape) -> dict[str, Any]:
    step: dict[str, Any] = {"step_id": "s1", "step_goal": "...", "tool_name": "..."}
    if shape.step_input:
        step["input"] = "..."
    if shape.step_notes:
        step["tool_intent"] = "why this tool"
        step["expected_output"] = "what the step returns"
    if shape.with_arguments and not shape.step_input:
        step["arguments"] = {}
    return step


def _shaped_step(step: dict[str, Any], tool: ToolBase | None, shape: PlanShape) -> dict[str, Any]:
    shaped: dict[str, Any] = {
        "step_id": step["step_id"],
        "step_goal": _bounded(step["step_goal"], shape.max_text_chars),
        "tool_name": step["tool_name"],
    }
    if shape.step_input:
        shaped["input"] = step["input"]
    if shape.step_notes:
        shaped.update({name: _bounded(step[name], shape.max_text_chars) for name in _NOTE_FIELDS})
    if shape.with_arguments and not shape.step_input and tool is not None:
        main = main_input_property(tool.input_schema)
        if main is not None:
            shaped["arguments"] = {main: step["input"]}
    return shaped


def _bounded(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
