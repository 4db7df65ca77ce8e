"""Canary split by a stable session hash, sticky sessions, and a shadow that can never hurt."""

from __future__ import annotations

import asyncio
import math
import time

import openai
import pytest
from hypothesis import given
from hypothesis import strategies as st

from atdp import ModelRef, VersionSpec, utcnow
from proxy.catalog import Catalog
from proxy.config import GatewayConfig
from proxy.router import Router, propose, session_bucket
from registry import (
    Alias,
    AliasState,
    SessionRoute,
    export_records,
    register_version,
    route_session,
    set_alias,
    transaction,
)
from tests.conftest import postgres_schema_url
from tests.proxy.test_gateway_sdk import client, stored
from tests.support.gateway import GatewayServer
from tests.support.upstream import ScriptedUpstream


@pytest.fixture
def registry_url(request, tmp_path) -> str:
    """SQLite, or PostgreSQL where a test is parametrized with it: a gateway reads new
    sessions' placements differently on each (`Catalog.session_routes`)."""
    if getattr(request, "param", "sqlite") == "postgresql":
        return postgres_schema_url(request.getfixturevalue("postgres_schema"))
    return f"sqlite:///{tmp_path / 'registry.db'}"


both_registries = pytest.mark.parametrize("registry_url", ["sqlite", "postgresql"], indirect=True)


def add_version(engine, base_url: str, model: str) -> str:
    spec = VersionSpec(model=ModelRef(engine="openai", base_url=base_url, model=model))
    with transaction(engine) as session:
        return register_version(
            session, "support-bot", spec, parent_id="support-bot@v1", author="t", reason="t"
        ).id


def canary_placement(session: str, version_id: str) -> SessionRoute:
    """Acme's session `session` as a gateway records it when placed on the canary."""
    return SessionRoute(
        agent="support-bot",
        tenant="acme",
        session=session,
        version_id=version_id,
        alias="canary",
        replica=0,
        created_at=utcnow(),
    )


async def _routes(engine, sessions: list[str], tenant: str = "acme") -> dict[str, str]:
    placed: list = []
    catalog = Catalog(engine, ttl=60.0)
    router = Router(catalog, placed.append)  # each call is a fresh gateway
    try:
        routes = {
            s: (await router.settle(await router.route(tenant, "support-bot", s))).version.id
            for s in sessions
        }
    finally:
        await catalog.aclose()
    with transaction(engine) as session:  # what the gateway's capture drain does
        for route in placed:
            route_session(session, route)
    return routes


@both_registries
def test_canary_share_is_within_tolerance_and_sessions_never_move(world, upstream) -> None:
    engine, _ = world
    canary = add_version(engine, upstream.base_url, "candidate")
    with transaction(engine) as session:
        set_alias(session, "support-bot", Alias.CANARY, canary, weight=0.25, actor="test")
    sessions = [f"session-{i}" for i in range(2000)]
    first = asyncio.run(_routes(engine, sessions))
    share = sum(v == canary for v in first.values()) / len(sessions)
    sigma = math.sqrt(0.25 * 0.75 / len(sessions))
    assert abs(share - 0.25) < 4 * sigma, share
    # Move the weights: known sessions keep their version (a fresh router reads the registry).
    with transaction(engine) as session:
        set_alias(session, "support-bot", Alias.CANARY, canary, weight=0.9, actor="test")
    again = asyncio.run(_routes(engine, sessions[:300]))
    assert again == {s: first[s] for s in sessions[:300]}
    # New sessions see the new weight.
    fresh = asyncio.run(_routes(engine, [f"new-{i}" for i in range(300)]))
    assert sum(v == canary for v in fresh.values()) > 200


def test_a_holdback_keeps_its_share_of_new_sessions_beside_a_canary(world, upstream) -> None:
    engine, _ = world
    promoted = add_version(engine, upstream.base_url, "promoted")
    canary = add_version(engine, upstream.base_url, "next candidate")
    with transaction(engine) as session:
        set_alias(session, "support-bot", Alias.STABLE, promoted, actor="test")
        set_alias(session, "support-bot", Alias.HOLDBACK, "support-bot@v1", weight=0.1, actor="t")
        set_alias(session, "support-bot", Alias.CANARY, canary, weight=0.25, actor="test")
    sessions = [f"session-{i}" for i in range(2000)]
    routes = asyncio.run(_routes(engine, sessions))
    for version, weight in (("support-bot@v1", 0.1), (canary, 0.25), (promoted, 0.65)):
        share = sum(v == version for v in routes.values()) / len(sessions)
        assert abs(share - weight) < 4 * math.sqrt(weight * (1 - weight) / len(sessions)), (
            version,
            share,
        )


