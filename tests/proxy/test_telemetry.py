"""OpenTelemetry out: the live gateway exports a GenAI span per call to a real OTLP/HTTP
receiver on loopback, through the real `openai` SDK; a collector that is down or hung
costs the calls nothing."""

from __future__ import annotations

import json
import socket
import time

import anthropic
import openai
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import format_span_id, format_trace_id
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from proxy import telemetry
from proxy.config import GatewayConfig
from tests.support.gateway import GatewayServer
from tests.support.otlp_collector import ReceivedSpan, TraceCollector


def gateway_config(registry_url: str, tmp_path, **otel) -> GatewayConfig:
    return GatewayConfig(
        database_url=registry_url,
        spool_dir=tmp_path / "spool",
        upstream_timeout=3.0,
        **otel,
    )


@pytest.fixture
def collector():
    with TraceCollector() as receiver:
        yield receiver


@pytest.fixture
def traced(world, registry_url, tmp_path, collector):
    """(server, keys) of a gateway exporting its spans to `collector`."""
    _, keys = world
    config = gateway_config(registry_url, tmp_path, otel_endpoint=collector.endpoint)
    with GatewayServer(config) as server:
        yield server, keys


def client(server, key: str, **kwargs) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key=key, max_retries=0, **kwargs)


def exported(server, collector, count: int = 1) -> list[ReceivedSpan]:
    """The spans received once `count` have arrived. A span is built just after its answer
    has left the gateway, so it may still be coming when the client has the answer: export
    what there is until it has (else the batch processor sends it within seconds)."""
    deadline = time.monotonic() + 30
    while len(collector.spans) < count and time.monotonic() < deadline:
        assert server.gateway.telemetry.flush()
        time.sleep(0.01)
    return collector.wait_for(count)


def test_a_call_is_one_genai_client_span_with_the_trajectory_and_version(traced, collector) -> None:
    server, keys = traced
    raw = client(server, keys["acme"]).chat.completions.with_raw_response.create(
        model="support-bot",
        messages=[{"role": "user", "content": "Where is my parcel?"}],
        temperature=0.2,
        top_p=0.9,
        max_tokens=50,
        seed=7,
        stop=["\n\n"],
        extra_headers={"X-Session-Id": "otel-plain"},
    )
    completion = raw.parse()
    (span,) = exported(server, collector)

    assert (span.name, span.kind, span.status) == ("chat support-bot", "CLIENT", "UNSET")
    assert span.parent_span_id == ""  # the agent sent no trace context
    assert span.resource["service.name"] == "evoplane-gateway"
    assert span.end_ns > span.start_ns
    assert span.attributes == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "support-bot",  # the agent, as the client named it
        "gen_ai.response.model": "scripted-model",  # the version's upstream model
        "gen_ai.response.id": completion.id,
        "gen_ai.response.finish_reasons": ["stop"],
        "gen_ai.usage.input_tokens": completion.usage.prompt_tokens,
        "gen_ai.usage.output_tokens": completion.usage.completion_tokens,
        "gen_ai.conversation.id": "otel-plain",
        "gen_ai.request.temperature": 0.2,
        "gen_ai.request.top_p": 0.9,
        "gen_ai.request.max_tokens": 50,
        "gen_ai.request.seed": 7,
        "gen_ai.request.stop_sequences": ["\n\n"],
        "evoplane.tenant": "acme",
        "evoplane.agent": "support-bot",
        "evoplane.trajectory_id": raw.headers["x-evoplane-trajectory-id"],
        "evoplane.event_id": raw.headers["x-evoplane-event-id"],
        "evoplane.version_id": "support-bot@v1",
        "evoplane.traffic": "user",
        "evoplane.protocol": "chat",
    }
    assert collector.headers[0]["content-type"] == "application/x-protobuf"


def test_a_streamed_call_is_one_span_once_the_stream_ends(traced, collector) -> None:
    server, keys = traced
    stream = client(server, keys["acme"]).chat.completions.create(
        model="support-bot",
        messages=[{"role": "user", "content": "Stream me an answer"}],
        stream=True,
        stream_options={"include_usage": True},
        extra_headers={"X-Session-Id": "otel-stream"},
    )
    chunks = list(stream)
    (span,) = exported(server, collector)

    usage = chunks[-1].usage
    assert span.name == "chat support-bot" and span.status == "UNSET"
    assert span.attributes["gen_ai.response.id"] == chunks[0].id
    assert span.attributes["gen_ai.response.finish_reasons"] == ["stop"]
    assert span.attributes["gen_ai.usage.output_tokens"] == usage.completion_tokens > 0
    assert span.attributes["gen_ai.conversation.id"] == "otel-stream"
    assert span.attributes["evoplane.protocol"] == "chat"


