"""The memory operator on a real registry (SQLite and PostgreSQL): corrections recorded as
the gateway records them become scoped, sourced memory items of a candidate version."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest

from activities.evidence import read_window
from activities.operators import memory_operator
from atdp import utcnow
from evolution.analysis import measure_window
from evolution.decision import Action, DecisionRecord, PolicyConfig, decide
from evolution.memory.distil import FactRelation, fact_text, relation
from evolution.operators import Candidate, OperatorError
from evolution.window import FailureCluster, FailureKind, WindowSpec
from registry import (
    MemoryStatus,
    current_aliases,
    get_memory_items,
    get_version,
    list_memory_items,
    transaction,
)
from registry.memory import list_agent_memory_items
from runtime.version.memory import MemoryIndex
from tests.evolution.window_helpers import (
    AGENT,
    Recorder,
    decision_for,
    failure_cluster,
    feedback,
    implicit_correction,
    store,
    trajectory,
    world,
)

HOUR = timedelta(hours=1)
MINUTE = timedelta(minutes=1)
REFUNDS = "days refund window"


class Traffic:
    """A window under construction: each correction in a session of its own by default."""

    def __init__(self, engine) -> None:
        self.engine, self.base, self.rec = engine, utcnow(), Recorder()
        self.trajectories, self.rewards = [], []
        self.offset = 50

    def _trajectory(self, tenant: str, session: str | None):
        self.offset -= 1
        found = trajectory(tenant, self.base - self.offset * MINUTE, session=session)
        self.trajectories.append(found)
        return found

    def next_turn(self, tenant: str, text: str, *, session: str | None = None):
        """An answer the user corrects in the next turn: returns the user's message."""
        t = self._trajectory(tenant, session)
        call = self.rec.llm_call(t)
        fix = self.rec.user_message(t, text, parent=call)
        self.rec.llm_call(t)
        self.rewards.append(implicit_correction(t, call))
        return fix

    def explicit(self, tenant: str, correction: str, *, session: str | None = None):
        """An answer corrected through /v1/feedback: returns the corrected llm_call."""
        t = self._trajectory(tenant, session)
        call = self.rec.llm_call(t)
        self.rewards.extend(feedback(t, call, thumbs="down", correction=correction))
        return call

    def store(self) -> WindowSpec:
        store(self.engine, self.trajectories, self.rec.events, self.rewards)
        self.trajectories, self.rec.events, self.rewards = [], [], []
        return WindowSpec(agent=AGENT, since=self.base - HOUR, until=self.base)


def decision(window: WindowSpec, target: FailureCluster | None = None) -> DecisionRecord:
    return decision_for(window, Action.MEMORY, target)


def missing_fact(key: str) -> FailureCluster:
    return failure_cluster(FailureKind.MISSING_FACT, key)


def propose(engine, window: WindowSpec, target: FailureCluster | None = None) -> Candidate:
    with transaction(engine) as session:
        parent = get_version(session, current_aliases(session, AGENT).stable)
        return memory_operator().run(session, parent, decision(window, target), window)


def items(engine) -> dict[str, object]:
    with transaction(engine) as session:
        return {item.content: item for item in list_agent_memory_items(session, AGENT)}


def test_corrections_become_a_tenant_fact_with_provenance(engine) -> None:
    world(engine)
    traffic = Traffic(engine)
    fix = traffic.next_turn("acme", "No, the refund window is 30 days, not 14.")
    corrected = traffic.explicit("acme", "The refund window is 30 days.")
    traffic.next_turn("acme", "Actually, the Berlin warehouse closes at 6pm on Fridays")
    window = traffic.store()
    with transaction(engine) as session:
        policy = PolicyConfig(min_trajectories=1, min_cluster_trajectories=1)
        chosen = decide(measure_window(read_window(session, window)), policy, force=Action.MEMORY)
        parent = get_version(session, current_aliases(session, AGENT).stable)
    assert chosen.target is not None and chosen.target.key == REFUNDS

    candidate = propose(engine, window, chosen.target)

    stored = items(engine)
    assert list(stored) == ["The refund window is 30 days, not 14."]  # only the target topic
    fact = stored["The refund window is 30 days, not 14."]
    assert (fact.tenant, fact.status, fact.kind.value) == ("acme", MemoryStatus.ACTIVE, "fact")
    assert fact.provenance == [str(fix.id), str(corrected.id)]
    assert fact.confidence == 0.75  # two independent sessions
    assert candidate.spec.memory.item_ids == [str(fact.id)]
    assert candidate.spec.harness == parent.spec.harness
    assert candidate.spec.model == parent.spec.model
    assert candidate.changes == [
        "added fact (tenant acme, 2 sessions): The refund window is 30 days, not 14."
    ]
    assert candidate.evidence["source_event_ids"] == [str(fix.id), str(corrected.id)]
    assert (candidate.evidence["corrections"], candidate.evidence["sessions"]) == (2, 2)
    assert "1 fact(s) added" in candidate.summary


