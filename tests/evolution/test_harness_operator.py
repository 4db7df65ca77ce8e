"""The harness operator with a real DSPy optimiser, the real dspy.LM client and a real
OpenAI-compatible upstream on loopback, on a window recorded in a real registry.

The scripted upstream echoes the last user message and the system prompt, so an answer
holds a fact exactly when the harness puts it into the system prompt: the metric can tell
harnesses apart without any model.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import timedelta

import pytest
import sqlalchemy as sa

from activities.operators import make_harness_operator, read_harness_cases
from atdp import ChatMessage, MessageAction, Observation, OutcomeStatus, utcnow
from evolution.decision import Action, DecisionRecord
from evolution.harness import HarnessCase, HarnessConfig, case_score, propose_harness
from evolution.harness.program import render_request
from evolution.operators import OperatorError
from evolution.window import FailureKind, WindowSpec
from registry import (
    create_db_engine,
    current_aliases,
    get_version,
    set_agent_settings,
    transaction,
    upgrade,
)
from tests.evolution.window_helpers import (
    AGENT,
    Recorder,
    decision_for,
    failure_cluster,
    feedback,
    store,
    trajectory,
    world,
)
from tests.support.upstream import ScriptedUpstream

dspy = pytest.importorskip("dspy")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

REFUNDS = "How long is the refund window?"
HOURS = "What are your opening hours?"
FACT = "The refund window is 30 days."


@pytest.fixture
def registry(tmp_path) -> Iterator[sa.Engine]:
    """SQLite is enough: the operator only reads the window through the registry's API."""
    engine = create_db_engine(f"sqlite:///{tmp_path / 'registry.db'}")
    upgrade(engine)
    yield engine
    engine.dispose()


@pytest.fixture(scope="module")
def upstream() -> Iterator[ScriptedUpstream]:
    with ScriptedUpstream() as server:
        yield server


def lm_factory(upstream: ScriptedUpstream):
    """What an activity wires to the gateway; here the upstream itself, through dspy.LM."""

    def factory(version_id: str):
        return dspy.LM(
            "openai/scripted-model",
            api_base=upstream.base_url,
            api_key="test-key",
            cache=False,
            extra_headers={"X-Evoplane-Traffic": "evaluation", "X-Evoplane-Version": version_id},
        )

    return factory


def answered(rec: Recorder, t, question: str, answer: str):
    """An llm_call as the gateway records it: the agent's request and the model's answer."""
    call = rec.llm_call(t)
    recorded = call.model_copy(
        update={
            "observation": Observation(messages=[ChatMessage(role="user", content=question)]),
            "action": MessageAction(content=answer),
        }
    )
    rec.events[rec.events.index(call)] = recorded
    return recorded


def recorded_window(engine) -> WindowSpec:
    """Two refund questions users corrected, two opening-hours answers that worked."""
    base, rec, trajectories, rewards = utcnow(), Recorder(), [], []
    for minutes, tenant in ((40, "acme"), (30, "globex")):
        t = trajectory(tenant, base - timedelta(minutes=minutes), status=OutcomeStatus.FAILURE)
        call = answered(rec, t, REFUNDS, f"echo: {REFUNDS} (system: Be helpful.)")
        trajectories.append(t)
        rewards += feedback(t, call, thumbs="down", correction=FACT)
    for minutes in (20, 10):
        t = trajectory("acme", base - timedelta(minutes=minutes), status=OutcomeStatus.SUCCESS)
        answered(rec, t, HOURS, f"echo: {HOURS} (system: Be helpful.)")
        trajectories.append(t)
    store(engine, trajectories, rec.events, rewards)
    return WindowSpec(agent=AGENT, since=base - timedelta(hours=1), until=base)


def decision(window: WindowSpec) -> DecisionRecord:
    target = failure_cluster(
        FailureKind.INSTRUCTION,
        "incomplete_answer",
        count=2,
        trajectories=2,
        share=0.5,
        tenants=["acme", "globex"],
    )
    return decision_for(window, Action.HARNESS, target)


def stable(engine):
    with transaction(engine) as session:
        return get_version(session, current_aliases(session, AGENT).stable)


def test_cases_carry_the_corrected_facts(registry) -> None:
    world(registry)
    window = recorded_window(registry)
    with transaction(registry) as session:
        cases = read_harness_cases(session, window)
    failures = [case for case in cases if not case.succeeded]
    assert len(failures) == 2 and all(case.required_facts == [FACT] for case in failures)
    assert {case.messages[-1]["content"] for case in cases} == {REFUNDS, HOURS}