def test_calls_over_the_responses_and_messages_apis_name_their_protocol(traced, collector):
    """The real SDKs of the other two APIs: a span each, in the same shape, with the
    protocol the call came in on."""
    server, keys = traced
    response = client(server, keys["acme"]).responses.create(
        model="support-bot", input="Where is my parcel?", extra_headers={"X-Session-Id": "r-1"}
    )
    messages = anthropic.Anthropic(
        base_url=server.base_url.removesuffix("/v1"), api_key=keys["acme"], max_retries=0
    )
    message = messages.messages.create(
        model="support-bot",
        max_tokens=64,
        messages=[{"role": "user", "content": "Where is my parcel?"}],
        extra_headers={"X-Session-Id": "m-1"},
    )
    spans = {s.attributes["evoplane.protocol"]: s for s in exported(server, collector, 2)}

    assert set(spans) == {"responses", "messages"}
    for protocol, session in (("responses", "r-1"), ("messages", "m-1")):
        span = spans[protocol]
        assert span.name == "chat support-bot" and span.kind == "CLIENT"
        assert span.attributes["gen_ai.conversation.id"] == session
        assert span.attributes["gen_ai.response.model"] == "scripted-model"
    assert spans["responses"].attributes["gen_ai.usage.output_tokens"] == (
        response.usage.output_tokens
    )
    assert spans["messages"].attributes["gen_ai.usage.output_tokens"] == (
        message.usage.output_tokens
    )


def test_the_span_is_a_child_of_the_callers_trace(traced, collector) -> None:
    """The app's own span, propagated as W3C `traceparent`, is the gateway span's parent;
    plain and streamed calls alike."""
    server, keys = traced
    app_tracer = TracerProvider().get_tracer("support-app")
    with app_tracer.start_as_current_span("handle ticket") as app_span:
        carrier: dict[str, str] = {}
        TraceContextTextMapPropagator().inject(carrier)
        openai_client = client(server, keys["acme"])
        messages = [{"role": "user", "content": "Where is my parcel?"}]
        openai_client.chat.completions.create(
            model="support-bot", messages=messages, extra_headers=carrier
        )
        list(
            openai_client.chat.completions.create(
                model="support-bot", messages=messages, stream=True, extra_headers=carrier
            )
        )
    spans = exported(server, collector, 2)

    context = app_span.get_span_context()
    assert len(spans) == 2
    for span in spans:
        assert span.trace_id == format_trace_id(context.trace_id)
        assert span.parent_span_id == format_span_id(context.span_id)


def test_a_failed_upstream_call_is_a_span_with_its_error_type(traced, upstream, collector):
    server, keys = traced
    upstream.fail_next(500)
    with pytest.raises(openai.APIStatusError) as failed:
        client(server, keys["acme"]).chat.completions.create(
            model="support-bot", messages=[{"role": "user", "content": "Hello?"}]
        )
    assert failed.value.status_code == 502
    (span,) = exported(server, collector)

    assert span.status == "ERROR"
    assert span.attributes["error.type"] == "upstream_error"
    assert span.attributes["evoplane.trajectory_id"]
    assert "gen_ai.response.id" not in span.attributes


def test_message_contents_are_left_out_by_default(traced, collector) -> None:
    server, keys = traced
    client(server, keys["acme"]).chat.completions.create(
        model="support-bot", messages=[{"role": "user", "content": "Mail jane@example.com"}]
    )
    (span,) = exported(server, collector)

    assert "gen_ai.input.messages" not in span.attributes
    assert "gen_ai.output.messages" not in span.attributes
    assert "jane@example.com" not in repr(span)


