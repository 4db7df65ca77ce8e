"""A harness candidate, proven by the real replay gate on held-out failures and successes.

The model behind the gateway answers from the facts in its system prompt (a scripted
upstream: the sentence sharing most words with the question, else "I don't know."), so an
answer changes exactly when the harness's instructions do. Users corrected refund answers;
the harness operator (DSPy's BootstrapFewShot, the real dspy.LM client) learns from one
window recorded through the gateway, and the gate replays *other* trajectories (held out,
asked in other words) on the parent and the candidate through the gateway's overlays.
"""

from __future__ import annotations

from typing import Any

import pytest

from activities.operators import read_harness_cases
from atdp import Harness, ModelRef, VersionSpec, utcnow
from evolution.decision import Action
from evolution.gates import GateConfig, Verdict
from evolution.harness import HarnessConfig, propose_harness
from evolution.window import WindowSpec
from registry import register_version, set_agent_settings, transaction
from tests.evolution.gateway_agent import AGENT, Agent, LiveGateway, live_gateway
from tests.evolution.replay_helpers import held_out_gate, improvement
from tests.evolution.test_harness_operator import decision
from tests.evolution.test_operator_replay import SUITE
from tests.support.upstream import Behaviour

dspy = pytest.importorskip("dspy")

INSTRUCTIONS = "You support Acme's customers. Our opening hours are 9 to 5 on weekdays."
FACT = "The refund window is 30 days."
TRAIN_REFUNDS = [
    "How long is the refund window?",
    "What is the refund window for shoes?",
    "Is there a refund window?",
]
TRAIN_HOURS = ["What are your opening hours?", "Opening hours today?", "Tell me your hours."]
HELD_OUT_REFUNDS = [
    "How many days do I have for a refund?",
    "Is the refund window still open after three weeks?",
    "Can I get a refund after twenty days?",
    "What refund window applies to jackets?",
    "Refund window for gifts, please?",
    "How many days until a refund is impossible?",
    "Does the refund window count weekends?",
    "Is a refund possible within days of delivery?",
]
HELD_OUT_HOURS = [
    "Are you open on weekdays?",
    "When do your opening hours start?",
    "Which hours are you open?",
    "Opening hours on Monday?",
    "What hours do you keep on weekdays?",
    "Your opening hours, please?",
    "Are the opening hours the same on Friday?",
    "Hours on weekdays?",
]


def parent_spec(base_url: str) -> VersionSpec:
    return VersionSpec(
        model=ModelRef(engine="openai", base_url=base_url, model="scripted-model"),
        harness=Harness(instructions=INSTRUCTIONS),
    )


def ask(live: LiveGateway, label: str, questions: list[str], *, corrected: bool) -> list[str]:
    """One conversation per question; refund answers corrected by users, the others accepted."""
    answers = []
    for i, question in enumerate(questions):
        agent = Agent(live, ("acme", "globex")[i % 2], f"{label}-{i}")
        answers.append(agent.say(question))
        if corrected:
            agent.correct(f"No, {FACT[0].lower()}{FACT[1:]}")
        else:
            agent.report(True)
    live.server.flush()
    return answers


def lm_factory(live: LiveGateway):
    """The task LM as an activity wires it, here straight to the upstream (the program
    renders the harness itself), marked as evaluation traffic."""

    def factory(version_id: str) -> Any:
        return dspy.LM(
            "openai/scripted-model",
            api_base=live.upstream.base_url,
            api_key="test-key",
            cache=False,
            extra_headers={"X-Evoplane-Traffic": "evaluation", "X-Evoplane-Version": version_id},
        )

    return factory


async def test_a_harness_candidate_fixes_held_out_failures_on_replay(tmp_path) -> None:
    with live_gateway(tmp_path, Behaviour(answers="facts"), parent_spec) as live:
        start = utcnow()
        wrong = ask(live, "train-refund", TRAIN_REFUNDS, corrected=True)
        ask(live, "train-hours", TRAIN_HOURS, corrected=False)
        split = utcnow()
        ask(live, "held-refund", HELD_OUT_REFUNDS, corrected=True)
        ask(live, "held-hours", HELD_OUT_HOURS, corrected=False)
        training = WindowSpec(agent=AGENT, since=start, until=split)
        held_out = WindowSpec(agent=AGENT, since=split, until=utcnow())
        parent = live.version()
        with transaction(live.engine) as session:
            built = propose_harness(
                read_harness_cases(session, training),
                parent,
                decision(training),
                lm_factory=lm_factory(live),
                config=HarnessConfig(optimizer="bootstrap"),
            )
            candidate = register_version(
                session, AGENT, built.spec, parent_id=parent.id, author="t", reason=built.summary
            )
            set_agent_settings(session, AGENT, SUITE)
        result = await held_out_gate(live.engine, parent.id, candidate.id, Action.HARNESS, held_out)

    assert wrong == ["I don't know."] * 3  # the parent's answers users corrected
    evidence = built.evidence
    assert evidence["after"] > evidence["before"]
    assert len(evidence["trajectory_ids"]) == 6  # trained on the training window only
    assert not set(evidence["trajectory_ids"]) & set(result.fixed)
    assert any(f"+- {FACT}" in change for change in built.changes)  # the stored diff
    failures, successes = improvement(
        f"harness (bootstrap, trained on {len(evidence['trajectory_ids'])} cases)", result
    )
    assert failures.n_baseline == 8 and successes.n_baseline == 8
    assert failures.baseline_mean == 0.0 and failures.candidate_mean == 1.0
    assert len(result.fixed) == 8
    assert successes.candidate_mean >= successes.baseline_mean - GateConfig().tolerance
    assert result.broken == [] and result.verdict is Verdict.PASS, result.reason
