"""An inconclusive canary in the review queue: the evolution waits for a person's answer
(`answer_canary`), the queue lists it with its open question, and a label given through
the CLI is that answer. Needs the canary ramp (E17); skipped on a build without it."""

from __future__ import annotations

import pytest

from activities.models import Outcome
from tests.workflows.conftest import AGENT, World
from tests.workflows.test_evolution import options, start, wait_for
from tests.workflows.test_review_queue import listed, reviewed  # noqa: F401
from workflows.evolution import EvolutionWorkflow

canary = pytest.importorskip("tests.workflows.test_canary", reason="needs the canary ramp")
if not hasattr(EvolutionWorkflow, "answer_canary"):
    pytest.skip("needs the canary's answer_canary update", allow_module_level=True)

pytestmark = [pytest.mark.temporal, pytest.mark.slow]


@pytest.mark.parametrize(
    ("label", "outcome"), [("roll_back", Outcome.ROLLED_BACK), ("promote", Outcome.PROMOTED)]
)
async def test_an_inconclusive_canary_is_answered_through_the_queue(
    world: World,
    workers,
    reviewed,  # noqa: F811 - the fixture, imported
    label: str,
    outcome: Outcome,
) -> None:
    handle = await start(world, options(candidate=world.spec("Say it twice."), gate=canary.ASK))
    status = await canary.canary_live(world, handle)
    canary.even(world, status)
    await wait_for(handle, lambda s: s.inconclusive is not None)
    queue = await reviewed("review", "list", "--agent", AGENT, "--kind", "canary")
    (number,) = listed(queue, "canary")
    shown = await reviewed("review", "show", str(number))
    assert "open question: " in shown
    assert all(f"  {choice}: " in shown for choice in ("promote", "extend", "roll_back"))
    said = await reviewed("review", "label", str(number), label, "--reviewer", "ana")
    assert f"the evolution's answer: {label}" in said
    done = await handle.result()
    assert done.outcome is outcome and "by ana" in done.reason