def test_metric_rewards_facts_and_reproduced_successes() -> None:
    failure = HarnessCase("t1", [], "echo: q", succeeded=False, required_facts=[FACT])
    assert case_score(failure, f"sure. {FACT.lower()}") == 1.0
    assert case_score(failure, "echo: q") == 0.0
    unguided = HarnessCase("t2", [], "echo: q", succeeded=False)
    assert case_score(unguided, "ECHO: q") == 0.0  # the same failed answer again
    assert case_score(unguided, "a different answer") == 1.0
    success = HarnessCase("t3", [], "echo: q (system: Be helpful.)", succeeded=True)
    assert case_score(success, "echo: q (system: Be helpful. More rules.)") == 1.0
    assert case_score(success, "echo: q") == 2 / 5  # echo, q of echo, q, system, be, helpful


def test_render_matches_the_gateway_layout() -> None:
    demo = {"messages": [{"role": "user", "content": "hi"}], "answer": "hello"}
    own = [{"role": "system", "content": "Agent prompt."}, {"role": "user", "content": "q"}]
    rendered = render_request("Be brief.", [demo], own, template="Rules: {instructions}")
    assert rendered == [
        {"role": "system", "content": "Rules: Be brief.\n\nAgent prompt."},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
        {"role": "user", "content": "q"},
    ]


@pytest.mark.parametrize("optimizer", ["bootstrap", "random_search"])
def test_optimised_harness_fixes_failures_and_keeps_successes(
    registry, upstream: ScriptedUpstream, optimizer: str
) -> None:
    world(registry)
    window = recorded_window(registry)
    parent = stable(registry)
    before_spec = parent.spec.model_dump()
    upstream.reset()
    operator = make_harness_operator(
        lm_factory(upstream), optimizer=optimizer, candidate_programs=2
    )
    with transaction(registry) as session:
        candidate = operator.run(session, parent, decision(window), window)

    evidence = candidate.evidence
    print(
        f"\n{optimizer}: metric {evidence['before']:.3f} -> {evidence['after']:.3f}; "
        f"failures {evidence['failures']}, successes {evidence['successes']}"
    )
    assert evidence["after"] > evidence["before"]
    assert evidence["failures"]["after"] == 1.0 > evidence["failures"]["before"]
    assert evidence["successes"]["after"] >= evidence["successes"]["before"]
    harness = candidate.spec.harness
    assert harness != parent.spec.harness and FACT in harness.instructions
    assert harness.instructions.startswith("Be helpful.")
    diff = next(change for change in candidate.changes if change.startswith("---"))
    assert f"+- {FACT}" in diff and "+++ instructions (candidate)" in diff
    assert all(demo.messages[-1].role == "assistant" for demo in harness.demos)
    # Only the harness changed, and the parent is untouched.
    assert parent.spec.model_dump() == before_spec
    assert candidate.spec.model_copy(update={"harness": parent.spec.harness}) == parent.spec
    # Every call went through dspy.LM to the upstream, marked as evaluation traffic.
    assert upstream.requests and all(
        headers.get("x-evoplane-traffic") == "evaluation" for headers in upstream.headers
    )
    assert {h.get("x-evoplane-version") for h in upstream.headers} == {parent.id}


def test_the_agents_settings_can_limit_the_operator_to_instructions(registry, upstream) -> None:
    world(registry)
    window = recorded_window(registry)
    parent = stable(registry)
    operator = make_harness_operator(lm_factory(upstream))
    with transaction(registry) as session:
        worker_default = operator.run(session, parent, decision(window), window).spec.harness
    with transaction(registry) as session:
        set_agent_settings(
            session, AGENT, {"harness": {"max_bootstrapped_demos": 0, "max_labeled_demos": 0}}
        )
    with transaction(registry) as session:
        own = operator.run(session, parent, decision(window), window).spec.harness
    assert worker_default.demos, "the worker's default adds demos"
    assert own.demos == [] and FACT in own.instructions


