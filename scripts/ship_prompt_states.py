"""Ship the CPU engine's state of the planner's default prompt with the page.

The page prepares the model by computing the KV cache of the planner's fixed prompt (about
1,400 tokens: most of a first visit's wait on a CPU) and keeps it in the browser's storage
for the next visit. This script makes that first computation once, at set-up: it opens the
page in headless Chromium with a fresh profile and the CPU engine, waits for the preparation,
and copies the saved state out of the browser's Cache Storage into
``web/vendor/llama/state/<key>``, the URL the engine reads a state from when the browser has
none, and lists it in ``index.json`` there (web/worker/engines/cpu-state-store.js). A state
is keyed by engine build, model, context window and the prompt itself, so a page whose
prompt differs (other MCP servers, another model, another build of the engine, as another
browser may pick) simply computes its own, as before.

Run by scripts/setup.sh with --browser; skipped when nothing it depends on changed (a stamp
of the engine build, the model and the page's code). ``--force`` runs it anyway.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agent_py.cli.terminal import PageAgent  # noqa: E402

STATE_DIR = ROOT / "web" / "vendor" / "llama" / "state"
STAMP = STATE_DIR / "stamp.json"
INDEX = STATE_DIR / "index.json"
# What the state depends on: the engine build, the models, and the code that writes the prompt.
INPUTS = ["web/vendor/llama/build.json", "web/models.json", "pyproject.toml"]
CODE_GLOBS = ["agent_py/**/*.py", "agent_py/core/prompts/*", "web/*.js", "web/worker/**/*.js"]
CHUNK = 4 * 1024 * 1024

DUMP = """async (chunk) => {
    const cache = await caches.open("agent-py-kv-state-v1");
    const states = [];
    for (const request of await cache.keys()) {
        const bytes = new Uint8Array(await (await cache.match(request)).arrayBuffer());
        const parts = [];
        for (let at = 0; at < bytes.length; at += chunk) {
            let text = "";
            const piece = bytes.subarray(at, at + chunk);
            for (let i = 0; i < piece.length; i += 0x8000) {
                text += String.fromCharCode.apply(null, piece.subarray(i, i + 0x8000));
            }
            parts.push(btoa(text));
        }
        states.push({ url: request.url, parts });
    }
    return states;
}"""


def stamp() -> dict[str, str]:
    """A digest of everything the shipped state depends on, and the default model's size."""
    digest = hashlib.sha256()
    files = [ROOT / name for name in INPUTS]
    for pattern in CODE_GLOBS:
        files += sorted(p for p in ROOT.glob(pattern) if "vendor" not in p.parts)
    for path in files:
        digest.update(path.relative_to(ROOT).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() if path.is_file() else b"(missing)")
    models = sorted((ROOT / "web" / "models").glob("*.gguf"))
    for model in models:
        digest.update(f"{model.name}:{model.stat().st_size}\n".encode())
    return {"inputs": digest.hexdigest()}


def ship(force: bool) -> int:
    wanted = stamp()
    up_to_date = STAMP.is_file() and INDEX.is_file() and json.loads(STAMP.read_text()) == wanted
    if not force and up_to_date:
        print("ship_prompt_states: the shipped planner state is up to date")
        return 0
    started = time.monotonic()
    with PageAgent(engine="cpu") as agent:  # a fresh profile: nothing restored
        if not agent.usable:
            print(f"ship_prompt_states: the CPU engine cannot run: {agent.why_unusable()}")
            return 1
        prepared = agent.page.evaluate("window.agentApp.prepared")
        states = agent.page.evaluate(DUMP, CHUNK)
    if not prepared or not prepared.get("prefilled") or not states:
        print(f"ship_prompt_states: the page prepared no state to ship ({prepared})")
        return 1
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    for old in STATE_DIR.iterdir():
        old.unlink()
    names = []
    for state in states:
        name = state["url"].rsplit("/", 1)[-1]
        data = b"".join(base64.b64decode(part) for part in state["parts"])
        (STATE_DIR / name).write_bytes(data)
        names.append(name)
        print(f"ship_prompt_states: {name[:16]}… {len(data) / 1e6:.1f} MB")
    INDEX.write_text(json.dumps({"states": names}))
    STAMP.write_text(json.dumps(wanted))
    print(
        f"ship_prompt_states: shipped the state of {prepared.get('prompt_tokens')} prompt "
        f"tokens in {time.monotonic() - started:.0f} s"
    )
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--force", action="store_true", help="ship it even when up to date")
    return ship(parser.parse_args().force)


if __name__ == "__main__":
    sys.exit(main())