@given(
    st.text(min_size=1, max_size=30),
    st.floats(0.0, 1.0),
    st.floats(0.0, 1.0),
)
def test_canary_and_holdback_take_disjoint_ends_of_the_bucket_range(
    session_id, canary_weight, holdback_weight
) -> None:
    holdback_weight = min(holdback_weight, 1.0 - canary_weight)
    aliases = AliasState(
        stable="a@v2",
        canary="a@v3" if canary_weight else None,
        canary_weight=canary_weight,
        holdback="a@v1" if holdback_weight else None,
        holdback_weight=holdback_weight,
    )
    version, alias = propose(aliases, "a", session_id)
    bucket = session_bucket("a", session_id)
    if bucket < canary_weight:
        assert (version, alias) == ("a@v3", Alias.CANARY)
    elif holdback_weight and bucket >= 1.0 - holdback_weight:
        assert (version, alias) == ("a@v1", Alias.HOLDBACK)
    else:
        assert (version, alias) == ("a@v2", Alias.STABLE)


def test_a_session_the_gateway_minted_is_placed_without_a_registry_read(world) -> None:
    """A request naming no session gets an id made up on the spot: nobody can have placed
    it, so it is placed on the hash's proposal and recorded, with no read to wait for."""
    engine, _ = world
    canary = add_version(engine, "http://127.0.0.1:9/v1", "candidate")
    with transaction(engine) as session:
        set_alias(session, "support-bot", Alias.CANARY, canary, weight=0.5, actor="test")

    async def place() -> tuple[list, int, list[tuple]]:
        placed: list = []
        catalog = Catalog(engine, ttl=60.0)
        reads = []
        looked_up = catalog.session_routes

        async def counted(keys):
            reads.append(list(keys))
            return await looked_up(keys)

        catalog.session_routes = counted
        router = Router(catalog, placed.append)
        try:
            routes = []
            for i in range(40):
                minted = f"s-minted-{i}"
                first = await router.route("acme", "support-bot", minted, minted=True)
                again = await router.settle(await router.route("acme", "support-bot", minted))
                routes.append((first.placing, first.version.id, again.version.id))
            named = await router.route("acme", "support-bot", "named-by-the-agent")
            await router.settle(named)
        finally:
            await catalog.aclose()
        return placed, len(reads), routes

    placed, reads, routes = asyncio.run(place())
    assert reads == 1  # the one session the agent named
    assert all(placing is None and first == again for placing, first, again in routes)
    # Each placement is recorded once, where the hash put it: both versions get sessions.
    assert [r.session for r in placed] == [f"s-minted-{i}" for i in range(40)] + [
        "named-by-the-agent"
    ]
    assert {version for _, version, _ in routes} == {"support-bot@v1", canary}


def test_a_registry_that_does_not_answer_leaves_new_sessions_on_their_hash(world) -> None:
    """A partition or a paused server neither answers nor fails the placement read: a new
    session waits for it at most the router's deadline, and while it is overdue the sessions
    after it do not wait at all. Each is placed on its proposal and recorded."""
    engine, _ = world
    canary = add_version(engine, "http://127.0.0.1:9/v1", "candidate")
    with transaction(engine) as session:
        set_alias(session, "support-bot", Alias.CANARY, canary, weight=0.5, actor="test")

    async def place() -> tuple[list, list, list[float], list[str]]:
        placed: list = []
        catalog = Catalog(engine, ttl=60.0)
        answered, reads = asyncio.Event(), []

        async def unanswered(keys):
            reads.append(list(keys))
            await answered.wait()
            return [None] * len(keys)

        catalog.session_routes = unanswered
        router = Router(catalog, placed.append, deadline=0.2)
        waits, versions = [], []
        try:
            for i in range(20):
                started = time.monotonic()
                route = await router.route("acme", "support-bot", f"s-{i}")
                assert await router.settle(route) is route
                waits.append(time.monotonic() - started)
                versions.append(route.version.id)
            answered.set()
            await router.drain()
        finally:
            await catalog.aclose()
        return placed, reads, waits, versions

    placed, reads, waits, versions = asyncio.run(place())
    assert len(reads) == 1  # the sessions after the first did not queue behind its read
    assert waits[0] >= 0.2 and max(waits) < 1.5
    assert [(r.session, r.version_id) for r in placed] == [
        (f"s-{i}", version) for i, version in enumerate(versions)
    ]
    aliases = AliasState(stable="support-bot@v1", canary=canary, canary_weight=0.5)
    assert versions == [propose(aliases, "support-bot", f"s-{i}")[0] for i in range(20)]
    assert set(versions) == {"support-bot@v1", canary}


