"""Governance before persistence, tenant isolation, and late rewards through the API."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import sqlalchemy as sa

from registry import effective_reward_of_trajectory, get_events, list_rewards, transaction
from tests.proxy.test_gateway_sdk import client, stored

EMAIL = "jane.doe@example.org"
CARD = "4111 1111 1111 1111"
SECRET = "sk-proj-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c"


def every_stored_value(engine) -> str:
    """Every column of every registry table, as text."""
    with engine.connect() as connection:
        tables = sa.inspect(engine).get_table_names()
        return "\n".join(
            str(value)
            for table in tables
            for row in connection.execute(sa.text(f'SELECT * FROM "{table}"'))
            for value in row
        )


def test_no_raw_personal_data_or_secret_is_stored_anywhere(live, upstream) -> None:
    server, engine, keys = live
    sdk = client(server, keys["acme"])
    message = f"I am {EMAIL}, card {CARD}, my key is {SECRET}. Refund please."
    reply = sdk.chat.completions.create(
        model="support-bot",
        messages=[{"role": "user", "content": message}],
        extra_headers={"X-Session-Id": "pii-1"},
    )
    assert EMAIL in reply.choices[0].message.content  # the agent itself is served unredacted
    assert EMAIL in json.dumps(upstream.requests[-1])
    feedback = httpx.post(  # the user's own words in feedback are governed too
        f"{server.base_url}/feedback",
        headers={"Authorization": f"Bearer {keys['acme']}"},
        json={
            "session_id": "pii-1",
            "thumbs": "down",
            "critique": f"Do not echo {EMAIL}",
            "correction": f"My card is {CARD}",
        },
    )
    assert feedback.status_code == 201, feedback.text
    _, events = stored(server, engine, "acme", "pii-1")
    stored_text = every_stored_value(engine)
    spool_text = "".join(
        p.read_text() for p in Path(server.config.spool_dir).rglob("*") if p.is_file()
    )
    for raw in (EMAIL, CARD, CARD.replace(" ", ""), SECRET):
        assert raw not in stored_text and raw not in spool_text, raw
    assert "[REDACTED:EMAIL]" in stored_text
    assert all(e.governance.redaction == "redacted" for e in events)
    assert {"pii:email", "pii:payment_card", "secret:api_key"} <= set(events[0].governance.labels)


def test_training_opt_out_and_debug_only_are_excluded_from_exports(live, tmp_path) -> None:
    server, engine, keys = live
    sdk = client(server, keys["acme"])
    sdk.chat.completions.create(
        model="support-bot",
        messages=[{"role": "user", "content": "keep me"}],
        extra_headers={"X-Session-Id": "train-on"},
    )
    sdk.chat.completions.create(
        model="support-bot",
        messages=[{"role": "user", "content": "not me"}],
        extra_headers={"X-Session-Id": "train-off", "X-Evoplane-Training": "off"},
    )
    _, off_events = stored(server, engine, "acme", "train-off")
    assert {e.governance.training for e in off_events} == {"debug_only"}

    exported = httpx.get(
        f"{server.base_url}/export",
        params={"agent": "support-bot"},
        headers={"Authorization": f"Bearer {keys['acme']}"},
        timeout=10,
    )
    sessions = [json.loads(line)["session"] for line in exported.text.splitlines()]
    assert sessions == ["train-on"]
    record = json.loads(exported.text.splitlines()[0])
    assert record["steps"][0]["completion"]["content"].startswith("echo: keep me")

    # The CLI export reads the same registry through the same function.
    out = tmp_path / "export.jsonl"
    env = {"EVOPLANE_DATABASE_URL": server.config.database_url, "PATH": "/usr/bin:/bin"}
    result = subprocess.run(
        [
            str(Path(sys.executable).parent / "evoplane"),
            "export",
            "--agent",
            "support-bot",
            "--out",
            str(out),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert [json.loads(line)["session"] for line in out.read_text().splitlines()] == ["train-on"]
    parquet = tmp_path / "export.parquet"
    result = subprocess.run(
        [
            *(str(Path(sys.executable).parent / "evoplane"), "export"),
            *("--agent", "support-bot", "--out", str(parquet), "--format", "parquet"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    import pyarrow.parquet as pq

    (row,) = pq.read_table(parquet).to_pylist()
    assert row["session"] == "train-on" and json.loads(row["steps"]) == record["steps"]


def test_one_tenant_cannot_read_rate_or_export_anothers_data(live) -> None:
    server, engine, keys = live
    raw = client(server, keys["acme"]).chat.completions.with_raw_response.create(
        model="support-bot",
        messages=[{"role": "user", "content": "acme secret plans"}],
        extra_headers={"X-Session-Id": "acme-1"},
    )
    trajectory_id = raw.headers["x-evoplane-trajectory-id"]
    event_id = raw.headers["x-evoplane-event-id"]
    as_globex = {"Authorization": f"Bearer {keys['globex']}"}
    as_acme = {"Authorization": f"Bearer {keys['acme']}"}

    assert (
        httpx.get(f"{server.base_url}/trajectories/{trajectory_id}", headers=as_globex).status_code
        == 404
    )
    for target in (
        {"trajectory_id": trajectory_id},
        {"event_id": event_id},
        {"session_id": "acme-1"},
    ):
        response = httpx.post(
            f"{server.base_url}/feedback", json={**target, "thumbs": "down"}, headers=as_globex
        )
        assert response.status_code == 404, (target, response.text)
        assert response.json()["error"]["type"] == "invalid_request_error"
    exported = httpx.get(
        f"{server.base_url}/export", params={"agent": "support-bot"}, headers=as_globex
    )
    assert exported.status_code == 200 and "acme" not in exported.text

    mine = httpx.get(f"{server.base_url}/trajectories/{trajectory_id}", headers=as_acme)
    assert mine.status_code == 200 and mine.json()["trajectory"]["tenant"] == "acme"
    server.flush()
    with transaction(engine) as session:
        assert (
            list_rewards(session, "acme", trajectory_id=__import__("uuid").UUID(trajectory_id))
            == []
        )


def test_feedback_events_and_implicit_signals_become_rewards(live) -> None:
    import uuid

    server, engine, keys = live
    sdk = client(server, keys["acme"])
    headers = {"X-Session-Id": "fb-1"}
    history = [{"role": "user", "content": "What is the refund window?"}]
    first = sdk.chat.completions.with_raw_response.create(
        model="support-bot", messages=history, extra_headers=headers
    )
    answer = first.parse().choices[0].message
    history += [
        {"role": "assistant", "content": answer.content},
        {"role": "user", "content": "No, that's wrong. I asked about refunds."},
    ]
    sdk.chat.completions.create(model="support-bot", messages=history, extra_headers=headers)
    sdk.chat.completions.create(
        model="support-bot", messages=history, extra_headers=headers
    )  # regenerate
    as_acme = {"Authorization": f"Bearer {keys['acme']}"}
    trajectory_id = first.headers["x-evoplane-trajectory-id"]
    feedback = httpx.post(
        f"{server.base_url}/feedback",
        headers=as_acme,
        json={
            "event_id": first.headers["x-evoplane-event-id"],
            "thumbs": "down",
            "critique": "wrong window",
        },
    )
    assert feedback.status_code == 201, feedback.text
    outcome = httpx.post(
        f"{server.base_url}/events",
        headers=as_acme,
        json={
            "trajectory_id": trajectory_id,
            "kind": "task_outcome",
            "outcome": {"success": False, "exit_code": 1},
            "side_effects": False,
        },
    )
    assert outcome.status_code == 201, outcome.text
    bad = httpx.post(f"{server.base_url}/feedback", headers=as_acme, json={"session_id": "fb-1"})
    assert bad.status_code == 400 and "thumbs" in bad.json()["error"]["message"]

    server.flush()
    with transaction(engine) as session:
        rewards = list_rewards(session, "acme", trajectory_id=uuid.UUID(trajectory_id))
        events = get_events(session, "acme", uuid.UUID(trajectory_id))
        total = effective_reward_of_trajectory(session, "acme", uuid.UUID(trajectory_id))
    sources = sorted((r.source.value, r.name) for r in rewards)
    assert ("explicit", "user_feedback") in sources
    assert ("implicit_next_turn", "user_accepted") in sources  # the "No, that's wrong" turn
    assert sources.count(("implicit_next_turn", "user_accepted")) == 2  # ... and the regenerate
    assert ("test", "task_success") in sources
    assert events[-1].kind == "task_outcome" and events[-1].seq == len(events) - 1
    assert total is not None and total.value == 0.0


def test_sealed_raw_copies_open_only_for_permitted_readers(world, registry_url, tmp_path) -> None:
    import uuid

    import pytest
    from cryptography.fernet import Fernet

    from proxy.config import GatewayConfig
    from registry import (
        NotFoundError,
        SealedAccessError,
        TenantPolicy,
        create_api_key,
        create_tenant,
        grant_agent,
        unseal_event,
    )
    from tests.support.gateway import GatewayServer

    engine, _ = world
    with transaction(engine) as session:
        create_tenant(
            session, "vault", TenantPolicy(seal_raw=True, sealed_readers=["grpo-nightly"])
        )
        grant_agent(session, "vault", "support-bot")
        key = create_api_key(session, "vault").key
    seal_key = Fernet.generate_key().decode()
    config = GatewayConfig(
        database_url=registry_url, spool_dir=tmp_path / "sealed", seal_key=seal_key
    )
    with GatewayServer(config) as server:
        raw = client(server, key).chat.completions.with_raw_response.create(
            model="support-bot",
            extra_headers={"X-Session-Id": "vault-1"},
            messages=[{"role": "user", "content": f"Write to {EMAIL} please"}],
        )
        server.flush()
    event_id = uuid.UUID(raw.headers["x-evoplane-event-id"])
    assert EMAIL not in every_stored_value(engine)
    with transaction(engine) as session:
        stored = get_events(session, "vault", uuid.UUID(raw.headers["x-evoplane-trajectory-id"]))
        assert {e.governance.sealed_ref for e in stored} == {f"sealed:{e.id}" for e in stored}
        opened = unseal_event(session, "vault", event_id, key=seal_key, reader="grpo-nightly")
        assert EMAIL in opened.observation.messages[-1].content
        assert EMAIL in opened.action.content
        with pytest.raises(SealedAccessError):
            unseal_event(session, "vault", event_id, key=seal_key, reader="someone-else")
        with pytest.raises(SealedAccessError):
            unseal_event(
                session,
                "vault",
                event_id,
                key=Fernet.generate_key().decode(),
                reader="grpo-nightly",
            )
        with pytest.raises((NotFoundError, SealedAccessError)):
            unseal_event(session, "acme", event_id, key=seal_key, reader="grpo-nightly")


def test_idle_sessions_are_closed_and_abandonment_is_a_weak_signal(
    world, registry_url, tmp_path
) -> None:
    import time
    import uuid

    from proxy.config import GatewayConfig
    from registry import get_trajectory
    from tests.support.gateway import GatewayServer

    engine, keys = world
    config = GatewayConfig(
        database_url=registry_url,
        spool_dir=tmp_path / "idle",
        abandon_after=0.3,
        sweep_interval=0.1,
    )
    with GatewayServer(config) as server:
        sdk = client(server, keys["acme"])
        quiet = sdk.chat.completions.with_raw_response.create(
            model="support-bot",
            messages=[{"role": "user", "content": "hello?"}],
            extra_headers={"X-Session-Id": "gone-quiet"},
        )
        done = sdk.chat.completions.with_raw_response.create(
            model="support-bot",
            messages=[{"role": "user", "content": "fix it"}],
            extra_headers={"X-Session-Id": "finished"},
        )
        httpx.post(
            f"{server.base_url}/events",
            headers={"Authorization": f"Bearer {keys['acme']}"},
            json={"session_id": "finished", "kind": "task_outcome", "outcome": {"success": True}},
        )
        time.sleep(1.0)
        server.flush()
    quiet_id = uuid.UUID(quiet.headers["x-evoplane-trajectory-id"])
    done_id = uuid.UUID(done.headers["x-evoplane-trajectory-id"])
    with transaction(engine) as session:
        ended = get_trajectory(session, "acme", quiet_id)
        finished = get_trajectory(session, "acme", done_id)
        quiet_rewards = list_rewards(session, "acme", trajectory_id=quiet_id)
        done_rewards = list_rewards(session, "acme", trajectory_id=done_id)
    assert ended.ended_at is not None and ended.outcome.status == "abandoned"
    assert [(r.name, r.confidence) for r in quiet_rewards] == [("session_completed", 0.2)]
    assert finished.ended_at is not None and finished.outcome.status == "unknown"
    assert [r.name for r in done_rewards] == ["task_success"]


def test_an_event_reported_after_a_restart_continues_its_trajectory(
    world, registry_url, tmp_path
) -> None:
    """A gateway that no longer holds the trajectory (it restarted) numbers the reported
    event after the last one stored."""
    import uuid

    from proxy.config import GatewayConfig
    from tests.support.gateway import GatewayServer

    engine, keys = world
    as_acme = {"Authorization": f"Bearer {keys['acme']}"}
    config = GatewayConfig(database_url=registry_url, spool_dir=tmp_path / "spool")
    with GatewayServer(config) as server:
        served = client(server, keys["acme"]).chat.completions.with_raw_response.create(
            model="support-bot",
            messages=[{"role": "user", "content": "where is my parcel?"}],
            extra_headers={"X-Session-Id": "before-restart"},
        )
        server.flush()
    trajectory_id = served.headers["x-evoplane-trajectory-id"]
    with GatewayServer(config) as server:
        reported = httpx.post(
            f"{server.base_url}/events",
            headers=as_acme,
            json={"trajectory_id": trajectory_id, "kind": "task_outcome", "outcome": {}},
        )
        assert reported.status_code == 201, reported.text
        server.flush()
    with transaction(engine) as session:
        events = get_events(session, "acme", uuid.UUID(trajectory_id))
    assert [e.seq for e in events] == list(range(len(events))) and len(events) >= 3
    assert events[-1].kind == "task_outcome"
