"""The WebLLM engine (web/worker/engines/webllm.js, gpu.js, errors.js) in headless Chromium with
--enable-unsafe-webgpu, which exposes a real WebGPU adapter: SwiftShader, a software renderer
without shader-f16.

Everything runs against the vendored WebLLM 0.2.86. Where WebLLM needs a model to go on (a
chat), web/dev/webllm_harness.js stands in for the model's forward pass only; WebLLM's request
checks, generation config, interrupt flag and streaming loop are its own. Reloads are real:
they fail where the model files cannot be fetched, which is what these tests need.

No request may leave loopback: every context aborts requests to any other host, and the tests
assert that none was attempted where the old code would have made one.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
HARNESS = "dev/webllm_harness.html"
QWEN3_F16 = "Qwen3-4B-q4f16_1-MLC"
QWEN3_F32 = "Qwen3-0.6B-q4f32_1-MLC"
QWEN3_Q0F16 = "Qwen3-0.6B-q0f16-MLC"  # its record declares no required_features
PHI3 = "Phi-3-mini-4k-instruct-q4f32_1-MLC"


@pytest.fixture(scope="module")
def gpu_browser(playwright: Any, browser_settings: Any) -> Iterator[Any]:
    """Chromium with WebGPU on: here a SwiftShader adapter."""
    browser = playwright.chromium.launch(
        **browser_settings.launch_options(extra_args=["--enable-unsafe-webgpu"])
    )
    yield browser
    browser.close()


class Guarded:
    """A page whose context aborts every request that would leave 127.0.0.1."""

    def __init__(self, page: Any) -> None:
        self.page = page
        self.blocked: list[str] = []
        self.urls: list[str] = []

    def call(self, source: str, arg: Any = None) -> Any:
        """Await `source` (a function of (h, arg), h = window.harness) in the page."""
        return self.page.evaluate(
            "([source, arg]) => (0, eval)(source)(window.harness, arg)", [source, arg]
        )


@pytest.fixture
def guarded_context(gpu_browser: Any, browser_settings: Any) -> Iterator[tuple[Any, Guarded]]:
    context = gpu_browser.new_context()
    context.set_default_timeout(browser_settings.DEFAULT_TIMEOUT_MS)
    guard = Guarded(None)

    def route(route: Any) -> None:
        host = re.match(r"^[a-z]+://([^/:]+)", route.request.url)
        if host and host.group(1) == "127.0.0.1":
            route.continue_()
        else:
            guard.blocked.append(route.request.url)
            route.abort()

    context.route("**/*", route)
    context.on("request", lambda request: guard.urls.append(request.url))
    yield context, guard
    context.close()


@pytest.fixture
def harness(guarded_context: tuple[Any, Guarded], page_url: Any) -> Guarded:
    context, guard = guarded_context
    guard.page = context.new_page()
    guard.page.goto(page_url(HARNESS))
    guard.page.wait_for_function("document.body.dataset.status === 'ready'")
    return guard


def closed_port() -> int:
    """A loopback port nobody listens on: a fetch there fails as it does offline."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# --- detection and the engine choice ---------------------------------------------------------


def test_a_software_adapter_is_detected_and_counts_as_no_usable_gpu(harness: Guarded) -> None:
    result = harness.call(
        """async (h) => {
            const adapter = await navigator.gpu.requestAdapter();
            const gpu = await h.gpu.detectWebGPU();
            return {
                gpu,
                architecture: adapter.info.architecture,
                software: h.gpu.isSoftwareAdapter(adapter),
                auto: h.gpu.chooseEngine("auto", gpu),
                forced: h.gpu.chooseEngine("webllm", gpu),
                // The same rule on adapters described by hand: a hardware GPU, and llvmpipe.
                hardware: h.gpu.isSoftwareAdapter(
                    {info: {vendor: "nvidia", architecture: "hopper"}}),
                llvmpipe: h.gpu.isSoftwareAdapter(
                    {info: {vendor: "mesa", description: "llvmpipe (LLVM 15.0.7, 256 bits)"}}),
                hardwareChoice: h.gpu.chooseEngine("auto", {ok: true}),
            };
        }"""
    )
    assert result["architecture"] == "swiftshader"
    assert result["software"] is True
    gpu = result["gpu"]
    assert gpu["ok"] is False and gpu["software"] is True and gpu["f16"] is False
    assert "software renderer" in gpu["reason"] and "swiftshader" in gpu["reason"]
    assert result["auto"] == "cpu"
    assert result["forced"] == "webllm"  # WebLLM can still be forced in Settings
    assert result["hardware"] is False and result["llvmpipe"] is True
    assert result["hardwareChoice"] == "webllm"


