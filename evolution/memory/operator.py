"""The memory operator: facts users had to supply become memory items of a candidate version.

It reads the missing-fact corrections of a window that the decision's cluster stands for
(`evolution.corrections`: users' next turns after a wrong answer, correction boxes, critiques),
distils them into facts (`evolution.memory.distil`), and reconciles
them with the agent's existing items: a fact already known is reinforced (more provenance,
higher confidence), a new one is added, and one that contradicts a fact its tenants can
already see is stored flagged as a conflict and left out of the candidate for a person.
Running it twice on one window writes nothing new and proposes the same spec, because
activities retry. It runs in three steps (`activities.operators.memory`): the activity
reads the window and the agent's items (`MemoryEvidence`), `plan_memory` decides what each
fact becomes, and the activity stores that (`ResolvedFact`s, `reinforcement`) and returns
`memory_candidate`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from evolution.corrections import (
    CorrectionJudge,
    CorrectionKind,
    CorrectionRecords,
    UserCorrection,
    correction_groups,
)
from evolution.decision import DecisionRecord
from evolution.memory.distil import (
    DistilledFact,
    FactRelation,
    distil_facts,
    reinforced_confidence,
    relation,
    scopes_overlap,
)
from evolution.operators import Candidate, OperatorError
from evolution.window import FailureCluster, FailureKind
from registry import AgentVersion, MemoryItem, MemoryStatus

__all__ = [
    "FactOutcome",
    "MemoryEvidence",
    "MemoryPlan",
    "ResolvedFact",
    "memory_candidate",
    "plan_memory",
    "reinforcement",
]


class FactOutcome(StrEnum):
    ADDED = "added"
    REINFORCED = "reinforced"  # an existing item states it; provenance merged
    CONFLICT = "conflict"  # contradicts an item its tenants can see; left out


@dataclass(frozen=True)
class ResolvedFact:
    """A distilled fact and the memory item it became."""

    fact: DistilledFact
    item: MemoryItem
    outcome: FactOutcome
    conflicts_with: MemoryItem | None = None


@dataclass(frozen=True)
class MemoryEvidence:
    """What the operator reads: the window's correction records and the agent's items."""

    records: CorrectionRecords
    existing: list[MemoryItem]


@dataclass(frozen=True)
class MemoryPlan:
    """What each distilled fact becomes, decided against the items read.

    Args:
        known: fact index -> the item that already states it (reinforced).
        rivals: new fact index -> a live item it contradicts, if any (it is added).
        partners: new fact index -> another new fact it contradicts, if any.
    """

    parent: AgentVersion
    wanted: str | None
    corrections: list[UserCorrection]
    facts: list[DistilledFact]
    known: dict[int, MemoryItem]
    rivals: dict[int, MemoryItem | None]
    partners: dict[int, int | None]


def plan_memory(
    evidence: MemoryEvidence,
    parent: AgentVersion,
    decision: DecisionRecord,
    *,
    judge: CorrectionJudge | None = None,
) -> MemoryPlan:
    """Which facts users supplied in the window, and what each becomes among the items.

    `judge`: the agent's judge model, when the window analysis read corrections with it,
    so the cluster it chose is found again.

    Raises:
        OperatorError: the decision targets no missing fact, the window holds no fact for
            its target.
    """
    wanted = _topic(decision)
    found = evidence.records.corrections(judge)
    corrections = _target_corrections(found, decision.target)
    facts = distil_facts(corrections)
    if not facts:
        raise OperatorError(
            f"the window of {parent.agent} holds no fact users supplied"
            + (f" on {wanted!r}" if wanted else "")
            + "; widen the window or choose another action"
        )
    return _plan(parent, wanted, corrections, facts, evidence.existing)


def _topic(decision: DecisionRecord) -> str | None:
    """The missing-fact topic the decision targets; None (every topic) without a target."""
    target = decision.target
    if target is None:
        return None
    if target.kind is not FailureKind.MISSING_FACT:
        raise OperatorError(
            f"the memory operator adds missing facts; the decision targets a "
            f"{target.kind.value} failure ({target.key}): choose the harness or tool-schema "
            "operator"
        )
    return target.key


# --- corrections in the window -----------------------------------------------------------


def _target_corrections(
    corrections: Sequence[UserCorrection], target: FailureCluster | None
) -> list[UserCorrection]:
    """The missing-fact corrections the decision's cluster stands for (all of them without
    a target): the group with its key, else the group holding most of its examples (the
    operator's window may hold a few sessions more than the analysis counted)."""
    facts = [c for c in corrections if c.kind is CorrectionKind.MISSING_FACT]
    if target is None:
        return facts
    groups = [g for g in correction_groups(facts) if g.kind is CorrectionKind.MISSING_FACT]
    exact = next((g for g in groups if g.key == target.key), None)
    if exact is not None:
        return exact.members
    examples = set(target.examples)
    best = max(groups, key=lambda g: len(examples & {c.text for c in g.members}), default=None)
    return best.members if best is not None and examples & {c.text for c in best.members} else []


# --- reconciling with the agent's items -------------------------------------------------


def _plan(
    parent: AgentVersion,
    wanted: str | None,
    corrections: list[UserCorrection],
    facts: list[DistilledFact],
    existing: list[MemoryItem],
) -> MemoryPlan:
    """Known facts are reinforced, new ones added; contradictions are flagged."""
    known = {i: item for i, fact in enumerate(facts) if (item := _known_item(existing, fact))}
    fresh = [i for i in range(len(facts)) if i not in known]
    return MemoryPlan(
        parent=parent,
        wanted=wanted,
        corrections=corrections,
        facts=facts,
        known=known,
        rivals={i: _conflicting_item(existing, facts[i]) for i in fresh},
        partners={i: _conflicting_fact(facts, i, fresh) for i in fresh},
    )


def _known_item(existing: Iterable[MemoryItem], fact: DistilledFact) -> MemoryItem | None:
    """An item stating this fact to every tenant that supplied it (same scope first)."""
    covering = [
        item
        for item in existing
        if (item.tenant is None or item.tenant == fact.tenant)
        and relation(item.content, fact.content) is FactRelation.SAME
    ]
    covering.sort(key=lambda item: item.tenant != fact.tenant)
    return covering[0] if covering else None


def _conflicting_item(existing: Iterable[MemoryItem], fact: DistilledFact) -> MemoryItem | None:
    """A live item that some tenant would see beside this fact and that contradicts it."""
    return next(
        (
            item
            for item in existing
            if item.status is not MemoryStatus.RETIRED
            and scopes_overlap(item.tenant, fact.tenant)
            and relation(item.content, fact.content) is FactRelation.CONFLICT
        ),
        None,
    )


def _conflicting_fact(
    facts: Sequence[DistilledFact], index: int, fresh: Sequence[int]
) -> int | None:
    """Another new fact of the window that some tenant would see beside this one."""
    fact = facts[index]
    return next(
        (
            other
            for other in fresh
            if other != index
            and scopes_overlap(facts[other].tenant, fact.tenant)
            and relation(facts[other].content, fact.content) is FactRelation.CONFLICT
        ),
        None,
    )


def reinforcement(item: MemoryItem, fact: DistilledFact) -> tuple[list[str], float] | None:
    """The sources `fact` adds to a known `item` (those it holds already count once) and
    the confidence they bring it; None when it adds none."""
    added = [c for c in fact.corrections if c.source not in item.provenance]
    if not added:
        return None
    sessions = len({(c.tenant, c.session) for c in added})
    return [c.source for c in added], reinforced_confidence(item.confidence, sessions)


# --- the candidate -----------------------------------------------------------------------


def memory_candidate(plan: MemoryPlan, resolved: Sequence[ResolvedFact]) -> Candidate:
    """The parent's spec with every active item the plan's facts resolved to, once stored.

    Items resolved on an earlier run count too, so a retried activity proposes the same spec.

    Raises:
        OperatorError: every fact is already in the parent or in conflict.
    """
    parent, wanted, corrections = plan.parent, plan.wanted, plan.corrections
    before = sorted(set(parent.spec.memory.item_ids))
    serving = [str(r.item.id) for r in resolved if r.item.status is MemoryStatus.ACTIVE]
    item_ids = sorted(set(before) | set(serving))
    if item_ids == before:
        raise OperatorError(
            f"nothing to add to {parent.id}'s memory: "
            + "; ".join(_change(r) for r in resolved)
            + ". Resolve the conflicts (set one item active) or wait for new evidence"
        )
    memory = parent.spec.memory.model_copy(update={"item_ids": item_ids})
    spec = parent.spec.model_copy(update={"memory": memory})
    return Candidate(
        spec=spec,
        summary=_summary(resolved, wanted),
        changes=[_change(r) for r in resolved],
        evidence=_evidence(wanted, corrections, resolved, len(item_ids) - len(before)),
    )


def _scope(tenant: str | None) -> str:
    return "all tenants" if tenant is None else f"tenant {tenant}"


def _change(resolved: ResolvedFact) -> str:
    item, sessions = resolved.item, resolved.fact.sessions
    where = f"({_scope(item.tenant)}, {sessions} session{'s' if sessions != 1 else ''})"
    if resolved.outcome is FactOutcome.ADDED:
        return f"added fact {where}: {item.content}"
    if resolved.outcome is FactOutcome.REINFORCED:
        state = "" if item.status is MemoryStatus.ACTIVE else f", still {item.status.value}"
        return f"reinforced fact {where}, confidence {item.confidence:.2f}{state}: {item.content}"
    rival = resolved.conflicts_with
    against = f" contradicts {rival.content!r} (item {rival.id})" if rival else ""
    return f"conflict {where}: {item.content!r}{against}; left out for a person to resolve"


def _summary(resolved: Sequence[ResolvedFact], wanted: str | None) -> str:
    counts = {o: sum(r.outcome is o for r in resolved) for o in FactOutcome}
    about = f" on {wanted!r}" if wanted else ""
    return (
        f"Memory{about}: {counts[FactOutcome.ADDED]} fact(s) added, "
        f"{counts[FactOutcome.REINFORCED]} reinforced, "
        f"{counts[FactOutcome.CONFLICT]} conflict(s) left out for review."
    )


def _evidence(
    wanted: str | None,
    corrections: Sequence[UserCorrection],
    resolved: Sequence[ResolvedFact],
    new_in_snapshot: int,
) -> dict:
    return {
        "target_topic": wanted,
        "corrections": len(corrections),
        "trajectories": len({c.trajectory_id for c in corrections}),
        "sessions": len({(c.tenant, c.session) for c in corrections}),
        "items_new_in_snapshot": new_in_snapshot,
        "source_event_ids": list(dict.fromkeys(s for r in resolved for s in r.fact.sources)),
        "facts": [_fact_evidence(r) for r in resolved],
    }


def _fact_evidence(resolved: ResolvedFact) -> dict:
    item = resolved.item
    return {
        "item_id": str(item.id),
        "outcome": resolved.outcome.value,
        "content": item.content,
        "tenant": item.tenant,
        "status": item.status.value,
        "confidence": item.confidence,
        "sessions": resolved.fact.sessions,
        "sources": resolved.fact.sources,
        "conflicts_with": str(item.conflicts_with) if item.conflicts_with else None,
    }
