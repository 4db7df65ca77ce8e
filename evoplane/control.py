"""The control API: start, follow, approve and roll back evolutions over HTTP.

Every route needs `Authorization: Bearer <admin token>`. Evolutions are Temporal workflows;
this API starts them and talks to them (updates, signals, queries), and reads what stays
after them from the registry, which is the source of truth. OpenAPI is at /openapi.json.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy.engine import Engine
from temporalio.client import (
    Client,
    RPCError,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleAlreadyRunningError,
    ScheduleIntervalSpec,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
    ScheduleUpdate,
    WorkflowUpdateFailedError,
)
from temporalio.common import SearchAttributePair, TypedSearchAttributes

from activities.models import (
    Approval,
    EvolutionOptions,
    EvolutionRequest,
    RollbackRequest,
    RollbackResult,
)
from evolution.settings import EvolutionSettings
from registry import (
    Alias,
    EvolutionAlreadyRunning,
    NotFoundError,
    current_aliases,
    finish_evolution,
    get_agent,
    get_evolution,
    list_agents,
    list_evolutions,
    list_versions,
    set_agent_settings,
    set_alias,
    transaction,
)
from registry import start_evolution as record_evolution
from workflows.evolution import EvolutionWorkflow
from workflows.loop import EvolutionLoop, LoopRequest
from workflows.naming import evolution_workflow_id, rollback_workflow_id
from workflows.queues import CONTROL_QUEUE
from workflows.rollback import RollbackWorkflow
from workflows.search_attributes import AGENT, TENANT

__all__ = ["ControlConfig", "admin_token", "create_control_app"]


class ControlConfig(BaseModel):
    """What the control API needs; built by the shell from settings.

    Args:
        client: a connected Temporal client, or None to connect with `connect` at start-up
            (a client belongs to the event loop that serves the API).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    engine: Engine
    client: Client | None = None
    connect: Callable[[], Awaitable[Client]] | None = None
    admin_token: str
    namespace: str = "default"
    temporal_ui_url: str | None = None


def admin_token(configured: str | None, data_dir: Path) -> str:
    """The configured token, else one generated once into the data dir (mode 600)."""
    if configured:
        return configured
    path = data_dir / "admin-token"
    if path.exists():
        return path.read_text().strip()
    data_dir.mkdir(parents=True, exist_ok=True)
    token = "evpadm_" + secrets.token_urlsafe(24)
    path.touch(mode=0o600)
    path.write_text(token + "\n")
    return token


class StartEvolution(BaseModel):
    model_config = ConfigDict(extra="forbid")

    agent: str
    tenants: list[str] | None = None
    options: EvolutionOptions = Field(default_factory=EvolutionOptions)


class Decision(BaseModel):
    model_config = ConfigDict(extra="forbid")

    actor: str = Field(min_length=1)
    reason: str = ""


class RollbackBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    to_version: str | None = None
    actor: str = Field(min_length=1)
    reason: str = ""


class ScheduleBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    agent: str
    every_minutes: float = Field(gt=0)
    tenants: list[str] | None = None
    options: EvolutionOptions = Field(default_factory=EvolutionOptions)