def boot_page(context: Any, url: str, settings: dict[str, Any] | None = None) -> Any:
    page = context.new_page()
    if settings is not None:
        page.add_init_script(
            f"localStorage.setItem('agent_py.settings', {json.dumps(json.dumps(settings))});"
        )
    page.goto(url)
    page.wait_for_function("window.agentApp?.engine !== undefined", timeout=90_000)
    return page


def test_auto_takes_the_cpu_engine_on_a_software_adapter_and_says_why(
    guarded_context: tuple[Any, Guarded], page_url: Any
) -> None:
    context, guard = guarded_context
    page = boot_page(context, page_url("index.html"))

    engine = page.evaluate("window.agentApp.engine")
    assert engine["name"] == "cpu"
    notice = page.locator("#engine-notice").inner_text()
    assert "software renderer" in notice
    assert "Using the CPU engine instead" in notice
    assert guard.blocked == []


def test_forced_webllm_on_a_software_adapter_refuses_a_q4f16_model_before_loading(
    guarded_context: tuple[Any, Guarded], page_url: Any
) -> None:
    context, guard = guarded_context
    page = boot_page(context, page_url("index.html?engine=webllm"), {"model": QWEN3_F16})

    engine = page.evaluate("window.agentApp.engine")
    assert engine["name"] == "webllm"
    assert engine["usable"] is False
    notice = page.locator("#engine-notice").inner_text()
    assert "shader-f16" in notice and "Qwen3-4B-q4f32_1-MLC" in notice
    assert "software renderer" in notice  # both reasons, not only the last
    assert guard.blocked == []


def test_forced_webllm_says_in_words_that_the_model_files_cannot_be_fetched(
    guarded_context: tuple[Any, Guarded], page_url: Any
) -> None:
    """Self-hosted on a loopback port nobody listens on: the fetch fails as it does offline."""
    context, guard = guarded_context
    port = closed_port()
    settings = {
        "model": QWEN3_F32,
        "model_url": f"http://127.0.0.1:{port}/{QWEN3_F32}/resolve/main/",
        "model_lib_url": f"http://127.0.0.1:{port}/{QWEN3_F32}.wasm",
    }
    page = boot_page(context, page_url("index.html?engine=webllm"), settings)
    engine = page.evaluate("window.agentApp.engine")
    assert engine["name"] == "webllm" and engine["usable"] is True
    assert "software renderer" in page.locator("#engine-notice").inner_text()

    page.get_by_role("textbox", name="Task").fill("What is 6 times 7?")
    page.get_by_role("button", name="Run").click()
    page.wait_for_function("window.agentApp.lastResult !== undefined", timeout=90_000)

    shown = page.locator("#status").inner_text() + " " + page.locator("#error").inner_text()
    assert "model files could not be downloaded" in shown, shown
    assert "offline" in shown
    assert guard.blocked == []


# --- the six behaviours of 0.2.86 -------------------------------------------------------------


