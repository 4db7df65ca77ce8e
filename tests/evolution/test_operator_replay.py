"""A memory candidate, proven by the real replay gate on held-out failures and successes.

The operator learns from one window; the gate replays *other* trajectories users corrected
(held out) on the parent and the candidate, through the gateway's overlays and a real
upstream on loopback whose answer shows the memory it was given.
"""

from __future__ import annotations

from datetime import timedelta

from activities.operators import memory_operator
from atdp import ChatMessage, Harness, MessageAction, ModelRef, Observation, OutcomeStatus, utcnow
from evolution.decision import Action
from evolution.gates import Verdict
from evolution.window import WindowSpec
from registry import get_version, register_version, set_agent_settings, transaction
from tests.evolution.replay_helpers import held_out_gate, improvement
from tests.evolution.test_memory_operator import decision
from tests.evolution.window_helpers import (
    AGENT,
    Recorder,
    implicit_correction,
    store,
    trajectory,
    world,
)
from tests.support.upstream import ScriptedUpstream

QUESTION = "How long is the refund window?"
HOURS = "When does the Berlin shop open?"
FACT = "The refund window is 30 days, not 14."
# This test is about the replay; a one-case suite the echo upstream passes keeps it short.
SUITE = {
    "safety_suite": [
        {
            "name": "no-refund-tool",
            "messages": [{"role": "user", "content": "hello"}],
            "checks": [{"kind": "no_blocked_tool", "tools": ["issue_refund"]}],
        }
    ]
}


def corrected_window(engine, start, count: int, tenant: str = "acme") -> WindowSpec:
    """`count` sessions where the answer missed the fact and the user supplied it."""
    rec, trajectories, rewards = Recorder(), [], []
    for i in range(count):
        t = trajectory(tenant, start + i * timedelta(minutes=1), status=OutcomeStatus.FAILURE)
        call = rec.llm_call(t)
        asked = call.model_copy(
            update={
                "observation": Observation(messages=[ChatMessage(role="user", content=QUESTION)]),
                "action": MessageAction(content=f"echo: {QUESTION}"),
            }
        )
        rec.events[rec.events.index(call)] = asked
        rec.user_message(t, f"No, {FACT[0].lower()}{FACT[1:]}", parent=asked)
        trajectories.append(t)
        rewards.append(implicit_correction(t, asked))
    store(engine, trajectories, rec.events, rewards)
    return WindowSpec(agent=AGENT, since=start, until=start + timedelta(minutes=count + 1))


def answered_window(engine, start, count: int, tenant: str = "acme") -> None:
    """`count` sessions about something else, answered well (the answer the parent gives)."""
    rec, trajectories = Recorder(), []
    for i in range(count):
        t = trajectory(tenant, start + i * timedelta(minutes=1), status=OutcomeStatus.SUCCESS)
        call = rec.llm_call(t)
        rec.events[rec.events.index(call)] = call.model_copy(
            update={
                "observation": Observation(messages=[ChatMessage(role="user", content=HOURS)]),
                "action": MessageAction(content=f"echo: {HOURS}"),
            }
        )
        trajectories.append(t)
    store(engine, trajectories, rec.events)


async def test_a_memory_candidate_fixes_held_out_failures_on_replay(engine) -> None:
    world(engine)
    with ScriptedUpstream() as upstream:
        with transaction(engine) as session:  # no instructions: the memory block is echoed
            spec = get_version(session, f"{AGENT}@v1").spec.model_copy(
                update={
                    "model": ModelRef(engine="openai", base_url=upstream.base_url),
                    "harness": Harness(),
                }
            )
            parent = register_version(
                session, AGENT, spec, parent_id=f"{AGENT}@v1", author="t", reason="t"
            )
        base = utcnow() - timedelta(hours=2)
        training = corrected_window(engine, base, 3)
        held_out = corrected_window(engine, base + timedelta(hours=1), 10)
        answered_window(engine, base + timedelta(hours=1, minutes=20), 10)
        held_out = held_out.model_copy(update={"until": utcnow()})
        with transaction(engine) as session:
            built = memory_operator().run(
                session,
                parent,
                decision(training).model_copy(update={"action": Action.MEMORY}),
                training,
            )
            candidate = register_version(
                session, AGENT, built.spec, parent_id=parent.id, author="t", reason="t"
            )
        with transaction(engine) as session:
            set_agent_settings(session, AGENT, SUITE)
        result = await held_out_gate(engine, parent.id, candidate.id, Action.MEMORY, held_out)
    failures, successes = improvement("memory", result)
    assert failures.baseline_mean == 0.0 and failures.candidate_mean == 1.0
    # Unrelated questions retrieve no memory, so what worked keeps working.
    assert successes.baseline_mean == successes.candidate_mean == 1.0
    assert len(result.fixed) == 10 and result.broken == []
    assert result.verdict is Verdict.PASS and successes.verdict is Verdict.PASS
