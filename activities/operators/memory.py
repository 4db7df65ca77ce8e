"""The memory operator as the build activity runs it: the window's correction records and
the agent's items read from the registry, `evolution.memory.operator.plan_memory`, then
the plan stored (items reinforced, added, flagged) and its candidate returned."""

from __future__ import annotations

from functools import partial

from activities.evidence import correction_records
from activities.operators.operator import Operator
from evolution.corrections import CorrectionJudge
from evolution.decision import DecisionRecord
from evolution.memory.distil import DistilledFact
from evolution.memory.operator import (
    FactOutcome,
    MemoryEvidence,
    MemoryPlan,
    ResolvedFact,
    memory_candidate,
    plan_memory,
    reinforcement,
)
from evolution.operators import Candidate
from evolution.window import WindowSpec
from registry import AgentVersion, Session
from registry.memory import (
    MemoryItem,
    MemoryKind,
    MemoryStatus,
    add_memory_item,
    list_agent_memory_items,
    reinforce_memory_item,
    set_memory_status,
)

__all__ = ["memory_operator", "read_memory", "write_memory"]


def read_memory(
    session: Session, parent: AgentVersion, decision: DecisionRecord, window: WindowSpec
) -> MemoryEvidence:
    """The evidence: the window's correction records and every item of the agent."""
    records = correction_records(session, window)
    return MemoryEvidence(records, list_agent_memory_items(session, parent.agent))


def write_memory(session: Session, plan: MemoryPlan) -> Candidate:
    """Store the plan's items and return the candidate whose snapshot serves them.

    Raises:
        OperatorError: every fact is already in the parent or in conflict.
    """
    return memory_candidate(plan, _reconcile(session, plan))


def memory_operator(judge: CorrectionJudge | None = None) -> Operator:
    """The memory operator; `judge` reads corrections as the window analysis did."""
    return Operator(read=read_memory, propose=partial(plan_memory, judge=judge), write=write_memory)


def _reconcile(session: Session, plan: MemoryPlan) -> list[ResolvedFact]:
    """Write the plan: reinforce, add, pair conflicts; resolved in the facts' order."""
    agent, facts = plan.parent.agent, plan.facts
    resolved = {i: _reinforce(session, item, facts[i]) for i, item in plan.known.items()}
    for index, rival in plan.rivals.items():
        contested = plan.partners[index] is not None
        resolved[index] = _add(session, agent, facts[index], rival, contested)
    for index, partner in plan.partners.items():
        if partner is not None and resolved[index].conflicts_with is None:
            resolved[index] = _pair_conflict(session, resolved[index], resolved[partner].item)
    return [resolved[i] for i in range(len(facts))]


def _reinforce(session: Session, item: MemoryItem, fact: DistilledFact) -> ResolvedFact:
    """Merge the fact's new sources into the item."""
    found = reinforcement(item, fact)
    if found is not None:
        sources, confidence = found
        item = reinforce_memory_item(session, item.id, sources, confidence)
    return ResolvedFact(fact, item, FactOutcome.REINFORCED)


def _add(
    session: Session, agent: str, fact: DistilledFact, rival: MemoryItem | None, contested: bool
) -> ResolvedFact:
    conflicted = rival is not None or contested
    item = add_memory_item(
        session,
        agent,
        fact.tenant,
        MemoryKind.FACT,
        fact.content,
        provenance=fact.sources,
        confidence=fact.confidence,
        status=MemoryStatus.CONFLICT if conflicted else MemoryStatus.ACTIVE,
        conflicts_with=rival.id if rival else None,
    )
    outcome = FactOutcome.CONFLICT if conflicted else FactOutcome.ADDED
    return ResolvedFact(fact, item, outcome, rival)


def _pair_conflict(session: Session, resolved: ResolvedFact, partner: MemoryItem) -> ResolvedFact:
    item = set_memory_status(
        session, resolved.item.id, MemoryStatus.CONFLICT, conflicts_with=partner.id
    )
    return ResolvedFact(resolved.fact, item, FactOutcome.CONFLICT, partner)