def test_the_same_session_id_of_two_tenants_is_routed_independently(world, upstream) -> None:
    engine, _ = world
    canary = add_version(engine, upstream.base_url, "candidate")
    with transaction(engine) as session:
        set_alias(session, "support-bot", Alias.CANARY, canary, weight=1.0, actor="test")
    acme = asyncio.run(_routes(engine, ["shared-id"], "acme"))
    with transaction(engine) as session:
        set_alias(session, "support-bot", Alias.CANARY, None, actor="test")
    globex = asyncio.run(_routes(engine, ["shared-id"], "globex"))
    assert (acme["shared-id"], globex["shared-id"]) == (canary, "support-bot@v1")


@given(st.text(min_size=1, max_size=50), st.text(min_size=1, max_size=50))
def test_session_buckets_are_stable_and_in_range(agent, session) -> None:
    bucket = session_bucket(agent, session)
    assert 0.0 <= bucket < 1.0 and bucket == session_bucket(agent, session)
    assert session_bucket(agent, session, "replica") != bucket or agent == session


def test_a_hanging_or_failing_shadow_changes_nothing_for_the_user(live, upstream) -> None:
    server, engine, keys = live
    with ScriptedUpstream() as shadow_upstream:
        shadow = add_version(engine, shadow_upstream.base_url, "shadow-model")
        with transaction(engine) as session:
            set_alias(session, "support-bot", Alias.SHADOW, shadow, actor="test")
        server.gateway.catalog.forget()
        sdk = client(server, keys["acme"])
        shadow_upstream.hang_next(5.0)
        started = time.monotonic()
        reply = sdk.chat.completions.create(
            model="support-bot",
            messages=[{"role": "user", "content": "hello"}],
            extra_headers={"X-Session-Id": "shadowed"},
        )
        elapsed = time.monotonic() - started
        # The shadow upstream holds its copy for 5 s: an answer sooner did not wait for it.
        assert elapsed < 5.0
        deadline = time.monotonic() + 5
        while not shadow_upstream.requests and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(shadow_upstream.requests) == 1
        assert reply.choices[0].message.content.startswith("echo: hello")
        shadow_upstream.fail_next(500)
        second = sdk.chat.completions.create(
            model="support-bot",
            messages=[{"role": "user", "content": "again"}],
            extra_headers={"X-Session-Id": "shadowed-2"},
        )
        assert second.choices[0].message.content.startswith("echo: again")
        third = sdk.chat.completions.create(
            model="support-bot",
            messages=[{"role": "user", "content": "ok"}],
            extra_headers={"X-Session-Id": "shadowed-3"},
        )
        deadline = time.monotonic() + 10
        while len(shadow_upstream.requests) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)
    assert third.choices[0].message.content.startswith("echo: ok")
    assert server.gateway.shadows.failures >= 1
    _, events = stored(server, engine, "acme", "shadowed-3", version="support-bot@v1")
    assert [e.metadata.traffic for e in events] == ["user", "user"]
    server.flush()
    from registry import ALL_TENANTS, get_events, list_trajectories

    with transaction(engine) as s:
        shadow_runs = [
            t
            for t in list_trajectories(s, ALL_TENANTS, session_id="shadowed-3")
            if t.versions.agent_version_id == shadow
        ]
        assert len(shadow_runs) == 1
        shadow_events = get_events(s, "acme", shadow_runs[0].id)
    assert {e.metadata.traffic for e in shadow_events} == {"shadow"}
    assert shadow_events[-1].metadata.agent_version_id == shadow


@both_registries
def test_a_session_placed_elsewhere_first_is_served_as_placed_there(
    world, registry_url, upstream, tmp_path
) -> None:
    """Two gateways place one new session at once, differently: the first placement written
    wins, and the gateway whose write lost serves the session that way from then on."""
    engine, keys = world
    candidate = add_version(engine, upstream.base_url, "candidate-model")
    config = GatewayConfig(
        database_url=registry_url,
        spool_dir=tmp_path / "spool",
        capture_flush_interval=60.0,  # its placement is written only when flushed below
    )
    with GatewayServer(config) as server:
        sdk = client(server, keys["acme"])
        ask = {"model": "support-bot", "extra_headers": {"X-Session-Id": "contested"}}
        sdk.chat.completions.create(messages=[{"role": "user", "content": "one"}], **ask)
        assert upstream.requests[-1]["model"] == "scripted-model"  # placed on stable
        with transaction(engine) as session:  # meanwhile, another gateway's write lands
            route_session(session, canary_placement("contested", candidate))
        server.flush()  # this gateway's own placement is refused...
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            sdk.chat.completions.create(messages=[{"role": "user", "content": "two"}], **ask)
            if upstream.requests[-1]["model"] == "candidate-model":
                break  # ...and it adopts the one in force
            time.sleep(0.05)
        assert upstream.requests[-1]["model"] == "candidate-model"


