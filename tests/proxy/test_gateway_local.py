"""The gateway serving versions on the local engine, through the real `openai` SDK, with the
registry on PostgreSQL: recorded token ids and logprobs, and which weights served what."""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path

import openai
import pytest

from atdp import ModelRef, VersionSpec
from evoplane.demo.tiny import TinyModelSpec, init_tiny
from proxy.config import GatewayConfig
from proxy.engines.local import load_model
from proxy.gateway import Gateway
from proxy.router import session_bucket
from registry import (
    Alias,
    create_db_engine,
    get_events,
    list_trajectories,
    register_version,
    set_alias,
    transaction,
    upgrade,
)
from tests.conftest import postgres_schema_url
from tests.proxy.test_engine_local import (
    ORDER_QUESTION,
    ORDER_TOOLS,
    Gate,
    recomputed,
    teach,
)
from tests.support.gateway import GatewayServer, seed_gateway_world

pytestmark = pytest.mark.usefixtures("one_torch_thread")

STABLE, CANARY = "taught@1", "tiny@1"


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory) -> dict[str, Path]:
    """The stable weights call the order tool; the canary's are untrained."""
    return {
        STABLE: teach(tmp_path_factory.mktemp("taught")),
        CANARY: init_tiny(tmp_path_factory.mktemp("base"), TinyModelSpec(seed=0)),
    }


def local_spec(checkpoint: Path, name: str) -> VersionSpec:
    return VersionSpec(model=ModelRef(engine="local", checkpoint=str(checkpoint), model=name))


@pytest.fixture
def local_world(postgres_schema, checkpoints, tmp_path):
    """A gateway on PostgreSQL whose support-bot is `taught@1`, with `tiny@1` as a 50% canary."""
    url = postgres_schema_url(postgres_schema)
    engine = create_db_engine(url)
    upgrade(engine)
    keys = seed_gateway_world(engine, "http://unused", local_spec(checkpoints[STABLE], STABLE))
    with transaction(engine) as session:
        canary = register_version(
            session,
            "support-bot",
            local_spec(checkpoints[CANARY], CANARY),
            parent_id="support-bot@v1",
            author="test",
            reason="candidate weights",
        ).id
        set_alias(session, "support-bot", Alias.CANARY, canary, weight=0.5, actor="test")
    config = GatewayConfig(
        database_url=url, spool_dir=tmp_path / "spool", upstream_timeout=60.0, local_threads=1
    )
    with GatewayServer(config) as server:
        yield server, engine, keys, canary
    engine.dispose()


def sessions_of(side: str, count: int) -> list[str]:
    """Session ids the 50% canary hash puts on `side` ("canary" or "stable")."""
    found, i = [], 0
    while len(found) < count:
        session = f"{side}-{i}"
        if (session_bucket("support-bot", session) < 0.5) == (side == "canary"):
            found.append(session)
        i += 1
    return found


def llm_event(server, engine, session: str):
    server.flush()
    with transaction(engine) as s:
        (trajectory,) = list_trajectories(s, "acme", session_id=session)
        events = get_events(s, "acme", trajectory.id)
    (llm,) = [e for e in events if e.kind == "llm_call"]
    return llm


def ask(server, key: str, session: str, **params):
    sdk = openai.OpenAI(base_url=server.base_url, api_key=key, max_retries=0, timeout=60)
    return sdk.chat.completions.with_raw_response.create(
        model="support-bot",
        messages=ORDER_QUESTION,
        tools=ORDER_TOOLS,
        temperature=0,
        max_tokens=100,
        extra_headers={"X-Session-Id": session},
        **params,
    )


def test_a_local_answer_is_recorded_with_its_tokens_logprobs_and_weights(
    local_world, checkpoints
) -> None:
    server, engine, keys, _ = local_world
    (session,) = sessions_of("stable", 1)
    raw = ask(server, keys["acme"], session)
    completion, body = raw.parse(), json.loads(raw.http_response.text)
    choice = completion.choices[0]
    assert raw.headers["x-evoplane-version"] == "support-bot@v1"
    assert completion.model == STABLE and choice.finish_reason == "tool_calls"
    assert choice.message.content == "Checking."
    (call,) = choice.message.tool_calls
    assert call.function.name == "lookup_order"
    assert json.loads(call.function.arguments) == {"order_id": "42"}

    llm = llm_event(server, engine, session)
    assert llm.metadata.model_checkpoint == STABLE
    assert llm.metadata.agent_version_id == "support-bot@v1"
    assert llm.action.token_ids == body["choices"][0]["token_ids"]
    assert llm.action.logprobs == [e.logprob for e in choice.logprobs.content]
    assert [c.name for c in llm.action.tool_calls] == ["lookup_order"]
    assert llm.metadata.tokens.completion == len(llm.action.token_ids)

    # What the trainer does: rebuild the prompt from the recorded observation, recompute.
    loaded = load_model(checkpoints[STABLE])
    messages = [m.model_dump(mode="json", exclude_defaults=True) for m in llm.observation.messages]
    tools = [{"type": "function", "function": {"name": t.name}} for t in llm.observation.tools]
    text = loaded.tokenizer.apply_chat_template(
        messages, tools=tools, add_generation_prompt=True, tokenize=False
    )
    prompt = loaded.tokenizer(text, add_special_tokens=False)["input_ids"]
    assert prompt == body["prompt_token_ids"]
    again = recomputed(loaded, prompt, llm.action.token_ids, 0)
    ratios = [math.exp(a - b) for a, b in zip(again, llm.action.logprobs, strict=True)]
    assert max(abs(r - 1) for r in ratios) < 1e-4


