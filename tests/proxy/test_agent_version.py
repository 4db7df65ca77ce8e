"""`GET /v1/agents/{agent}/version`: an agent that calls its model itself is told what the
gateway would apply for its session, placed as a served call would be, tenant-checked."""

from __future__ import annotations

import json
from urllib.parse import quote

import httpx

from atdp import (
    ChatMessage,
    FewShotDemo,
    Guardrails,
    Harness,
    MemorySnapshot,
    ModelRef,
    ToolOverride,
    ToolSchemaOverlay,
    VersionSpec,
)
from registry import (
    Alias,
    MemoryKind,
    add_memory_item,
    list_trajectories,
    register_version,
    set_alias,
    transaction,
)
from tests.proxy.test_gateway_sdk import LOOKUP, client

QUESTION = "When does my Berlin parcel ship?"


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def pull(server, key: str, agent: str = "support-bot", **params) -> httpx.Response:
    query = "&".join(f"{name}={quote(value)}" for name, value in params.items())
    return httpx.get(f"{server.base_url}/agents/{agent}/version?{query}", headers=auth(key))


def register(engine, spec: VersionSpec, alias: Alias, weight: float | None = None) -> str:
    with transaction(engine) as session:
        version = register_version(
            session, "support-bot", spec, parent_id="support-bot@v1", author="t", reason="t"
        )
        set_alias(session, "support-bot", alias, version.id, weight=weight, actor="test")
    return version.id


def memory(engine) -> dict[str, str]:
    """A fact for acme, one for globex and one for every tenant: their ids by owner."""
    with transaction(engine) as session:
        return {
            owner: str(add_memory_item(session, "support-bot", tenant, MemoryKind.FACT, content).id)
            for owner, tenant, content in [
                ("acme", "acme", "Berlin parcels ship from the Leipzig hub on Tuesdays."),
                ("globex", "globex", "Globex parcels to Berlin are confidential."),
                ("shared", None, "Parcels ship within two days of payment."),
            ]
        }


def full_spec(upstream_url: str, items: list[str]) -> VersionSpec:
    demo = FewShotDemo(
        messages=[
            ChatMessage(role="user", content="Where is order 7?"),
            ChatMessage(role="assistant", content="Order 7 ships today."),
        ]
    )
    return VersionSpec(
        model=ModelRef(engine="openai", base_url=upstream_url, model="scripted-model"),
        harness=Harness(
            instructions="Answer in one sentence.", template="Policy: {instructions}", demos=[demo]
        ),
        memory=MemorySnapshot(item_ids=items, top_k=2),
        tools=ToolSchemaOverlay(
            tools={
                "lookup_order": ToolOverride(
                    description="Look up an order by its id, formatted like A-17.",
                    parameters={"type": "object", "properties": {"id": {"type": "string"}}},
                    argument_map={"id": "order_id"},
                )
            }
        ),
        guardrails=Guardrails(max_tokens=64, blocked_tools=["delete_order"]),
    )


def test_the_pull_holds_what_the_gateway_would_apply(live, upstream) -> None:
    server, engine, keys = live
    items = memory(engine)
    version = register(engine, full_spec(upstream.base_url, list(items.values())), Alias.STABLE)
    server.gateway.catalog.forget()

    response = pull(server, keys["acme"], session="pull-1", query=QUESTION)
    assert response.status_code == 200, response.text
    assert response.headers["x-evoplane-version"] == version
    assert response.headers["x-evoplane-session-id"] == "pull-1"
    pulled = response.json()
    assert (pulled["id"], pulled["alias"], pulled["session"]) == (version, "stable", "pull-1")
    assert pulled["model"] == "scripted-model"
    assert pulled["harness"]["system_prompt"] == "Policy: Answer in one sentence."
    assert pulled["harness"]["demos"] == [
        [
            {"role": "user", "content": "Where is order 7?"},
            {"role": "assistant", "content": "Order 7 ships today."},
        ]
    ]
    assert {item["id"] for item in pulled["memory"]["items"]} == {items["acme"], items["shared"]}
    assert [hit["id"] for hit in pulled["memory"]["retrieved"]][0] == items["acme"]
    assert pulled["tools"]["lookup_order"]["argument_map"] == {"id": "order_id"}
    assert pulled["guardrails"]["blocked_tools"] == ["delete_order"]

    # What the gateway sends upstream for the same question is the pull's messages, then it.
    client(server, keys["acme"]).chat.completions.create(
        model="support-bot",
        messages=[{"role": "user", "content": QUESTION}],
        tools=[LOOKUP],
        extra_headers={"X-Session-Id": "served-1"},
    )
    sent = upstream.requests[-1]["messages"]
    assert pulled["messages"] == sent[:-1]
    assert pulled["memory"]["block"] == sent[1]["content"]
    assert "Leipzig" in pulled["memory"]["block"]

    globex = pull(server, keys["globex"], session="pull-1", query=QUESTION).json()
    assert {item["id"] for item in globex["memory"]["items"]} == {items["globex"], items["shared"]}
    assert "Leipzig" not in json.dumps(globex)


