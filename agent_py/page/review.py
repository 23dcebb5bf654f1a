"""Plan review in the page: the plan goes to the UI's review panel (``web/ui/plan-review.js``)
through the user bridge's ``reviewPlan`` (:mod:`agent_py.page.user`), and the user's answer
comes back. Apart from user.py, which imports the MCP client: the page imports that only once
a server is configured."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from agent_py.core.plan import PlanSchema
from agent_py.core.registry import ToolRegistry
from agent_py.core.review import ReviewAnswer, ReviewPolicy

if TYPE_CHECKING:
    from agent_py.page.user import UserBridge


class PageReviewer:
    """Plan review in the page's run view (``web/ui/plan-review.js``)."""

    def __init__(self, user: UserBridge, registry: ToolRegistry, policy: ReviewPolicy) -> None:
        self._user = user
        self._registry = registry
        self._policy = policy

    async def review(self, plan: PlanSchema, *, question: str, problem: str | None) -> ReviewAnswer:
        tools = {
            step.tool_name: {"remote": bool(tool and tool.remote)}
            for step in plan.steps()
            for tool in [self._registry.get(step.tool_name)]
        }
        request = {
            "plan": plan.model_dump(exclude_none=True),
            "question": question,
            "problem": problem,
            "policy": self._policy,
            "tools": tools,
        }
        raw = await self._user.reviewPlan(json.dumps(request))
        try:
            return ReviewAnswer.model_validate_json(str(raw))
        except ValueError:
            # An answer we cannot read approves nothing.
            return ReviewAnswer(action="cancel")
