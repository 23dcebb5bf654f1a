"""What the terminal prints of a run, and the history it writes.

A line for each event worth one, the session's JSONL history as it happens (and read back
for a follow-up), the run's outcome with its exit code, and how the model was prepared.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TextIO

from agent_py.core.errors import SetupError
from agent_py.core.events import Event, EventType
from agent_py.core.history import read_history_file

EXIT_OK, EXIT_FAILED, EXIT_SETUP = 0, 1, 2


def describe(event: Event) -> str | None:
    """One line for the terminal, or None for events not worth a line."""
    where = f"[{event.step}] " if event.step else ""
    meta = event.meta
    match event.type:
        case EventType.STATE:
            return f"· {event.content}"
        case EventType.PLAN_STARTED:
            lines = [f"plan: {event.content}"]
            for task in meta["plan"]["tasks"]:
                lines.append(f"  {task['task_id']}: {task['task_goal']}")
                lines += [
                    f"    {s['step_id']} {s['tool_name']}: {s['step_goal']}" for s in task["steps"]
                ]
            return "\n".join(lines)
        case (
            EventType.PLAN_CUT
            | EventType.PLAN_TEXT_WHOLE
            | EventType.PLAN_TO_CODE
            | EventType.PLAN_TO_READ
        ):
            return f"· {event.content}"  # the inputs the steps show next are not the plan's
        case EventType.STEP_STARTED:
            return f"{where}started ({meta['tool']}): {event.content}"
        case EventType.THINKING:
            return f"{where}thinking: {event.content[:200]}"
        case EventType.ACTION:
            return f"{where}input: {event.content[:300]}"
        case EventType.STEP_COMPLETED | EventType.STEP_FAILED:
            status = "done" if event.type is EventType.STEP_COMPLETED else "FAILED"
            return f"{where}{status} in {meta['seconds']:.2f} s: {event.content[:300]}"
        case EventType.REFLECTION:
            return f"rethink: {meta['status']}"
        case EventType.MODEL if event.content == "reload":
            return f"· model {meta.get('model')} loaded"
        case _:
            return None


class HistoryWriter:
    """Writes each event as a JSONL line as it arrives, and prints its line."""

    def __init__(self, path: Path, out: TextIO, *, append: bool = False) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.file = path.open("a" if append else "w", encoding="utf-8")
        self.out = out
        self.final: Event | None = None

    def __call__(self, raw: dict[str, Any]) -> None:
        event = Event.model_validate(raw)
        self.file.write(event.to_json() + "\n")
        self.file.flush()
        if event.type is EventType.FINAL:
            self.final = event
        line = describe(event)
        if line:
            print(line, file=self.out, flush=True)

    def close(self) -> None:
        self.file.close()


def read_session(path: Path) -> list[Event]:
    """The events of a session's JSONL history; [] for a file that does not exist yet (the
    session starts with this task). A file that is not such a history is a set-up error."""
    if not path.exists() or path.stat().st_size == 0:
        return []
    try:
        events = read_history_file(path)
    except (OSError, ValueError) as exc:
        why = f"{path} is not a session's history (JSONL of agent events): {exc}"
        raise SetupError(why) from None
    if len({event.session for event in events}) > 1:
        raise SetupError(f"{path} holds more than one session: give the file of one")
    return events


def print_prepared(prepared: dict[str, Any], out: TextIO) -> None:
    """How the model was prepared before the task (the page's PREPARED report)."""
    if prepared.get("warning"):
        print(f"warning: {prepared['warning']}", file=out)
    if not prepared.get("prefilled"):
        return
    seconds = prepared["ms"] / 1000
    restored = prepared.get("restored_tokens") or 0
    how = (
        f"restored from the state set-up shipped with the page ({restored} tokens)"
        if restored and prepared.get("state_source") == "shipped"
        else f"restored from the saved state ({restored} tokens)"
        if restored
        else "prefilled and saved for the next run"
        if prepared.get("state") == "saved"
        else "prefilled"
    )
    tokens = prepared["prompt_tokens"]
    # A server that reports no usage (llama-cpp-python's, streaming) gives no count.
    counted = "the planner's prompt"
    if tokens:
        counted = f"{tokens} prompt tokens of {counted}"
    print(f"model prepared before the task in {seconds:.1f} s: {counted} {how}", file=out)


def report_result(result: dict[str, Any], history: Path, out: TextIO, err: TextIO) -> int:
    """Print a run's outcome; the exit code: 0 completed, 1 failed or stopped."""
    print(file=out)
    failed = [step for step in result.get("steps", []) if not step["ok"]]
    if failed:
        shown = "; ".join(f"{s['step_id']} ({s['tool']}): {s['output'][:160]}" for s in failed)
        print(f"note: {len(failed)} of {len(result['steps'])} steps failed: {shown}", file=out)
    if result["state"] != "completed":
        print(f"{result['state']}: {result.get('error')}", file=err)
        return EXIT_FAILED
    print(result["answer"], file=out)
    stats = result["stats"]
    calls = sum(stats["model_calls"].values())
    # The model's own time apart: the run's time also holds waiting for the preparation.
    model_time = stats.get("model_time_s")
    in_calls = f" ({model_time:.1f} s in them)" if model_time is not None else ""
    print(
        f"\n{calls} model calls{in_calls}, {stats['steps_run']} steps, "
        f"{stats['wall_time_s']:.1f} s; history: {history}",
        file=out,
    )
    return EXIT_OK
