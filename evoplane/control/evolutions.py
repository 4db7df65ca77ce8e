"""/api/evolutions: start an evolution, list and follow them, approve, reject or abort one,
answer its inconclusive canary."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter, Depends, HTTPException
from pydantic import BaseModel, ConfigDict, Field
from temporalio.client import Client, RPCError, WorkflowUpdateFailedError
from temporalio.common import SearchAttributePair, TypedSearchAttributes

from activities.models import Approval, CanaryAnswer, EvolutionOptions, EvolutionRequest
from atdp import VersionSpec
from evolution.decision import Action
from evoplane.control.config import ControlConfig, authorised, ui_link
from registry import (
    EvolutionAlreadyRunning,
    NotFoundError,
    changed_parts,
    current_aliases,
    finish_evolution,
    get_evolution,
    get_version,
    list_evolutions,
    transaction,
)
from registry import start_evolution as record_evolution
from workflows.evolution import EvolutionWorkflow
from workflows.naming import evolution_workflow_id
from workflows.queues import CONTROL_QUEUE
from workflows.search_attributes import AGENT, TENANT

__all__ = ["Decision", "StartEvolution", "router"]

router = APIRouter(prefix="/api/evolutions", tags=["evolutions"])


class StartEvolution(BaseModel):
    """Which agent to evolve, over which tenants' traffic, and how."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "agent": "support-bot",
                    "tenants": ["acme"],
                    "options": {"force": "harness", "approve_before": ["promotion"]},
                }
            ]
        },
    )

    agent: str
    tenants: list[str] | None = None
    options: EvolutionOptions = Field(default_factory=EvolutionOptions)


