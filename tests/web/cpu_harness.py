"""The CPU engine's harness page (web/dev/cpu_engine_harness.html) driven from Playwright:
shared by the engine's tests with and without cross-origin isolation.

Every wait ends on an event (a reply, a streamed token) or a token count. The only deadline
is a stall guard: it fails a call after STALL_S seconds without any message from the engine,
which a machine whose cores are busy with other work does not come near.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

HARNESS = "dev/cpu_engine_harness.html"
MODEL = "gemma3-270m-q4_k_m"  # loaded by id: the model with a built-in template
INSTRUCT_MODEL = "smollm2-135m-instruct-q4_1"  # the quickest instruct model
# page.evaluate has no time limit of its own. A call fails only when the engine says nothing
# (no token, no loading report, no answer) for this long: our longest prompt is about 200
# tokens, a few minutes of prefill even at 1 token/s on a machine busy with other work.
STALL_S = 300


def _origin(url: str) -> str | None:
    if url.startswith("blob:"):
        url = url[len("blob:") :]
    parts = urlsplit(url)
    return None if parts.scheme in ("data", "about") else f"{parts.scheme}://{parts.netloc}"


@dataclass
class CPUHarness:
    page: Any
    origin: str
    urls: list[str] = field(default_factory=list)  # every request, workers included
    errors: list[str] = field(default_factory=list)

    def call(self, expression: str, arg: Any = None) -> Any:
        """Await `expression(arg)` in the page; if the engine stalls, interrupt it (so the next
        test finds it free) and fail."""
        return self.page.evaluate(
            """([source, arg, stallMs]) => new Promise((resolve, reject) => {
                cpu.lastActivity = performance.now();
                const guard = setInterval(() => {
                    if (performance.now() - cpu.lastActivity < stallMs) return;
                    clearInterval(guard);
                    cpu.interrupt();
                    reject(new Error(`the CPU engine said nothing for ${stallMs / 1000} s`));
                }, 1000);
                Promise.resolve()
                    .then(() => (0, eval)(source)(arg))
                    .then(resolve, reject)
                    .finally(() => clearInterval(guard));
            })""",
            [expression, arg, STALL_S * 1000],
        )

    def chat(self, messages: list[dict[str, str]], **call: Any) -> dict[str, Any]:
        call = {"model": MODEL, "purpose": "generate", **call}
        return self.call("([m, c]) => cpu.chat(m, c)", [messages, call])

    def capital_of_france(self) -> str:
        """The instruct model's greedy answer to a one-word question (its right answer is
        Paris)."""
        messages = [
            {"role": "user", "content": "What is the capital of France? Answer in one word."}
        ]
        greedy = {"temperature": 0, "top_k": 1}
        return str(self.chat(messages, model=INSTRUCT_MODEL, max_tokens=6, sampling=greedy)["text"])

    def counts(self) -> dict[str, Any]:
        return self.call("() => cpu.counts()")

    def ensure_loaded(self, model: str = MODEL) -> dict[str, Any]:
        """Load `model` unless it is the one loaded; the engine's counts afterwards."""
        if self.counts()["loadedModel"] != model:
            self.call("model => cpu.reload(model)", model)
        return self.counts()

    def wait_for_streamed(self, pieces: int) -> None:
        """Until the running chat has streamed `pieces` pieces (an event, not a duration)."""
        self.page.wait_for_function(
            f"() => cpu.streamed.length >= {pieces}", timeout=STALL_S * 1000
        )

    def foreign(self) -> list[str]:
        return [u for u in self.urls if _origin(u) not in (None, self.origin)]


@contextmanager
def open_harness(browser: Any, base_url: str, **options: Any) -> Iterator[CPUHarness]:
    """The harness page in a new browser context, every request recorded, with a fresh engine
    made with ``options`` (cpu.create)."""
    context = browser.new_context()
    context.set_default_timeout(60_000)
    page = context.new_page()
    harness = CPUHarness(page, origin=_origin(base_url) or "")
    context.on("request", lambda request: harness.urls.append(request.url))
    page.on("pageerror", lambda error: harness.errors.append(str(error)))
    try:
        page.goto(base_url + HARNESS)
        page.wait_for_selector("body:not([data-status='starting'])")
        assert page.get_attribute("body", "data-status") == "ready", page.text_content("#status")
        harness.call("options => cpu.create(options)", options)
        yield harness
    finally:
        context.close()
