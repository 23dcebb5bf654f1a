"""Model profiles: how the agent works with a given model.

A profile bundles what depends on the model's size: how large a plan may be, the reply
budgets, the sampling, and the :class:`Strategy` switches that trade model calls for
robustness. A 4B model on a GPU plans freely and reflects after every task; a 135M-270M
model on two CPU cores gets a tight plan shape with the tool input inline, short examples,
and no model call that a successful step makes unnecessary. Profiles follow the model's
class: tiny (300M parameters or fewer), small (up to 2B) and full. Each switch of the tiny and
small profiles was measured with the real-task suite's tuning split (``python -m agent_py
eval``) on the model class it serves; docs/benchmarks.md has the tables.

The page chooses the profile here, from the engine and the model, so every default lives
in Python: ``profile_for("cpu", "qwen2.5-coder-0.5b-instruct-q4_1")``.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict

from agent_py.core.llm import Sampling
from agent_py.core.model_client import ReplyBudgets
from agent_py.core.plan import PlanShape

DEFAULT_CPU_MODEL = "qwen2.5-coder-0.5b-instruct-q4_k_m"
"""The CPU engine's model unless the user picks another: chosen by the real-task suite on a
2-core machine (docs/benchmarks.md: it answers far more tasks right than SmolLM2-135M, in
about the time a one-step task should take; the 1.5B model is three times slower). One of
the bundled models (web/models.json, fetched by scripts/fetch_model.py)."""


class Strategy(BaseModel):
    """Switches of the loop. Defaults are the full behaviour of the original design."""

    model_config = ConfigDict(frozen=True)

    examples: bool = False
    """Short worked examples (as earlier turns) before the plan and argument requests."""
    nearest_example: bool = False
    """With ``examples``: the example closest to the task in words is shown once more, just
    before it (after the fixed examples, so their prefilled cache still serves)."""
    merge_duplicate_steps: bool = False
    """Identical steps of a plan run once; references to a copy point to the one kept.
    Off by default: a capable model repeats a call on purpose (polling, a random draw);
    a small model repeats steps by mistake."""
    skip_rethink_on_success: bool = False
    """No rethink call after a task whose steps all succeeded: the plan goes on, and after
    the last task the answer follows."""
    rethink_after_failure: bool = True
    """Rethink after a task with a failed step. Off: the plan goes on (steps that need a
    failed result fail too) and a run whose every step failed ends failed; for models whose
    reflections cannot be read, this saves the rethink and its repair call."""
    compact_json: bool = False
    """Replies under a schema get a grammar without whitespace between JSON tokens, for
    engines that take one (llama.cpp): a small model otherwise pretty-prints, and every
    newline and indent is a decoded token."""
    replan_after_failure: bool = False
    """After a task with a failed step, ask once for a corrected plan under the plan
    grammar, showing the errors (instead of a free-text rethink). Small models cannot write
    a readable reflection, but they can write a plan again."""
    retry_temperature: float | None = None
    """Temperature of that corrected plan (and of ``code_repair``'s turn): a greedy model
    otherwise repeats its plan."""
    fenced_code: bool = False
    """A step whose tool takes source code (``ToolBase.code_language``) gets it from a
    separate call that asks for a fenced code block in plain text, not from the plan's
    JSON string (where quotes must be escaped and small models lose the thread)."""
    code_call_after_failure: bool = False
    """A failed step whose code came from the plan runs once more, with its code from a
    separate call as ``fenced_code`` asks for it, before any corrected plan. A corrected plan
    in the same conversation mostly repeats the failed code; a fresh framing is another draw."""
    code_repair: bool = False
    """Code from a code call (``fenced_code``, ``code_call_after_failure``) that fails, its
    checks or its run, gets one more turn of the same call, which shows the error: "the code
    only defines sortWords(words) and never calls it" is fixed there, where a fresh draw or a
    corrected plan repeats the code. Sampled at ``retry_temperature``, as the corrected plan."""
    answer_from_single_step: bool = False
    """When the last task is one successful step, its result is the answer (no answer
    call). With skip_rethink_on_success, a one-step task then costs one model call."""
    tool_hint: bool = False
    """The task's plan request names the tools whose name shares a word with it
    (``plan_prompts.matching_tools``): a small model otherwise takes the first tool of a
    server (``add`` for a capital city)."""
    data_check: bool = False
    """With ``answer_from_single_step``: the handed-over result must come from tool calls that
    were given the question's data (its numbers, quoted texts and web addresses); a result
    from calls that left some out fails its step (``answer_checks.data_left_out``). Catches a
    tiny model's answer about something else; can refuse a stronger model's right answer
    that did not need every number (an example sequence, a pasted list)."""
    chain_check: bool = False
    """With ``answer_from_single_step``: the handed-over result fails its step when an earlier
    step of the same plan found something that no later step used (``rescues.chained``):
    the answer would leave that work out, as a count of a country's letters where the plan
    found its capital first."""
    refuse_constant_text: bool = False
    """Code tools refuse code that only gives back text written into it (``return 'Hello,
    Bob!';``), as they always refuse code that only gives back numbers: it computes nothing,
    and it is how a model fakes a task it cannot do (an email "sent"). Off for tiny models,
    which write their texts as code."""
    grounded_arguments: bool = False
    """A remote (MCP) tool's call fails its step when none of its argument values comes from
    the task, the conversation or an earlier result (``checks.grounded_arguments``):
    a model that picked a tool that does not fit the task invents its values (``add(0, 0)``
    to delete a record), and the invented call's result would be reported as done."""
    caret_is_power: bool = False
    """Code tools refuse ``^`` before a number (``1^2 + 2^2``): it is XOR in JavaScript and
    Python, and a model that copies a user's "2^10" means a power. Off where a model writes
    XOR on purpose."""
    compute_twice: bool = False
    """The last task's one step, code from the plan that gave a number, is computed once more
    from a code call before its number is the answer; numbers that differ fail the step
    (``agreement.computed_twice``). One more model call for an answer that is computed."""
    answer_apart: bool = False
    """The answer call is a conversation of its own (``answer_system``, the task and the
    results), not the plan conversation's next turn: after the planner's prompt and its plan,
    the 0.5B model answered every answer call of a tuning run with a plan again."""
    decline: bool = False
    """The ``decline`` tool is offered: a plan that uses it ends the run failed with its
    reason, before anything runs (a task that needs the internet, live data, the user's
    files or an action in the world)."""


class ModelProfile(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    plan_shape: PlanShape = PlanShape()
    budgets: ReplyBudgets | None = None
    """None: every purpose gets the page's max_tokens setting."""
    strategy: Strategy = Strategy()
    sampling: Sampling | None = None
    """None: the engine's own defaults."""
    text_sampling: Sampling | None = None
    """For free text (no schema); None: ``sampling``."""


# For models above 2B parameters (WebLLM's Qwen3-4B), or any model given it in Settings. Its
# switches were measured on Qwen2.5-Coder-1.5B on llama-server (docs/benchmarks.md). The tool
# hint: without it, "Use JavaScript to count the letters in 'encyclopedia'" was planned with
# atlas__capital. The code call after failed code, and its repair turn: the plan's code split
# one program across steps (a variable of another step) or wrote "$80" for 80, and the
# rethink gave up or a corrected plan repeated the code; both cost model calls only after a
# step failed. Grounded arguments: asked to use a delete tool the server lacks, the model
# called add(30.603752, -121.388927), and the run completed with its sum. The decline tool:
# a task no tool here can do must be able to say so, in every profile.
FULL = ModelProfile(
    name="full",
    strategy=Strategy(
        tool_hint=True,
        code_call_after_failure=True,
        code_repair=True,
        grounded_arguments=True,
        decline=True,
    ),
)

# For models of 300M parameters or fewer (SmolLM2-135M, Gemma 3 270M) on two CPU cores. The
# budgets hold the largest plan the shape allows: 2 tasks of 2 steps with a 160-character
# input each. Each switch was measured on SmolLM2-135M with the tuning split of the suite.
TINY = ModelProfile(
    name="tiny",
    plan_shape=PlanShape(
        max_tasks=2,
        max_steps_per_task=2,
        max_text_chars=80,
        with_arguments=False,
        step_input=True,
        max_input_chars=160,
        step_notes=False,
    ),
    budgets=ReplyBudgets(plan=448, arguments=160, generate=192, rethink=96, answer=192),
    strategy=Strategy(
        examples=True,
        nearest_example=True,
        merge_duplicate_steps=True,
        skip_rethink_on_success=True,
        rethink_after_failure=False,
        replan_after_failure=True,
        retry_temperature=0.8,
        code_call_after_failure=True,
        answer_from_single_step=True,
        answer_apart=True,
        data_check=True,
        compact_json=True,
    ),
    # Greedy: at 0.2 the 135M model wandered more often, in code above all.
    sampling=Sampling(temperature=0.0),
    # Free text looped ("The ocean is a vast and mysterious place." until the budget ran
    # out): DRY penalises extending a repeated run of tokens.
    text_sampling=Sampling(
        temperature=0.0, dry_multiplier=0.8, dry_allowed_length=3, dry_penalty_last_n=256
    ),
)

# For models of 0.5B-2B parameters (Qwen2.5-Coder 0.5B and 1.5B) on a CPU. Each switch was
# measured on Qwen2.5-Coder-0.5B with the tuning split of the suite (docs/benchmarks.md).
SMALL = TINY.model_copy(
    update={
        "name": "small",
        # Room for real code in a step's input (a loop, a date calculation).
        "plan_shape": TINY.plan_shape.model_copy(update={"max_input_chars": 400}),
        "budgets": ReplyBudgets(plan=768, arguments=320, generate=256, rethink=192, answer=256),
        "strategy": TINY.strategy.model_copy(
            update={
                "decline": True,
                "grounded_arguments": True,
                "caret_is_power": True,
                "nearest_example": False,
                "data_check": False,
                "tool_hint": True,
                "refuse_constant_text": True,
                "chain_check": True,
                "code_repair": True,
                "compute_twice": True,
            }
        ),
    }
)

PROFILES: dict[str, ModelProfile] = {p.name: p for p in (TINY, SMALL, FULL)}

# Per-model choices, where a model needs another profile than its size gives.
MODEL_PROFILES: dict[str, str] = {}

TINY_MODEL_PARAMETERS = 300_000_000
"""Models of at most this size (by the size in their name) get the tiny profile."""
SMALL_MODEL_PARAMETERS = 2_000_000_000
"""Larger models up to this size get the small profile; larger ones the full profile."""
ENGINE_DEFAULT_PROFILES: dict[str, str] = {"cpu": "small"}
"""For a model whose name states no size: the CPU engine runs small models."""
_SIZE_IN_NAME = re.compile(r"(?<![0-9a-z.])(\d+(?:\.\d+)?)([mb])(?![a-z])", re.IGNORECASE)


def parameters_in_name(model: str) -> float | None:
    """The parameter count a model's name states (``smollm2-135m-instruct``: 135e6,
    ``qwen2.5:0.5b``: 0.5e9), or None when it states none."""
    found = _SIZE_IN_NAME.findall(model.rsplit("/", 1)[-1])
    if not found:
        return None
    number, unit = found[-1]
    return float(number) * (1e6 if unit.lower() == "m" else 1e9)


def profile_for(engine: str, model: str, choice: str = "auto") -> ModelProfile:
    """The profile named ``choice``, or with ``auto`` the one for this model's class: its size
    by its name (tiny up to 300M, small up to 2B, full above); a name without a size gets
    the engine's default (small on the CPU engine, full elsewhere)."""
    if choice != "auto":
        try:
            return PROFILES[choice]
        except KeyError:
            known = ", ".join(["auto", *PROFILES])
            raise ValueError(f"unknown profile {choice!r}; choose one of {known}") from None
    name = MODEL_PROFILES.get(model)
    if name is None:
        size = parameters_in_name(model)
        if size is None:
            name = ENGINE_DEFAULT_PROFILES.get(engine, FULL.name)
        elif size <= TINY_MODEL_PARAMETERS:
            name = TINY.name
        elif size <= SMALL_MODEL_PARAMETERS:
            name = SMALL.name
        else:
            name = FULL.name
    return PROFILES[name]
