"""On PostgreSQL, alias moves and key revocations reach the gateway at once, not after its
cache's TTL: the registry announces them and the gateway drops what they made stale."""

from __future__ import annotations

import time

import openai
import pytest

from atdp import Harness, ModelRef, VersionSpec
from registry import Alias, authenticate, register_version, revoke_api_key, set_alias, transaction
from tests.conftest import postgres_schema_url
from tests.proxy.test_gateway_sdk import client

TTL = 300.0  # far longer than any wait below: only an announcement can explain a change


@pytest.fixture
def registry_url(postgres_schema) -> str:
    return postgres_schema_url(postgres_schema)


@pytest.fixture
def catalog_ttl() -> float:
    return TTL


@pytest.fixture(autouse=True)
def listening(live) -> None:
    server = live[0]
    _until(lambda: server.gateway.changes.listening.is_set(), "the gateway listens")


def _until(condition, what: str, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting until {what}")
        time.sleep(0.05)


def _served_by(server, key: str, session: str) -> str:
    raw = client(server, key).chat.completions.with_raw_response.create(
        model="support-bot",
        messages=[{"role": "user", "content": "hi"}],
        extra_headers={"X-Session-Id": session},
    )
    return raw.headers["X-Evoplane-Version"]


def test_a_promotion_reaches_new_sessions_before_the_cache_expires(live, upstream) -> None:
    server, engine, keys = live
    assert _served_by(server, keys["acme"], "before") == "support-bot@v1"  # aliases cached
    spec = VersionSpec(
        model=ModelRef(engine="openai", base_url=upstream.base_url, model="scripted-model"),
        harness=Harness(instructions="Answer in one sentence."),
    )
    with transaction(engine) as session:
        version = register_version(
            session, "support-bot", spec, parent_id="support-bot@v1", author="t", reason="t"
        )
        set_alias(session, "support-bot", Alias.STABLE, version.id, actor="test")
    sessions = iter(range(1000))
    _until(
        lambda: _served_by(server, keys["acme"], f"after-{next(sessions)}") == version.id,
        f"new sessions go to {version.id}",
    )
    assert _served_by(server, keys["acme"], "before") == "support-bot@v1"  # sessions stick


def test_a_revoked_key_is_refused_before_the_cache_expires(live) -> None:
    server, engine, keys = live
    assert _served_by(server, keys["acme"], "s1")  # the key is cached as valid
    with transaction(engine) as session:
        identity = authenticate(session, keys["acme"])
        assert identity is not None
        revoke_api_key(session, identity.key_id)

    def refused() -> bool:
        try:
            _served_by(server, keys["acme"], "s1")
        except openai.AuthenticationError:
            return True
        return False

    _until(refused, "the revoked key is refused")
    assert _served_by(server, keys["globex"], "s2")  # other keys still work
