"""`GET /v1/agents/{agent}/version`: the version in force, for agents that call their model
themselves (and report their traces over OTLP).

The gateway cannot apply a version to calls it does not serve, so such an agent asks for the
version's parts and applies them itself: the harness (instructions, template, demos), the
memory items its tenant may retrieve (and, for `?query=...`, the block the gateway would
inject for that query), the tool-schema overlay with its argument maps, and the guardrails.
`messages` is what the gateway would put in front of the agent's own messages. A session is
placed by the gateway's router, so canary and holdback shares are the same as for served
calls, and the session's OTLP traces are recorded under the version it was told.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse

from proxy.errors import GatewayError
from proxy.router import Route
from proxy.service import GatewayService
from registry import AgentVersion, Alias, MemoryItem, get_memory_items
from runtime.version.overlays import MEMORY_BLOCK_START, Overlaid
from runtime.version.skills import SKILL_BLOCK_START

__all__ = ["agent_version", "version_document"]

_SESSION = re.compile(r"^[^\x00-\x1f\x7f]{1,200}$")


async def agent_version(
    request: Request, agent: str, session: str | None = None, query: str | None = None
) -> JSONResponse:
    """The version that serves `session` (the stable version without one), tenant-checked."""
    service: GatewayService = request.app.state.service
    identity = await service.access.authenticate(request.headers.get("authorization"))
    await service.access.authorize(identity, agent)
    version, alias = await _in_force(service, identity.tenant, agent, session)
    ids = [uuid.UUID(item) for item in version.spec.memory.item_ids]
    items = await service.catalog.read(get_memory_items, agent, identity.tenant, ids)
    agent_messages = [{"role": "user", "content": query}] if query else []
    overlaid = await service.pipeline.overlay(
        {"messages": agent_messages}, version, identity.tenant
    )
    headers = {"X-Evoplane-Version": version.id}
    if session:
        headers["X-Evoplane-Session-Id"] = session
    document = version_document(version, alias, session, items, overlaid, query)
    return JSONResponse(document, headers=headers)


async def _in_force(
    service: GatewayService, tenant: str, agent: str, session: str | None
) -> tuple[AgentVersion, Alias]:
    if session is None:
        aliases = await service.catalog.aliases(agent)
        if aliases.stable is None:
            raise _no_version(agent)
        return await service.catalog.version(aliases.stable), Alias.STABLE
    if not _SESSION.match(session):
        raise GatewayError(
            400,
            "session must be 1 to 200 printable characters.",
            param="session",
            code="invalid_value",
        )
    try:
        route: Route = await service.router.route(tenant, agent, session)
    except LookupError:
        raise _no_version(agent) from None
    route = await service.router.settle(route)
    return route.version, route.alias or Alias.STABLE


def _no_version(agent: str) -> GatewayError:
    return GatewayError(
        404, f"The agent '{agent}' has no stable version.", code="version_not_found"
    )


def version_document(
    version: AgentVersion,
    alias: Alias,
    session: str | None,
    items: list[MemoryItem],
    overlaid: Overlaid,
    query: str | None,
) -> dict[str, Any]:
    """The version as the pull answers it; `overlaid` is the version applied to the query
    alone (or to no messages), whose added messages are the ones the gateway prepends."""
    spec = version.spec
    prefix = overlaid.body["messages"][:-1] if query else overlaid.body["messages"]
    first = prefix[0] if prefix else {}
    system_prompt = (
        first.get("content") if first.get("role") == "system" and not _is_block(first) else None
    )
    block = next((m["content"] for m in prefix if _is_block(m, MEMORY_BLOCK_START)), None)
    skill_block = next((m["content"] for m in prefix if _is_block(m, SKILL_BLOCK_START)), None)
    return {
        "object": "agent.version",
        "id": version.id,
        "agent": version.agent,
        "number": version.number,
        "content_hash": version.content_hash,
        "alias": alias.value,
        "session": session,
        "model": spec.model.adapter or spec.model.model,
        "harness": {
            "instructions": spec.harness.instructions,
            "template": spec.harness.template,
            "system_prompt": system_prompt,
            "demos": [[m.to_openai() for m in demo.messages] for demo in spec.harness.demos],
        },
        "memory": {
            "top_k": spec.memory.top_k,
            "items": [{"id": str(i.id), "kind": i.kind, "content": i.content} for i in items],
            "query": query,
            "retrieved": [
                {"id": str(hit.item.id), "content": hit.item.content, "score": hit.score}
                for hit in overlaid.retrieved
            ],
            "block": block,
        },
        "skills": {
            "top_k": spec.skills.top_k,
            "max_chars": spec.skills.max_chars,
            "items": [skill.model_dump(mode="json") for skill in spec.skills.items],
            "retrieved": [{"name": hit.skill.name, "score": hit.score} for hit in overlaid.skills],
            "block": skill_block,
        },
        "tools": {
            name: override.model_dump(mode="json") for name, override in spec.tools.tools.items()
        },
        "guardrails": spec.guardrails.model_dump(mode="json"),
        "messages": prefix,
        "fingerprints": spec.part_hashes(),
    }


def _is_block(message: dict[str, Any], *starts: str) -> bool:
    """Whether `message` is a block the gateway injects (memory or skills, or one of `starts`)."""
    content = message.get("content")
    starts = starts or (MEMORY_BLOCK_START, SKILL_BLOCK_START)
    return isinstance(content, str) and content.startswith(starts)
