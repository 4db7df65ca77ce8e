"""Stateless replicas: any gateway process serves any turn of a session, and the session is
still recorded as one trajectory with its tool results linked and `seq` gapless."""

from __future__ import annotations

import json
import threading
import time
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from atdp import EventKind, ToolCallAction
from proxy.config import GatewayConfig
from registry import create_db_engine, get_events, list_trajectories, transaction, upgrade
from tests.conftest import postgres_schema_url
from tests.proxy.test_gateway_sdk import LOOKUP, client
from tests.support.gateway import GatewayServer, seed_gateway_world

SESSIONS = 6


@pytest.fixture(params=["postgresql", "sqlite"])
def shared_registry(request, tmp_path, upstream):
    """One registry two gateway processes share: PostgreSQL, and SQLite (one file)."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'registry.db'}"
    else:
        url = postgres_schema_url(request.getfixturevalue("postgres_schema"))
    yield from _seeded(url, upstream)


@pytest.fixture
def postgres_registry(postgres_schema, upstream):
    yield from _seeded(postgres_schema_url(postgres_schema), upstream)


def _seeded(url: str, upstream):
    engine = create_db_engine(url)
    upgrade(engine)
    keys = seed_gateway_world(engine, upstream.base_url)
    yield url, engine, keys
    engine.dispose()


def _gateway(url: str, spool) -> GatewayServer:
    # catalog_ttl as in production; capture flushes as it does by default (0.2 s): the
    # next turn often reaches the other gateway before the last one is committed.
    return GatewayServer(GatewayConfig(database_url=url, spool_dir=spool, resume_wait=5.0))


def _turn(sdk, session: str, messages: list[dict]) -> dict:
    reply = sdk.chat.completions.create(
        model="support-bot",
        messages=messages,
        tools=[LOOKUP],
        extra_headers={"X-Session-Id": session},
    )
    return reply.choices[0].message.model_dump(exclude_none=True)


def test_sessions_served_round_robin_and_across_a_restart_stay_whole(
    shared_registry, tmp_path
) -> None:
    url, engine, keys = shared_registry
    first, second = _gateway(url, tmp_path / "a"), _gateway(url, tmp_path / "b")
    conversations = {f"rr-{i}": [] for i in range(SESSIONS)}

    def turn_on(server, session: str, said: list[dict]) -> None:
        messages = conversations[session]
        messages += said
        answer = _turn(client(server, keys["acme"]), session, messages)
        messages.append(answer)

    def ask(session: str) -> list[dict]:
        order = f"A-{session}-{len(conversations[session])}"  # a call id of its own
        return [
            {"role": "user", "content": f"call lookup_order with {json.dumps({'order_id': order})}"}
        ]

    def results(session: str) -> list[dict]:
        calls = conversations[session][-1]["tool_calls"]
        return [
            {"role": "tool", "tool_call_id": call["id"], "content": f"shipped ({session})"}
            for call in calls
        ]

    with first, second:
        gateways = [first, second]
        for i, session in enumerate(conversations):  # turn 1 and 2 on different gateways
            turn_on(gateways[i % 2], session, ask(session))
        for i, session in enumerate(conversations):
            turn_on(gateways[(i + 1) % 2], session, results(session))
        for i, session in enumerate(conversations):  # a new question, back on the first
            turn_on(gateways[i % 2], session, ask(session))
    # Both stop; one comes back as a new process (nothing in memory) for the last turn.
    with _gateway(url, tmp_path / "a") as restarted:
        for session in conversations:
            turn_on(restarted, session, results(session))
        restarted.flush()

    with transaction(engine) as db:
        for session in conversations:
            trajectories = list_trajectories(db, "acme", session_id=session)
            assert len(trajectories) == 1, (session, trajectories)
            events = get_events(db, "acme", trajectories[0].id)
            kinds = [event.kind for event in events]
            assert kinds == [
                EventKind.USER_MESSAGE,
                EventKind.LLM_CALL,
                EventKind.TOOL_CALL,
                EventKind.LLM_CALL,
                EventKind.USER_MESSAGE,
                EventKind.LLM_CALL,
                EventKind.TOOL_CALL,
                EventKind.LLM_CALL,
            ], session
            assert [event.seq for event in events] == list(range(len(events)))
            calls = {
                call.id: event.id
                for event in events
                if event.kind is EventKind.LLM_CALL
                for call in event.action.tool_calls
            }
            tools = [event for event in events if event.kind is EventKind.TOOL_CALL]
            for tool in tools:
                assert isinstance(tool.action, ToolCallAction)
                assert tool.parent_id == calls[tool.action.call.id], session
                assert tool.action.call.name == "lookup_order"
            # Each turn's first event follows the answer before it.
            assert events[4].parent_id == events[3].id


def test_a_request_showing_answers_nobody_recorded_starts_its_own_trajectory(
    shared_registry, tmp_path
) -> None:
    """Few-shot examples (answers no gateway gave) wait at most `resume_wait`, then the
    session is recorded from this request on."""
    url, engine, keys = shared_registry
    config = GatewayConfig(database_url=url, spool_dir=tmp_path / "s", resume_wait=0.2)
    with GatewayServer(config) as server:
        sdk = client(server, keys["acme"])
        shots = [
            {"role": "user", "content": "Example: where is A-1?"},
            {"role": "assistant", "content": "A-1 shipped."},
        ]
        reply = sdk.chat.completions.with_raw_response.create(
            model="support-bot",
            messages=[*shots, {"role": "user", "content": "Where is A-2?"}],
            extra_headers={"X-Session-Id": f"shots-{uuid.uuid4().hex[:6]}"},
        )
        server.flush()
    trajectory_id = uuid.UUID(reply.headers["x-evoplane-trajectory-id"])
    with transaction(engine) as db:
        events = get_events(db, "acme", trajectory_id)
    assert [event.seq for event in events] == list(range(len(events)))
    assert events[-1].kind is EventKind.LLM_CALL


def test_a_progress_read_under_way_when_resume_wait_ends_gets_its_floor(
    postgres_registry, tmp_path, monkeypatch
) -> None:
    """A read of the session's progress may take PROGRESS_READ_FLOOR though `resume_wait`
    ends sooner: one that answers within it (a loaded machine) links the turn to the
    trajectory another gateway recorded; one the registry leaves unanswered ends the wait."""
    import proxy.capture.recorder

    url, engine, keys = postgres_registry
    real, release = proxy.capture.recorder.session_progress, threading.Event()

    def slow(*args):
        time.sleep(0.3)
        return real(*args)

    def stalled(*args):
        release.wait(30)
        return real(*args)

    impatient = GatewayConfig(database_url=url, spool_dir=tmp_path / "b", resume_wait=0.05)
    conversations = {"slow": slow, "stalled": stalled}
    waited = {}
    with _gateway(url, tmp_path / "a") as first, GatewayServer(impatient) as second:
        for session, read in conversations.items():
            messages = [{"role": "user", "content": "Where is A-1?"}]
            messages.append(_turn(client(first, keys["acme"]), session, messages))
            first.flush()
            monkeypatch.setattr(proxy.capture.recorder, "session_progress", read)
            messages.append({"role": "user", "content": "And A-2?"})
            started = time.monotonic()
            _turn(client(second, keys["acme"]), session, messages)
            waited[session] = time.monotonic() - started
        release.set()
        second.flush()
    with transaction(engine) as db:
        assert len(list_trajectories(db, "acme", session_id="slow")) == 1
        assert len(list_trajectories(db, "acme", session_id="stalled")) == 2
    assert proxy.capture.recorder.PROGRESS_READ_FLOOR <= waited["stalled"] < 10


def test_a_gateway_does_not_end_a_session_another_one_serves_now(shared_registry, tmp_path) -> None:
    """The first gateway goes quiet on a session the second one went on serving: its idle
    sweep forgets the session without ending its trajectory or judging it abandoned."""
    from registry import get_trajectory, list_rewards

    url, engine, keys = shared_registry
    # The second gateway's turn must be recorded before the first's sweep comes (3.5 s
    # after its sleep below): enough on a loaded 2-core machine, where 1 s was not.
    quick = GatewayConfig(
        database_url=url, spool_dir=tmp_path / "a", abandon_after=5.0, sweep_interval=0.2
    )
    with GatewayServer(quick) as first, _gateway(url, tmp_path / "b") as second:
        messages = [{"role": "user", "content": "Where is A-1?"}]
        reply = client(first, keys["acme"]).chat.completions.with_raw_response.create(
            model="support-bot", messages=messages, extra_headers={"X-Session-Id": "moved"}
        )
        first.flush()
        time.sleep(1.5)
        messages += [
            reply.parse().choices[0].message.model_dump(exclude_none=True),
            {"role": "user", "content": "And A-2?"},
        ]
        _turn(client(second, keys["acme"]), "moved", messages)
        second.flush()
        deadline = time.monotonic() + 15  # the first gateway's sweep finds it idle
        while first.gateway.recorder.sessions.get("acme", "support-bot", "moved") is not None:
            assert time.monotonic() < deadline, "the idle session was never swept"
            time.sleep(0.1)
        first.flush()
    trajectory_id = uuid.UUID(reply.headers["x-evoplane-trajectory-id"])
    with transaction(engine) as db:
        assert get_trajectory(db, "acme", trajectory_id).ended_at is None
        rewards = list_rewards(db, "acme", trajectory_id=trajectory_id)
    assert "session_completed" not in [reward.name for reward in rewards]


texts = st.text(max_size=40)
call_ids = st.lists(st.text(min_size=1, max_size=8), max_size=4, unique=True)


@given(text=texts, ids=call_ids, other=texts)
def test_an_answer_key_is_what_an_sdk_sending_the_answer_back_keeps(text, ids, other) -> None:
    """The key any gateway computes for an answer survives how SDKs send it back (text
    parts for a string, padding, tool calls in another order, new arguments) and tells
    answers apart by text or by their calls."""
    from proxy.capture.events import answer_key

    calls = [{"id": i, "function": {"name": "f", "arguments": "{}"}} for i in ids]
    sent = {"role": "assistant", "content": text, "tool_calls": calls}
    back = {
        "role": "assistant",
        "content": [{"type": "text", "text": f" {text} "}],
        "tool_calls": [
            {**call, "function": {"name": "f", "arguments": '{"x": 1}'}} for call in reversed(calls)
        ],
    }
    assert answer_key(sent) == answer_key(back) is not None
    assert answer_key({"role": "user", "content": text}) is None
    if not ids and text.strip() != other.strip():
        assert answer_key(sent) != answer_key({"role": "assistant", "content": other})
    if ids:
        assert answer_key(sent) != answer_key({**sent, "tool_calls": calls[:-1]})


def test_spool_claims_are_exclusive_and_a_released_one_is_taken_again(tmp_path) -> None:
    import os

    from proxy.capture import spool

    first = spool.claim_spool(tmp_path)
    second = spool.claim_spool(tmp_path)
    assert (first.name, second.name) == ("worker-0", "worker-1")
    os.close(spool._claims.pop(0))  # the first holder dies
    assert spool.claim_spool(tmp_path) == first
    for fd in spool._claims[-2:]:
        os.close(fd)
    del spool._claims[-2:]


def test_gateway_workers_share_a_port_and_each_keeps_a_spool(postgres_registry, tmp_path) -> None:
    """`evoplane gateway --workers 2`: two processes serve one port, each with a spool
    of its own; tool-using sessions served over fresh connections stay whole."""
    import contextlib
    import os
    import signal
    import subprocess
    import sys
    from pathlib import Path

    import httpx
    import openai

    from tests.conftest import free_port

    url, engine, keys = postgres_registry
    port = free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("EVOPLANE_")},
        "EVOPLANE_DATABASE_URL": url,
        "EVOPLANE_DATA_DIR": str(tmp_path / "data"),
    }
    evoplane = str(Path(sys.executable).parent / "evoplane")
    process = subprocess.Popen(
        [evoplane, "gateway", "--port", str(port), "--workers", "2"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    spools = tmp_path / "data" / "spool" / f"gateway-{port}"
    try:
        deadline = time.monotonic() + 60
        while len(list(spools.glob("worker-*/lock"))) < 2:
            assert process.poll() is None, process.stderr.read().decode()
            assert time.monotonic() < deadline, "the workers did not start"
            time.sleep(0.2)
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).raise_for_status()
                break
            except httpx.HTTPError:
                assert time.monotonic() < deadline, "the gateway did not answer"
                time.sleep(0.2)
        sessions = {f"w-{i}": [] for i in range(4)}
        for turn in range(2):
            for session, messages in sessions.items():
                if turn == 0:
                    ask = {"order_id": f"B-{session}"}
                    messages.append(
                        {"role": "user", "content": f"call lookup_order with {json.dumps(ask)}"}
                    )
                else:
                    messages += [
                        {"role": "tool", "tool_call_id": call["id"], "content": "shipped"}
                        for call in messages[-1]["tool_calls"]
                    ]
                with httpx.Client() as fresh:  # a new connection: any worker may take it
                    sdk = openai.OpenAI(
                        base_url=f"http://127.0.0.1:{port}/v1",
                        api_key=keys["acme"],
                        max_retries=0,
                        http_client=fresh,
                    )
                    messages.append(_turn(sdk, session, messages))
    finally:
        process.send_signal(signal.SIGTERM)  # the workers stop, committing their spools
        try:
            process.wait(60)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)  # anything left behind
    # Each worker claimed a spool of its own, and stopping committed what they spooled.
    assert sorted(p.name for p in spools.glob("worker-*")) == ["worker-0", "worker-1"]
    with transaction(engine) as db:
        for session in sessions:
            (trajectory,) = list_trajectories(db, "acme", session_id=session)
            events = get_events(db, "acme", trajectory.id)
            assert [event.kind for event in events] == [
                EventKind.USER_MESSAGE,
                EventKind.LLM_CALL,
                EventKind.TOOL_CALL,
                EventKind.LLM_CALL,
            ]
            assert events[2].parent_id == events[1].id


def test_one_gateway_never_reads_the_registry_to_go_on_with_its_own_sessions(
    live, monkeypatch
) -> None:
    """Answers sent back as each SDK sends them (chat completions, streamed too; Anthropic's
    content blocks; a Responses continuation) are ones this gateway recorded: serving the
    next turn costs no registry read."""
    import anthropic

    import proxy.capture.recorder

    reads = []
    real = proxy.capture.recorder.session_progress
    monkeypatch.setattr(
        proxy.capture.recorder, "session_progress", lambda *args: reads.append(args) or real(*args)
    )
    server, _, keys = live
    sdk = client(server, keys["acme"])
    chat = [{"role": "user", "content": "  Where is my parcel?  "}]
    for stream in (False, True):
        headers = {"X-Session-Id": f"own-chat-{stream}"}
        if stream:
            parts = sdk.chat.completions.create(
                model="support-bot", messages=chat[:1], stream=True, extra_headers=headers
            )
            text = "".join(chunk.choices[0].delta.content or "" for chunk in parts if chunk.choices)
            answer = {"role": "assistant", "content": text}
        else:
            answer = _turn(sdk, headers["X-Session-Id"], chat[:1])
        sdk.chat.completions.create(
            model="support-bot",
            messages=[chat[0], answer, {"role": "user", "content": "Thanks."}],
            extra_headers=headers,
        )
    claude = anthropic.Anthropic(
        base_url=server.base_url.removesuffix("/v1"),
        api_key=keys["acme"],
        max_retries=0,
        default_headers={"X-Session-Id": "own-messages"},
    )
    question = {"role": "user", "content": "Where is my parcel?"}
    first = claude.messages.create(model="support-bot", max_tokens=64, messages=[question])
    claude.messages.create(
        model="support-bot",
        max_tokens=64,
        messages=[
            question,
            {"role": "assistant", "content": first.content},
            {"role": "user", "content": "Thanks."},
        ],
    )
    response = sdk.responses.create(model="support-bot", input="Where is my parcel?")
    sdk.responses.create(model="support-bot", input="Thanks.", previous_response_id=response.id)
    assert reads == []
