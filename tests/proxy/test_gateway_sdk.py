"""The real `openai` SDK against the gateway in front of a real upstream on loopback."""

from __future__ import annotations

import json
import threading
import time
import uuid
from datetime import timedelta

import anthropic
import openai
import pytest

from atdp import EventKind, MessageAction, ToolCallAction
from benchmarks.gateway_latency import server_timing
from registry import get_events, list_trajectories, transaction

LOOKUP = {
    "type": "function",
    "function": {
        "name": "lookup_order",
        "description": "Look up an order",
        "parameters": {
            "type": "object",
            "properties": {"order_id": {"type": "string"}},
            "required": ["order_id"],
        },
    },
}


def client(server, key: str, **kwargs) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key=key, max_retries=0, **kwargs)


def stored(server, engine, tenant: str, session: str, version: str | None = None):
    """The one trajectory of `session` (of `version` when shadows share it) and its events."""
    server.flush()
    with transaction(engine) as s:
        trajectories = [
            t
            for t in list_trajectories(s, tenant, session_id=session)
            if version is None or t.versions.agent_version_id == version
        ]
        assert len(trajectories) == 1, trajectories
        return trajectories[0], get_events(s, tenant, trajectories[0].id)


def test_plain_completion_applies_the_harness_and_is_captured(live, upstream) -> None:
    server, engine, keys = live
    raw = client(server, keys["acme"]).chat.completions.with_raw_response.create(
        model="support-bot",
        messages=[{"role": "user", "content": "Where is my parcel?"}],
        extra_headers={"X-Session-Id": "plain-1"},
    )
    completion = raw.parse()
    assert completion.choices[0].message.content.startswith("echo: Where is my parcel?")
    assert "You are Acme's support agent." in completion.choices[0].message.content
    assert upstream.requests[-1]["model"] == "scripted-model"
    assert raw.headers["x-evoplane-session-id"] == "plain-1"
    assert raw.headers["x-evoplane-version"] == "support-bot@v1"

    trajectory, events = stored(server, engine, "acme", "plain-1")
    assert str(trajectory.id) == raw.headers["x-evoplane-trajectory-id"]
    assert [e.kind for e in events] == [EventKind.USER_MESSAGE, EventKind.LLM_CALL]
    llm = events[1]
    assert str(llm.id) == raw.headers["x-evoplane-event-id"]
    assert llm.parent_id == events[0].id
    assert llm.observation.messages[0].content.startswith("You are Acme's support agent.")
    assert llm.action.content == completion.choices[0].message.content
    assert llm.metadata.agent_version_id == "support-bot@v1" and llm.metadata.latency_ms > 0
    assert llm.metadata.tokens.prompt == completion.usage.prompt_tokens > 0
    assert llm.metadata.cost_usd is None  # the version names no prices
    assert llm.replay.replay_class == "deterministic"


@pytest.mark.parametrize(
    ("decoding", "replay_class"),
    [
        ({}, "deterministic"),  # the server's default decoding, as most agents send it
        ({"temperature": 0}, "deterministic"),  # greedy
        ({"temperature": 0.8, "seed": 7}, "deterministic"),  # sampled, but reproducibly
        ({"temperature": 0.8}, "approximate"),  # another draw may differ
    ],
)
def test_an_llm_call_is_deterministic_only_when_a_rerun_must_repeat_it(
    live, decoding, replay_class
) -> None:
    server, engine, keys = live
    client(server, keys["acme"]).chat.completions.create(
        model="support-bot",
        messages=[{"role": "user", "content": "Where is my parcel?"}],
        extra_headers={"X-Session-Id": "decoding-1"},
        **decoding,
    )
    _, events = stored(server, engine, "acme", "decoding-1")
    replay = events[-1].replay
    assert replay.replay_class == replay_class
    assert replay_class == "deterministic" or "without a seed" in replay.reason


async def test_async_streaming_reassembles_and_is_captured(live) -> None:
    server, engine, keys = live
    async_client = openai.AsyncOpenAI(base_url=server.base_url, api_key=keys["acme"], max_retries=0)
    stream = await async_client.chat.completions.create(
        model="support-bot",
        messages=[{"role": "user", "content": "Tell me a long story about refunds"}],
        stream=True,
        extra_headers={"X-Session-Id": "stream-1"},
    )
    text = "".join(
        [chunk.choices[0].delta.content or "" async for chunk in stream if chunk.choices]
    )
    await async_client.close()
    assert text.startswith("echo: Tell me a long story about refunds")
    _, events = stored(server, engine, "acme", "stream-1")
    assert events[-1].kind is EventKind.LLM_CALL and events[-1].action.content == text


