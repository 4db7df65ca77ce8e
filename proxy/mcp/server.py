"""`/mcp/{server}`: the gateway's MCP proxy, an SDK server whose tools are an upstream's.

Each request is authenticated with the tenant key like every gateway route, and the
server named in the path must be registered for an agent the key may use, with the
tenant among those allowed. `tools/list` and `tools/call` go to the upstream through the
agent version's overlay and guardrails, and are captured; anything malformed is answered
by the SDK's transport with a JSON-RPC error before a handler (or capture) sees it.
A well-formed 2026-07-28 `tools/call` skips the SDK's server (`proxy.mcp.direct`) and
takes the same `call_tool` the SDK's handler does.
"""

from __future__ import annotations

from contextlib import asynccontextmanager

import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.exceptions import MCPError
from starlette.responses import JSONResponse

from atdp import new_id
from proxy.catalog import RegistryUnreachable
from proxy.errors import GatewayError
from proxy.mcp.capture import (
    McpCaller,
    ToolOutcome,
    call_event,
    linked_call,
    listing_event,
    record_event,
    session_of,
)
from proxy.mcp.direct import DirectCall, error_reply, read_direct_call, result_reply
from proxy.mcp.tools import is_blocked, overlaid_tools, upstream_arguments
from proxy.mcp.upstream import McpUnavailable, UpstreamPool
from proxy.service import GatewayService

__all__ = ["TOOL_BLOCKED", "UPSTREAM_UNAVAILABLE", "McpProxy"]

# JSON-RPC server error codes (-32000 to -32099 are the implementation's own).
UPSTREAM_UNAVAILABLE = -32001
TOOL_BLOCKED = -32002
_CALLER = "evoplane.mcp_caller"