def test_message_contents_when_asked_for_are_the_redacted_ones(
    world, registry_url, tmp_path, upstream, collector
) -> None:
    _, keys = world
    config = gateway_config(
        registry_url,
        tmp_path,
        otel_endpoint=collector.endpoint + "/v1/traces",  # the traces URL itself works too
        otel_content=True,
        otel_service_name="support-gateway",
        otel_headers={"x-mlflow-experiment-id": "7"},
    )
    lookup = {
        "type": "function",
        "function": {
            "name": "lookup_order",
            "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}},
        },
    }
    with GatewayServer(config) as server:
        openai_client = client(server, keys["acme"])
        session = {"X-Session-Id": "otel-content"}
        messages = [
            {
                "role": "user",
                "content": 'Mail jane@example.com, call lookup_order with {"order_id": "A1"}',
            }
        ]
        first = openai_client.chat.completions.create(
            model="support-bot", messages=messages, tools=[lookup], extra_headers=session
        )
        call = first.choices[0].message.tool_calls[0]
        messages += [
            first.choices[0].message.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": call.id, "content": "shipped to jane@example.com"},
        ]
        second = openai_client.chat.completions.create(
            model="support-bot", messages=messages, tools=[lookup], extra_headers=session
        )
        spans = sorted(exported(server, collector, 2), key=lambda span: span.start_ns)

    assert "jane@example.com" in upstream.requests[-1]["messages"][-1]["content"]  # sent as is
    assert "jane@example.com" in second.choices[0].message.content
    assert all("jane@example.com" not in repr(span) for span in spans)
    assert spans[0].resource["service.name"] == "support-gateway"
    assert collector.headers[0]["x-mlflow-experiment-id"] == "7"

    first_in = json.loads(spans[0].attributes["gen_ai.input.messages"])
    first_out = json.loads(spans[0].attributes["gen_ai.output.messages"])
    assert first_in[0]["role"] == "system"  # the version's harness, as the model saw it
    assert first_in[-1] == {
        "role": "user",
        "parts": [
            {
                "type": "text",
                "content": 'Mail [REDACTED:EMAIL], call lookup_order with {"order_id": "A1"}',
            }
        ],
    }
    assert first_out == [
        {
            "role": "assistant",
            "parts": [
                {
                    "type": "tool_call",
                    "id": call.id,
                    "name": "lookup_order",
                    "arguments": {"order_id": "A1"},
                }
            ],
            "finish_reason": "tool_calls",
        }
    ]
    second_in = json.loads(spans[1].attributes["gen_ai.input.messages"])
    assert second_in[-1] == {
        "role": "tool",
        "parts": [
            {"type": "tool_call_response", "id": call.id, "response": "shipped to [REDACTED:EMAIL]"}
        ],
    }
    (answer,) = json.loads(spans[1].attributes["gen_ai.output.messages"])
    assert answer["finish_reason"] == "stop"
    assert answer["parts"][0]["type"] == "text"
    assert "[REDACTED:EMAIL]" in answer["parts"][0]["content"]


def refused_endpoint() -> str:
    """A loopback address where nothing listens: connections are refused."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}"


# A bound far above a call's time on loopback, and below what an export to a collector that
# is down (retried with backoff for seconds) or hung would add to a call made to wait on it.
STALL = 5.0


def test_a_collector_that_is_down_fails_no_call(world, registry_url, tmp_path) -> None:
    _, keys = world
    config = gateway_config(registry_url, tmp_path, otel_endpoint=refused_endpoint())
    with GatewayServer(config) as server:
        openai_client = client(server, keys["acme"], timeout=STALL)
        messages = [{"role": "user", "content": "Still there?"}]
        for _ in range(3):
            plain = openai_client.chat.completions.create(model="support-bot", messages=messages)
            assert plain.choices[0].message.content.startswith("echo: Still there?")
            streamed = openai_client.chat.completions.create(
                model="support-bot", messages=messages, stream=True
            )
            assert [c.choices[0].finish_reason for c in streamed if c.choices][-1] == "stop"
        assert server.gateway.telemetry.enabled


def test_a_hung_collector_stalls_no_call_nor_the_gateways_close(
    world, registry_url, tmp_path, monkeypatch
) -> None:
    """While the exporter's thread waits on a collector that never answers, calls are
    served, and closing the gateway does not wait for the collector either."""
    _, keys = world
    monkeypatch.setattr(telemetry, "EXPORT_TIMEOUT", 3600.0)  # an export hangs for the test
    with TraceCollector(hang=True) as collector:
        config = gateway_config(registry_url, tmp_path, otel_endpoint=collector.endpoint)
        server = GatewayServer(config)
        with server:
            openai_client = client(server, keys["acme"], timeout=STALL)
            messages = [{"role": "user", "content": "Anyone?"}]
            openai_client.chat.completions.create(model="support-bot", messages=messages)
            collector.wait_for_export()  # the batch processor's thread now waits on it
            for _ in range(3):
                openai_client.chat.completions.create(model="support-bot", messages=messages)
                streamed = openai_client.chat.completions.create(
                    model="support-bot", messages=messages, stream=True
                )
                assert [c.choices[0].finish_reason for c in streamed if c.choices][-1] == "stop"
        assert not server._thread.is_alive(), "the gateway did not close"


def test_nothing_is_exported_unless_an_endpoint_is_set(
    world, registry_url, tmp_path, collector, monkeypatch
) -> None:
    """Not even to a collector OpenTelemetry's own variables name: the gateway takes its
    endpoint from its config alone."""
    _, keys = world
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.endpoint)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", collector.endpoint + "/v1/traces")
    with GatewayServer(gateway_config(registry_url, tmp_path)) as server:
        assert not server.gateway.telemetry.enabled
        client(server, keys["acme"]).chat.completions.create(
            model="support-bot", messages=[{"role": "user", "content": "Hi"}]
        )
    # Closing the gateway would have sent whatever it had queued.
    assert collector.exports == 0 and collector.spans == []