def test_multi_turn_tool_calls_are_linked_to_their_call(live) -> None:
    server, engine, keys = live
    sdk = client(server, keys["acme"])
    messages = [{"role": "user", "content": 'call lookup_order with {"order_id": "A-17"}'}]
    first = sdk.chat.completions.create(
        model="support-bot",
        messages=messages,
        tools=[LOOKUP],
        extra_headers={"X-Session-Id": "tools-1"},
    )
    call = first.choices[0].message.tool_calls[0]
    assert (call.function.name, json.loads(call.function.arguments)) == (
        "lookup_order",
        {"order_id": "A-17"},
    )
    messages += [
        first.choices[0].message.model_dump(exclude_none=True),
        {
            "role": "tool",
            "tool_call_id": call.id,
            "content": json.dumps({"error": "order not found"}),
        },
    ]
    second = sdk.chat.completions.create(
        model="support-bot",
        messages=messages,
        tools=[LOOKUP],
        extra_headers={"X-Session-Id": "tools-1"},
    )
    assert second.choices[0].finish_reason  # the scripted model answers from the last user turn

    _, events = stored(server, engine, "acme", "tools-1")
    kinds = [e.kind for e in events]
    assert kinds == [
        EventKind.USER_MESSAGE,
        EventKind.LLM_CALL,
        EventKind.TOOL_CALL,
        EventKind.LLM_CALL,
    ]
    first_llm, tool, second_llm = events[1], events[2], events[3]
    assert (
        isinstance(first_llm.action, MessageAction) and first_llm.action.tool_calls[0].id == call.id
    )
    assert isinstance(tool.action, ToolCallAction) and tool.action.call.name == "lookup_order"
    assert tool.parent_id == first_llm.id
    assert tool.outcome.tool_return == {"error": "order not found"} and tool.outcome.error_class
    assert second_llm.replay.replay_class == "approximate"
    assert [e.seq for e in events] == [0, 1, 2, 3]


def test_token_ids_and_logprobs_are_captured(live) -> None:
    server, engine, keys = live
    completion = client(server, keys["acme"]).chat.completions.create(
        model="support-bot",
        messages=[{"role": "user", "content": "hello there"}],
        logprobs=True,
        top_logprobs=2,
        extra_headers={"X-Session-Id": "lp-1"},
    )
    assert completion.choices[0].logprobs.content
    _, events = stored(server, engine, "acme", "lp-1")
    action = events[-1].action
    assert action.token_ids and len(action.token_ids) == len(action.logprobs)
    assert action.logprobs == [e.logprob for e in completion.choices[0].logprobs.content]


def test_models_lists_what_the_key_may_use(live) -> None:
    server, _, keys = live
    assert [m.id for m in client(server, keys["acme"]).models.list()] == ["support-bot"]
    assert [m.id for m in client(server, keys["acme-limited"]).models.list()] == []


@pytest.mark.parametrize(
    ("key", "agent", "error", "status"),
    [
        ("nope", "support-bot", openai.AuthenticationError, 401),
        ("acme", "ghost-bot", openai.NotFoundError, 404),
        ("acme", "internal-bot", openai.PermissionDeniedError, 403),
        ("acme-limited", "support-bot", openai.PermissionDeniedError, 403),
    ],
)
def test_identity_errors_in_openai_shape(live, key, agent, error, status) -> None:
    server, _, keys = live
    with pytest.raises(error) as caught:
        client(server, keys.get(key, key)).chat.completions.create(
            model=agent, messages=[{"role": "user", "content": "hi"}]
        )
    assert caught.value.status_code == status
    assert set(caught.value.body) >= {"message", "type", "code"}


def test_upstream_failures_map_to_502_429_and_504(live, upstream) -> None:
    server, _, keys = live
    sdk = client(server, keys["acme"])
    upstream.fail_next(500)
    with pytest.raises(openai.InternalServerError) as failed:
        sdk.chat.completions.create(
            model="support-bot", messages=[{"role": "user", "content": "hi"}]
        )
    assert failed.value.status_code == 502
    upstream.fail_next(429)
    with pytest.raises(openai.RateLimitError) as limited:
        sdk.chat.completions.create(
            model="support-bot", messages=[{"role": "user", "content": "hi"}]
        )
    assert limited.value.body["code"] == "upstream_rate_limited"
    assert limited.value.response.headers.get("retry-after")
    upstream.hang_next(10)
    with pytest.raises(openai.APIStatusError) as slow:
        sdk.chat.completions.create(
            model="support-bot", messages=[{"role": "user", "content": "hi"}]
        )
    assert slow.value.status_code == 504 and slow.value.body["type"] == "timeout_error"


