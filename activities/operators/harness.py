"""The harness operator as the build activity runs it: the agent's settings, the window's
recorded cases and corrections and its evaluation set's cases, read from the registry, then
`evolution.harness.propose_harness` (DSPy, with the task LM the activity makes)."""

from __future__ import annotations

from typing import Any

from activities.evidence import cases_of, correction_records
from activities.operators.operator import Operator
from evolution.decision import DecisionRecord
from evolution.harness import (
    HarnessCase,
    HarnessConfig,
    HarnessEvidence,
    LMFactory,
    harness_cases,
    harness_config,
    propose_harness,
)
from evolution.harness.operator import Optimizer
from evolution.operators import Candidate
from evolution.settings import EvolutionSettings
from evolution.window import WindowSpec
from registry import (
    AgentVersion,
    EvaluationSet,
    Session,
    evaluation_set_events,
    get_agent,
    latest_evaluation_set,
)

__all__ = ["make_harness_operator", "read_harness_cases"]


def read_harness_cases(
    session: Session,
    window: WindowSpec,
    *,
    per_kind: int = 20,
    evaluation: EvaluationSet | None = None,
) -> list[HarnessCase]:
    """The window's cases to learn from (`evolution.harness.harness_cases`): up to
    `per_kind` past failures and known successes, then the evaluation set's."""
    records = correction_records(session, window)
    corrections = records.corrections()
    events = evaluation_set_events(session, evaluation) if evaluation is not None else None
    return harness_cases(
        cases_of(session, records, corrections, per_kind=per_kind),
        corrections,
        evaluation=evaluation,
        evaluation_events=events,
    )


def make_harness_operator(
    lm_factory: LMFactory, *, optimizer: Optimizer = "bootstrap", **settings: Any
) -> Operator:
    """The harness operator: it reads the window's cases, then `propose_harness` optimises.

    Args:
        lm_factory: version id -> task LM. The program renders the harness itself, so the
            LM must reach the version's upstream without the gateway re-applying a harness:
            e.g. `dspy.LM("openai/<agent>", api_base=<gateway>/v1, api_key=<tenant key>,
            cache=False, extra_headers={"X-Evoplane-Traffic": "evaluation",
            "X-Evoplane-Version": <a harness-less sibling of version id>})`.
        settings: the other `HarnessConfig` fields (proposer_lm for mipro and gepa).
    """
    config = HarnessConfig(optimizer=optimizer, **settings)

    def read(
        session: Session, parent: AgentVersion, decision: DecisionRecord, window: WindowSpec
    ) -> HarnessEvidence:
        agent = EvolutionSettings.of(get_agent(session, parent.agent).settings)
        chosen = harness_config(config, agent)
        use = agent.evaluation
        held = latest_evaluation_set(session, parent.agent, use.name) if use.harness else None
        cases = read_harness_cases(session, window, per_kind=chosen.per_kind, evaluation=held)
        return HarnessEvidence(cases, chosen)

    def propose(
        evidence: HarnessEvidence, parent: AgentVersion, decision: DecisionRecord
    ) -> Candidate:
        return propose_harness(
            evidence.cases, parent, decision, lm_factory=lm_factory, config=evidence.config
        )

    return Operator(read=read, propose=propose)
