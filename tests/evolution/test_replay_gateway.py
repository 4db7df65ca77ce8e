"""Replay of trajectories the real gateway recorded, with a seeded sampling upstream.

Deterministic replay re-serves every recorded llm_call on a version through the gateway's
own overlays (the replay gate's `serve`, or the gateway itself as evaluation traffic). With
sampling at temperature > 0 and a seed, the recording version reproduces every recorded
action; another seed or another model does not, and neither does sampling without a seed.
Replays are evaluation traffic: never captured by the gate, never in a training export.
"""

from __future__ import annotations

from typing import Any

import httpx

from activities.replay_gate import ReplayGate
from atdp import EventKind, ModelRef, Traffic, TrainingEligibility
from evolution.replay import EVALUATION_HEADERS, Serve, action_of, replay_trajectory
from registry import ALL_TENANTS, export_records, list_trajectories, register_version, transaction
from tests.evolution.gateway_agent import AGENT, Agent, LiveGateway, live_gateway
from tests.evolution.replay_helpers import LOOKUP_ORDER
from tests.support.upstream import Behaviour

SAMPLED = Behaviour(sampling=True)


def shipped(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"status": "shipped", "order": arguments.get("order_id")}


def record(live: LiveGateway, session: str, decoding: dict[str, Any]) -> list:
    """An order lookup (a tool call and its result), an answer, then a follow-up question."""
    agent = Agent(live, "acme", session, [LOOKUP_ORDER], shipped, decoding)
    agent.say('call lookup_order with {"order_id": "A-17"}')
    agent.say("Thanks. When will it arrive?")
    agent.report(True)
    return live.events(session)


def reseeded(serve: Serve, seed: int) -> Serve:
    return lambda body: serve({**body, "seed": seed})


def sibling(live: LiveGateway, model: str) -> str:
    """A version that differs from stable only in its model (same upstream)."""
    stable = live.version()
    spec = stable.spec.model_copy(
        update={
            "model": ModelRef(engine="openai", base_url=stable.spec.model.base_url, model=model)
        }
    )
    with transaction(live.engine) as session:
        return register_version(
            session, AGENT, spec, parent_id=stable.id, author="t", reason="t"
        ).id


async def test_a_seeded_trajectory_replays_exactly_on_its_own_version_only(tmp_path) -> None:
    with live_gateway(tmp_path, SAMPLED) as live:
        events = record(live, "seeded", {"temperature": 0.8, "seed": 42})
        unseeded = record(live, "unseeded", {"temperature": 0.8})
        stable, other = live.version(), live.version(sibling(live, "scripted-model-b"))
        gate = ReplayGate(live.engine, timeout=10)
        try:
            own = await replay_trajectory(events, gate.serve(stable, "acme"), mode="deterministic")
            again = await replay_trajectory(
                events, gate.serve(stable, "acme"), mode="deterministic"
            )
            seed_43 = await replay_trajectory(
                events, reseeded(gate.serve(stable, "acme"), 43), mode="deterministic"
            )
            other_model = await replay_trajectory(
                events, gate.serve(other, "acme"), mode="deterministic"
            )
            no_seed = await replay_trajectory(
                unseeded, gate.serve(stable, "acme"), mode="deterministic"
            )
        finally:
            await gate.aclose()
        live.server.flush()
        with transaction(live.engine) as session:
            captured = list_trajectories(session, ALL_TENANTS, agent=AGENT)

    llm_calls = [event for event in events if event.kind is EventKind.LLM_CALL]
    assert [call.metadata.decoding.seed for call in llm_calls] == [42, 42, 42]
    assert {call.replay.replay_class for call in llm_calls} == {"deterministic", "approximate"}
    recorded = [call.action.content for call in llm_calls]
    assert recorded[0] is None and all(" ~ " in text for text in recorded[1:])  # sampled words
    assert own.reproduced and again.reproduced
    assert [action_of(step.response).content for step in own.steps] == recorded
    # The tool call is not sampled; both sampled answers change with the seed or the model.
    assert [step.matched for step in seed_43.steps] == [True, False, False]
    assert [step.matched for step in other_model.steps] == [True, False, False]
    assert not no_seed.reproduced
    # The gate's replays went straight to the upstream: nothing was captured for them.
    assert sorted(t.session for t in captured) == ["seeded", "unseeded"]


def through_gateway(live: LiveGateway, version: str, session: str) -> Serve:
    """Replay through the gateway itself, as the harness operator's calls go: evaluation
    traffic pinned to `version`."""

    async def serve(body: dict[str, Any]) -> dict[str, Any]:
        headers = {
            "Authorization": f"Bearer {live.keys['acme']}",
            "X-Session-Id": session,
            "X-Evoplane-Version": version,
            **EVALUATION_HEADERS,
        }
        async with httpx.AsyncClient(timeout=30) as client:
            response = await client.post(
                f"{live.server.base_url}/chat/completions",
                json={"model": AGENT, **body},
                headers=headers,
            )
        response.raise_for_status()
        return response.json()

    return serve


async def test_replays_through_the_gateway_are_evaluation_traffic_and_never_exported(
    tmp_path,
) -> None:
    with live_gateway(tmp_path, SAMPLED) as live:
        events = record(live, "user-session", {"temperature": 0.8, "seed": 7})
        stable = live.version().id
        deterministic = await replay_trajectory(
            events, through_gateway(live, stable, "replay-deterministic"), mode="deterministic"
        )
        approximate = await replay_trajectory(
            events, through_gateway(live, stable, "replay-approximate"), mode="approximate"
        )
        replays = {
            session: live.events(session)
            for session in ("replay-deterministic", "replay-approximate")
        }
        with transaction(live.engine) as session:
            exported = list(export_records(session, ALL_TENANTS, AGENT))

    assert deterministic.reproduced and approximate.reproduced
    replayed = [event for found in replays.values() for event in found]
    assert len(replayed) >= 6
    assert {event.metadata.traffic for event in replayed} == {Traffic.EVALUATION}
    assert {event.governance.training for event in replayed} == {TrainingEligibility.DEBUG_ONLY}
    assert [record["session"] for record in exported] == ["user-session"]
    exported_ids = {event["id"] for record in exported for event in record["events"]}
    assert exported_ids and not exported_ids & {str(event.id) for event in replayed}
    assert {str(event.id) for event in events if event.kind is EventKind.LLM_CALL} <= exported_ids