def test_sessions_come_from_user_or_metadata_or_are_made(live) -> None:
    server, engine, keys = live
    sdk = client(server, keys["acme"])
    by_user = sdk.chat.completions.with_raw_response.create(
        model="support-bot", messages=[{"role": "user", "content": "a"}], user="user-42"
    )
    made = sdk.chat.completions.with_raw_response.create(
        model="support-bot", messages=[{"role": "user", "content": "b"}]
    )
    assert by_user.headers["x-evoplane-session-id"] == "user-42"
    assert made.headers["x-evoplane-session-id"].startswith("s-")
    uuid.UUID(made.headers["x-evoplane-trajectory-id"])


@pytest.mark.parametrize(
    ("metadata", "task_type"),
    [
        ({"task_type": "refund"}, "refund"),
        ({"task_type": ""}, None),  # not a name
        ({"task_type": "a\nb"}, None),  # control characters: not a name
        ({"other": "x"}, None),
    ],
)
def test_the_task_type_an_agent_names_in_metadata_is_the_trajectorys(
    live, metadata, task_type
) -> None:
    server, engine, keys = live
    session = f"typed-{uuid.uuid4().hex[:8]}"
    client(server, keys["acme"]).chat.completions.create(
        model="support-bot",
        messages=[{"role": "user", "content": "Refund me"}],
        metadata=metadata,
        extra_headers={"X-Session-Id": session},
    )
    trajectory, _ = stored(server, engine, "acme", session)
    assert trajectory.task_type == task_type


def test_each_protocol_says_where_its_time_went(live, upstream) -> None:
    """`Server-Timing` splits a call into the upstream's time and the gateway's own."""
    server, _, keys = live
    upstream.delay_ms = 80
    sdk = client(server, keys["acme"])
    chat = sdk.chat.completions.with_raw_response.create(
        model="support-bot", messages=[{"role": "user", "content": "Where is my parcel?"}]
    )
    responses = sdk.responses.with_raw_response.create(model="support-bot", input="And now?")
    messages = anthropic.Anthropic(
        base_url=server.base_url.removesuffix("/v1"), api_key=keys["acme"], max_retries=0
    ).messages.with_raw_response.create(
        model="support-bot", max_tokens=64, messages=[{"role": "user", "content": "Hello?"}]
    )
    for raw in (chat, responses, messages):
        header = raw.headers["server-timing"]
        timing = server_timing(header)
        assert set(timing) == {"upstream", "gateway"} and header.count(",") == 1, header
        assert 80 <= timing["upstream"] < 5_000  # the upstream's own delay, and its wait
        assert 0 < timing["gateway"] < 5_000


def test_an_sdk_retry_after_a_client_timeout_is_one_delivered_exchange(live, upstream) -> None:
    """The SDK gives up on a slow answer and retries (numbering it in its own header): the
    first answer, which the client never received, is recorded as such, the user's message
    once, and nothing reads as a user asking again."""
    from registry import window_rewards
    from registry.windows import TrajectoryWindow, conversation_turns

    server, engine, keys = live
    upstream.delay_ms = 1500
    sdk = openai.OpenAI(base_url=server.base_url, api_key=keys["acme"], max_retries=2, timeout=0.5)

    def faster_once_asked() -> None:
        while not upstream.requests:
            time.sleep(0.01)
        upstream.delay_ms = 0  # the retry is answered at once

    helper = threading.Thread(target=faster_once_asked)
    helper.start()
    completion = sdk.chat.completions.create(
        model="support-bot",
        messages=[{"role": "user", "content": "Where is my parcel?"}],
        extra_headers={"X-Session-Id": "retried-1"},
    )
    helper.join()
    assert completion.choices[0].message.content.startswith("echo: Where is my parcel?")
    time.sleep(1.5)  # the first call's answer arrives after the client left

    trajectory, events = stored(server, engine, "acme", "retried-1")
    users = [e for e in events if e.kind is EventKind.USER_MESSAGE]
    calls = [e for e in events if e.kind is EventKind.LLM_CALL]
    assert len(users) == 1 and len(calls) == 2
    undelivered = [c for c in calls if c.metadata.extra.get("delivered") is False]
    delivered = [c for c in calls if c.metadata.extra.get("delivered") is not False]
    assert len(undelivered) == 1 and len(delivered) == 1
    assert delivered[0].action.content == completion.choices[0].message.content
    window = TrajectoryWindow(agent="support-bot", since=trajectory.started_at - timedelta(1))
    with transaction(engine) as session:
        rewards = window_rewards(session, window)
        turns = conversation_turns(session, window)
    assert [r for r in rewards if r.name == "user_accepted"] == []  # no regeneration, no re-ask
    assert [t.speaker for t in turns] == ["user"]  # one user turn, no answer followed up
