"""/api/agents: the agents, their versions and evolution settings, rollback, the holdback."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from fastapi import APIRouter, Depends
from pydantic import BaseModel, ConfigDict, Field
from temporalio.common import SearchAttributePair, TypedSearchAttributes

from activities.models import RollbackRequest, RollbackResult
from evolution.settings import EvolutionSettings
from evoplane.control.config import ControlConfig, authorised, ui_link
from evoplane.control.evolutions import Decision
from registry import (
    AgentVersion,
    Alias,
    AliasState,
    current_aliases,
    diff_versions,
    get_agent,
    list_agents,
    list_versions,
    resolve_version,
    set_agent_settings,
    set_alias,
    transaction,
)
from workflows.naming import rollback_workflow_id
from workflows.queues import CONTROL_QUEUE
from workflows.rollback import RollbackWorkflow
from workflows.search_attributes import AGENT

__all__ = ["RollbackBody", "router"]

router = APIRouter(prefix="/api/agents", tags=["agents"])


class RollbackBody(BaseModel):
    """Where to roll back to (default: the previous stable), with who and why."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [{"to_version": "support-bot@v2", "actor": "ana", "reason": "refunds"}]
        },
    )

    to_version: str | None = None
    actor: str = Field(min_length=1)
    reason: str = ""


@router.get("")
async def agents(c: ControlConfig = Depends(authorised)) -> list[dict[str, Any]]:
    """Every agent, with where its aliases point."""
    with transaction(c.engine) as session:
        return [
            {
                "name": agent.name,
                "description": agent.description,
                "aliases": current_aliases(session, agent.name).model_dump(mode="json"),
            }
            for agent in list_agents(session)
        ]


@router.get("/{agent}/versions")
async def versions(agent: str, c: ControlConfig = Depends(authorised)) -> dict[str, Any]:
    """The agent's versions (id, parent, author, reason, hash) and its aliases."""
    with transaction(c.engine) as session:
        get_agent(session, agent)
        return {
            "aliases": current_aliases(session, agent).model_dump(mode="json"),
            "versions": [
                {
                    "id": v.id,
                    "parent_id": v.parent_id,
                    "author": v.author,
                    "reason": v.reason,
                    "created_at": v.created_at.isoformat(),
                    "content_hash": v.content_hash,
                }
                for v in list_versions(session, agent)
            ],
        }


@router.get("/{agent}/versions/{version}")
async def version(
    agent: str, version: str, c: ControlConfig = Depends(authorised)
) -> dict[str, Any]:
    """One version: its spec, part fingerprints, parent, author, reason and aliases on it.

    `version` is an id (`agent@v3`), a number (`v3`) or an alias (`stable`)."""
    with transaction(c.engine) as session:
        found = resolve_version(session, agent, version)
        aliases = current_aliases(session, agent)
    return _shown(found, aliases)


@router.get("/{agent}/versions/{before}/diff/{after}")
async def version_diff(
    agent: str, before: str, after: str, c: ControlConfig = Depends(authorised)
) -> dict[str, Any]:
    """What changed from one version to another, part by part.

    Harness text as unified diffs, memory items added, removed and changed, tool overrides,
    guardrails and model fields. Either version is named as in the route above."""
    with transaction(c.engine) as session:
        old, new = resolve_version(session, agent, before), resolve_version(session, agent, after)
        return diff_versions(session, old, new)


def _shown(version: AgentVersion, aliases: AliasState) -> dict[str, Any]:
    pointing = [alias.value for alias in Alias if getattr(aliases, alias.value) == version.id]
    return {
        "id": version.id,
        "agent": version.agent,
        "number": version.number,
        "content_hash": version.content_hash,
        "parts": version.spec.part_hashes(),
        "parent_id": version.parent_id,
        "author": version.author,
        "reason": version.reason,
        "created_at": version.created_at.isoformat(),
        "aliases": pointing,
        "spec": version.spec.model_dump(mode="json"),
    }


@router.get("/{agent}/settings")
async def agent_settings(agent: str, c: ControlConfig = Depends(authorised)) -> dict[str, Any]:
    """The agent's evolution settings, defaults filled in."""
    with transaction(c.engine) as session:
        stored = get_agent(session, agent).settings
    return EvolutionSettings.of(stored).model_dump(mode="json")


@router.put("/{agent}/settings")
async def configure_agent(
    agent: str, settings: EvolutionSettings, c: ControlConfig = Depends(authorised)
) -> dict[str, Any]:
    """Replace the agent's evolution settings (validated; omitted parts take defaults)."""
    with transaction(c.engine) as session:
        set_agent_settings(session, agent, settings.model_dump(mode="json", exclude_unset=True))
    return settings.model_dump(mode="json")


@router.post("/{agent}/rollback")
async def rollback(
    agent: str, body: RollbackBody, c: ControlConfig = Depends(authorised)
) -> dict[str, Any]:
    """Put an earlier version back on stable (default: the previous stable); canary,
    shadow and holdback are cleared."""
    with transaction(c.engine) as session:
        get_agent(session, agent)
    workflow_id = rollback_workflow_id(agent, datetime.now(UTC))
    result: RollbackResult = await c.client.execute_workflow(
        RollbackWorkflow.run,
        RollbackRequest(
            agent=agent, to_version=body.to_version, actor=body.actor, reason=body.reason
        ),
        id=workflow_id,
        task_queue=CONTROL_QUEUE,
        search_attributes=TypedSearchAttributes([SearchAttributePair(AGENT, agent)]),
        static_summary=f"rollback of {agent} by {body.actor}",
        execution_timeout=timedelta(minutes=5),
    )
    return {**result.model_dump(mode="json"), "id": workflow_id, "ui": ui_link(c, workflow_id)}


@router.post("/{agent}/holdback/end")
async def end_holdback(
    agent: str, body: Decision, c: ControlConfig = Depends(authorised)
) -> dict[str, Any]:
    """End the holdback: its share of new sessions goes to stable.

    New sessions only: a session keeps its version. The next regression check then
    compares before against after."""
    with transaction(c.engine) as session:
        held = current_aliases(session, agent).holdback
        if held is not None:
            set_alias(
                session,
                agent,
                Alias.HOLDBACK,
                None,
                actor=body.actor,
                reason=body.reason or "holdback ended by hand",
            )
    return {"agent": agent, "ended": held}