def test_enable_thinking_reaches_only_qwen3_and_never_a_schema_call(harness: Guarded) -> None:
    """(1) and (2): WebLLM 0.2.86 inserts an empty think block for ANY model when
    enable_thinking === false; a schema call cannot think, and the live view is told."""
    result = harness.call(
        """async (h, [qwen, phi]) => {
            const out = {};
            for (const model of [qwen, phi]) {
                const { adapter, standIn } = h.adapterWithStandIn(model);
                const notes = [];
                const call = (thinking, schema) => adapter.chat(
                    [{role: "user", content: "hi"}],
                    {purpose: "plan", model, max_tokens: 3, thinking, schema},
                    null, (note) => notes.push(note));
                await call(true, null);
                await call(false, null);
                await call(true, {type: "object"});
                out[model] = {
                    thinking: standIn.genConfigs.map((g) => g.enable_thinking ?? "absent"),
                    notes,
                };
            }
            return out;
        }""",
        [QWEN3_F32, PHI3],
    )
    assert result[QWEN3_F32]["thinking"] == [True, False, False]
    assert len(result[QWEN3_F32]["notes"]) == 1
    assert "Thinking is off for this plan call" in result[QWEN3_F32]["notes"][0]
    assert result[PHI3]["thinking"] == ["absent", "absent", "absent"]
    assert result[PHI3]["notes"] == []


def test_an_interrupt_sent_before_generation_starts_stops_it(harness: Guarded) -> None:
    """(3): 0.2.86 resets its interrupt flag when the generator takes its lock."""
    result = harness.call(
        """async (h, model) => {
            // WebLLM alone: an interrupt before the stream is read is forgotten.
            const raw = h.adapterWithStandIn(model).adapter.engine;
            const chunks = await raw.chat.completions.create(
                {messages: [{role: "user", content: "hi"}], stream: true, max_tokens: 40});
            await raw.interruptGenerate();
            let rawFinish = null;
            for await (const chunk of chunks) {
                rawFinish = chunk.choices[0]?.finish_reason || rawFinish;
            }

            // Our adapter, interrupted as the call begins.
            const { adapter } = h.adapterWithStandIn(model);
            const call = adapter.chat([{role: "user", content: "hi"}],
                                      {purpose: "plan", model, max_tokens: 40}, null);
            adapter.interrupt();
            const reply = await call;
            // A later call is not interrupted by the earlier Stop.
            const next = await adapter.chat([{role: "user", content: "hi"}],
                                            {purpose: "plan", model, max_tokens: 5}, null);
            return {rawFinish, finish: reply.finish_reason, tokens: reply.usage.completion_tokens,
                    nextFinish: next.finish_reason, nextTokens: next.usage.completion_tokens};
        }""",
        QWEN3_F32,
    )
    assert result["rawFinish"] == "length"  # the upstream behaviour this adapter works around
    assert result["finish"] == "abort"
    assert result["tokens"] < 40
    assert result["nextFinish"] == "length" and result["nextTokens"] == 5


def test_unload_during_a_download_of_reload_cancels_it_in_words(
    harness: Guarded, base_url: str
) -> None:
    """(4), first half: a real WebLLM reload held at its first download, then unload().
    WebLLM 0.2.86 in Chromium rejects with its abort reason, the bare string
    "Engine.unload() is called."."""
    held: list[Any] = []
    harness.page.route("**/held-model/**", lambda route: held.append(route))
    model_url = f"{base_url.rstrip('/')}/held-model/{QWEN3_F32}/resolve/main/"
    with harness.page.expect_request(lambda request: "held-model" in request.url):
        harness.call(
            """(h, [model, modelUrl]) => {
                const modelLibUrl = modelUrl + "lib.wasm";
                window.adapter = new h.engines.WebLLMEngine({modelUrl, modelLibUrl});
                window.reloading = h.settle(window.adapter.reload(model));
            }""",
            [QWEN3_F32, model_url],
        )
    result = harness.call(
        """async (h) => {
            await window.adapter.unload();
            const reload = await window.reloading;
            return {reload, loadedModel: window.adapter.loadedModel, counts: window.adapter.counts};
        }"""
    )
    assert result["reload"]["ok"] is False
    assert result["reload"]["kind"] == "cancelled", result["reload"]
    assert "unloaded while it loaded" in result["reload"]["message"]
    assert result["loadedModel"] is None
    assert result["counts"] == {"reloads": 0, "unloads": 1, "reload_ms": []}
    assert harness.blocked == []


