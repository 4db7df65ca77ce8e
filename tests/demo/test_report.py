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
