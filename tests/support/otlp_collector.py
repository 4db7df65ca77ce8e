"""A real OTLP/HTTP trace receiver on loopback, for tests and benchmarks.

    with TraceCollector() as collector:        # TraceCollector(hang=True): never answers
        config = GatewayConfig(..., otel_endpoint=collector.endpoint)
        ...
        (span,) = collector.wait_for(1)

It parses each `ExportTraceServiceRequest` (protobuf, as the SDK's exporter sends it) into
plain `ReceivedSpan`s. Standalone, for benchmarks in their own process, it only counts:

    python -m tests.support.otlp_collector   # prints the endpoint; on stdin EOF, the spans
"""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

__all__ = ["ReceivedSpan", "TraceCollector"]


@dataclass(frozen=True)
class ReceivedSpan:
    """One exported span, ids as lower-case hex ("" for no parent)."""

    name: str
    kind: str  # "CLIENT", "SERVER", "INTERNAL", ...
    trace_id: str
    span_id: str
    parent_span_id: str
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    resource: dict[str, Any]
    status: str  # "UNSET", "OK", "ERROR"


class TraceCollector:
    """A threading HTTP server on a free loopback port that takes `POST /v1/traces`.

    Args:
        hang: read each export and never answer (until the collector stops), as a
            collector that accepts connections but is stuck does.
    """

    def __init__(self, *, hang: bool = False) -> None:
        self.hang = hang
        self.spans: list[ReceivedSpan] = []
        self.exports = 0  # requests received, answered or not
        self.headers: list[dict[str, str]] = []
        self._changed = threading.Condition()
        self._released = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self.endpoint = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="otlp-collector", daemon=True
        )

    def __enter__(self) -> TraceCollector:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._released.set()
        self._server.shutdown()
        self._server.server_close()

    def wait_for(self, count: int, timeout: float = 30.0) -> list[ReceivedSpan]:
        """The spans received once there are at least `count` (AssertionError after `timeout`)."""
        with self._changed:
            if not self._changed.wait_for(lambda: len(self.spans) >= count, timeout):
                raise AssertionError(f"{len(self.spans)} spans received, expected {count}")
            return list(self.spans)

    def wait_for_export(self, timeout: float = 30.0) -> None:
        """Until an export request has arrived (answered or, when hanging, not)."""
        with self._changed:
            if not self._changed.wait_for(lambda: self.exports > 0, timeout):
                raise AssertionError("no export request arrived")

    def _received(self, headers: dict[str, str], body: bytes) -> None:
        with self._changed:
            self.exports += 1
            self.headers.append(headers)
            self._changed.notify_all()
        if self.hang:
            self._released.wait()
            return
        spans = parse_export(body)
        with self._changed:
            self.spans += spans
            self._changed.notify_all()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the http.server interface
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                if self.path != "/v1/traces":
                    self.send_error(404)
                    return
                collector._received({k.lower(): v for k, v in self.headers.items()}, body)
                if collector.hang:
                    return
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: object) -> None:
                pass

        return Handler


def parse_export(body: bytes) -> list[ReceivedSpan]:
    """The spans of one serialized `ExportTraceServiceRequest`."""
    request = ExportTraceServiceRequest.FromString(body)
    spans = []
    for resource_spans in request.resource_spans:
        resource = _attributes(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                spans.append(
                    ReceivedSpan(
                        name=span.name,
                        kind=Span.SpanKind.Name(span.kind).removeprefix("SPAN_KIND_"),
                        trace_id=span.trace_id.hex(),
                        span_id=span.span_id.hex(),
                        parent_span_id=span.parent_span_id.hex(),
                        start_ns=span.start_time_unix_nano,
                        end_ns=span.end_time_unix_nano,
                        attributes=_attributes(span.attributes),
                        resource=resource,
                        status=Status.StatusCode.Name(span.status.code).removeprefix(
                            "STATUS_CODE_"
                        ),
                    )
                )
    return spans


def _attributes(pairs) -> dict[str, Any]:
    return {pair.key: _value(pair.value) for pair in pairs}


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return _attributes(value.kvlist_value.values)
    return None if kind is None else getattr(value, kind)


def main() -> None:
    with TraceCollector() as collector:
        print(collector.endpoint, flush=True)
        sys.stdin.read()
        print(len(collector.spans), flush=True)


if __name__ == "__main__":
    main()