def test_unload_past_the_last_download_of_reload_leaves_nothing_loaded(harness: Guarded) -> None:
    """(4), second half: unload() after WebLLM's last abortable download cannot stop the load;
    WebLLM's reload() then returns without error with the model on the GPU. The adapter must
    neither count it as loaded nor leave it there. WebLLM's reload() and unload() are real;
    the download-and-build step is held and then registers the stand-in model."""
    result = harness.call(
        """async (h, model) => {
            const adapter = new h.engines.WebLLMEngine({});
            adapter.engine = new h.webllm.MLCEngine({appConfig: adapter.appConfig(model)});
            const hold = h.holdReload(adapter.engine);
            const reloading = h.settle(adapter.reload(model));
            await hold.entered;
            await adapter.unload();
            hold.release();
            const reload = await reloading;
            return {
                reload,
                loadedModel: adapter.loadedModel,
                counts: adapter.counts,
                onGpu: [...adapter.engine.loadedModelIdToPipeline.keys()],
            };
        }""",
        QWEN3_F32,
    )
    assert result["reload"]["ok"] is False
    assert result["reload"]["kind"] == "cancelled"
    assert result["loadedModel"] is None
    assert result["counts"] == {"reloads": 0, "unloads": 1, "reload_ms": []}
    assert result["onGpu"] == []  # unloaded again once the load finished


def test_a_reload_that_cannot_fetch_the_model_files_fails_in_words(harness: Guarded) -> None:
    port = closed_port()
    result = harness.call(
        """async (h, [model, base]) => {
            const adapter = new h.engines.WebLLMEngine(
                {modelUrl: base + "/m/resolve/main/", modelLibUrl: base + "/m.wasm"});
            const reload = await h.settle(adapter.reload(model));
            return {...reload, loaded: adapter.loadedModel, counts: adapter.counts};
        }""",
        [QWEN3_F32, f"http://127.0.0.1:{port}"],
    )
    assert result["ok"] is False
    assert result["kind"] == "network"
    assert "model files could not be downloaded" in result["message"]
    assert result["loaded"] is None and result["counts"]["reloads"] == 0


def test_cache_functions_look_self_hosted_records_up_in_our_config(harness: Guarded) -> None:
    """(5): WebLLM's hasModelInCache / deleteModelAllInfoInCache default to prebuiltAppConfig.
    The cache is filled directly (Cache API), in WebLLM's layout; nothing is fetched."""
    result = harness.call(
        """async (h, [model, custom]) => {
            const cache = await caches.open("webllm/model");
            const fill = async (base) => {
                const manifest = {records: [{dataPath: "params_shard_0.bin"}]};
                const url = (name) => new URL(name, base).href;
                await cache.put(url("tensor-cache.json"), new Response(JSON.stringify(manifest)));
                await cache.put(url("params_shard_0.bin"), new Response("w"));
            };
            const has = async (base) =>
                !!(await cache.match(new URL("params_shard_0.bin", base).href));
            const mine = location.origin + "/weights/" + model + "/resolve/main/";
            const hf = "https://huggingface.co/mlc-ai/" + model + "/resolve/main/";
            const config = h.engines.appConfigFor(model, {modelUrl: mine});

            await fill(mine);
            const listed = await h.engines.cachedModels(config);
            const listedWithoutConfig = await h.engines.cachedModels();
            await fill(hf);  // the prebuilt copy of the same id, cached too
            await h.engines.deleteCachedModel(model, config);
            const after = {mine: await has(mine), hf: await has(hf)};

            // A self-hosted id that WebLLM's prebuilt list does not know.
            const customBase = location.origin + "/weights/" + custom + "/resolve/main/";
            const customConfig = h.engines.appConfigFor(
                custom, {modelUrl: customBase, modelLibUrl: customBase + "lib.wasm"});
            await fill(customBase);
            const customListed = await h.engines.cachedModels(customConfig);
            let customDeleted;
            try {
                await h.engines.deleteCachedModel(custom, customConfig);
                customDeleted = !(await has(customBase));
            } catch (error) {
                customDeleted = String(error);
            }
            return {listed, listedWithoutConfig, after, customListed, customDeleted};
        }""",
        [QWEN3_F32, "my-own-model-q4f32_1-MLC"],
    )
    assert QWEN3_F32 in result["listed"]
    assert QWEN3_F32 not in result["listedWithoutConfig"]  # the prebuilt copy was not cached yet
    assert result["after"] == {"mine": False, "hf": True}
    assert "my-own-model-q4f32_1-MLC" in result["customListed"]
    assert result["customDeleted"] is True
    assert harness.blocked == []


