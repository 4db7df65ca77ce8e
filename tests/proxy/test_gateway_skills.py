"""Skills at the gateway: a version's skill reaches the upstream for the requests that match
it, within its tenant scope, is recorded in the event's hidden state, and is shown by the
version pull."""

from __future__ import annotations

import httpx

from atdp import Harness, ModelRef, Skill, SkillCall, SkillSet, VersionSpec
from runtime.version.skills import SKILL_BLOCK_START
from tests.proxy.test_gateway_overlays import promote
from tests.proxy.test_gateway_sdk import client, stored

RESET = Skill(
    name="password reset",
    description="reset a forgotten password for a locked account",
    steps=["verify the caller's identity", "unlock the account", "send a reset link"],
    tool_calls=[SkillCall(tool="unlock", arguments=["account"])],
    tenants=["acme"],
)


def skilled_version(upstream) -> VersionSpec:
    return VersionSpec(
        model=ModelRef(engine="openai", base_url=upstream.base_url, model="scripted-model"),
        harness=Harness(instructions="Be brief."),
        skills=SkillSet(items=[RESET]),
    )


def test_a_matching_request_gets_the_skill_and_its_event_records_it(live, upstream) -> None:
    server, engine, keys = live
    spec = skilled_version(upstream)
    promote(engine, spec)
    server.gateway.catalog.forget()
    client(server, keys["acme"]).chat.completions.create(
        model="support-bot",
        messages=[{"role": "user", "content": "I forgot my password and the account is locked"}],
        extra_headers={"X-Session-Id": "skill-1"},
    )
    sent = upstream.requests[-1]["messages"]
    assert sent[0]["content"] == "Be brief."
    assert sent[1]["content"].startswith(SKILL_BLOCK_START)
    assert "1. verify the caller's identity" in sent[1]["content"]
    _, events = stored(server, engine, "acme", "skill-1")
    llm = events[-1]
    assert llm.hidden.skills == ["password reset"]
    assert llm.hidden.skill_fingerprint == spec.part_hashes()["skills"]
    assert llm.hidden.harness_fingerprint == spec.part_hashes()["harness"]

    # A request that matches nothing carries no block; the event says no skill served it.
    client(server, keys["acme"]).chat.completions.create(
        model="support-bot",
        messages=[{"role": "user", "content": "Where is my parcel?"}],
        extra_headers={"X-Session-Id": "skill-2"},
    )
    assert all(
        not m["content"].startswith(SKILL_BLOCK_START)
        for m in upstream.requests[-1]["messages"]
        if isinstance(m.get("content"), str)
    )
    _, events = stored(server, engine, "acme", "skill-2")
    assert events[-1].hidden.skills == []
    assert events[-1].hidden.skill_fingerprint == spec.part_hashes()["skills"]


def test_a_skill_never_reaches_another_tenant(live, upstream) -> None:
    server, engine, keys = live
    promote(engine, skilled_version(upstream))
    server.gateway.catalog.forget()
    client(server, keys["globex"]).chat.completions.create(
        model="support-bot",
        messages=[{"role": "user", "content": "I forgot my password and the account is locked"}],
        extra_headers={"X-Session-Id": "skill-3"},
    )
    assert "password reset" not in str(upstream.requests[-1])
    _, events = stored(server, engine, "globex", "skill-3")
    assert events[-1].hidden.skills == []


def test_the_version_pull_shows_the_skills_and_the_block_for_a_query(live, upstream) -> None:
    server, engine, keys = live
    promote(engine, skilled_version(upstream))
    server.gateway.catalog.forget()
    answer = httpx.get(
        f"{server.base_url}/agents/support-bot/version",
        params={"query": "my account is locked, reset the password"},
        headers={"Authorization": f"Bearer {keys['acme']}"},
    )
    assert answer.status_code == 200, answer.text
    skills = answer.json()["skills"]
    assert [item["name"] for item in skills["items"]] == ["password reset"]
    assert [hit["name"] for hit in skills["retrieved"]] == ["password reset"]
    assert skills["block"].startswith(SKILL_BLOCK_START)
    assert answer.json()["harness"]["system_prompt"] == "Be brief."
