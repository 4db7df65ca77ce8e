"""/api/agents/{agent}/scorers and /evaluation-sets: the agent's code scorers (run them now
or every so often, read how they fared) and its evaluation sets, version by version."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from fastapi import APIRouter, Depends
from pydantic import BaseModel, ConfigDict, Field
from temporalio.client import (
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleAlreadyRunningError,
    ScheduleIntervalSpec,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
    ScheduleUpdate,
)
from temporalio.common import SearchAttributePair, TypedSearchAttributes

from evoplane.control.config import ControlConfig, authorised
from registry import (
    DEFAULT_SET,
    NotFoundError,
    get_agent,
    get_evaluation_set,
    latest_evaluation_set,
    list_evaluation_sets,
    scorer_summaries,
    transaction,
)
from workflows.queues import CONTROL_QUEUE
from workflows.scoring import ScoringRequest, ScoringWorkflow
from workflows.search_attributes import AGENT

__all__ = ["ScoreBody", "router"]

router = APIRouter(prefix="/api/agents", tags=["evaluation"])


class ScoreBody(BaseModel):
    """Score the last `window_minutes` of traffic now, or every `every_minutes` (a
    schedule, one an agent, replaced by the next request that names a period)."""

    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"window_minutes": 60}]}
    )

    window_minutes: float = Field(default=24 * 60, gt=0)
    every_minutes: float | None = Field(default=None, gt=0)
    tenants: list[str] | None = None
    scorers: list[str] | None = None


@router.get("/{agent}/scorers")
async def scorers(agent: str, c: ControlConfig = Depends(authorised)) -> list[dict[str, Any]]:
    """Each code scorer's results over the agent's traffic: scored, abstained, failed, and
    its latest error in words."""
    with transaction(c.engine) as session:
        get_agent(session, agent)
        return [summary.model_dump(mode="json") for summary in scorer_summaries(session, agent)]


@router.post("/{agent}/score")
async def score(
    agent: str, body: ScoreBody, c: ControlConfig = Depends(authorised)
) -> dict[str, Any]:
    """Run the agent's code scorers on its recent traffic now (their report), or schedule
    them every `every_minutes`."""
    with transaction(c.engine) as session:
        get_agent(session, agent)
    request = ScoringRequest(
        agent=agent,
        tenants=body.tenants,
        window_minutes=body.window_minutes,
        scorers=body.scorers,
    )
    if body.every_minutes is not None:
        return await _schedule(c, request, body.every_minutes)
    now = datetime.now(UTC)
    report = await c.client.execute_workflow(
        ScoringWorkflow.run,
        request,
        id=f"scoring-{agent}-{now:%Y%m%dT%H%M%S%fZ}",
        task_queue=CONTROL_QUEUE,
        search_attributes=TypedSearchAttributes([SearchAttributePair(AGENT, agent)]),
        static_summary=f"code scorers of {agent}",
        execution_timeout=timedelta(hours=1),
    )
    return report.model_dump(mode="json")


async def _schedule(c: ControlConfig, request: ScoringRequest, every: float) -> dict[str, Any]:
    schedule_id = f"scoring-{request.agent}"
    wanted = Schedule(
        action=ScheduleActionStartWorkflow(
            ScoringWorkflow.run,
            request,
            id=schedule_id,
            task_queue=CONTROL_QUEUE,
            typed_search_attributes=TypedSearchAttributes(
                [SearchAttributePair(AGENT, request.agent)]
            ),
        ),
        spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(every=timedelta(minutes=every))]),
        policy=SchedulePolicy(overlap=ScheduleOverlapPolicy.SKIP),
    )
    try:
        await c.client.create_schedule(schedule_id, wanted)
        created = True
    except ScheduleAlreadyRunningError:
        handle = c.client.get_schedule_handle(schedule_id)
        await handle.update(lambda _: ScheduleUpdate(schedule=wanted))
        created = False
    return {"id": schedule_id, "created": created, "every_minutes": every}


@router.get("/{agent}/evaluation-sets")
async def evaluation_sets(agent: str, c: ControlConfig = Depends(authorised)) -> list[dict]:
    """Every version of the agent's evaluation sets, newest first: id, cases, who and why."""
    with transaction(c.engine) as session:
        get_agent(session, agent)
        return [
            {
                **found.model_dump(mode="json", exclude={"cases"}),
                "cases": len(found.cases),
                "fixed": sum(case.status == "fixed" for case in found.cases),
            }
            for found in list_evaluation_sets(session, agent)
        ]


@router.get("/{agent}/evaluation-sets/{name}")
async def evaluation_set(
    agent: str,
    name: str = DEFAULT_SET,
    version: int | None = None,
    c: ControlConfig = Depends(authorised),
) -> dict[str, Any]:
    """One version of a set with its cases (the latest unless `version` says)."""
    with transaction(c.engine) as session:
        get_agent(session, agent)
        found = (
            latest_evaluation_set(session, agent, name)
            if version is None
            else get_evaluation_set(session, agent, name, version)
        )
    if found is None:
        raise NotFoundError("evaluation set", f"{agent}/{name}")
    return found.model_dump(mode="json")