def test_a_fact_from_several_tenants_is_agent_wide_and_merges_later(engine) -> None:
    world(engine)
    traffic = Traffic(engine)
    first = traffic.next_turn("acme", "No, the refund window is 30 days.")
    second = traffic.next_turn("globex", "Actually the refund window is 30 days, not 14")
    propose(engine, traffic.store())
    (fact,) = items(engine).values()
    assert fact.tenant is None and fact.confidence == 0.75
    assert fact.provenance == [str(first.id), str(second.id)]

    traffic.base += HOUR  # a later window: the same fact again, in other words
    third = traffic.next_turn("initech", "no, the refund window is 30 days")
    candidate = propose(engine, traffic.store(), missing_fact(REFUNDS))

    (merged,) = items(engine).values()  # no second item
    assert merged.id == fact.id and merged.content == fact.content
    assert merged.provenance == [str(first.id), str(second.id), str(third.id)]
    assert merged.confidence == 0.875
    assert candidate.spec.memory.item_ids == [str(fact.id)]
    assert candidate.changes[0].startswith("reinforced fact (all tenants, 1 session)")


def test_a_contradiction_is_flagged_and_left_out(engine) -> None:
    world(engine)
    traffic = Traffic(engine)
    traffic.next_turn("acme", "No, returns are accepted within 30 days.")
    propose(engine, traffic.store())
    known = items(engine)["Returns are accepted within 30 days."]

    traffic.base += HOUR
    traffic.next_turn("acme", "Wrong: returns are accepted within 14 days.")
    traffic.next_turn("acme", "Actually the Berlin warehouse closes at 6pm on Fridays")
    # Two new facts that contradict each other: neither may be served.
    traffic.next_turn("acme", "No, the Paris office opens at 9am.")
    traffic.next_turn("acme", "No, the Paris office opens at 10am.")
    window = traffic.store()
    candidate = propose(engine, window)

    stored = items(engine)
    late = stored["Returns are accepted within 14 days."]
    assert (late.status, late.conflicts_with) == (MemoryStatus.CONFLICT, known.id)
    assert stored["Returns are accepted within 30 days."].status is MemoryStatus.ACTIVE
    nine, ten = stored["The Paris office opens at 9am."], stored["The Paris office opens at 10am."]
    assert (nine.status, ten.status) == (MemoryStatus.CONFLICT, MemoryStatus.CONFLICT)
    assert (nine.conflicts_with, ten.conflicts_with) == (ten.id, nine.id)
    warehouse = stored["The Berlin warehouse closes at 6pm on Fridays."]
    assert candidate.spec.memory.item_ids == [str(warehouse.id)]
    conflicts = [change for change in candidate.changes if change.startswith("conflict")]
    assert len(conflicts) == 3
    assert f"contradicts 'Returns are accepted within 30 days.' (item {known.id})" in conflicts[0]
    assert "3 conflict(s) left out" in candidate.summary

    # Run again on the same window for the Paris topic alone: nothing can be served.
    with pytest.raises(OperatorError, match="nothing to add"):
        propose(engine, window, missing_fact("office opens paris"))
    assert len(items(engine)) == 5