class McpProxy:
    """The ASGI app behind `/mcp/{server}`; `run()` holds its sessions and upstreams open."""

    def __init__(self) -> None:
        self.service: GatewayService | None = None
        self.upstreams: UpstreamPool | None = None
        self.server = Server(
            "evoplane-gateway",
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            # The listing differs per caller (overlays): no caller-blind schema checks.
            get_tool_input_schema=lambda _name: None,
        )
        self.manager: StreamableHTTPSessionManager | None = None

    @asynccontextmanager
    async def run(self, service: GatewayService):
        config = service.config
        self.service = service
        self.manager = StreamableHTTPSessionManager(
            self.server, json_response=True, max_request_body_size=config.max_body_bytes
        )
        self.upstreams = UpstreamPool(
            timeout=config.mcp_timeout, connect_timeout=config.upstream_connect_timeout
        )
        try:
            async with self.manager.run():
                yield
        finally:
            await self.upstreams.aclose()

    async def __call__(self, scope, receive, send) -> None:
        try:
            caller = await self._caller(scope)
        except GatewayError as error:
            response = JSONResponse(
                _jsonrpc_error(error.message, error.code), status_code=error.status
            )
            await response(scope, receive, send)
            return
        except RegistryUnreachable:
            message = "The registry is unreachable and this gateway has nothing cached for it."
            body = _jsonrpc_error(message, "registry_unreachable")
            await JSONResponse(body, status_code=503)(scope, receive, send)
            return
        assert self.service is not None
        limit = self.service.config.max_body_bytes
        call, receive = await read_direct_call(scope, receive, limit)
        if call is not None:
            response = await self._direct(caller, call)
            await response(scope, receive, send)
            return
        scope[_CALLER] = caller
        # MCP sessions belong to the tenant that opened them: another key gets a 404.
        token = AccessToken(token=str(caller.identity.key_id), client_id=caller.tenant, scopes=[])
        scope["user"] = AuthenticatedUser(token)
        assert self.manager is not None
        await self.manager.handle_request(scope, receive, send)

    async def _caller(self, scope) -> McpCaller:
        assert self.service is not None, "the MCP proxy serves only inside the gateway's lifespan"
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        identity = await self.service.access.authenticate(headers.get("authorization"))
        name = scope["path_params"]["server"]
        server = await self.service.catalog.mcp_server(name)
        if server is None:
            raise GatewayError(404, f"No MCP server '{name}'.", code="mcp_server_not_found")
        if not server.allows(identity.tenant):
            raise GatewayError(
                403,
                f"Tenant '{identity.tenant}' may not use MCP server '{name}' (allow it with "
                f"`evoplane mcp allow {name} --tenant {identity.tenant}`).",
                code="mcp_server_not_allowed",
            )
        await self.service.access.authorize(identity, server.agent)
        session = (
            headers.get("x-session-id") or headers.get("mcp-session-id") or f"mcp-{new_id().hex}"
        )
        return McpCaller(identity, server, session)

    async def _direct(self, caller: McpCaller, call: DirectCall):
        try:
            result = await self.call_tool(caller, call.params)
        except Exception as error:  # noqa: BLE001 - the wire error the SDK's server would give
            return error_reply(call, error)
        return result_reply(call, result, self.server.server_info_stamp)

    async def _list_tools(
        self, ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        assert self.service is not None and self.upstreams is not None
        exchange = await session_of(self.service, _caller_of(ctx))
        upstream = self.upstreams.get(exchange.caller.server)
        exchange.restart()
        try:
            listing = await upstream.list_tools(params.cursor if params else None)
        except McpUnavailable as error:
            outcome = ToolOutcome(None, "upstream_unavailable", str(error))
            await record_event(self.service, exchange.state, listing_event(exchange, [], outcome))
            raise MCPError(UPSTREAM_UNAVAILABLE, str(error)) from None
        tools = overlaid_tools(listing.tools, exchange.version.spec)
        event = listing_event(exchange, tools, ToolOutcome())
        await record_event(self.service, exchange.state, event)
        return types.ListToolsResult(tools=tools, next_cursor=listing.next_cursor)

    async def _call_tool(
        self, ctx: ServerRequestContext, params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        return await self.call_tool(_caller_of(ctx), params)

    async def call_tool(
        self, caller: McpCaller, params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        """One `tools/call`: governed, overlaid, forwarded and captured; MCPError if it fails."""
        assert self.service is not None and self.upstreams is not None
        exchange = await session_of(self.service, caller)
        spec, server = exchange.version.spec, exchange.caller.server
        upstream = self.upstreams.get(server)
        sent = upstream_arguments(params.name, params.arguments, spec)
        linked = linked_call(exchange.state, params.name, sent, exchange.version)
        exchange.restart()
        failure: MCPError | None = None
        try:
            if is_blocked(params.name, spec):
                raise MCPError(
                    TOOL_BLOCKED,
                    f"The tool '{params.name}' is blocked by agent '{server.agent}''s guardrails.",
                )
            result = await upstream.call_tool(params.name, sent)
            outcome = ToolOutcome.of_result(result)
        except MCPError as error:
            outcome, failure = ToolOutcome(None, _error_class(error.code), error.message), error
        except McpUnavailable as error:
            outcome = ToolOutcome(None, "upstream_unavailable", str(error))
            failure = MCPError(UPSTREAM_UNAVAILABLE, str(error))
        event = call_event(
            exchange, params, sent, linked, outcome, read_only=upstream.read_only(params.name)
        )
        await record_event(self.service, exchange.state, event)
        if failure is not None:
            raise failure
        return result


def _caller_of(ctx: ServerRequestContext) -> McpCaller:
    request = ctx.request
    caller = request.scope.get(_CALLER) if request is not None else None
    if caller is None:
        raise MCPError(types.INTERNAL_ERROR, "The request reached the MCP proxy unauthenticated.")
    return caller


def _error_class(code: int) -> str:
    return {
        types.INVALID_PARAMS: "invalid_params",
        types.METHOD_NOT_FOUND: "method_not_found",
        types.INTERNAL_ERROR: "server_error",
        TOOL_BLOCKED: "blocked_by_guardrail",
    }.get(code, f"mcp_error_{code}")


def _jsonrpc_error(message: str, code: str | None) -> dict:
    return {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": types.INVALID_REQUEST, "message": message, "data": {"code": code}},
    }
