"""OTLP/HTTP trace requests in, OTLP responses out: protobuf or JSON, plain or compressed.

Both encodings are read into the one protobuf message, `ExportTraceServiceRequest`, and from
it into plain `Span` records, so everything after this module is the same for either. The
JSON encoding is protobuf's JSON mapping but for the ids: OTLP writes trace and span ids as
hex, where protobuf would write base64, so they are turned into base64 first.
"""

from __future__ import annotations

import base64
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from proxy import jsonio

__all__ = [
    "JSON",
    "PROTOBUF",
    "BodyTooLarge",
    "OtlpDecodeError",
    "Span",
    "SpanEvent",
    "decode_spans",
    "decompress",
    "encode_response",
    "encoding_of",
]

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
_ID_KEYS = ("traceId", "trace_id", "spanId", "span_id", "parentSpanId", "parent_span_id")


class OtlpDecodeError(ValueError):
    """The body is not an OTLP trace export request; `status` is the HTTP status to answer."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


class BodyTooLarge(OtlpDecodeError):
    """The body, once decompressed, is larger than the gateway accepts."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"The decompressed body is larger than the {limit}-byte limit.", 413)


@dataclass(frozen=True, slots=True)
class SpanEvent:
    name: str
    time_unix_nano: int
    attributes: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Span:
    """One span, its ids as lower-case hex, its attribute values as plain Python values
    (arrays as lists, key-value lists as dicts, bytes as base64 text)."""

    trace_id: str
    span_id: str
    name: str
    start_unix_nano: int
    end_unix_nano: int
    parent_span_id: str = ""
    kind: int = 0
    attributes: dict[str, Any] = field(default_factory=dict)
    events: tuple[SpanEvent, ...] = ()
    status_code: int = 0  # 0 unset, 1 ok, 2 error
    status_message: str = ""
    resource: dict[str, Any] = field(default_factory=dict)
    scope: str = ""


def encoding_of(content_type: str | None) -> str:
    """PROTOBUF or JSON, from the request's Content-Type (415 for anything else)."""
    media = (content_type or "").split(";")[0].strip().lower()
    if media in {PROTOBUF, JSON}:
        return media
    raise OtlpDecodeError(
        f"Content-Type {content_type!r} is not an OTLP encoding; send {PROTOBUF} or {JSON}.",
        415,
    )


def decompress(body: bytes, content_encoding: str | None, limit: int) -> bytes:
    """The body with its Content-Encoding (gzip, deflate or none) undone, at most `limit`
    bytes: a small compressed body must not inflate past what an uncompressed one may be."""
    coding = (content_encoding or "identity").strip().lower()
    if coding in {"", "identity"}:
        return body
    if coding == "gzip":
        return _inflate(body, 16 + zlib.MAX_WBITS, limit, coding)
    if coding == "deflate":  # zlib-wrapped as RFC 9110 says, or raw as some clients send it
        try:
            return _inflate(body, zlib.MAX_WBITS, limit, coding)
        except BodyTooLarge:
            raise
        except OtlpDecodeError:
            return _inflate(body, -zlib.MAX_WBITS, limit, coding)
    raise OtlpDecodeError(
        f"Content-Encoding {content_encoding!r} is not supported; send gzip, deflate or none.",
        415,
    )


def _inflate(body: bytes, wbits: int, limit: int, coding: str) -> bytes:
    inflater = zlib.decompressobj(wbits)
    try:
        data = inflater.decompress(body, limit + 1)
    except zlib.error as error:
        raise OtlpDecodeError(f"The body is not valid {coding} data: {error}.") from None
    if len(data) > limit:
        raise BodyTooLarge(limit)
    if not inflater.eof:
        raise OtlpDecodeError(f"The {coding} body is truncated.")
    return data


def decode_spans(body: bytes, encoding: str) -> list[Span]:
    """Every span of an export request, in the order the request lists them."""
    request = _parse_json(body) if encoding == JSON else _parse_protobuf(body)
    try:
        return list(_spans(request))
    except RecursionError:
        raise OtlpDecodeError("An attribute value is nested too deeply.") from None


