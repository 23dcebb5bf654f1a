"""What happens to a plan the model (or the user) gave before it runs: a declining step ends
the run; inputs that looped to their length bound are cut; inputs that copied the request
up to that bound get it whole; the writer's steps in a task declared to compute go to a code
tool; repeated steps are merged (when the strategy says so); step ids an earlier plan used
are renamed. Each change is an event."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agent_py.core.answer_checks import web_addresses
from agent_py.core.checks import Seen, Stage, first_refusal
from agent_py.core.checks.needs_a_tool import unsupplied
from agent_py.core.decline import DECLINE_TOOL, TaskDeclined, declined_because
from agent_py.core.events import EventType
from agent_py.core.execution import CallMemory
from agent_py.core.history import EventRecorder
from agent_py.core.plan import (
    AnswerKind,
    Needs,
    PlanSchema,
    PlanShape,
    StepSchema,
    TaskSchema,
    cut_runaway_inputs,
    give_copied_text_whole,
    merge_duplicate_steps,
    order_by_references,
    rename_reused_ids,
)
from agent_py.core.step_action import looks_like_code


def adopt(
    plan: PlanSchema,
    plans: list[PlanSchema],
    memory: CallMemory,
    question: str,
    *,
    plan_shape: PlanShape,
    merge_duplicates: bool,
    takes_code: Callable[[str], bool],
    own_tool: Callable[[str], bool],
    recorder: EventRecorder,
    reads_data: Callable[[str], bool] = lambda name: False,
    code_tool_for: Callable[[str, str], str | None] = lambda tool, text: None,
    files_tool_for: Callable[[str, str], str | None] = lambda tool, text: None,
    reader_of: Callable[[str], str | None] = lambda question: None,
    files_code: str | None = None,
    page_reader: tuple[str, str] | None = None,
    takes_address: Callable[[str], bool] = lambda name: False,
) -> PlanSchema:
    """``plan`` as it will run, added to the run's ``plans`` (which it follows); raises
    TaskDeclined when a step declines the task, or a check of the plan stage refuses it (a
    task that needs a look-up or an action, planned with only the agent's own tools,
    ``own_tool``). ``code_tool_for(tool, text)``: the code tool that computes what a step
    of ``tool`` (with ``text`` its input) was to compute, where ``tool`` only writes, or None
    (see :func:`computed_by_code`). ``files_tool_for(tool, text)``: the code tool that writes code
    on the user's files, for a step of the code tool ``tool`` (``text`` its input) that
    should not keep it (see :func:`on_files`).
    ``reader_of(question)``: the code tool that opens a file of the user's that ``question``
    names, or None (see :func:`files_looked_up`). ``files_code``: the code tool that opens
    the user's files, if one is here (see :func:`counted_by_code`). ``page_reader``: the tool
    that reads the page at a web address and its parameter for it, if one is here, and
    ``takes_address(tool)`` whether a tool takes one (see :func:`page_read_first`)."""

    def report(kind: EventType, key: str, changes: dict[str, str], text: Callable[[], str]) -> None:
        if changes:
            meta: dict[str, Any] = {key: changes}
            recorder.emit(kind, text(), **meta)

    if page_reader is not None:
        plan, read = page_read_first(plan, page_reader, question, takes_address)
        report(
            EventType.PLAN_TO_READ,
            "added",
            read,
            lambda: (
                "the page at the task's address is read first, for a plan that reads none: "
                + ", ".join(f"{step} added, of {tool}" for step, tool in read.items())
            ),
        )
    reader = reader_of(question)
    if reader is not None:
        plan, read_by = files_looked_up(plan, reader, own_tool, question, reads_data)
        report(
            EventType.PLAN_TO_CODE,
            "moved",
            read_by,
            lambda: (
                "a look-up of the user's files planned on tools that cannot open them goes "
                "to the code tool that can: "
                + ", ".join(f"{step} to {tool}" for step, tool in read_by.items())
            ),
        )
    declined = decline_reason(plan, own_tool, question, reads_data)
    if declined is not None:
        plans.append(plan)
        raise TaskDeclined(declined)

    plan, cut = cut_runaway_inputs(plan, plan_shape)
    report(
        EventType.PLAN_CUT,
        "cut",
        cut,
        lambda: (
            "cut inputs that looped to their length bound: "
            + "; ".join(f"{step} keeps {kept!r}" for step, kept in cut.items())
        ),
    )
    plan, given = give_copied_text_whole(plan, plan_shape, question, takes_code)
    report(
        EventType.PLAN_TEXT_WHOLE,
        "given",
        given,
        lambda: (
            f"gave the request's text whole to steps whose input copied it up to the "
            f"{plan_shape.max_input_chars}-character bound: {', '.join(given)}"
        ),
    )
    plan, moved = computed_by_code(plan, code_tool_for)
    report(
        EventType.PLAN_TO_CODE,
        "moved",
        moved,
        lambda: (
            "steps of tasks declared to compute go to code, not the writer: "
            + ", ".join(f"{step} to {tool}" for step, tool in moved.items())
        ),
    )
    plan, to_files = on_files(plan, files_tool_for)
    report(
        EventType.PLAN_TO_CODE,
        "moved",
        to_files,
        lambda: (
            "code steps go to the code tool that sees the user's files: "
            + ", ".join(f"{step} to {tool}" for step, tool in to_files.items())
        ),
    )
    if merge_duplicates:
        plan, merged = merge_duplicate_steps(plan)
        report(
            EventType.PLAN_MERGED,
            "merged",
            merged,
            lambda: (
                "merged repeated steps: "
                + ", ".join(f"{dropped} into {kept}" for dropped, kept in merged.items())
            ),
        )
    if files_code is not None:
        plan, added = counted_by_code(
            plan, files_code, lambda name: reads_data(name) and not takes_code(name)
        )
        report(
            EventType.PLAN_TO_CODE,
            "added",
            added,
            lambda: (
                "a number from the user's files is computed by code, not by the answer's "
                "writer: " + ", ".join(f"{step} added, of {tool}" for step, tool in added.items())
            ),
        )
    taken = {step.step_id for earlier in plans for step in earlier.steps()}
    plan, renamed = rename_reused_ids(plan, taken)
    report(
        EventType.PLAN_RENAMED,
        "renamed",
        renamed,
        lambda: (
            "new plan reuses step ids: "
            + ", ".join(f"{old} is now {new}" for old, new in renamed.items())
        ),
    )
    plan, ordered = order_by_references(plan)
    report(
        EventType.PLAN_ORDERED,
        "ordered",
        ordered,
        lambda: (
            "steps that use a result of their own task run after it: "
            + ", ".join(f"{step} in {task}" for step, task in ordered.items())
        ),
    )
    if plans:
        memory.replanned()
    plans.append(plan)
    return plan


def decline_reason(
    plan: PlanSchema,
    own_tool: Callable[[str], bool],
    question: str,
    reads_data: Callable[[str], bool] = lambda name: False,
) -> str | None:
    """Why the run ends before it starts: a step of ``plan`` declines the task, or a check of
    the plan stage (``checks``) finds that no tool here can do a task of it."""
    for step in plan.steps():
        if step.tool_name == DECLINE_TOOL:
            reason = step.input if step.input is not None else (step.arguments or {}).get("reason")
            return declined_because(str(reason or step.step_goal))
    seen = Seen(question=question, plan=plan, own_tool=own_tool, reads_data=reads_data)
    refused = first_refusal(Stage.PLAN, None, seen)
    return declined_because(refused) if refused is not None else None


def files_looked_up(
    plan: PlanSchema,
    reader: str,
    own_tool: Callable[[str], bool],
    question: str,
    reads_data: Callable[[str], bool],
) -> tuple[PlanSchema, dict[str, str]]:
    """``plan`` with the steps of each look-up task that no tool of it can do (the writer
    asked for a file's last line) moved to ``reader``, the code tool that opens the file the
    question names, their code written afresh by a code call; and ``{step id: reader}``.
    Only for a question that names a file of the user's (its name, in any language): a
    look-up of anything else stays refused (:mod:`agent_py.core.checks.needs_a_tool`)."""
    seen = Seen(question=question, plan=plan, own_tool=own_tool, reads_data=reads_data)
    unread = {id(task) for task in unsupplied(seen) if task.needs is Needs.LOOK_UP}
    if not unread:
        return plan, {}
    moved: dict[str, str] = {}
    tasks = []
    for task in plan.tasks:
        if id(task) in unread:
            moved.update({step.step_id: reader for step in task.steps})
            steps = [
                step.model_copy(update={"tool_name": reader, "input": None, "arguments": None})
                for step in task.steps
            ]
            task = task.model_copy(update={"steps": steps})
        tasks.append(task)
    return plan.model_copy(update={"tasks": tasks}), moved


def page_read_first(
    plan: PlanSchema,
    reader: tuple[str, str],
    question: str,
    takes_address: Callable[[str], bool],
) -> tuple[PlanSchema, dict[str, str]]:
    """``plan`` with a first task that reads the page at the web address ``question`` holds
    with ``reader`` (a tool and its parameter for the address: fetch_page's url), when the
    plan looks something up or computes and no step of it reads an address (a tool that
    takes one, ``takes_address``, or code that holds it); a later step that was handed the
    address as text is given the page's text too (``${sN}`` after it); and
    ``{new step id: tool}``. The default model gave the writer the address of a page to find
    a figure on it, and the code call that took the writer's place made the figure up.
    A plan that only writes (a post that names a site) reads nothing."""
    addresses = web_addresses(question)
    if not addresses or not any(t.needs in (Needs.LOOK_UP, Needs.COMPUTE) for t in plan.tasks):
        return plan, {}
    address = addresses[0]
    for step in plan.steps():
        text = _main_text(step)
        if takes_address(step.tool_name) or (looks_like_code(text) and address in text):
            return plan, {}
    tool, parameter = reader
    read = StepSchema(
        step_id=_free_id("s", {step.step_id for step in plan.steps()}),
        step_goal=f"Read {address}",
        tool_name=tool,
        arguments={parameter: address},
    )
    reference = f"${{{read.step_id}}}"

    def given(text: Any) -> Any:
        return f"{text}\n\n{reference}" if isinstance(text, str) and address in text else text

    tasks = [
        TaskSchema(
            task_id=_free_id("t", {task.task_id for task in plan.tasks}),
            task_goal=read.step_goal,
            needs=Needs.LOOK_UP,
            steps=[read],
        )
    ]
    for task in plan.tasks:
        steps = [
            step.model_copy(
                update={
                    "input": given(step.input),
                    "arguments": None
                    if step.arguments is None
                    else {key: given(value) for key, value in step.arguments.items()},
                }
            )
            for step in task.steps
        ]
        tasks.append(task.model_copy(update={"steps": steps}))
    return plan.model_copy(update={"tasks": tasks}), {read.step_id: tool}


def _free_id(prefix: str, taken: set[str]) -> str:
    """The first id ``prefix`` + a number, from one past how many are taken, not in ``taken``."""
    number = len(taken) + 1
    while f"{prefix}{number}" in taken:
        number += 1
    return f"{prefix}{number}"


def counted_by_code(
    plan: PlanSchema, files_code: str, only_reads: Callable[[str], bool]
) -> tuple[PlanSchema, dict[str, str]]:
    """``plan`` with a step of ``files_code`` (the code tool that opens the user's files)
    after its last task, when the plan declared a number for its answer and that task only
    reads (``only_reads``: ``read_file``, ``list_files``); and ``{new step id: files_code}``.
    The answer's writer would compute the number from the text it was shown, and a small
    model does that badly (6.0 for the mean of 4.5, 6.0 and 3.5, a value of the file), while
    the code call writes code that opens the file and computes it."""
    last = plan.tasks[-1]
    if plan.answer is not AnswerKind.NUMBER or not all(only_reads(s.tool_name) for s in last.steps):
        return plan, {}
    # It works from what the task read: it runs after the reads (a turn of its own, see
    # order_by_references) and is skipped when one failed, instead of code written for a
    # file that is not there.
    added = StepSchema(
        step_id=_free_id("s", {step.step_id for step in plan.steps()}),
        step_goal=last.task_goal,
        tool_name=files_code,
        after=[step.step_id for step in last.steps],
    )
    task = last.model_copy(update={"steps": [*last.steps, added]})
    return plan.model_copy(update={"tasks": [*plan.tasks[:-1], task]}), {added.step_id: files_code}


def computed_by_code(
    plan: PlanSchema, code_tool_for: Callable[[str, str], str | None]
) -> tuple[PlanSchema, dict[str, str]]:
    """``plan`` with each step of a task the model declared ``compute`` moved to the code tool
    ``code_tool_for`` names for it, and ``{step id: code tool}``.

    The writer guesses a count or a sum ("The sentence has 14 words" for seven); the plan
    even wrote the code as the writer's input. A step's input that is code stays its code;
    any other input goes (the writer's prompt is no program), and the step gets its code
    from a code call."""
    moved: dict[str, str] = {}
    tasks = []
    for task in plan.tasks:
        steps = []
        for step in task.steps:
            text = _main_text(step)
            tool = code_tool_for(step.tool_name, text) if task.needs is Needs.COMPUTE else None
            if tool is not None:
                moved[step.step_id] = tool
                code = text if looks_like_code(text) else None
                step = step.model_copy(update={"tool_name": tool, "input": code, "arguments": None})
            steps.append(step)
        tasks.append(task.model_copy(update={"steps": steps}))
    return (plan.model_copy(update={"tasks": tasks}), moved) if moved else (plan, {})


def on_files(
    plan: PlanSchema, files_tool_for: Callable[[str, str], str | None]
) -> tuple[PlanSchema, dict[str, str]]:
    """``plan`` with each code step that ``files_tool_for`` sends to the code tool that
    writes code on the user's files moved there, its code written afresh by a code call, and
    ``{step id: code tool}``. While the workspace holds files a task's code is about them:
    code for a sandbox that has none reads nothing (``require is not defined``)."""
    moved: dict[str, str] = {}
    tasks = []
    for task in plan.tasks:
        steps = []
        for step in task.steps:
            tool = files_tool_for(step.tool_name, _main_text(step))
            if tool is not None:
                moved[step.step_id] = tool
                step = step.model_copy(update={"tool_name": tool, "input": None, "arguments": None})
            steps.append(step)
        tasks.append(task.model_copy(update={"steps": steps}))
    return (plan.model_copy(update={"tasks": tasks}), moved) if moved else (plan, {})


def _main_text(step: StepSchema) -> str:
    """The step's input, or the one text of its arguments ("" when it has neither)."""
    if step.input is not None:
        return step.input
    texts = [value for value in (step.arguments or {}).values() if isinstance(value, str)]
    return texts[0] if len(texts) == 1 else ""
