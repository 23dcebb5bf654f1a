"""One step's use of one tool: think (get valid arguments), then act.

Think skips the model when the plan already gave arguments that meet the tool's schema.
Otherwise the model fills them under the schema; a violation gets one repair round that
shows the model the validator's message.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from agent_py.core import references
from agent_py.core.checks.description_as_value import described_not_given
from agent_py.core.concurrency import run_abandonable
from agent_py.core.errors import InvalidArgumentsError, ReplyParseError
from agent_py.core.grammar import fenced_code_grammar
from agent_py.core.llm import CallOptions, CallPurpose, Message, Sampling
from agent_py.core.parsing import extract_json
from agent_py.core.prompts import examples, render
from agent_py.core.tool import (
    ToolBase,
    ToolContext,
    ToolError,
    ToolResult,
    main_input_property,
)
from agent_py.core.tool_schema import validate_arguments

_FENCED = re.compile(r"```[\w+-]*[ \t]*\n?(.*?)(?:```|$)", re.DOTALL)
# A statement of code where a value belongs: `return capital('Freedonia');`, `const x = …`.
_CODE_STATEMENT = re.compile(
    r"\s*(?:(?:return|const|let|var|def|import)\s|function\b|print\().*|.*\)\s*;\s*", re.DOTALL
)


def looks_like_code(text: str) -> bool:
    """Whether ``text`` is a statement of code (a small model writes the input of a tool that
    takes a plain value, a country's name, as the JavaScript that would call the tool)."""
    return bool(_CODE_STATEMENT.fullmatch(text))


_PYTHON_STATEMENT = re.compile(r"\s*(?:def\s|import\s|from\s+[\w.]+\s+import\s|print\()")


def looks_like_python(text: str) -> bool:
    """Whether ``text`` opens as Python rather than JavaScript (``def``, ``import``,
    ``print(``)."""
    return bool(_PYTHON_STATEMENT.match(text))


def fenced_block(reply: str) -> str:
    """The first fenced code block of a reply (to the end when it is not closed), or the
    whole reply when it has none."""
    match = _FENCED.search(reply)
    return (match.group(1) if match else reply).strip()


def resolve_references(
    value: Any,
    results: Mapping[str, ToolResult],
    step_ids: Collection[str] = (),
    code_language: str | None = None,
) -> Any:
    """Replace ``${step_id}`` with that step's result, inside strings at any depth.

    Only ids of planned steps (``step_ids``, plus those with results) are references, so
    JavaScript template literals such as ``${words.length}`` pass through untouched. A
    string that is exactly one reference becomes the step's structured data when it has
    any, so a list stays a list; elsewhere the result's text is spliced in. With
    ``code_language`` (the arguments of a code tool), code strings get each result as a
    literal of that language (``splice_into_code``).
    """

    def whole(step_id: str) -> Any:
        result = _lookup(step_id, results)
        return result.data if result.data is not None else result.content

    known = set(step_ids) | set(results)
    if code_language is not None and isinstance(value, dict):
        # The code of a code tool: each reference becomes a literal of the language.
        value = {
            key: splice_into_code(item, results, known, code_language)
            if isinstance(item, str)
            else item
            for key, item in value.items()
        }
    return references.resolve(
        value,
        set(step_ids) | set(results),
        whole=whole,
        spliced=lambda step_id: _lookup(step_id, results).reference_text(),
    )


def splice_into_code(
    code: str, results: Mapping[str, ToolResult], known: Collection[str], language: str
) -> str:
    """``code`` with each ``${step_id}`` of ``known`` replaced so that the code stays valid:
    inside a string literal, the result's text escaped for that literal; elsewhere, the
    result as a literal of its own (a number as a number, text as a quoted string). A tool's
    text (a page, a log) spliced raw into ``'${s1}'`` breaks at its first quote or newline."""
    out: list[str] = []
    quote: str | None = None  # the open literal's delimiter
    index = 0
    while index < len(code):
        match = references.REFERENCE.match(code, index)
        if match and match.group(1) in known:
            out.append(_code_literal(_lookup(match.group(1), results), quote, language))
            index = match.end()
            continue
        char = code[index]
        if quote is not None and char == "\\":
            out.append(code[index : index + 2])
            index += 2
            continue
        if quote is not None and code.startswith(quote, index):
            out.append(quote)
            index += len(quote)
            quote = None
            continue
        if quote is None and char in _QUOTES:
            triple = code[index : index + 3]
            quote = triple if language == "Python" and triple in _TRIPLE_QUOTES else char
            out.append(quote)
            index += len(quote)
            continue
        out.append(char)
        index += 1
    return "".join(out)


_QUOTES = ("'", '"', "`")
_TRIPLE_QUOTES = ("'" * 3, '"' * 3)


def _code_literal(result: ToolResult, quote: str | None, language: str) -> str:
    """``result`` written into code: escaped for the open literal ``quote``, or as a literal."""
    text = result.reference_text()
    if quote is not None:
        escaped = json.dumps(text, ensure_ascii=False)[1:-1]
        if quote.startswith("'"):
            escaped = escaped.replace("'", "\\'")
        elif quote == "`":
            escaped = escaped.replace("`", "\\`").replace("${", "\\${")
        return escaped
    data = result.data
    if isinstance(data, bool) or (not isinstance(data, (int, float, str)) and data is not None):
        if language == "Python":
            return repr(data)
        return json.dumps(data, ensure_ascii=False, default=str)
    if isinstance(data, (int, float)):
        return repr(data) if language == "Python" else json.dumps(data)
    try:
        float(text)
    except ValueError:
        return json.dumps(text, ensure_ascii=False)
    return text.strip()  # a number printed as text: a number in the code


def _lookup(step_id: str, results: Mapping[str, ToolResult]) -> ToolResult:
    if step_id not in results:
        done = ", ".join(results) or "none yet"
        raise ToolError(
            f"the arguments refer to ${{{step_id}}}, which has no result yet (results: {done}); "
            "a step can only use results of earlier tasks"
        )
    if results[step_id].is_error:  # its text is an error message, not data to go on with
        raise failed_dependency([step_id])
    return results[step_id]


def failed_dependency(step_ids: list[str]) -> ToolError:
    """Why a step that needs the results of failed steps is skipped."""
    return ToolError(f"skipped: depends on {' and '.join(step_ids)}, which failed")


FAILURE_CHARS = 400
"""Of why an earlier run failed, what a code call is told (an error's first lines)."""


@dataclass(frozen=True)
class StepBrief:
    """What the model is told about the step whose arguments it fills in."""

    question: str
    task_goal: str
    step_goal: str
    tool_intent: str
    expected_output: str
    planned_arguments: dict[str, Any] | None
    results_digest: str
    planned_input: str | None = None
    failed_before: str = ""
    """Why an earlier run of the step failed (its code call is told)."""


class StepAction:
    """Think, then act, for one step's tool (a step of the plan; not a model's tool call)."""

    def __init__(
        self, tool: ToolBase, ctx: ToolContext, *, timeout_s: float, examples: bool = False
    ) -> None:
        self.tool = tool
        self.ctx = ctx
        self.timeout_s = tool.timeout_s or timeout_s
        self.examples = examples
        self._code_call: list[Message] | None = None
        """The conversation of the last ``write_code`` call, for ``repair_code``."""

    def literal_arguments(
        self,
        planned: dict[str, Any] | None,
        results: Mapping[str, ToolResult],
        step_ids: Collection[str],
        planned_input: str | None = None,
    ) -> tuple[dict[str, Any] | None, str | None]:
        """The plan's own arguments with references resolved, when they are valid.

        A plan step may give the tool's main input as one string instead of an object;
        it fills the tool's only required string property. Returns ``(arguments, None)``
        when they can be used as they are, else ``(None, why_not)``.
        """
        if planned is None and planned_input is not None and planned_input.strip():
            main = main_input_property(self.tool.input_schema)
            if main is None:
                return None, f"{self.tool.name} needs more than one input value"
            if self.tool.code_language is None and looks_like_code(planned_input):
                return None, (
                    f"the plan gave code as the {main} of {self.tool.name}, which takes a value"
                )
            planned = {main: planned_input}
        if planned is None:
            return None, "the plan gave no arguments"
        resolved = resolve_references(planned, results, step_ids, self.tool.code_language)
        problem = self._problem(resolved)
        return (resolved, None) if problem is None else (None, problem)

    def _problem(self, arguments: Any) -> str | None:
        """Why ``arguments`` cannot be used: they do not meet the tool's schema, or a value
        is its parameter's description (``checks.description_as_value``)."""
        problem = validate_arguments(self.tool.input_schema, arguments)
        if problem is None and isinstance(arguments, dict):
            problem = described_not_given(self.tool.input_schema, arguments, self.tool.description)
        return problem

    async def think(
        self,
        brief: StepBrief,
        results: Mapping[str, ToolResult],
        step_ids: Collection[str],
        why_not_literal: str,
    ) -> dict[str, Any]:
        """Ask the model for arguments that meet the tool's schema (one repair round)."""
        hint = ""
        if brief.planned_arguments is not None:
            planned = json.dumps(brief.planned_arguments, ensure_ascii=False)
            hint = f"The plan proposed {planned}, but: {why_not_literal}\n"
        elif (
            brief.planned_input
            and self.tool.code_language is None
            and looks_like_code(brief.planned_input)
        ):
            hint = (
                f"The plan gave code as the input: {brief.planned_input}\n"
                f"{self.tool.name} takes the values themselves, not code.\n"
            )
        elif brief.planned_input:
            hint = f"The plan says the input is: {brief.planned_input}\n"
        messages: list[Message] = [{"role": "system", "content": render("arguments_system")}]
        if self.examples:
            messages += arguments_example_turns()
        messages += [
            {
                "role": "user",
                "content": render(
                    "arguments_user",
                    question=brief.question,
                    task_goal=brief.task_goal,
                    step_goal=brief.step_goal,
                    tool_name=self.tool.name,
                    tool_description=self.tool.description,
                    tool_intent=brief.tool_intent,
                    expected_output=brief.expected_output,
                    schema=json.dumps(self.tool.input_schema, ensure_ascii=False),
                    hint=hint,
                    results=brief.results_digest or "(none yet)",
                ),
            },
        ]
        reply = await self._ask(messages)
        arguments, problem = self._read_arguments(reply, results, step_ids)
        if problem is None and arguments is not None:
            return arguments
        messages += [
            {"role": "assistant", "content": reply},
            {
                "role": "user",
                "content": render("arguments_repair", tool_name=self.tool.name, error=problem),
            },
        ]
        repaired = await self._ask(messages)
        if repaired.strip() == reply.strip():
            raise InvalidArgumentsError(
                f"invalid arguments for {self.tool.name}: {problem} "
                "(the model repeated the same reply when asked to fix it)"
            )
        arguments, problem = self._read_arguments(repaired, results, step_ids)
        if problem is not None or arguments is None:
            raise InvalidArgumentsError(f"invalid arguments for {self.tool.name}: {problem}")
        return arguments

    async def write_code(
        self,
        brief: StepBrief,
        results: Mapping[str, ToolResult],
        step_ids: Collection[str],
        temperature: float | None = None,
    ) -> dict[str, Any]:
        """The tool's code from a plain-text call: one fenced block, read back out; sampled
        at ``temperature`` when one is given."""
        main = main_input_property(self.tool.input_schema)
        language = self.tool.code_language
        if main is None or language is None:
            raise InvalidArgumentsError(f"{self.tool.name} takes no code")
        spec = (self.tool.input_schema.get("properties") or {}).get(main) or {}
        messages: list[Message] = [
            {
                "role": "system",
                "content": render(
                    "code_system",
                    language=language,
                    fence=language.lower(),
                    input_description=spec.get("description") or main,
                ),
            },
            {
                "role": "user",
                "content": render(
                    "code_user",
                    question=brief.question,
                    step=f"Step: {brief.step_goal}" if brief.step_goal else "",
                    results=f"Results so far:\n{brief.results_digest}"
                    if brief.results_digest
                    else "",
                    files=self.tool.code_context,
                    failed=render("code_failed_before", error=brief.failed_before[:FAILURE_CHARS])
                    if brief.failed_before
                    else "",
                ).strip(),
            },
        ]
        self._code_call = messages
        return await self._code_reply(
            messages, main, language, results, step_ids, self._sampled_at(temperature)
        )

    async def repair_code(
        self,
        error: str,
        results: Mapping[str, ToolResult],
        step_ids: Collection[str],
        temperature: float | None = None,
    ) -> dict[str, Any]:
        """The code of the last ``write_code`` call, written again after it failed with
        ``error``: one more turn of the same conversation, which shows its code and the error,
        sampled at ``temperature`` when one is given (a greedy model repeats its code)."""
        messages = self._code_call
        main = main_input_property(self.tool.input_schema)
        language = self.tool.code_language
        if messages is None or main is None or language is None:
            raise InvalidArgumentsError(f"{self.tool.name} wrote no code to repair")
        messages.append(
            {"role": "user", "content": render("code_repair", error=error, fence=language.lower())}
        )
        return await self._code_reply(
            messages, main, language, results, step_ids, self._sampled_at(temperature)
        )

    def _sampled_at(self, temperature: float | None) -> Sampling | None:
        """The model's sampling, at ``temperature`` when one is given."""
        sampling = self.ctx.model.sampling
        if temperature is not None:
            sampling = (sampling or Sampling()).model_copy(update={"temperature": temperature})
        return sampling

    async def _code_reply(
        self,
        messages: list[Message],
        main: str,
        language: str,
        results: Mapping[str, ToolResult],
        step_ids: Collection[str],
        sampling: Sampling | None = None,
    ) -> dict[str, Any]:
        """Ask the code call's conversation for one fenced block; its code as the arguments."""
        reply = await self.ctx.model.ask(
            messages,
            CallPurpose.ARGUMENTS,
            CallOptions(
                tool=self.tool.name,
                step=self.ctx.step_id,
                # Code copies the question's values: no DRY penalty (the free-text sampling).
                sampling=sampling or self.ctx.model.sampling,
                grammar=fenced_code_grammar(language.lower()),
            ),
        )
        messages.append({"role": "assistant", "content": reply})
        code = fenced_block(reply)
        if not code:
            raise InvalidArgumentsError(f"the model wrote no {language} code")
        arguments = resolve_references({main: code}, results, step_ids, self.tool.code_language)
        problem = self._problem(arguments)
        if problem is not None:
            raise InvalidArgumentsError(f"invalid arguments for {self.tool.name}: {problem}")
        return dict(arguments)

    async def act(self, arguments: dict[str, Any]) -> ToolResult:
        """Run the tool under its time limit. A failure raises ToolError with the text the
        step reports: ``StepExecutor.run`` is the one place that makes it the observation.

        The run is its own task: at the limit it is cancelled, and a tool that ignores the
        cancellation is abandoned, so the step still ends at the limit. Stopping the agent
        cancels the run too."""
        try:
            result = await self._run(arguments)
        except ToolError as exc:
            raise ToolError(f"{self.tool.name} failed: {exc}") from exc
        except asyncio.CancelledError:
            if _cancelling():
                raise
            raise ToolError(f"{self.tool.name} was cancelled") from None
        except Exception as exc:  # a tool bug must not end the run
            raise ToolError(f"{self.tool.name} raised {type(exc).__name__}: {exc}") from exc
        if result is _TIMED_OUT:
            raise ToolError(f"{self.tool.name} timed out after {self.timeout_s:g} s")
        if not isinstance(result, ToolResult):
            problem = f"returned {type(result).__name__}, not a ToolResult"
        elif not isinstance(result.content, str):
            problem = (
                f"returned a ToolResult with {type(result.content).__name__} content, not text"
            )
        else:
            return result
        raise ToolError(f"{self.tool.name} {problem} (a bug in the tool)")

    async def _run(self, arguments: dict[str, Any]) -> object:
        """What the tool's run gave, or ``_TIMED_OUT``."""
        started = self.tool.run(arguments, self.ctx)
        if not inspect.isawaitable(started):  # a tool whose run is not async
            return started
        return await run_abandonable(started, self.timeout_s, _TIMED_OUT)

    async def _ask(self, messages: list[Message]) -> str:
        return await self.ctx.model.ask(
            messages,
            CallPurpose.ARGUMENTS,
            CallOptions(schema=self.tool.input_schema, tool=self.tool.name, step=self.ctx.step_id),
        )

    def _read_arguments(
        self, reply: str, results: Mapping[str, ToolResult], step_ids: Collection[str]
    ) -> tuple[dict[str, Any] | None, str | None]:
        try:
            value = extract_json(reply)
        except ReplyParseError as exc:
            return None, exc.reason
        if not isinstance(value, dict):
            return None, "the reply must be one JSON object"
        resolved = resolve_references(value, results, step_ids, self.tool.code_language)
        problem = self._problem(resolved)
        return (resolved, None) if problem is None else (None, problem)


_TIMED_OUT = object()


def _cancelling() -> bool:
    """True when the current task itself is being cancelled (the agent was stopped)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def arguments_example_turns() -> list[Message]:
    """Earlier turns that show an arguments reply for a tool that needs several values."""
    turns: list[Message] = []
    for example in examples()["arguments"]:
        turns.append(
            {
                "role": "user",
                "content": render(
                    "arguments_example",
                    step_goal=example["step"],
                    tool_name=example["tool_name"],
                    tool_description=example["tool_description"],
                    schema=json.dumps(example["schema"]),
                    hint=f"The plan says the input is: {example['input']}",
                ),
            }
        )
        turns.append({"role": "assistant", "content": json.dumps(example["arguments"])})
    return turns
