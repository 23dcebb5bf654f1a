"""Follow-up turns: what a new task of the same session is told about the earlier ones.

Each finished turn leaves a :class:`TurnDigest` (its question, how it ended, its answer and
the plan the model made) in the ``turn_end`` record of the history, so a session continued
later (the terminal's ``--session FILE``, the page after a reload) gets the same digests back
from its events. The planner of the next turn shows the newest that fit a token budget as the
model's own earlier turns; older turns go first.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ValidationError

from agent_py.core.budget import estimate_tokens, truncate_middle
from agent_py.core.events import Event, EventType

QUESTION_CHARS = 240
"""An earlier question is kept to this many characters in a digest."""
ANSWER_CHARS = 320
"""An earlier answer to this many."""
PLAN_CHARS = 900
"""A turn's plan is shown to later turns up to this length (a longer one is left out)."""


class TurnDigest(BaseModel):
    """One finished turn, as later turns see it."""

    turn: int
    question: str
    state: str
    answer: str = ""
    plan: str = ""
    """The model's reply that gave the turn's first plan ("" when longer than PLAN_CHARS)."""

    def outcome(self) -> str:
        return self.answer if self.state == "completed" else f"not done ({self.answer})"

    def tokens(self) -> int:
        """About what the turn costs in a prompt (its task, plan and result)."""
        return estimate_tokens(f"{self.question}{self.plan}{self.outcome()}") + 24


@dataclass
class SessionState:
    """Where a session stands: its id, its last turn, its finished turns, whether its
    ``session_start`` was recorded, and whether a turn ran since it was taken up (only then
    does leaving it record a ``session_end``)."""

    session: str
    turn: int
    earlier: list[TurnDigest]
    started: bool
    active: bool = False

    @classmethod
    def recorded(cls, events: Iterable[Event]) -> SessionState | None:
        """The session of recorded ``events``, to go on with; None when there are none."""
        session, turn, earlier = digests_from_events(events)
        return cls(session, turn, earlier, started=True) if session else None


def make_digest(
    turn: int,
    question: str,
    state: str,
    answer: str,
    *,
    plan: str = "",
) -> TurnDigest:
    return TurnDigest(
        turn=turn,
        question=truncate_middle(question, QUESTION_CHARS),
        state=state,
        answer=truncate_middle(answer.strip(), ANSWER_CHARS),
        plan=plan.strip() if len(plan.strip()) <= PLAN_CHARS else "",
    )


def digests_from_events(events: Iterable[Event]) -> tuple[str | None, int, list[TurnDigest]]:
    """A recorded session's id, its last turn number and its turns' digests, oldest first.

    Turns recorded before digests existed are rebuilt from their question (``turn_start``) and
    their final answer (``final``); a turn that never ended (the page was closed) is left out.
    """
    session: str | None = None
    last_turn = 0
    questions: dict[int, str] = {}
    finals: dict[int, Event] = {}
    digests: dict[int, TurnDigest] = {}
    for event in events:
        session = session or event.session
        last_turn = max(last_turn, event.turn)
        if event.type is EventType.TURN_START:
            questions[event.turn] = event.content
        elif event.type is EventType.FINAL:
            finals[event.turn] = event
        elif event.type is EventType.TURN_END:
            recorded = event.meta.get("digest")
            try:
                digests[event.turn] = TurnDigest.model_validate(recorded)
            except ValidationError:
                final = finals.get(event.turn)
                if event.turn in questions and final is not None:
                    state = str(final.meta.get("state") or event.meta.get("state") or "")
                    digests[event.turn] = make_digest(
                        event.turn, questions[event.turn], state, final.content
                    )
    return session, last_turn, [digests[turn] for turn in sorted(digests)]


def turns_that_fit(turns: Sequence[TurnDigest], max_tokens: int) -> list[TurnDigest]:
    """The newest turns whose task, plan and result fit in ``max_tokens``, oldest first."""
    kept: list[TurnDigest] = []
    used = 0
    for turn in reversed(turns):
        used += turn.tokens()
        if used > max_tokens:
            break
        kept.append(turn)
    return kept[::-1]