def test_every_harness_is_scored_on_the_same_seeds(registry, upstream) -> None:
    """Each case is answered `samples` times per harness, with the seeds every harness
    gets: the comparison of parent and candidate is paired, not two coin flips."""
    world(registry)
    window = recorded_window(registry)
    parent = stable(registry)
    upstream.reset()
    config = HarnessConfig(samples=3, max_bootstrapped_demos=0, max_labeled_demos=0)
    with transaction(registry) as session:
        cases = read_harness_cases(session, window, per_kind=config.per_kind)
    candidate = propose_harness(
        cases, parent, decision(window), lm_factory=lm_factory(upstream), config=config
    )
    assert FACT in candidate.spec.harness.instructions
    seeds: dict[str, list[int]] = {}
    for request in upstream.requests:
        system = request["messages"][0]["content"]
        seeds.setdefault(system, []).append(request["seed"])
    # The parent's instructions and the variant with the lesson: each scored once, on seeds
    # 0..11 (4 cases x 3 answers). The parent's instructions compiled without demos are the
    # parent, so that variant is not answered again.
    assert len(seeds) == 2, seeds
    for given in seeds.values():
        assert sorted(given) == list(range(12)), seeds


def test_the_candidate_is_a_pure_function_of_the_window(registry, upstream) -> None:
    world(registry)
    window = recorded_window(registry)
    parent = stable(registry)
    proposals = []
    for _ in range(2):
        with transaction(registry) as session:
            cases = read_harness_cases(session, window)
        proposals.append(
            propose_harness(cases, parent, decision(window), lm_factory=lm_factory(upstream))
        )
    first, second = proposals
    assert first.spec.content_hash() == second.spec.content_hash()
    assert first.changes == second.changes


def test_empty_window_is_an_operator_error(registry, upstream) -> None:
    world(registry)
    window = WindowSpec(agent=AGENT, since=utcnow() - timedelta(hours=1))
    operator = make_harness_operator(lm_factory(upstream))
    with transaction(registry) as session, pytest.raises(OperatorError, match="no failure"):
        operator.run(session, stable(registry), decision(window), window)


@pytest.mark.parametrize("optimizer", ["mipro", "gepa"])
def test_proposer_led_optimisers_need_a_proposer(registry, upstream, optimizer) -> None:
    world(registry)
    window = recorded_window(registry)
    operator = make_harness_operator(lm_factory(upstream), optimizer=optimizer)
    with transaction(registry) as session, pytest.raises(OperatorError, match="proposer LM"):
        operator.run(session, stable(registry), decision(window), window)


def test_gepa_rewrites_instructions_with_a_reflection_lm(registry, upstream) -> None:
    """DSPy's own DummyLM stands in for the reflection LM; the task LM is still the upstream."""
    from dspy.utils.dummies import DummyLM

    world(registry)
    window = recorded_window(registry)
    parent = stable(registry)
    rewritten = f"Be helpful.\n{FACT}"
    answers = [{"new_instruction": rewritten}] * 20
    reflection = DummyLM(answers, adapter=dspy.JSONAdapter())  # GEPA asks for JSON
    operator = make_harness_operator(
        lm_factory(upstream), optimizer="gepa", proposer_lm=reflection, metric_calls=16
    )
    with transaction(registry) as session:
        candidate = operator.run(session, parent, decision(window), window)
    print(f"\ngepa: metric {candidate.evidence['before']} -> {candidate.evidence['after']}")
    assert candidate.spec.harness.instructions == rewritten
    assert candidate.evidence["after"] > candidate.evidence["before"]
    assert any(f"+{FACT}" in change for change in candidate.changes)


def test_mipro_proposes_instructions_with_a_proposer_lm(registry, upstream) -> None:
    """MIPROv2 (with optuna) proposes through DSPy's DummyLM; tasks still hit the upstream."""
    from dspy.utils.dummies import DummyLM

    world(registry)
    window = recorded_window(registry)
    parent = stable(registry)
    rewritten = f"Be helpful.\n{FACT}"
    proposal = {
        "proposed_instruction": rewritten,
        "summary": "customers ask about refunds and opening hours",
        "observations": "refund questions were corrected by users",
        "program_description": "answers support questions",
        "module_description": "answers the customer's last message",
    }
    operator = make_harness_operator(
        lm_factory(upstream), optimizer="mipro", proposer_lm=DummyLM([proposal] * 200)
    )
    with transaction(registry) as session:
        candidate = operator.run(session, parent, decision(window), window)
    print(f"\nmipro: metric {candidate.evidence['before']} -> {candidate.evidence['after']}")
    assert candidate.spec.harness.instructions == rewritten
    assert candidate.evidence["after"] > candidate.evidence["before"]
