"""The OTLP decoder: protobuf and OTLP/JSON read into the same spans; anything else is a
clear OtlpDecodeError, never another exception."""

from __future__ import annotations

import base64
import gzip
import json
import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans
from opentelemetry.proto.trace.v1.trace_pb2 import Span as ProtoSpan

from proxy.otlp.decode import (
    JSON,
    PROTOBUF,
    BodyTooLarge,
    OtlpDecodeError,
    decode_spans,
    decompress,
    encode_response,
    encoding_of,
)

INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
UINT64 = st.integers(min_value=0, max_value=2**64 - 1)
KEYS = st.text(max_size=12)
SCALARS = st.one_of(
    st.text(max_size=20),
    st.booleans(),
    INT64,
    st.floats(allow_nan=False, allow_infinity=False),
    st.binary(max_size=8),
)
# An attribute value: a scalar, an array of values, or a key-value list.
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3).map(tuple),
        st.lists(st.tuples(KEYS, inner), max_size=3).map(lambda pairs: ("kv", tuple(pairs))),
    ),
    max_leaves=8,
)
ATTRIBUTES = st.lists(st.tuples(KEYS, VALUES), max_size=4)
SPANS = st.fixed_dictionaries(
    {
        "trace_id": st.binary(min_size=16, max_size=16),
        "span_id": st.binary(min_size=8, max_size=8),
        "parent_span_id": st.one_of(st.just(b""), st.binary(min_size=8, max_size=8)),
        "name": st.text(max_size=20),
        "kind": st.integers(min_value=0, max_value=5),
        "start": UINT64,
        "end": UINT64,
        "attributes": ATTRIBUTES,
        "events": st.lists(st.tuples(st.text(max_size=10), UINT64, ATTRIBUTES), max_size=2),
        "status": st.tuples(st.integers(min_value=0, max_value=2), st.text(max_size=10)),
    }
)
REQUESTS = st.lists(
    st.tuples(ATTRIBUTES, st.text(max_size=10), st.lists(SPANS, max_size=3)), max_size=3
)


def is_kvlist(value) -> bool:
    return isinstance(value, tuple) and len(value) == 2 and value[0] == "kv"


# --- the expected reading ---------------------------------------------------------------------


def plain(value):
    if is_kvlist(value):
        return {key: plain(item) for key, item in value[1]}
    if isinstance(value, tuple):
        return [plain(item) for item in value]
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    return value


def plain_attributes(pairs) -> dict:
    return {key: plain(value) for key, value in pairs}


def expected_spans(request) -> list[tuple]:
    return [
        (
            span["trace_id"].hex(),
            span["span_id"].hex(),
            span["parent_span_id"].hex(),
            span["name"],
            span["kind"],
            span["start"],
            span["end"],
            plain_attributes(span["attributes"]),
            [(name, time, plain_attributes(attrs)) for name, time, attrs in span["events"]],
            span["status"],
            plain_attributes(resource),
            scope,
        )
        for resource, scope, spans in request
        for span in spans
    ]


def read(spans) -> list[tuple]:
    return [
        (
            s.trace_id,
            s.span_id,
            s.parent_span_id,
            s.name,
            s.kind,
            s.start_unix_nano,
            s.end_unix_nano,
            s.attributes,
            [(e.name, e.time_unix_nano, e.attributes) for e in s.events],
            (s.status_code, s.status_message),
            s.resource,
            s.scope,
        )
        for s in spans
    ]


# --- the protobuf encoding, through the generated classes --------------------------------------


def any_value(value) -> AnyValue:
    if is_kvlist(value):
        pairs = [KeyValue(key=key, value=any_value(item)) for key, item in value[1]]
        return AnyValue(kvlist_value={"values": pairs})
    if isinstance(value, tuple):
        return AnyValue(array_value={"values": [any_value(item) for item in value]})
    if isinstance(value, bool):
        return AnyValue(bool_value=value)
    if isinstance(value, int):
        return AnyValue(int_value=value)
    if isinstance(value, float):
        return AnyValue(double_value=value)
    if isinstance(value, bytes):
        return AnyValue(bytes_value=value)
    return AnyValue(string_value=value)


def key_values(pairs) -> list[KeyValue]:
    return [KeyValue(key=key, value=any_value(value)) for key, value in pairs]


def protobuf(request) -> bytes:
    message = ExportTraceServiceRequest(
        resource_spans=[
            ResourceSpans(
                resource={"attributes": key_values(resource)},
                scope_spans=[
                    ScopeSpans(
                        scope={"name": scope},
                        spans=[
                            ProtoSpan(
                                trace_id=s["trace_id"],
                                span_id=s["span_id"],
                                parent_span_id=s["parent_span_id"],
                                name=s["name"],
                                kind=s["kind"],
                                start_time_unix_nano=s["start"],
                                end_time_unix_nano=s["end"],
                                attributes=key_values(s["attributes"]),
                                events=[
                                    ProtoSpan.Event(
                                        name=name,
                                        time_unix_nano=time,
                                        attributes=key_values(attrs),
                                    )
                                    for name, time, attrs in s["events"]
                                ],
                                status={"code": s["status"][0], "message": s["status"][1]},
                            )
                            for s in spans
                        ],
                    )
                ],
            )
            for resource, scope, spans in request
        ]
    )
    return message.SerializeToString()


# --- OTLP/JSON, written by hand after the OTLP specification -----------------------------------