def test_tenant_memory_is_never_retrieved_for_another_tenant(engine) -> None:
    world(engine)
    traffic = Traffic(engine)
    traffic.next_turn("acme", "No, the refund window is 30 days.")
    traffic.next_turn("globex", "No, the refund window is 14 days.")  # its own policy
    traffic.next_turn("acme", "Actually the Berlin warehouse closes at 6pm on Fridays")
    candidate = propose(engine, traffic.store())
    stored = items(engine)
    acme_refund = stored["The refund window is 30 days."]
    globex_refund = stored["The refund window is 14 days."]
    assert (acme_refund.tenant, globex_refund.tenant) == ("acme", "globex")
    assert {acme_refund.status, globex_refund.status} == {MemoryStatus.ACTIVE}  # no overlap
    ids = [uuid.UUID(item_id) for item_id in candidate.spec.memory.item_ids]
    assert len(ids) == 3

    def retrieve(tenant: str, query: str) -> list[str]:
        with transaction(engine) as session:
            index = MemoryIndex(get_memory_items(session, AGENT, tenant, ids))
        return [hit.item.content for hit in index.search(query, k=3)]

    assert retrieve("acme", "How long is the refund window?")[0] == acme_refund.content
    assert retrieve("globex", "How long is the refund window?") == [globex_refund.content]
    assert retrieve("globex", "When does the Berlin warehouse close?") == []
    assert retrieve("initech", "refund window Berlin warehouse") == []
    with transaction(engine) as session:
        visible = {item.content for item in list_memory_items(session, AGENT, "globex")}
    assert visible == {globex_refund.content}


def test_running_twice_writes_nothing_new_and_proposes_the_same_spec(engine) -> None:
    world(engine)
    traffic = Traffic(engine)
    traffic.next_turn("acme", "No, the refund window is 30 days.", session="shared")
    traffic.explicit("acme", "The refund window is 30 days", session="shared")
    traffic.next_turn("globex", "No, returns are accepted within 30 days.")
    traffic.next_turn("globex", "No, returns are accepted within 14 days.")
    window = traffic.store()

    first = propose(engine, window)
    before = items(engine)
    second = propose(engine, window)

    assert second.spec == first.spec
    assert second.spec.content_hash() == first.spec.content_hash()
    assert items(engine) == before  # same rows, same provenance and confidence
    assert before["The refund window is 30 days."].confidence == 0.5  # one session, twice


def test_no_fact_for_the_target_is_an_operator_error(engine) -> None:
    world(engine)
    traffic = Traffic(engine)
    empty = traffic.store()
    with pytest.raises(OperatorError, match="holds no fact"):
        propose(engine, empty, missing_fact(REFUNDS))

    traffic.next_turn("acme", "No, that's wrong. What is the refund window?")
    with pytest.raises(OperatorError, match="holds no fact users supplied;"):
        propose(engine, traffic.store())

    traffic.next_turn("acme", "Actually the Berlin warehouse closes at 6pm on Fridays")
    window = traffic.store()
    with pytest.raises(OperatorError, match="holds no fact users supplied on 'days refund"):
        propose(engine, window, missing_fact(REFUNDS))
    tool = missing_fact("lookup.order_id:validation_error").model_copy(
        update={"kind": FailureKind.TOOL_ARGUMENT}
    )
    with pytest.raises(OperatorError, match="tool_argument"):
        propose(engine, window, tool)
    assert items(engine) == {}


@pytest.mark.parametrize(
    ("text", "fact"),
    [
        ("No, the refund window is 30 days, not 14.", "The refund window is 30 days, not 14."),
        ("Hi! Actually, I said that the shop opens at 9.", "The shop opens at 9."),
        ("No returns are accepted after 30 days", "No returns are accepted after 30 days."),
        ("That's not right. Can you check the refund window?", None),
        ("nope", None),
    ],
)
def test_fact_text_keeps_only_the_fact(text: str, fact: str | None) -> None:
    assert fact_text(text) == fact


def test_relation_compares_asserted_values() -> None:
    assert relation("The refund window is 30 days, not 14.", "the refund window is 30 days") == (
        FactRelation.SAME
    )
    assert relation("The refund window is 30 days.", "The refund window is 14 days.") == (
        FactRelation.CONFLICT
    )
    assert relation("The refund window is 30 days.", "The warehouse closes at 6pm.") == (
        FactRelation.UNRELATED
    )