def test_a_streamed_local_answer_is_recorded_alike(local_world) -> None:
    server, engine, keys, _ = local_world
    (session,) = sessions_of("stable", 1)
    sdk = openai.OpenAI(base_url=server.base_url, api_key=keys["acme"], max_retries=0, timeout=60)
    chunks = list(
        sdk.chat.completions.create(
            model="support-bot",
            messages=ORDER_QUESTION,
            tools=ORDER_TOOLS,
            temperature=0,
            max_tokens=100,
            stream=True,
            extra_headers={"X-Session-Id": session},
        )
    )
    assert {c.model for c in chunks} == {STABLE}
    calls = [call for c in chunks for ch in c.choices for call in ch.delta.tool_calls or []]
    assert [call.function.name for call in calls] == ["lookup_order"]
    assert chunks[-1].choices[0].finish_reason == "tool_calls"

    llm = llm_event(server, engine, session)
    assert llm.metadata.model_checkpoint == STABLE
    assert llm.action.token_ids and len(llm.action.token_ids) == len(llm.action.logprobs)
    assert [c.name for c in llm.action.tool_calls] == ["lookup_order"]


def test_canary_and_stable_weights_each_serve_their_sessions(local_world) -> None:
    server, engine, keys, canary = local_world
    served = {}
    for side in ("stable", "canary"):
        for session in sessions_of(side, 2):
            raw = ask(server, keys["acme"], session)
            llm = llm_event(server, engine, session)
            served[session] = (
                raw.headers["x-evoplane-version"],
                raw.parse().model,
                llm.metadata.agent_version_id,
                llm.metadata.model_checkpoint,
            )
            assert llm.action.token_ids and len(llm.action.logprobs) == len(llm.action.token_ids)
    for session in sessions_of("stable", 2):
        assert served[session] == ("support-bot@v1", STABLE, "support-bot@v1", STABLE)
    for session in sessions_of("canary", 2):
        assert served[session] == (canary, CANARY, canary, CANARY)
    engines = list(server.gateway.engines.local_engines())
    assert sorted(e.version for e in engines) == sorted([STABLE, CANARY])


# --- the engine cache, without HTTP ---------------------------------------------------------


async def test_local_engines_are_cached_per_weights_and_evicted_when_idle(
    registry_url, checkpoints, tmp_path, monkeypatch
) -> None:
    db = create_db_engine(registry_url)
    upgrade(db)
    seed_gateway_world(db, "http://unused", local_spec(checkpoints[STABLE], STABLE))
    monkeypatch.chdir(checkpoints[STABLE].parent)
    with transaction(db) as session:
        stable, canary, same_weights = (
            register_version(session, "support-bot", spec, author="test", reason="test")
            for spec in [
                local_spec(checkpoints[STABLE], STABLE),  # v1 again
                local_spec(checkpoints[CANARY], CANARY),
                local_spec(Path(checkpoints[STABLE].name), "relative"),  # the same directory
            ]
        )
    db.dispose()
    config = GatewayConfig(
        database_url=registry_url, spool_dir=tmp_path / "spool", local_max_models=1
    )
    gateway = Gateway(config)
    await gateway.start()
    try:
        first = gateway.engines.engine_for(stable, None)
        assert gateway.engines.engine_for(stable, None) is first
        assert gateway.engines.engine_for(same_weights, None) is first
        gate = Gate(await first.load())
        body = {"messages": ORDER_QUESTION, "temperature": 0, "max_tokens": 2}
        running = asyncio.ensure_future(first.complete(body, model=None, timeout=60))
        await gate.wait_inside(1)

        second = gateway.engines.engine_for(canary, None)  # over the limit: `first` is evicted...
        assert second is not first and second.version == CANARY
        await asyncio.sleep(0.1)
        assert first.loaded is not None  # ...but keeps its weights for its request
        gate.opened.set()
        assert (await running)["model"] == STABLE
        async with asyncio.timeout(10):
            while first.loaded is not None:  # then frees them
                await asyncio.sleep(0.01)
        assert gateway.engines.engine_for(stable, None) is not first
    finally:
        await gateway.close()


def test_a_local_version_without_a_checkpoint_is_refused(local_world) -> None:
    server, engine, keys, _ = local_world
    spec = VersionSpec(model=ModelRef(engine="local", model="nothing"))
    with transaction(engine) as session:
        broken = register_version(session, "support-bot", spec, author="t", reason="t").id
        set_alias(session, "support-bot", Alias.CANARY, broken, weight=1.0, actor="test")
    sdk = openai.OpenAI(base_url=server.base_url, api_key=keys["acme"], max_retries=0)
    with pytest.raises(openai.APIStatusError) as caught:
        sdk.chat.completions.create(
            model="support-bot",
            messages=ORDER_QUESTION,
            extra_headers={"X-Session-Id": "no-checkpoint"},
        )
    assert caught.value.status_code == 502
    assert "names no checkpoint" in caught.value.message
