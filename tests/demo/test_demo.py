"""A shortened demo end to end, on the real stack: Temporal dev server, PostgreSQL, MLflow, and
the gateway, worker and control API processes `evoplane up` runs.

Five rounds at the CI scale (less traffic, lower thresholds): a missing fact and a changed
tool argument each diagnosed as their surface and promoted with a better reward, a person's
cost cut stopped by the canary with stable unchanged, a gate-skipping hotfix that regresses,
rolled back by the policy, and customers' stories no reading can place, queued for a person
whose labels make the next evolution add the fact.
"""

from __future__ import annotations

import asyncio

import httpx
import pytest

from evoplane.demo.drifts import by_name
from evoplane.demo.report import facts
from evoplane.demo.reporting import DemoResult
from evoplane.demo.runner import run_demo
from evoplane.demo.scale import SMALL
from evoplane.settings import Settings
from evoplane.simulation.stack import stack
from registry import ReviewKind, ReviewStatus, create_db_engine, list_review_items, transaction

pytestmark = [pytest.mark.temporal, pytest.mark.slow, pytest.mark.timeout(600)]

ROUNDS = ["memory", "tool_schema", "gate", "rollback", "review"]


def play(settings: Settings) -> DemoResult:
    # The MLflow server is shared with other tests, which name their agent support-bot.
    with stack(settings) as endpoints:
        return run_demo(endpoints, by_name(ROUNDS), scale=SMALL, seed=7, agent="demo-bot")


async def test_a_short_demo_shows_every_claim_on_the_real_stack(stack_settings: Settings) -> None:
    result = await asyncio.to_thread(play, stack_settings)
    rows = {row.round: [r for r in result.rows if r.round == row.round] for row in result.rows}
    unshown = [f"{f.claim}: {f.detail}" for f in facts(result.rows) if not f.shown]
    assert not unshown, "\n".join(unshown)

    for name in ("memory", "tool_schema"):
        (row,) = rows[name]
        assert (row.action, row.outcome) == (name, "promoted"), row.reason
        assert row.reward_after > row.reward_before
        assert row.stable_after == row.candidate != row.stable_before

    (cost_cut,) = rows["gate"]
    assert cost_cut.forced and cost_cut.outcome in {"rolled_back", "aborted"}
    assert cost_cut.gates[-1]["gate"] == "canary" and cost_cut.gates[-1]["verdict"] == "fail"
    assert cost_cut.stable_after == cost_cut.stable_before

    hotfix, rollback = rows["rollback"]
    assert hotfix.outcome == "promoted" and all(g.get("skipped") for g in hotfix.gates)
    assert rollback.action == "rollback" and rollback.outcome == "rolled_back"
    assert rollback.stable_before == hotfix.candidate
    assert rollback.stable_after == hotfix.stable_before
    assert rollback.reward_after > rollback.reward_before

    looked, relabelled = rows["review"]
    assert looked.outcome != "promoted" and looked.stable_after == looked.stable_before
    assert relabelled.reviewed and relabelled.action == "memory", relabelled.reason
    assert relabelled.outcome == "promoted" and relabelled.stable_after == relabelled.candidate
    engine = create_db_engine(stack_settings.registry_url)
    with transaction(engine) as session:  # the person's labels, on the queue's items
        labelled = list_review_items(
            session, agent=result.agent, status=ReviewStatus.LABELLED, kind=ReviewKind.CORRECTION
        )
    engine.dispose()
    assert len(labelled) == relabelled.reviewed

    # Every evolution is a workflow in Temporal and a run in MLflow with its decision.
    for row in result.rows:
        assert row.temporal_url and row.evolution_id in row.temporal_url
        assert row.mlflow_url.endswith("?workflowType=machine_learning")  # the runs view
        run_id = row.mlflow_url.partition("?")[0].rsplit("/", 1)[-1]
        found = httpx.get(
            f"{stack_settings.tracking_uri}/api/2.0/mlflow/artifacts/list",
            params={"run_id": run_id},
        ).json()
        assert "decision.json" in {item["path"] for item in found.get("files", [])}