class Decision(BaseModel):
    """A person's approval, rejection or abort, with who and why."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"actor": "ana", "reason": "canary looks right"}]},
    )

    actor: str = Field(min_length=1)
    reason: str = ""


@router.post("", status_code=201)
async def start_evolution(
    body: StartEvolution, c: ControlConfig = Depends(authorised)
) -> dict[str, Any]:
    """Start an evolution of an agent: its id, run id and Temporal UI link.

    A candidate spec is evaluated as the change it is (see `options.candidate`)."""
    if body.options.candidate is not None:
        body = _as_its_change(c, body)
    workflow_id = evolution_workflow_id(body.agent, datetime.now(UTC))
    # Recorded before the workflow starts, so a second start is refused here and now
    # (the workflow's first activity finds this record and carries on).
    try:
        with transaction(c.engine) as session:
            record_evolution(
                session,
                workflow_id,
                body.agent,
                scope={"tenants": body.tenants},
                options=body.options.model_dump(mode="json", exclude_none=True),
            )
    except EvolutionAlreadyRunning as error:
        raise HTTPException(409, str(error)) from None
    attributes = [SearchAttributePair(AGENT, body.agent)]
    if body.tenants:
        attributes.append(SearchAttributePair(TENANT, body.tenants))
    try:
        handle = await c.client.start_workflow(
            EvolutionWorkflow.run,
            EvolutionRequest(agent=body.agent, tenants=body.tenants, options=body.options),
            id=workflow_id,
            task_queue=CONTROL_QUEUE,
            search_attributes=TypedSearchAttributes(attributes),
            static_summary=_summary(body),
        )
    except RPCError as error:
        with transaction(c.engine) as session:
            finish_evolution(session, workflow_id, "failed")
        raise HTTPException(503, f"Temporal refused the evolution: {error.message}") from None
    return {"id": handle.id, "run_id": handle.result_run_id, "ui": ui_link(c, handle.id)}


@router.get("")
async def evolutions(
    agent: str | None = None,
    stage: str | None = None,
    outcome: str | None = None,
    limit: int = 50,
    c: ControlConfig = Depends(authorised),
) -> list[dict[str, Any]]:
    """The latest evolution records, newest first, optionally of one agent, stage, outcome."""
    with transaction(c.engine) as session:
        records = list_evolutions(session, agent=agent, stage=stage, outcome=outcome, limit=limit)
    return [{**r.model_dump(mode="json"), "ui": ui_link(c, r.id)} for r in records]


@router.get("/{evolution_id}")
async def evolution(evolution_id: str, c: ControlConfig = Depends(authorised)) -> dict[str, Any]:
    """One evolution: its record, its live status (null once the workflow is gone), link."""
    live = await _status(c.client, evolution_id)
    with transaction(c.engine) as session:
        try:
            record = get_evolution(session, evolution_id).model_dump(mode="json")
        except NotFoundError:
            if live is None:
                raise
            record = None
    return {"record": record, "live": live, "ui": ui_link(c, evolution_id)}


@router.post("/{evolution_id}/approve")
async def approve(
    evolution_id: str, body: Decision, c: ControlConfig = Depends(authorised)
) -> dict[str, Any]:
    """Let an evolution waiting for a person past its approval point (409 if not waiting)."""
    return await _update(c.client, evolution_id, EvolutionWorkflow.approve, _approval(body))


@router.post("/{evolution_id}/reject")
async def reject(
    evolution_id: str, body: Decision, c: ControlConfig = Depends(authorised)
) -> dict[str, Any]:
    """Stop an evolution at its approval point; the candidate never goes live."""
    return await _update(c.client, evolution_id, EvolutionWorkflow.reject, _approval(body))


@router.post("/{evolution_id}/canary")
async def answer_canary(
    evolution_id: str, body: CanaryAnswer, c: ControlConfig = Depends(authorised)
) -> dict[str, Any]:
    """Answer a canary left open at the end of its budget (409 if none is waiting).

    `extend` it for `hours` (default: the time its open question needs at the pace so far),
    `promote` it (recorded as the person's call, never as a pass) or `roll_back`."""
    return await _update(c.client, evolution_id, EvolutionWorkflow.answer_canary, body)


@router.post("/{evolution_id}/abort", status_code=202)
async def abort(
    evolution_id: str, body: Decision, c: ControlConfig = Depends(authorised)
) -> dict[str, str]:
    """Stop an evolution at its next step; canary and shadow are cleared."""
    handle = c.client.get_workflow_handle(evolution_id)
    try:
        await handle.signal(EvolutionWorkflow.abort, Approval(actor=body.actor, reason=body.reason))
    except RPCError as error:
        raise HTTPException(404, f"evolution {evolution_id}: {error.message}") from None
    return {"id": evolution_id, "status": "abort requested"}


def _approval(body: Decision) -> Approval:
    return Approval(actor=body.actor, reason=body.reason)


async def _update(client: Client, evolution_id: str, update, answer: Any) -> dict[str, Any]:
    """A person's answer sent to the evolution, answered with its status (409 if refused)."""
    handle = client.get_workflow_handle(evolution_id)
    try:
        status = await handle.execute_update(update, answer)
    except WorkflowUpdateFailedError as error:
        cause = error.cause.message if error.cause else str(error)
        raise HTTPException(409, cause) from None
    except RPCError as error:
        raise HTTPException(404, f"evolution {evolution_id}: {error.message}") from None
    return status.model_dump(mode="json")


# The action that stands for a change of each part of a spec; guardrails have none.
PART_ACTIONS = {
    "harness": Action.HARNESS,
    "memory": Action.MEMORY,
    "tools": Action.TOOL_SCHEMA,
    "skills": Action.SKILL,
    "model": Action.WEIGHTS,
}


def _as_its_change(c: ControlConfig, body: StartEvolution) -> StartEvolution:
    """A person's candidate, to be evaluated as the change it is against stable: the action
    read from the part it changes unless `force` says; refused (400) when nothing changed or
    the change is not one action's, so the policy can never drop it as a noop."""
    candidate: VersionSpec = body.options.candidate
    with transaction(c.engine) as session:
        stable_id = current_aliases(session, body.agent).stable
        if stable_id is None:
            raise HTTPException(409, f"agent {body.agent} has no stable version to compare with")
        stable = get_version(session, stable_id)
    parts = changed_parts(stable.spec, candidate)
    if not parts:
        raise HTTPException(
            400,
            f"the candidate is identical to {stable.id}, the stable version (content hash "
            f"{stable.content_hash}): change a part of it, there is nothing to evaluate",
        )
    if body.options.force is not None:
        return body
    actions = {PART_ACTIONS.get(part) for part in parts}
    if len(actions) != 1 or None in actions:
        choices = " | ".join(a.value for a in PART_ACTIONS.values())
        raise HTTPException(
            400,
            f"the candidate changes {' and '.join(parts)} against {stable.id}, which is not "
            f"one action's change: add options.force ({choices}; `evoplane evolve --force "
            "harness`, say) to name the change it should be evaluated as",
        )
    options = body.options.model_copy(update={"force": actions.pop()})
    return body.model_copy(update={"options": options})


def _summary(body: StartEvolution) -> str:
    options = body.options
    what = options.force.value if options.force else "policy's choice"
    tenants = ", ".join(body.tenants) if body.tenants else "all tenants"
    return f"evolution of {body.agent} ({what}; {tenants}) started by {options.actor}"


async def _status(client: Client, evolution_id: str) -> dict[str, Any] | None:
    """The live status query, or None when the workflow is gone or unknown."""
    try:
        status = await client.get_workflow_handle(evolution_id).query(EvolutionWorkflow.status)
    except RPCError:
        return None
    except Exception:  # noqa: BLE001 - a query on a failed workflow raises its own errors
        return None
    return status.model_dump(mode="json")
