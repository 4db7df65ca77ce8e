"""An operator runs in the activity's three steps: its evidence is read in one transaction,
it decides with none open (a DSPy optimisation can take hours), and what it proposes is
written in a transaction of its own."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

import pytest
from temporalio.exceptions import ApplicationError

import activities.evolution
from activities.evolution import EvolutionActivities
from activities.models import CandidateRequest
from activities.operators import Operator
from atdp import utcnow
from evolution.decision import Action
from evolution.operators import Candidate, OperatorError
from evolution.window import WindowSpec
from registry import get_version, transaction
from tests.evolution.window_helpers import AGENT, decision_for, world

WINDOW = WindowSpec(agent=AGENT, since=utcnow() - timedelta(hours=1))


@pytest.fixture
def open_transactions(monkeypatch) -> list[int]:
    """How many transactions the activity holds open, read when an operator step runs."""
    depth = [0]

    @contextmanager
    def counted(engine) -> Iterator:
        with transaction(engine) as session:
            depth[0] += 1
            try:
                yield session
            finally:
                depth[0] -= 1

    monkeypatch.setattr(activities.evolution, "transaction", counted)
    return depth


def _request(parent: str) -> CandidateRequest:
    decision = decision_for(WINDOW, Action.MEMORY)
    return CandidateRequest(
        evolution_id="e-1", agent=AGENT, parent_version=parent, decision=decision, window=WINDOW
    )


def test_the_operator_decides_with_no_transaction_open(engine, open_transactions) -> None:
    parent = world(engine)
    steps: list[tuple[str, int]] = []

    def read(session, version, decision, window) -> str:
        steps.append(("read", open_transactions[0]))
        return f"evidence for {version.id}"

    def propose(evidence, version, decision) -> str:
        steps.append(("propose", open_transactions[0]))
        return evidence

    def write(session, proposal) -> Candidate:
        steps.append(("write", open_transactions[0]))
        return Candidate(spec=get_version(session, parent).spec, summary=proposal)

    built = EvolutionActivities(engine, None, replay=None)._run_operator(
        Operator(read=read, propose=propose, write=write), _request(parent)
    )
    assert steps == [("read", 1), ("propose", 0), ("write", 1)]
    assert built.summary == f"evidence for {parent}"


def test_nothing_to_propose_is_not_retried(engine) -> None:
    parent = world(engine)

    def propose(evidence, version, decision) -> Candidate:
        raise OperatorError("nothing here")

    operator = Operator(read=lambda *_: None, propose=propose)
    with pytest.raises(ApplicationError) as raised:
        EvolutionActivities(engine, None, replay=None)._run_operator(operator, _request(parent))
    assert raised.value.type == "NothingToPropose" and raised.value.non_retryable
