"""EvolutionLoop: one scheduled pass over an agent, evolving until the policy says noop.

A Temporal Schedule starts it (`evoplane schedule --agent A --every 30m`, overlap policy
skip, so passes never overlap). Each evolution runs as a child workflow with its own id
(`evolution-<agent>-<timestamp>`), so each shows up in the UI on its own; between
evolutions the loop continues as new so its history stays short. The registry refuses a
second unfinished evolution of an agent, so a manual start and a scheduled one cannot race.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field
from temporalio import workflow
from temporalio.exceptions import ChildWorkflowError

with workflow.unsafe.imports_passed_through():
    from activities.models import EvolutionOptions, EvolutionRequest, EvolutionStatus, Outcome
    from workflows.evolution import EvolutionWorkflow
    from workflows.naming import evolution_workflow_id
    from workflows.queues import CONTROL_QUEUE

__all__ = ["EvolutionLoop", "LoopRequest"]


class LoopRequest(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    agent: str
    tenants: list[str] | None = None
    options: EvolutionOptions = Field(default_factory=EvolutionOptions)
    max_evolutions: int = Field(default=3, ge=1)  # per pass: a bound on change per period
    done: list[str] = Field(default_factory=list)  # evolutions of this pass so far


@workflow.defn
class EvolutionLoop:
    @workflow.run
    async def run(self, request: LoopRequest) -> list[str]:
        evolution_id = evolution_workflow_id(request.agent, workflow.now())
        workflow.set_current_details(
            f"evolution {len(request.done) + 1} of at most {request.max_evolutions}: {evolution_id}"
        )
        try:
            status: EvolutionStatus = await workflow.execute_child_workflow(
                EvolutionWorkflow.run,
                EvolutionRequest(
                    agent=request.agent, tenants=request.tenants, options=request.options
                ),
                id=evolution_id,
                task_queue=CONTROL_QUEUE,
                static_summary=f"scheduled evolution of {request.agent}",
            )
        except ChildWorkflowError as error:
            workflow.logger.warning("evolution %s did not finish: %s", evolution_id, error)
            return [*request.done, evolution_id]
        done = [*request.done, evolution_id]
        changed = status.outcome in (Outcome.PROMOTED, Outcome.ROLLED_BACK)
        if changed and len(done) < request.max_evolutions:
            workflow.continue_as_new(request.model_copy(update={"done": done}))
        return done
