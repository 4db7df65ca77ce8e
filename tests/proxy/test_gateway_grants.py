"""A newly granted agent is served at once, whatever the gateway's cache holds: a refusal is
checked against the registry itself (on SQLite, which announces nothing, as here)."""

from __future__ import annotations

import openai
import pytest

from registry import grant_agent, transaction
from tests.proxy.test_gateway_sdk import client


@pytest.fixture
def catalog_ttl() -> float:
    return 300.0  # longer than the test: only a fresh read can explain the grant being seen


def ask(server, key: str) -> str:
    reply = client(server, key).chat.completions.create(
        model="internal-bot", messages=[{"role": "user", "content": "hi"}]
    )
    return reply.choices[0].message.content or ""


def test_an_agent_granted_after_a_refusal_is_served_at_once(live) -> None:
    server, engine, keys = live
    with pytest.raises(openai.PermissionDeniedError):
        ask(server, keys["acme"])  # refused, and the tenant's grants are now cached
    with transaction(engine) as session:
        grant_agent(session, "acme", "internal-bot")
    assert ask(server, keys["acme"])
