"""Prompt budgets count with the engine's own tokenizer where it has one
(ManagedLLM.measure), and estimate only where it has none."""

from __future__ import annotations

import math

from agent_py.core.budget import MESSAGE_OVERHEAD_TOKENS, estimate_tokens
from agent_py.core.history import EventRecorder
from agent_py.core.llm import CallPurpose
from agent_py.core.managed_llm import ManagedLLM, ModelRoles
from agent_py.core.model_client import ModelClient, ReplyBudgets
from agent_py.core.scripted_llm import ScriptedLLM

MODEL = "m"
DENSER = 1.3
"""The real tokenizer counts 30% more tokens than the estimate (numbers, code, other
scripts run denser than the byte rule)."""


class DenseTokenizer(ScriptedLLM):
    """A scripted engine whose tokenizer counts 30% above the agent's estimate."""

    def __init__(self, *, has_tokenizer: bool) -> None:
        super().__init__(lambda messages, call: "ok")
        self.has_tokenizer = has_tokenizer
        self.counted: list[str] = []

    async def count_tokens_exact(self, texts: list[str]) -> list[int] | None:
        if not self.has_tokenizer:
            return None
        self.counted += texts
        return [math.ceil(estimate_tokens(text) * DENSER) for text in texts]


def client(engine: DenseTokenizer, window: int) -> ModelClient:
    managed = ManagedLLM(engine, ModelRoles(planner=MODEL))
    budgets = ReplyBudgets(plan=64, arguments=64, generate=64, rethink=64, answer=64)
    return ModelClient(managed, EventRecorder(), context_window=window, budgets=budgets)


def prompt_of(estimated_tokens: int) -> list[dict[str, str]]:
    return [{"role": "user", "content": "x" * (3 * estimated_tokens)}]


async def test_a_prompt_that_fits_by_estimate_but_not_by_real_count_is_cut_to_fit() -> None:
    budget = 1000
    window = 64 + budget  # the reply's 64, and a 1,000-token prompt
    messages = prompt_of(900)  # 900 estimated tokens, 1,170 real ones

    sent: dict[bool, str] = {}
    for has_tokenizer in (False, True):
        engine = DenseTokenizer(has_tokenizer=has_tokenizer)
        model = client(engine, window)
        await engine.reload(MODEL)  # the page loads the model before the first task
        assert await model.ask(messages, CallPurpose.GENERATE) == "ok"
        sent[has_tokenizer] = engine.calls[-1][0][0]["content"]

    # By the estimate the prompt fits and goes whole, and the engine would find it too long;
    # by the real count it is cut until it fits.
    assert sent[False] == messages[0]["content"]
    assert len(sent[True]) < len(messages[0]["content"])
    real = math.ceil(estimate_tokens(sent[True]) * DENSER) + MESSAGE_OVERHEAD_TOKENS
    assert real <= budget


async def test_counts_are_taken_once_per_text_and_only_with_the_model_loaded() -> None:
    engine = DenseTokenizer(has_tokenizer=True)
    managed = ManagedLLM(engine, ModelRoles(planner=MODEL))
    await managed.measure(["before the load"])
    assert engine.counted == [], "no model loaded: the estimate stands"

    await engine.reload(MODEL)
    await managed.measure(["system prompt", "task one"])
    await managed.measure(["system prompt", "task two"])
    assert engine.counted == ["system prompt", "task one", "task two"]
    assert managed.count_tokens("task two") == math.ceil(estimate_tokens("task two") * DENSER)
    assert managed.count_tokens("never measured") == estimate_tokens("never measured")
