"""OpenTelemetry out: a GenAI client span per served call, for the tracing backend the app
already uses (MLflow, Jaeger, any OTLP collector), beside the app's own spans.

A span is built from the capture's documents (the redacted ones) once the answer has
left, and is exported over OTLP/HTTP by the SDK's batch processor in its own thread, so a
slow or dead collector costs a call nothing: what cannot be sent is dropped. Attributes
follow the GenAI semantic conventions' inference span, with Evoplane's ids under
`evoplane.*`; message contents only when the config asks for them.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from contextvars import ContextVar
from typing import Any

import orjson

from proxy import jsonio
from proxy.capture.events import EventDocument, Exchange
from proxy.config import GatewayConfig

__all__ = ["CallTelemetry", "calling_trace", "content_attributes", "span_attributes", "trace_of"]

log = logging.getLogger(__name__)

EXPORT_TIMEOUT = 10.0  # seconds an export may take, retries included (the exporter's thread)
SHUTDOWN_TIMEOUT = 5.0  # seconds closing waits for the last spans to leave
TRACES_PATH = "/v1/traces"

# The decoding a request names, by the inference span's attribute for it.
_DECODING = {
    "temperature": "gen_ai.request.temperature",
    "top_p": "gen_ai.request.top_p",
    "max_tokens": "gen_ai.request.max_tokens",
    "seed": "gen_ai.request.seed",
    "stop": "gen_ai.request.stop_sequences",
}
_OUTPUT_TYPES = {"text": "text", "json_object": "json", "json_schema": "json"}

# The W3C `traceparent` of the HTTP request being served, set per request by the ASGI app
# (`trace_of`): whichever protocol's route serves it, the call's span joins the caller's trace.
calling_trace: ContextVar[str | None] = ContextVar("calling_trace", default=None)


def trace_of(headers: list[tuple[bytes, bytes]]) -> str | None:
    """The `traceparent` among an ASGI request's headers (lower-case names), if any."""
    for name, value in headers:
        if name == b"traceparent":
            return value.decode("latin-1")
    return None


class CallTelemetry:
    """The gateway's spans of served calls; off, each call a no-op, unless the config names
    an OTLP endpoint. The SDK is imported only then."""

    def __init__(self, config: GatewayConfig) -> None:
        self.content = config.otel_content
        self._provider: Any = None
        if config.otel_endpoint:
            self._open(config)

    @property
    def enabled(self) -> bool:
        return self._provider is not None

    def _open(self, config: GatewayConfig) -> None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        from opentelemetry.trace import SpanKind, Status, StatusCode
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        exporter = OTLPSpanExporter(
            endpoint=traces_url(config.otel_endpoint),
            headers=dict(config.otel_headers),
            timeout=EXPORT_TIMEOUT,
        )
        resource = Resource.create({"service.name": config.otel_service_name})
        self._provider = TracerProvider(resource=resource, shutdown_on_exit=False)
        self._provider.add_span_processor(BatchSpanProcessor(exporter))
        self._tracer = self._provider.get_tracer("evoplane.gateway")
        self._client, self._failed = SpanKind.CLIENT, Status(StatusCode.ERROR)
        self._propagator = TraceContextTextMapPropagator()
        # A full queue (a collector down for long) is dropped span by span on the request's
        # path: that warning would be logged as often; the exporter's errors, once a batch,
        # still say the collector is unreachable.
        logging.getLogger("opentelemetry.sdk._shared_internal").setLevel(logging.ERROR)

    def record(
        self, exchange: Exchange, llm: EventDocument, latency_ms: float, error: str | None = None
    ) -> None:
        """The span of one served call, ended now and begun `latency_ms` before, a child of
        the caller's trace when its request sent one (`calling_trace`).

        Args:
            exchange: the call as the capture saw it.
            llm: its llm_call document as stored (redacted), or the request's redacted draft
                when the upstream failed.
            error: a low-cardinality class of the failure ("upstream_timeout", ...).
        """
        if self._provider is None:
            return
        # Built once the answer has left: the loop runs this after the current task's step,
        # which writes the response (in a copy of this context, so `calling_trace` holds).
        end = time.time_ns()
        asyncio.get_running_loop().call_soon(self._record, exchange, llm, end, latency_ms, error)

    def _record(
        self,
        exchange: Exchange,
        llm: EventDocument,
        end: int,
        latency_ms: float,
        error: str | None,
    ) -> None:
        try:
            self._span(exchange, llm, end, latency_ms, error)
        except Exception:  # noqa: BLE001 - a span is never worth a failed call
            log.exception("building the span of a call failed")

    def _span(
        self,
        exchange: Exchange,
        llm: EventDocument,
        end: int,
        latency_ms: float,
        error: str | None,
    ) -> None:
        attributes = span_attributes(exchange, llm, error)
        if self.content:
            attributes.update(content_attributes(llm))
        traceparent = calling_trace.get()
        parent = self._propagator.extract({"traceparent": traceparent}) if traceparent else None
        span = self._tracer.start_span(
            f"chat {exchange.agent}",
            context=parent,
            kind=self._client,
            attributes=attributes,
            start_time=end - int(latency_ms * 1_000_000),
        )
        if "error.type" in attributes:
            span.set_status(self._failed)
        span.end(end_time=end)

    def flush(self, timeout: float = 30.0) -> bool:
        """Export every ended span now (blocks: not for the event loop)."""
        return self._provider is None or self._provider.force_flush(int(timeout * 1000))

    def shutdown(self, timeout: float = SHUTDOWN_TIMEOUT) -> None:
        """Send what is queued, for at most `timeout` seconds (an unreachable collector
        loses it), and stop the exporter's thread."""
        if self._provider is None:
            return
        closing = threading.Thread(target=self._provider.shutdown, name="otel-close", daemon=True)
        closing.start()
        closing.join(timeout)


