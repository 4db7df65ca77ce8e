"""RollbackWorkflow: put an earlier version back on stable, on a person's request.

Automatic rollbacks happen inside EvolutionWorkflow (the policy chooses `rollback`);
both carry Action=rollback, so "all rollbacks of agent X" is one filter in the UI.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from activities.evolution import EvolutionActivities
    from activities.models import RollbackRequest, RollbackResult
    from workflows.queues import CONTROL_QUEUE
    from workflows.search_attributes import ACTION, AGENT, OUTCOME, STAGE

__all__ = ["RollbackWorkflow"]


@workflow.defn
class RollbackWorkflow:
    @workflow.run
    async def run(self, request: RollbackRequest) -> RollbackResult:
        workflow.upsert_search_attributes(
            [
                AGENT.value_set(request.agent),
                ACTION.value_set("rollback"),
                STAGE.value_set("rolling_back"),
            ]
        )
        target = request.to_version or "the previous stable"
        workflow.set_current_details(
            f"**rolling back** {request.agent} to {target} ({request.actor})"
        )
        result: RollbackResult = await workflow.execute_activity_method(
            EvolutionActivities.rollback,
            request,
            task_queue=CONTROL_QUEUE,
            start_to_close_timeout=timedelta(minutes=2),
            retry_policy=RetryPolicy(maximum_attempts=10),
            summary=f"stable -> {target}",
        )
        workflow.upsert_search_attributes(
            [STAGE.value_set("done"), OUTCOME.value_set("rolled_back")]
        )
        workflow.set_current_details(
            f"**rolled back** {result.agent}: {result.from_version} -> {result.to_version}"
        )
        return result
