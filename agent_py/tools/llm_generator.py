"""``llm_generator``: the model writes, summarises, translates or explains."""

from __future__ import annotations

from typing import Any

from agent_py.core.answer_checks import (
    before_it_starts_over,
    echoes_instructions,
    gives_instruction_back,
    repeats_itself,
)
from agent_py.core.llm import CallOptions, CallPurpose, Message
from agent_py.core.prompts import render
from agent_py.core.tool import ToolBase, ToolContext, ToolError, ToolResult
from agent_py.core.written import read_written


class LLMGenerator(ToolBase):
    name = "llm_generator"
    description = (
        "Writes, summarises, translates or explains text with the language model. "
        "Give the full instruction and any text it works on in 'prompt'."
    )
    input_schema = {
        "type": "object",
        "properties": {
            "prompt": {
                "type": "string",
                "minLength": 1,
                "description": "the instruction, with the text to work on",
            }
        },
        "required": ["prompt"],
        "additionalProperties": False,
    }
    uses_model = True

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        system = render("generator_system")
        instruction = str(arguments["prompt"])
        messages: list[Message] = [
            {"role": "system", "content": system},
            {"role": "user", "content": _with_request(instruction, ctx.question)},
        ]
        options = CallOptions(tool=self.name, step=ctx.step_id)
        reply = await ctx.model.reply(messages, CallPurpose.GENERATE, options)
        written = read_written(reply.text)
        if written.cannot:  # the reply format's status, in any language
            raise ToolError(f"the model declined: {written.text.strip()[:300]}")
        text = written.text
        if reply.finish_reason == "length":
            kept = before_it_starts_over(text)
            if kept is not None:
                ctx.report_progress(
                    "the reply ran to its length limit writing itself again: "
                    "kept the text before the repeat",
                    {"kept_chars": len(kept), "chars": len(text)},
                )
                text = kept
        if not text.strip():
            raise ToolError("the model returned no text")
        if repeats_itself(text):
            raise ToolError("the model wrote one phrase over and over instead of the text")
        if echoes_instructions(text, [system], allowed=instruction):
            raise ToolError("the model repeated its own instructions instead of doing the task")
        if gives_instruction_back(text, instruction, ctx.question):
            raise ToolError(
                f"the model gave its instruction back unchanged ({text.strip()[:80]!r}) "
                "instead of doing it: the instruction was only words cut out of the task, "
                "not what to do with them"
            )
        return ToolResult(text)


def _with_request(instruction: str, question: str | None) -> str:
    """The step's instruction, with the user's request for its language: a plan written in
    English for a task asked in Chinese otherwise gets its text in English."""
    if not question or question.strip() == instruction.strip():
        return instruction
    return render("generator_user", instruction=instruction, question=question.strip())
