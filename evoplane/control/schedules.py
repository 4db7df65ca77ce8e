"""/api/schedules: evolve an agent every so often (a Temporal schedule of the loop)."""

from __future__ import annotations

from datetime import timedelta
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

from activities.models import EvolutionOptions
from evoplane.control.config import ControlConfig, authorised
from registry import get_agent, transaction
from workflows.loop import EvolutionLoop, LoopRequest
from workflows.queues import CONTROL_QUEUE
from workflows.search_attributes import AGENT

__all__ = ["ScheduleBody", "router"]

router = APIRouter(prefix="/api/schedules", tags=["schedules"])


class ScheduleBody(BaseModel):
    """Evolve `agent` every `every_minutes`, over these tenants' traffic."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"agent": "support-bot", "every_minutes": 30}]},
    )

    agent: str
    every_minutes: float = Field(gt=0)
    tenants: list[str] | None = None
    options: EvolutionOptions = Field(default_factory=EvolutionOptions)


@router.post("", status_code=201)
async def schedule(body: ScheduleBody, c: ControlConfig = Depends(authorised)) -> dict[str, Any]:
    """Create the agent's schedule, or replace it: one schedule an agent."""
    with transaction(c.engine) as session:
        get_agent(session, body.agent)
    schedule_id = f"evolution-loop-{body.agent}"
    action = ScheduleActionStartWorkflow(
        EvolutionLoop.run,
        LoopRequest(agent=body.agent, tenants=body.tenants, options=body.options),
        id=schedule_id,
        task_queue=CONTROL_QUEUE,
        typed_search_attributes=TypedSearchAttributes([SearchAttributePair(AGENT, body.agent)]),
    )
    every = ScheduleIntervalSpec(every=timedelta(minutes=body.every_minutes))
    wanted = Schedule(
        action=action,
        spec=ScheduleSpec(intervals=[every]),
        policy=SchedulePolicy(overlap=ScheduleOverlapPolicy.SKIP),
    )
    try:
        await c.client.create_schedule(schedule_id, wanted)
        created = True
    except ScheduleAlreadyRunningError:
        handle = c.client.get_schedule_handle(schedule_id)
        await handle.update(lambda _: ScheduleUpdate(schedule=wanted))
        created = False
    return {"id": schedule_id, "created": created, "every_minutes": body.every_minutes}