def test_without_a_query_or_a_session_the_stable_version_and_its_harness(live, upstream) -> None:
    server, engine, keys = live
    version = register(engine, full_spec(upstream.base_url, []), Alias.STABLE)
    server.gateway.catalog.forget()
    pulled = pull(server, keys["acme"]).json()
    assert (pulled["id"], pulled["alias"], pulled["session"]) == (version, "stable", None)
    assert pulled["memory"]["block"] is None and pulled["memory"]["query"] is None
    assert [m["role"] for m in pulled["messages"]] == ["system", "user", "assistant"]


def test_a_session_is_told_the_version_that_serves_it_and_its_traces_record_it(
    live, upstream
) -> None:
    server, engine, keys = live
    canary = register(
        engine,
        VersionSpec(model=ModelRef(engine="openai", base_url=upstream.base_url, model="cand")),
        Alias.CANARY,
        weight=0.5,
    )
    server.gateway.catalog.forget()
    sdk = client(server, keys["acme"])
    told = {}
    for index in range(16):
        session = f"placed-{index}"
        told[session] = pull(server, keys["acme"], session=session).json()["id"]
        served = sdk.chat.completions.with_raw_response.create(
            model="support-bot",
            messages=[{"role": "user", "content": "hi"}],
            extra_headers={"X-Session-Id": session},
        )
        assert served.headers["x-evoplane-version"] == told[session], session
    assert set(told.values()) == {"support-bot@v1", canary}  # both sides of the split

    on_canary = next(s for s, v in told.items() if v == canary)
    trace = {
        "resourceSpans": [
            {
                "scopeSpans": [
                    {
                        "spans": [
                            {
                                "traceId": "0af7651916cd43dd8448eb211c80319c",
                                "spanId": "b7ad6b7169203331",
                                "name": "chat cand",
                                "startTimeUnixNano": "1767225600000000000",
                                "endTimeUnixNano": "1767225600500000000",
                                "attributes": [
                                    {"key": k, "value": {"stringValue": v}}
                                    for k, v in {
                                        "gen_ai.operation.name": "chat",
                                        "gen_ai.request.model": "cand",
                                        "gen_ai.conversation.id": on_canary,
                                    }.items()
                                ],
                            }
                        ]
                    }
                ]
            }
        ]
    }
    response = httpx.post(
        f"{server.base_url}/traces",
        json=trace,
        headers={**auth(keys["acme"]), "X-Evoplane-Agent": "support-bot"},
    )
    assert response.status_code == 200, response.text
    server.flush()
    with transaction(engine) as session:
        trajectories = list_trajectories(session, "acme", session_id=on_canary)
    ingested = [
        t for t in trajectories if str(t.id) == response.headers["x-evoplane-trajectory-id"]
    ]
    assert [t.versions.agent_version_id for t in ingested] == [canary]


def test_the_pull_is_tenant_checked(live) -> None:
    server, _, keys = live
    no_key = httpx.get(f"{server.base_url}/agents/support-bot/version")
    assert no_key.status_code == 401
    assert no_key.json()["error"]["code"] == "missing_api_key"
    assert pull(server, keys["acme-limited"]).status_code == 403  # a key for internal-bot only
    assert pull(server, keys["acme"], agent="internal-bot").status_code == 403  # not granted
    assert pull(server, keys["acme"], agent="nobody").status_code == 404
    bad = pull(server, keys["acme"], session="a\nb")
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "session"
