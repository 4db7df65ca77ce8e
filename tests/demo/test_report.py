"""The demo's claims, read off its rows."""

from __future__ import annotations

import pytest

from evoplane.demo.report import facts
from evoplane.demo.reporting import EvolutionRow


def _promoted(before: float | None, after: float | None) -> EvolutionRow:
    return EvolutionRow(
        round="harness",
        drift="a new policy",
        expected="harness",
        evolution_id="evolution-1",
        action="harness",
        outcome="promoted",
        reward_before=before,
        reward_after=after,
    )


@pytest.mark.parametrize(
    ("before", "after", "shown", "detail"),
    [
        (0.818, 0.824, True, "0.818 -> 0.824 (+0.006)"),  # read as 0.82 -> 0.82 before
        (0.824, 0.818, False, "0.824 -> 0.818 (-0.006)"),
        (0.8, 0.8, False, "0.800 -> 0.800 (+0.000)"),
        (None, 0.8, False, "- -> 0.80"),
    ],
)
def test_a_promotion_claims_an_improvement_only_when_the_canary_measured_one(
    before, after, shown, detail
) -> None:
    (diagnosed, improved) = facts([_promoted(before, after)])
    assert diagnosed.shown
    assert improved.shown is shown
    assert detail in improved.detail


def test_the_signals_column_says_a_procedural_failure() -> None:
    from evoplane.demo.report import _signals

    row = _promoted(0.4, 0.9)
    row.signals = {
        "trajectories": 60,
        "top_procedure_task_type": "onboard",
        "top_procedure_step": 3,
        "top_procedure_sessions": 36,
        "top_procedure_consistency": 1.0,
        "top_procedure_fixed_rate": 0.97,
    }
    assert "procedure: 'onboard' guided at step 3 in 36 sessions" in _signals(row)