def create_control_app(config: ControlConfig) -> FastAPI:
    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        if config.client is None:
            assert config.connect is not None, "give a client or a way to connect one"
            config.client = await config.connect()
        yield

    app = FastAPI(title="Evoplane control API", version="1", lifespan=lifespan)

    def authorised(request: Request) -> ControlConfig:
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not secrets.compare_digest(token, config.admin_token):
            raise HTTPException(
                401, "Send `Authorization: Bearer <admin token>` (see `evoplane up`)."
            )
        return config

    @app.exception_handler(NotFoundError)
    async def _not_found(_: Request, error: NotFoundError) -> JSONResponse:
        return JSONResponse({"detail": str(error)}, status_code=404)

    def ui_link(workflow_id: str) -> str | None:
        if not config.temporal_ui_url:
            return None
        return f"{config.temporal_ui_url}/namespaces/{config.namespace}/workflows/{workflow_id}"

    @app.post("/api/evolutions", status_code=201)
    async def start_evolution(body: StartEvolution, c=Depends(authorised)) -> dict[str, Any]:
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
        return {"id": handle.id, "run_id": handle.result_run_id, "ui": ui_link(handle.id)}

    @app.get("/api/evolutions")
    async def evolutions(
        agent: str | None = None,
        stage: str | None = None,
        outcome: str | None = None,
        limit: int = 50,
        c=Depends(authorised),
    ) -> list[dict[str, Any]]:
        with transaction(c.engine) as session:
            records = list_evolutions(
                session, agent=agent, stage=stage, outcome=outcome, limit=limit
            )
        return [{**r.model_dump(mode="json"), "ui": ui_link(r.id)} for r in records]

    @app.get("/api/evolutions/{evolution_id}")
    async def evolution(evolution_id: str, c=Depends(authorised)) -> dict[str, Any]:
        live = await _status(c.client, evolution_id)
        with transaction(c.engine) as session:
            try:
                record = get_evolution(session, evolution_id).model_dump(mode="json")
            except NotFoundError:
                if live is None:
                    raise
                record = None
        return {"record": record, "live": live, "ui": ui_link(evolution_id)}

    async def _update(evolution_id: str, update, body: Decision) -> dict[str, Any]:
        handle = config.client.get_workflow_handle(evolution_id)
        try:
            status = await handle.execute_update(
                update, Approval(actor=body.actor, reason=body.reason)
            )
        except WorkflowUpdateFailedError as error:
            cause = error.cause.message if error.cause else str(error)
            raise HTTPException(409, cause) from None
        except RPCError as error:
            raise HTTPException(404, f"evolution {evolution_id}: {error.message}") from None
        return status.model_dump(mode="json")

    @app.post("/api/evolutions/{evolution_id}/approve")
    async def approve(evolution_id: str, body: Decision, c=Depends(authorised)) -> dict[str, Any]:
        return await _update(evolution_id, EvolutionWorkflow.approve, body)

    @app.post("/api/evolutions/{evolution_id}/reject")
    async def reject(evolution_id: str, body: Decision, c=Depends(authorised)) -> dict[str, Any]:
        return await _update(evolution_id, EvolutionWorkflow.reject, body)

    @app.post("/api/evolutions/{evolution_id}/abort", status_code=202)
    async def abort(evolution_id: str, body: Decision, c=Depends(authorised)) -> dict[str, str]:
        handle = c.client.get_workflow_handle(evolution_id)
        try:
            await handle.signal(
                EvolutionWorkflow.abort, Approval(actor=body.actor, reason=body.reason)
            )
        except RPCError as error:
            raise HTTPException(404, f"evolution {evolution_id}: {error.message}") from None
        return {"id": evolution_id, "status": "abort requested"}

    @app.get("/api/agents")
    async def agents(c=Depends(authorised)) -> list[dict[str, Any]]:
        with transaction(c.engine) as session:
            return [
                {
                    "name": agent.name,
                    "description": agent.description,
                    "aliases": current_aliases(session, agent.name).model_dump(mode="json"),
                }
                for agent in list_agents(session)
            ]

    @app.get("/api/agents/{agent}/versions")
    async def versions(agent: str, c=Depends(authorised)) -> dict[str, Any]:
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

    @app.get("/api/agents/{agent}/settings")
    async def agent_settings(agent: str, c=Depends(authorised)) -> dict[str, Any]:
        """The agent's evolution settings, defaults filled in."""
        with transaction(c.engine) as session:
            stored = get_agent(session, agent).settings
        return EvolutionSettings.of(stored).model_dump(mode="json")

    @app.put("/api/agents/{agent}/settings")
    async def configure_agent(
        agent: str, settings: EvolutionSettings, c=Depends(authorised)
    ) -> dict[str, Any]:
        """Replace the agent's evolution settings (validated; omitted parts take defaults)."""
        with transaction(c.engine) as session:
            set_agent_settings(session, agent, settings.model_dump(mode="json", exclude_unset=True))
        return settings.model_dump(mode="json")

    @app.post("/api/agents/{agent}/rollback")
    async def rollback(agent: str, body: RollbackBody, c=Depends(authorised)) -> dict[str, Any]:
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
        return {**result.model_dump(mode="json"), "id": workflow_id, "ui": ui_link(workflow_id)}

    @app.post("/api/agents/{agent}/holdback/end")
    async def end_holdback(agent: str, body: Decision, c=Depends(authorised)) -> dict[str, Any]:
        """Give the sessions a holdback keeps on the replaced version back to stable (new
        sessions only: a session keeps its version). The next regression check then
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

    @app.post("/api/schedules", status_code=201)
    async def schedule(body: ScheduleBody, c=Depends(authorised)) -> dict[str, Any]:
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

    return app


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