def json_value(value) -> dict:
    if is_kvlist(value):
        return {"kvlistValue": {"values": json_attributes(value[1])}}
    if isinstance(value, tuple):
        return {"arrayValue": {"values": [json_value(item) for item in value]}}
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, bytes):
        return {"bytesValue": base64.b64encode(value).decode()}
    return {"stringValue": value}


def json_attributes(pairs) -> list[dict]:
    return [{"key": key, "value": json_value(value)} for key, value in pairs]


def otlp_json(request) -> bytes:
    return json.dumps(
        {
            "resourceSpans": [
                {
                    "resource": {"attributes": json_attributes(resource)},
                    "scopeSpans": [
                        {
                            "scope": {"name": scope},
                            "spans": [
                                {
                                    "traceId": s["trace_id"].hex(),
                                    "spanId": s["span_id"].hex(),
                                    "parentSpanId": s["parent_span_id"].hex(),
                                    "name": s["name"],
                                    "kind": s["kind"],
                                    "startTimeUnixNano": str(s["start"]),
                                    "endTimeUnixNano": s["end"],  # a number is read too
                                    "attributes": json_attributes(s["attributes"]),
                                    "events": [
                                        {
                                            "name": name,
                                            "timeUnixNano": str(time),
                                            "attributes": json_attributes(attrs),
                                        }
                                        for name, time, attrs in s["events"]
                                    ],
                                    "status": {"code": s["status"][0], "message": s["status"][1]},
                                    "someFutureField": {"ignored": True},
                                }
                                for s in spans
                            ],
                        }
                    ],
                }
                for resource, scope, spans in request
            ]
        }
    ).encode()


@given(REQUESTS)
def test_protobuf_and_json_read_into_the_same_spans(request) -> None:
    expected = expected_spans(request)
    assert read(decode_spans(protobuf(request), PROTOBUF)) == expected
    assert read(decode_spans(otlp_json(request), JSON)) == expected


@given(st.binary(max_size=200))
def test_any_bytes_read_as_protobuf_are_spans_or_a_decode_error(body) -> None:
    try:
        spans = decode_spans(body, PROTOBUF)
    except OtlpDecodeError as error:
        assert error.status == 400 and str(error)
    else:
        assert isinstance(spans, list)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=12,
)
OTLP_KEYS = st.sampled_from(
    [
        "resourceSpans",
        "scopeSpans",
        "spans",
        "traceId",
        "spanId",
        "attributes",
        "key",
        "value",
        "stringValue",
        "intValue",
        "arrayValue",
        "values",
        "kvlistValue",
        "events",
        "name",
    ]
)
OTLP_SHAPED = st.recursive(
    JSON_VALUES,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(OTLP_KEYS, inner, max_size=4),
    max_leaves=20,
)


@given(st.one_of(JSON_VALUES, OTLP_SHAPED))
def test_any_json_is_spans_or_a_decode_error(document) -> None:
    try:
        spans = decode_spans(json.dumps(document).encode(), JSON)
    except OtlpDecodeError as error:
        assert error.status == 400 and str(error)
    else:
        assert isinstance(spans, list)


@given(st.binary(max_size=2000))
def test_gzip_and_deflate_are_undone(body) -> None:
    assert decompress(gzip.compress(body), "gzip", 2000) == body
    assert decompress(zlib.compress(body), "deflate", 2000) == body
    raw = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    assert decompress(raw.compress(body) + raw.flush(), "deflate", 2000) == body
    assert decompress(body, None, 2000) == body


@given(st.integers(min_value=1, max_value=5000))
def test_a_body_never_inflates_past_the_limit(size) -> None:
    compressed = gzip.compress(b"x" * size)
    if size > 1000:
        with pytest.raises(BodyTooLarge):
            decompress(compressed, "gzip", 1000)
    else:
        assert len(decompress(compressed, "gzip", 1000)) == size


def test_truncated_gzip_and_unknown_encodings_are_refused() -> None:
    with pytest.raises(OtlpDecodeError, match="truncated"):
        decompress(gzip.compress(b"x" * 100)[:-12], "gzip", 1000)
    with pytest.raises(OtlpDecodeError) as unknown:
        decompress(b"", "br", 1000)
    assert unknown.value.status == 415


def test_content_types() -> None:
    assert encoding_of("application/x-protobuf") == PROTOBUF
    assert encoding_of("application/json; charset=utf-8") == JSON
    with pytest.raises(OtlpDecodeError) as refused:
        encoding_of("text/plain")
    assert refused.value.status == 415


def test_ids_in_json_must_be_hex() -> None:
    body = {
        "resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "W46/95gDgQPSabYzgT/GDA=="}]}]}]
    }
    with pytest.raises(OtlpDecodeError, match="must be hex"):
        decode_spans(json.dumps(body).encode(), JSON)


def test_responses_in_either_encoding() -> None:
    assert encode_response(JSON) == b"{}"
    assert encode_response(PROTOBUF) == b""
    partial = json.loads(encode_response(JSON, 2, "2 GenAI span(s) rejected"))
    assert partial == {
        "partialSuccess": {"rejectedSpans": "2", "errorMessage": "2 GenAI span(s) rejected"}
    }
    message = ExportTraceServiceResponse.FromString(encode_response(PROTOBUF, 0, "warning"))
    assert (message.partial_success.rejected_spans, message.partial_success.error_message) == (
        0,
        "warning",
    )