def test_no_adapter_error_of_webllm_is_a_webgpu_error_in_words(harness: Guarded) -> None:
    """(6a): the text is taken from the vendored bundle, so the rule follows WebLLM's words."""
    bundle = (ROOT / "web" / "vendor" / "web-llm" / "index.js").read_text()
    match = re.search(r'throw Error\("(Unable to find a compatible GPU[^"]*)"', bundle)
    assert match, "WebLLM's no-adapter message is no longer in the bundle"
    result = harness.call(
        "(h, text) => h.errors.describeEngineError(new Error(text))", match.group(1)
    )
    assert result["kind"] == "webgpu"
    assert "no GPU that WebGPU can use" in result["message"]
    assert "webgpureport" not in result["message"]


def test_f16_pipeline_errors_and_the_f16_check_come_from_the_model_record(
    harness: Guarded,
) -> None:
    """(6b): a real GPUPipelineError (a shader enabling f16 on SwiftShader, which lacks it),
    classified from the record; and reload's pre-check for every f16 model, run before any
    download (the q0f16 and q4f16 Qwen3 records declare no required_features)."""
    result = harness.call(
        """async (h, [q0f16, q4f16, f32]) => {
            const prebuilt = (id) => h.engines.recordOf(id, h.webllm.prebuiltAppConfig);
            const gpu = await h.gpu.detectWebGPU();
            const error = await h.f16PipelineError();
            const classify = (record) =>
                h.errors.describeEngineError(h.engines.classifyLoadError(error, record, gpu));
            const reloads = {};
            for (const model of [q0f16, q4f16]) {
                const adapter = new h.engines.WebLLMEngine({gpu});
                try {
                    await adapter.reload(model);
                    reloads[model] = {ok: true};
                } catch (e) {
                    reloads[model] = h.errors.describeEngineError(e);
                }
            }
            return {
                errorName: error?.name,
                f16Model: classify(prebuilt(q0f16)),
                f32Model: classify(prebuilt(f32)),
                needs: [q0f16, q4f16, f32].map((id) => h.gpu.needsShaderF16(prebuilt(id))),
                selfHosted: h.gpu.needsShaderF16({model_id: "mine", model_lib: "https://example.invalid/x/Mine-q4f16_1-webgpu.wasm"}),
                reloads,
            };
        }""",
        [QWEN3_Q0F16, QWEN3_F16, QWEN3_F32],
    )
    assert result["errorName"] == "GPUPipelineError"
    assert result["f16Model"]["kind"] == "f16"
    assert "shader-f16" in result["f16Model"]["message"]
    assert "Qwen3-0.6B-q0f32-MLC" in result["f16Model"]["message"]
    assert result["f32Model"]["kind"] == "engine"
    assert "could not build this model's shaders" in result["f32Model"]["message"]
    assert result["needs"] == [True, True, False]
    assert result["selfHosted"] is True
    for model in (QWEN3_Q0F16, QWEN3_F16):
        assert result["reloads"][model]["kind"] == "f16", result["reloads"][model]
    assert harness.blocked == []  # refused before WebLLM reached for the files
    assert not any("huggingface" in url or "githubusercontent" in url for url in harness.urls)


# --- scripts/webllm_check.py ------------------------------------------------------------------


def test_webllm_check_refuses_to_measure_on_a_software_adapter(vendored: Path) -> None:
    """The maintainer's check adds --enable-unsafe-webgpu; here that gives SwiftShader, which
    it must name and refuse rather than report numbers for."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "webllm_check.py"), "--skip-suite"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,  # a hang guard: the page boots in seconds
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "adapter: google swiftshader" in done.stdout
    assert "software renderer" in done.stderr
    assert "decode tok/s" not in done.stdout  # no numbers for a software adapter
