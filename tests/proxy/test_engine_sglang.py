"""SGLangEngine and SGLangAdmin against a loopback stand-in for SGLang (tests/gpu: the real one),
and the launcher the GPU tests start the real one with, against a fake `sglang` package."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from proxy.capture.events import _message_action
from proxy.engines.base import UpstreamError
from proxy.engines.sglang import SGLangEngine, server_url
from proxy.engines.sglang_admin import (
    SGLangAdmin,
    WeightSyncError,
    versioned_adapter_name,
)
from proxy.process_group import group_members
from proxy.streaming import assemble_chunks
from tests.support.sglang_server import launch_sglang
from tests.support.sglang_standin import STOP_TOKEN, SGLangStandIn


def chat(user: str = "hi", **extra: object) -> dict:
    return {"model": "support-bot", "messages": [{"role": "user", "content": user}]} | extra


@pytest.fixture
def sglang() -> Iterator[SGLangStandIn]:
    with SGLangStandIn(weight_version="base") as server:
        yield server


@pytest.fixture
async def engine(sglang: SGLangStandIn) -> AsyncIterator[SGLangEngine]:
    engine = SGLangEngine(sglang.url, connect_timeout=1, max_connections=4, retry_backoff=0.01)
    yield engine
    await engine.aclose()


@pytest.fixture
async def admin(sglang: SGLangStandIn) -> AsyncIterator[SGLangAdmin]:
    admin = SGLangAdmin(sglang.base_url, timeout=5, update_timeout=5)
    yield admin
    await admin.aclose()


async def collect(engine: SGLangEngine, body: dict, model: str | None = None) -> list[dict]:
    return [chunk async for chunk in engine.stream(body, model=model, timeout=5)]


def assert_trainable(choice: dict) -> None:
    """What capture keeps: token ids aligned with per-token logprobs, nothing set aside."""
    action, extra = _message_action(choice)
    assert action.token_ids == choice["token_ids"]
    assert action.logprobs is not None and len(action.logprobs) == len(action.token_ids)
    assert extra == {}


# --- the engine -----------------------------------------------------------------------------


async def test_complete_returns_token_ids_aligned_with_logprobs(engine, sglang) -> None:
    body = chat("Where is my order?")
    reply = await engine.complete(body, model=None, timeout=5)
    sent = sglang.requests[-1]
    assert sent["logprobs"] is True and sent["return_token_ids"] is True
    assert "lora_path" not in sent and "logprobs" not in body  # the caller's body is untouched
    choice = reply["choices"][0]
    assert choice["message"]["content"] == "echo: Where is my order?"
    assert choice["token_ids"] == choice["response_token_ids"]
    assert choice["token_ids"] == [*b"echo: Where is my order?", STOP_TOKEN]
    assert_trainable(choice)


async def test_model_names_the_weight_version(engine, sglang, admin) -> None:
    assert (await engine.complete(chat(), model="qwen-tiny", timeout=5))["model"] == "base"
    sglang.weight_version = "default"  # launched without --weight-version: no label
    assert (await engine.complete(chat(), model="qwen-tiny", timeout=5))["model"] == "qwen-tiny"


async def test_every_choice_gets_its_token_ids(engine) -> None:
    reply = await engine.complete(chat("two", n=2), model=None, timeout=5)
    for choice in reply["choices"]:
        assert_trainable(choice)
    assert reply["choices"][0]["token_ids"] != reply["choices"][1]["token_ids"]


async def test_a_length_cut_has_no_stop_token(engine) -> None:
    reply = await engine.complete(chat("a long question", max_tokens=4), model=None, timeout=5)
    choice = reply["choices"][0]
    assert choice["finish_reason"] == "length"
    assert choice["token_ids"] == list(b"echo")
    assert_trainable(choice)


async def test_stream_carries_token_ids_and_the_weight_label(engine, sglang) -> None:
    body = chat("stream me", stream_options={"include_usage": True})
    chunks = await collect(engine, body)
    sent = sglang.requests[-1]
    assert sent["return_output_ids_in_sglext"] is True and "return_token_ids" not in sent
    assert {chunk["model"] for chunk in chunks} == {"base"}
    assert chunks[-1]["usage"]["completion_tokens"] == len(b"echo: stream me") + 1
    reply = assemble_chunks(chunks)
    choice = reply["choices"][0]
    assert choice["message"]["content"] == "echo: stream me"
    assert choice["token_ids"] == [*b"echo: stream me", STOP_TOKEN]
    assert_trainable(choice)


async def test_stream_without_a_known_version_keeps_the_model_name(engine, sglang) -> None:
    sglang.weight_version = "default"
    chunks = await collect(engine, chat(), model="qwen-tiny")
    assert {chunk["model"] for chunk in chunks} == {"qwen-tiny"}


async def test_engine_takes_the_server_or_its_api_root(sglang) -> None:
    assert server_url(sglang.base_url) == server_url(sglang.url + "/") == sglang.url
    engine = SGLangEngine(sglang.base_url, connect_timeout=1, max_connections=2)
    try:
        reply = await engine.complete(chat(), model=None, timeout=5)
    finally:
        await engine.aclose()
    assert engine.base_url == sglang.base_url and reply["model"] == "base"


async def test_sglang_errors_become_upstream_errors(engine) -> None:
    with pytest.raises(UpstreamError) as caught:
        await engine.complete({"model": "support-bot"}, model=None, timeout=5)
    assert caught.value.status == 400
    assert "messages" in caught.value.message  # SGLang's {"object": "error", "message": ...}
    assert caught.value.body["object"] == "error"


async def test_a_down_server_is_an_upstream_error_also_when_listing_adapters() -> None:
    engine = SGLangEngine("http://127.0.0.1:9", connect_timeout=0.5, max_connections=1)
    try:
        with pytest.raises(UpstreamError) as caught:
            await engine.complete(chat(), model="support-bot@v7", timeout=5)
    finally:
        await engine.aclose()
    assert caught.value.status is None and "127.0.0.1:9" in str(caught.value)


# --- LoRA adapters --------------------------------------------------------------------------


async def test_an_adapter_named_as_model_is_applied_and_labels_the_answer(
    engine, sglang, admin
) -> None:
    sglang.checkpoints.add("/adapters/support-bot/v7")
    adapter = await admin.load_lora_adapter("support-bot", "v7", "/adapters/support-bot/v7")
    assert adapter == "support-bot@v7"
    assert sglang.admin_calls[-1] == (
        "/load_lora_adapter",
        {"lora_name": adapter, "lora_path": "/adapters/support-bot/v7", "pinned": False},
    )
    assert await admin.adapters() == {adapter: "/adapters/support-bot/v7"}
    reply = await engine.complete(chat(), model=adapter, timeout=5)
    assert sglang.requests[-1]["lora_path"] == adapter
    assert reply["model"] == adapter
    chunks = await collect(engine, chat(), model=adapter)
    assert sglang.requests[-1]["lora_path"] == adapter
    assert {chunk["model"] for chunk in chunks} == {adapter}


async def test_a_base_model_name_is_looked_up_once_per_recheck_interval(engine, sglang) -> None:
    for _ in range(3):
        await engine.complete(chat(), model="qwen-tiny", timeout=5)
    assert sglang.reads.count("/v1/models") == 1
    assert "lora_path" not in sglang.requests[-1]
    await engine.complete(chat(), model=None, timeout=5)  # the agent's own name: no lookup
    assert sglang.reads.count("/v1/models") == 1


async def test_a_new_adapter_is_used_from_its_first_request(engine, sglang, admin) -> None:
    await engine.complete(chat(), model="qwen-tiny", timeout=5)  # adapters now listed
    sglang.checkpoints.add("/adapters/v8")
    adapter = await admin.load_lora_adapter("support-bot", "v8", "/adapters/v8")
    await engine.complete(chat(), model=adapter, timeout=5)
    assert sglang.requests[-1]["lora_path"] == adapter


async def test_concurrent_requests_share_one_adapter_lookup(engine, sglang) -> None:
    await asyncio.gather(*(engine.complete(chat(), model="qwen-tiny", timeout=5) for _ in range(8)))
    assert sglang.reads.count("/v1/models") == 1


async def test_sglang_syntax_base_colon_adapter_is_passed_through(engine, sglang) -> None:
    await engine.complete(chat(), model="qwen-tiny:support-bot@v7", timeout=5)
    assert "lora_path" not in sglang.requests[-1] and "/v1/models" not in sglang.reads


async def test_adapter_load_and_unload_failures_say_why(sglang, admin) -> None:
    with pytest.raises(WeightSyncError, match="no adapter_config.json in /nowhere"):
        await admin.load_lora_adapter("support-bot", "v9", "/nowhere")
    sglang.checkpoints.add("/adapters/v9")
    await admin.load_lora_adapter("support-bot", "v9", "/adapters/v9")
    with pytest.raises(WeightSyncError, match="already loaded") as caught:
        await admin.load_lora_adapter("support-bot", "v9", "/adapters/v9")
    assert caught.value.status == 400
    await admin.unload_lora_adapter("support-bot@v9")
    assert await admin.adapters() == {}
    with pytest.raises(WeightSyncError, match="is not loaded"):
        await admin.unload_lora_adapter("support-bot@v9")
    sglang.enable_lora = False
    with pytest.raises(WeightSyncError, match="--enable-lora"):
        await admin.load_lora_adapter("support-bot", "v10", "/adapters/v9")


def test_adapter_names_are_versioned_and_never_contain_a_colon() -> None:
    assert versioned_adapter_name("support-bot", "v7") == "support-bot@v7"
    for name, version in [("base:x", "v1"), ("bot", "v:1"), ("", "v1"), ("bot", "")]:
        with pytest.raises(ValueError):
            versioned_adapter_name(name, version)


# --- weight sync ----------------------------------------------------------------------------


async def test_update_pauses_loads_with_a_version_then_continues(engine, sglang, admin) -> None:
    sglang.checkpoints.add("/ckpt/step-300")
    synced = await admin.update_weights("/ckpt/step-300", weight_version="support-bot@v8")
    assert sglang.admin_calls == [
        ("/pause_generation", {"mode": "retract"}),
        (
            "/update_weights_from_disk",
            {"model_path": "/ckpt/step-300", "weight_version": "support-bot@v8"},
        ),
        ("/continue_generation", {}),
    ]
    assert (synced.previous_version, synced.weight_version) == ("base", "support-bot@v8")
    assert synced.model_path == "/ckpt/step-300"
    info = await admin.model_info()
    assert (info.model_path, info.weight_version) == ("/ckpt/step-300", "support-bot@v8")
    reply = await engine.complete(chat(), model=None, timeout=5)
    assert reply["model"] == "support-bot@v8"


async def test_requests_during_an_update_wait_and_get_the_new_weights(
    engine, sglang, admin
) -> None:
    sglang.checkpoints.add("/ckpt/step-400")
    sglang.update_delay_s = 0.3
    update = asyncio.create_task(admin.update_weights("/ckpt/step-400", weight_version="v9"))
    while not sglang.paused:
        await asyncio.sleep(0.01)
    request = asyncio.create_task(engine.complete(chat(), model=None, timeout=5))
    await asyncio.sleep(0.1)
    assert not request.done()
    await update
    assert (await request)["model"] == "v9"


async def test_a_failed_update_continues_and_reports_the_old_version(engine, sglang, admin) -> None:
    with pytest.raises(WeightSyncError) as caught:
        await admin.update_weights("/ckpt/missing", weight_version="v9")
    error = caught.value
    assert error.status == 400 and error.served_version == "base"
    assert "Failed to get weights iterator" in error.message and "'base'" in error.message
    assert sglang.admin_calls[-1] == ("/continue_generation", {}) and not sglang.paused
    assert await admin.weight_version() == "base"
    assert (await engine.complete(chat(), model=None, timeout=5))["model"] == "base"


async def test_a_failed_pause_loads_nothing(sglang, admin) -> None:
    sglang.checkpoints.add("/ckpt/step-500")
    sglang.refuse_next("/pause_generation", 500, "scheduler is gone")
    with pytest.raises(WeightSyncError, match="could not pause generation: scheduler is gone"):
        await admin.update_weights("/ckpt/step-500", weight_version="v10")
    assert [path for path, _ in sglang.admin_calls] == ["/pause_generation"]
    assert sglang.weight_version == "base"


async def test_a_failed_continue_says_the_server_stays_paused(sglang, admin) -> None:
    sglang.checkpoints.add("/ckpt/step-600")
    sglang.refuse_next("/continue_generation", 500, "scheduler is gone")
    with pytest.raises(WeightSyncError, match="stays paused") as caught:
        await admin.update_weights("/ckpt/step-600", weight_version="v11")
    assert caught.value.status == 500
    await admin._step("/continue_generation", {}, "continue generation")  # what the error asks
    assert not sglang.paused


async def test_pause_mode_is_checked_and_sent(sglang) -> None:
    with pytest.raises(ValueError, match="pause_mode"):
        SGLangAdmin(sglang.url, pause_mode="later")
    admin = SGLangAdmin(sglang.url, pause_mode="abort")
    sglang.checkpoints.add("/ckpt/step-700")
    try:
        await admin.update_weights("/ckpt/step-700", weight_version="v12")
    finally:
        await admin.aclose()
    assert sglang.admin_calls[0] == ("/pause_generation", {"mode": "abort"})


async def test_health_and_model_info(sglang, admin) -> None:
    assert await admin.health()
    info = await admin.model_info()
    assert (info.model_path, info.weight_version) == ("/models/tiny", "base")
    assert info.raw["architectures"] == ["Qwen2ForCausalLM"]
    sglang.healthy = False  # SGLang answers 503 while starting or stuck
    assert not await admin.health()


async def test_an_unreachable_server_is_unhealthy_and_says_so() -> None:
    admin = SGLangAdmin("http://127.0.0.1:9/v1", timeout=2)
    try:
        assert not await admin.health()
        with pytest.raises(UpstreamError, match="check that SGLang is running") as caught:
            await admin.model_info()
    finally:
        await admin.aclose()
    assert caught.value.status is None


# --- the launcher the GPU tests start SGLang with (tests/support/sglang_server.py) ----------

# Stands in for `python -m sglang.launch_server`: unhealthy (503) for a moment, then healthy,
# with a child process as SGLang's scheduler would be; a missing model path ends it at once.
FAKE_LAUNCH_SERVER = """
import argparse, http.server, subprocess, sys, time