@both_registries
def test_a_session_placed_before_this_gateway_started_is_served_as_placed(
    world, registry_url, upstream, tmp_path
) -> None:
    """A session's first request on a gateway goes out on the hash's proposal while the
    registry read runs; for a session placed before (here on a canary since retired), that
    call is dropped and the request is served, captured and answered as placed."""
    engine, keys = world
    candidate = add_version(engine, upstream.base_url, "candidate-model")
    with transaction(engine) as session:
        for placed in ("placed-plain", "placed-stream"):
            route_session(session, canary_placement(placed, candidate))
    upstream.delay_ms = 100  # the proposal's call is still out when the read settles
    config = GatewayConfig(database_url=registry_url, spool_dir=tmp_path / "spool")
    with GatewayServer(config) as server:
        sdk = client(server, keys["acme"])
        plain = sdk.chat.completions.with_raw_response.create(
            model="support-bot",
            messages=[{"role": "user", "content": "Where is my parcel?"}],
            extra_headers={"X-Session-Id": "placed-plain"},
        )
        assert plain.headers["x-evoplane-version"] == candidate
        # The proposal (stable) went out first and was dropped; the candidate answered.
        assert [r["model"] for r in upstream.requests] == ["scripted-model", "candidate-model"]
        upstream.reset()
        with sdk.chat.completions.with_streaming_response.create(
            model="support-bot",
            messages=[{"role": "user", "content": "And my refund?"}],
            extra_headers={"X-Session-Id": "placed-stream"},
            stream=True,
        ) as streamed:
            assert streamed.headers["x-evoplane-version"] == candidate
            chunks = list(streamed.parse())
        assert chunks[-1].choices == [] or chunks[-1].choices[0].finish_reason == "stop"
        assert upstream.requests[-1]["model"] == "candidate-model"
        for placed in ("placed-plain", "placed-stream"):
            trajectory, events = stored(server, engine, "acme", placed)
            assert trajectory.versions.agent_version_id == candidate
            (llm,) = [e for e in events if e.kind == "llm_call"]
            assert llm.metadata.agent_version_id == candidate


def test_evaluation_calls_pin_a_version_and_never_become_user_or_training_data(
    live, upstream
) -> None:
    server, engine, keys = live
    candidate = add_version(engine, upstream.base_url, "candidate-model")
    sdk = client(server, keys["acme"])
    # A user session beside it, so the export below is not empty and the check has teeth.
    sdk.chat.completions.create(
        model="support-bot",
        messages=[{"role": "user", "content": "a real question"}],
        extra_headers={"X-Session-Id": "user-1"},
    )
    evaluation = {"X-Evoplane-Traffic": "evaluation", "X-Session-Id": "replay-1"}
    reply = sdk.chat.completions.with_raw_response.create(
        model="support-bot",
        messages=[{"role": "user", "content": "replayed question"}],
        extra_headers={**evaluation, "X-Evoplane-Version": candidate},
    )
    assert reply.headers["X-Evoplane-Version"] == candidate  # not stable: pinned
    assert upstream.requests[-1]["model"] == "candidate-model"
    trajectory, events = stored(server, engine, "acme", "replay-1")
    assert trajectory.versions.agent_version_id == candidate
    assert {e.metadata.traffic for e in events} == {"evaluation"}
    assert {e.governance.training for e in events} == {"debug_only"}  # never training data
    server.flush()
    with transaction(engine) as session:
        exported = list(export_records(session, "acme", "support-bot"))
    assert [record["session"] for record in exported] == ["user-1"]

    def refused(headers: dict) -> openai.APIStatusError:
        with pytest.raises(openai.APIStatusError) as error:
            sdk.chat.completions.create(
                model="support-bot",
                messages=[{"role": "user", "content": "x"}],
                extra_headers=headers,
            )
        return error.value

    unpinned = refused({"X-Evoplane-Version": candidate})  # user traffic may not choose
    assert unpinned.status_code == 400 and "X-Evoplane-Traffic" in unpinned.message
    unknown = refused({**evaluation, "X-Evoplane-Version": "support-bot@v99"})
    assert unknown.status_code == 404 and unknown.body["code"] == "version_not_found"
    odd = refused({"X-Evoplane-Traffic": "synthetic"})
    assert odd.status_code == 400 and odd.body["param"] == "X-Evoplane-Traffic"
    bare = refused({"X-Evoplane-Harness": "off"})  # users always get the version's harness
    assert bare.status_code == 400 and bare.body["param"] == "X-Evoplane-Harness"

    # An optimiser brings its own harness: the stable's instructions are left out.
    sdk.chat.completions.create(
        model="support-bot",
        messages=[{"role": "user", "content": "plain"}],
        extra_headers={**evaluation, "X-Evoplane-Harness": "off"},
    )
    assert upstream.requests[-1]["messages"] == [{"role": "user", "content": "plain"}]
    sdk.chat.completions.create(
        model="support-bot",
        messages=[{"role": "user", "content": "with harness"}],
        extra_headers=evaluation,
    )
    assert upstream.requests[-1]["messages"][0]["role"] == "system"