def traces_url(endpoint: str) -> str:
    """The OTLP/HTTP traces URL of a collector's base URL (as OTEL_EXPORTER_OTLP_ENDPOINT
    names one), or the URL itself when it names the traces path already."""
    endpoint = endpoint.rstrip("/")
    return endpoint if endpoint.endswith(TRACES_PATH) else endpoint + TRACES_PATH


def span_attributes(
    exchange: Exchange, llm: EventDocument, error: str | None = None
) -> dict[str, Any]:
    """The inference span's attributes: GenAI conventions, then Evoplane's ids."""
    metadata = llm["metadata"]
    action = llm.get("action") or {}
    finish = action.get("finish_reason")
    if finish == "error" and error is None:
        error = "upstream_error"  # a stream the upstream broke off (proxy.protocols.serving)
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": exchange.version.spec.model.engine,
        "gen_ai.request.model": exchange.agent,
        "gen_ai.conversation.id": exchange.session,
        **_decoding(metadata.get("decoding") or {}),
    }
    response = {
        "gen_ai.response.model": metadata.get("model_checkpoint"),
        "gen_ai.response.id": (metadata.get("extra") or {}).get("response_id"),
        "gen_ai.response.finish_reasons": [finish] if finish else None,
        "error.type": error,
    }
    attributes.update((key, value) for key, value in response.items() if value is not None)
    tokens = metadata.get("tokens")
    if tokens and (tokens["prompt"] or tokens["completion"]):  # both 0: none reported
        attributes["gen_ai.usage.input_tokens"] = tokens["prompt"]
        attributes["gen_ai.usage.output_tokens"] = tokens["completion"]
    attributes.update(
        {
            "evoplane.tenant": exchange.tenant,
            "evoplane.agent": exchange.agent,
            "evoplane.trajectory_id": llm["trajectory_id"],
            "evoplane.event_id": llm["id"],
            "evoplane.version_id": exchange.version.id,
            "evoplane.traffic": exchange.traffic.value,
            "evoplane.protocol": exchange.protocol[0] if exchange.protocol else "chat",
        }
    )
    return attributes


def _decoding(decoding: dict[str, Any]) -> dict[str, Any]:
    attributes = {_DECODING[k]: v for k, v in decoding.items() if k in _DECODING}
    if decoding.get("n", 1) != 1:
        attributes["gen_ai.request.choice.count"] = decoding["n"]
    response_format = (decoding.get("extra") or {}).get("response_format")
    if isinstance(response_format, dict) and response_format.get("type") in _OUTPUT_TYPES:
        attributes["gen_ai.output.type"] = _OUTPUT_TYPES[response_format["type"]]
    return attributes


def content_attributes(llm: EventDocument) -> dict[str, str]:
    """`gen_ai.input.messages` and `gen_ai.output.messages` (JSON, as the conventions' schemas
    shape them) from an llm_call document: the redacted one, never the agent's raw text."""
    messages = (llm.get("observation") or {}).get("messages") or []
    attributes = {"gen_ai.input.messages": _json([_message(m) for m in messages])}
    action = llm.get("action")
    if action:
        parts = _parts(action.get("content"), action.get("tool_calls"))
        output = {"role": "assistant", "parts": parts, "finish_reason": action["finish_reason"]}
        attributes["gen_ai.output.messages"] = _json([output])
    return attributes


def _message(message: dict[str, Any]) -> dict[str, Any]:
    if message["role"] == "tool":
        part = {
            "type": "tool_call_response",
            "id": message.get("tool_call_id"),
            "response": message.get("content"),
        }
        return {"role": "tool", "parts": [part]}
    return {
        "role": message["role"],
        "parts": _parts(message.get("content"), message.get("tool_calls")),
    }


def _parts(content: Any, tool_calls: list[dict[str, str]] | None) -> list[dict[str, Any]]:
    """A chat message's content and tool calls as message parts; a non-text content part
    (an image, a file) by its type alone."""
    if isinstance(content, str):
        parts = [{"type": "text", "content": content}] if content else []
    else:
        parts = [
            {"type": "text", "content": part.get("text") or ""}
            if part.get("type") == "text"
            else {"type": str(part.get("type"))}
            for part in content or []
            if isinstance(part, dict)
        ]
    for call in tool_calls or []:
        parts.append(
            {
                "type": "tool_call",
                "id": call["id"],
                "name": call["name"],
                "arguments": _arguments(call["arguments"]),
            }
        )
    return parts


def _arguments(text: str) -> Any:
    """Tool-call arguments as an object when they are JSON (the conventions ask for one)."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return text


def _json(value: Any) -> str:
    return jsonio.dumps(value).decode()