def _parse_protobuf(body: bytes) -> ExportTraceServiceRequest:
    try:
        return ExportTraceServiceRequest.FromString(body)
    except (DecodeError, RecursionError) as error:
        raise OtlpDecodeError(
            f"The body is not a protobuf ExportTraceServiceRequest: {error}."
        ) from None


def _parse_json(body: bytes) -> ExportTraceServiceRequest:
    try:
        document = jsonio.loads(body)
    except jsonio.JSONDecodeError as error:
        raise OtlpDecodeError(f"The body is not valid JSON: {error}.") from None
    if not isinstance(document, dict):
        raise OtlpDecodeError("The body must be a JSON object with `resourceSpans`.")
    try:
        _ids_to_base64(document)
        request = ExportTraceServiceRequest()
        return json_format.ParseDict(document, request, ignore_unknown_fields=True)
    except (json_format.ParseError, ValueError, TypeError, RecursionError) as error:
        raise OtlpDecodeError(f"The body is not an OTLP/JSON trace request: {error}") from None


def _ids_to_base64(document: dict) -> None:
    """Rewrite the hex ids of every span and link as protobuf's JSON mapping wants them."""
    for resource_spans in _list(document, "resourceSpans", "resource_spans"):
        for scope_spans in _list(resource_spans, "scopeSpans", "scope_spans"):
            for span in _list(scope_spans, "spans"):
                _id_fields(span)
                for link in _list(span, "links"):
                    _id_fields(link)


def _list(container: Any, *keys: str) -> list:
    """The list under the first of `keys` present (ParseDict reports other shapes)."""
    if not isinstance(container, dict):
        return []
    for key in keys:
        if key in container:
            found = container[key]
            if not isinstance(found, list):
                return []
            return [item for item in found if isinstance(item, dict)]
    return []


def _id_fields(item: dict) -> None:
    for key in _ID_KEYS:
        value = item.get(key)
        if isinstance(value, str):
            item[key] = _hex_to_base64(value, key)


def _hex_to_base64(value: str, key: str) -> str:
    try:
        raw = bytes.fromhex(value)
    except ValueError:
        raise OtlpDecodeError(
            f"`{key}` must be hex (OTLP/JSON writes ids as hex, not base64): {value[:64]!r}."
        ) from None
    return base64.b64encode(raw).decode()


def _spans(request: ExportTraceServiceRequest) -> Iterator[Span]:
    for resource_spans in request.resource_spans:
        resource = _attributes(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            scope = scope_spans.scope.name
            for span in scope_spans.spans:
                yield Span(
                    trace_id=span.trace_id.hex(),
                    span_id=span.span_id.hex(),
                    parent_span_id=span.parent_span_id.hex(),
                    name=span.name,
                    kind=span.kind,
                    start_unix_nano=span.start_time_unix_nano,
                    end_unix_nano=span.end_time_unix_nano,
                    attributes=_attributes(span.attributes),
                    events=tuple(
                        SpanEvent(e.name, e.time_unix_nano, _attributes(e.attributes))
                        for e in span.events
                    ),
                    status_code=span.status.code,
                    status_message=span.status.message,
                    resource=resource,
                    scope=scope,
                )


def _attributes(pairs: Any) -> dict[str, Any]:
    """Key-value pairs as a dict (a repeated key: the last one wins, as in the SDKs)."""
    return {pair.key: _value(pair.value) for pair in pairs}


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [_value(item) for item in value.array_value.values]
    if kind == "kvlist_value":
        return _attributes(value.kvlist_value.values)
    if kind == "bytes_value":
        return base64.b64encode(value.bytes_value).decode()
    return getattr(value, kind)


def encode_response(encoding: str, rejected_spans: int = 0, message: str = "") -> bytes:
    """An ExportTraceServiceResponse in the request's encoding; `partial_success` is set
    only when spans were rejected or there is a warning to give (OTLP's rule)."""
    response = ExportTraceServiceResponse()
    if rejected_spans or message:
        response.partial_success.rejected_spans = rejected_spans
        response.partial_success.error_message = message
    if encoding == JSON:
        return jsonio.dumps(json_format.MessageToDict(response))
    return response.SerializeToString()
