"""ScoringWorkflow: the agent's code scorers over its recent traffic, once.

Started by hand (`evoplane score --agent A`) or by a Temporal Schedule (`--every 5m`,
overlap skip), so live traffic, a canary's included, is scored as it comes; an evolution
also scores its own window before reading it. A scorer's faults are in the report, never
a failure of the workflow.
"""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel, ConfigDict, Field
from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from activities.models import ScoreReport, ScoreRequest
    from activities.scorers import ScorerActivities
    from evolution.window import WindowSpec
    from workflows.queues import CONTROL_QUEUE

__all__ = ["ScoringRequest", "ScoringWorkflow"]


class ScoringRequest(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    agent: str
    tenants: list[str] | None = None
    window_minutes: float = Field(default=24 * 60, gt=0)
    scorers: list[str] | None = None  # None: every scorer of the agent


@workflow.defn
class ScoringWorkflow:
    @workflow.run
    async def run(self, request: ScoringRequest) -> ScoreReport:
        now = workflow.now()
        window = WindowSpec(
            agent=request.agent,
            tenants=request.tenants,
            since=now - timedelta(minutes=request.window_minutes),
            until=now,
        )
        workflow.set_current_details(f"scoring {request.agent}'s traffic of the last window")
        report: ScoreReport = await workflow.execute_activity_method(
            ScorerActivities.score_traffic,
            ScoreRequest(window=window, scorers=request.scorers),
            task_queue=CONTROL_QUEUE,
            start_to_close_timeout=timedelta(minutes=30),
            heartbeat_timeout=timedelta(minutes=2),
            retry_policy=RetryPolicy(maximum_attempts=3),
            summary="run the agent's code scorers",
        )
        workflow.set_current_details(report.words())
        return report