parser = argparse.ArgumentParser()
for flag in ("--model-path", "--host", "--weight-version", "--mem-fraction-static"):
    parser.add_argument(flag)
parser.add_argument("--port", type=int)
args = parser.parse_args()
if args.model_path == "/missing":
    sys.exit(f"ValueError: {args.model_path} is not a model directory")
scheduler = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
print("scheduler", scheduler.pid, "weight version", args.weight_version, flush=True)
started = time.monotonic()


class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        healthy = self.path == "/health" and time.monotonic() - started > 0.5
        self.send_response(200 if healthy else 503)
        self.end_headers()

    def log_message(self, *args):
        pass


http.server.HTTPServer((args.host, args.port), Health).serve_forever()
"""


@pytest.fixture
def fake_sglang(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """A `sglang` package holding only FAKE_LAUNCH_SERVER; returns the env that finds it."""
    package = tmp_path / "fake" / "sglang"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "launch_server.py").write_text(FAKE_LAUNCH_SERVER)
    monkeypatch.syspath_prepend(str(package.parent))
    return {"PYTHONPATH": str(package.parent)}


def running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_launch_waits_for_health_and_stop_ends_the_process_group(fake_sglang, tmp_path) -> None:
    server = launch_sglang(
        "/models/tiny",
        weight_version="v1",
        args=["--mem-fraction-static", "0.1"],
        log_path=tmp_path / "sglang.log",
        env=fake_sglang,
        startup_timeout=30,
    )
    with server:
        assert httpx.get(f"{server.url}/health").status_code == 200
        assert server.base_url == f"{server.url}/v1"
        found = re.search(r"scheduler (\d+) weight version v1", server.log_tail())
        assert found is not None
        scheduler = int(found.group(1))
        assert running(scheduler)
    assert server.process.poll() is not None
    assert not running(scheduler)
    assert group_members(server.process.pid) == []


def test_launch_failure_shows_the_servers_last_words(fake_sglang, tmp_path) -> None:
    with pytest.raises(RuntimeError, match="/missing is not a model directory"):
        launch_sglang("/missing", log_path=tmp_path / "sglang.log", env=fake_sglang)


def test_launch_without_sglang_names_the_extra(monkeypatch) -> None:
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)
    with pytest.raises(RuntimeError, match=r"pip install -e '\.\[gpu\]'"):
        launch_sglang("/models/tiny")
