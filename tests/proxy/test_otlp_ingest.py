"""OTLP ingest: GenAI spans from the real OpenTelemetry SDK and exporter, and hand-written
OTLP/JSON, become governed trajectories in the registry, tenant-checked."""

from __future__ import annotations

import gzip
import json
from collections.abc import Sequence

import httpx
import pytest
from cryptography.fernet import Fernet
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.trace import SpanKind

from activities.evidence import read_window
from atdp import ReplayClass
from evolution.analysis import measure_window
from evolution.window import WindowSpec
from proxy.config import GatewayConfig
from proxy.otlp.trace import trajectory_id
from registry import (
    TenantPolicy,
    create_api_key,
    create_tenant,
    get_events,
    grant_agent,
    list_rewards,
    list_trajectories,
    transaction,
    unseal_event,
)
from tests.conftest import postgres_schema_url
from tests.proxy.test_gateway_governance import every_stored_value
from tests.support.gateway import GatewayServer, spool_files

EMAIL = "jane.doe@example.org"
SYSTEM = "You are Acme's support agent."
QUESTION = f"Where is order 42? Mail me at {EMAIL}."
LOOKUP_ARGS = '{"order_id": "42"}'
LOOKUP_RESULT = '{"status": "shipped", "eta": "tomorrow"}'
ANSWER = "Order 42 ships tomorrow."


@pytest.fixture
def registry_url(request, tmp_path) -> str:
    """SQLite, or PostgreSQL where a test is parametrized with it (the capture drain writes
    each with its own statements: batched INSERT, COPY)."""
    if getattr(request, "param", "sqlite") == "postgresql":
        return postgres_schema_url(request.getfixturevalue("postgres_schema"))
    return f"sqlite:///{tmp_path / 'registry.db'}"


both_registries = pytest.mark.parametrize("registry_url", ["sqlite", "postgresql"], indirect=True)


class CheckedExporter(SpanExporter):
    """The SDK's OTLP/HTTP exporter, keeping what each export returned."""

    def __init__(self, exporter: OTLPSpanExporter) -> None:
        self.exporter, self.results = exporter, []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        result = self.exporter.export(spans)
        self.results.append(result)
        return result

    def shutdown(self) -> None:
        self.exporter.shutdown()


def sdk_tracer(server, key: str, *, batch: bool = True, service: str = "support-bot", **kwargs):
    """(tracer, provider, exporter): the SDK pointed at the gateway's /v1/traces."""
    exporter = CheckedExporter(
        OTLPSpanExporter(
            endpoint=f"{server.base_url}/traces",
            headers={"Authorization": f"Bearer {key}", **kwargs.pop("headers", {})},
            **kwargs,
        )
    )
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    processor = BatchSpanProcessor(exporter) if batch else SimpleSpanProcessor(exporter)
    provider.add_span_processor(processor)
    return provider.get_tracer("test-agent"), provider, exporter


def parts(*items: dict) -> list[dict]:
    return list(items)


def text(content: str) -> dict:
    return {"type": "text", "content": content}


def lookup_call() -> dict:
    return {"type": "tool_call", "id": "call-1", "name": "lookup_order", "arguments": LOOKUP_ARGS}


FIRST_INPUT = [{"role": "user", "parts": parts(text(QUESTION))}]
SECOND_INPUT = [
    *FIRST_INPUT,
    {"role": "assistant", "parts": parts(lookup_call())},
    {
        "role": "tool",
        "parts": parts({"type": "tool_call_response", "id": "call-1", "response": LOOKUP_RESULT}),
    },
]


def chat_attributes(inputs: list[dict], outputs: list[dict], **more) -> dict:
    return {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "scripted-model",
        "gen_ai.response.model": "scripted-model-2026",
        "gen_ai.request.temperature": 0.2,
        "gen_ai.usage.input_tokens": 31,
        "gen_ai.usage.output_tokens": 9,
        "gen_ai.system_instructions": json.dumps([text(SYSTEM)]),
        "gen_ai.input.messages": json.dumps(inputs),
        "gen_ai.output.messages": json.dumps(outputs),
        **more,
    }


def run_agent(tracer, *, conversation: str | None = "conv-1", agent_name: bool = True) -> None:
    """An agent turn as instrumentations trace it: invoke_agent, chat (a tool call),
    execute_tool, chat (the answer)."""
    agent_attributes = {"gen_ai.operation.name": "invoke_agent"}
    if agent_name:
        agent_attributes["gen_ai.agent.name"] = "support-bot"
    if conversation:
        agent_attributes["gen_ai.conversation.id"] = conversation
    agent_attributes["gen_ai.input.messages"] = json.dumps(FIRST_INPUT)
    with tracer.start_as_current_span("invoke_agent support-bot", attributes=agent_attributes):
        with tracer.start_as_current_span(
            "chat scripted-model",
            kind=SpanKind.CLIENT,
            attributes=chat_attributes(
                FIRST_INPUT,
                [{"role": "assistant", "parts": [lookup_call()], "finish_reason": "tool_call"}],
                **({"gen_ai.conversation.id": conversation} if conversation else {}),
            ),
        ):
            pass
        with tracer.start_as_current_span(
            "execute_tool lookup_order",
            attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "lookup_order",
                "gen_ai.tool.call.id": "call-1",
                "gen_ai.tool.call.arguments": LOOKUP_ARGS,
                "gen_ai.tool.call.result": LOOKUP_RESULT,
            },
        ):
            pass
        with tracer.start_as_current_span(
            "chat scripted-model",
            kind=SpanKind.CLIENT,
            attributes=chat_attributes(
                SECOND_INPUT,
                [{"role": "assistant", "parts": [text(ANSWER)], "finish_reason": "stop"}],
            ),
        ):
            pass


def stored_session(server, engine, tenant: str, session: str):
    server.flush()
    with transaction(engine) as s:
        found = list_trajectories(s, tenant, session_id=session)
        assert len(found) == 1, found
        return found[0], get_events(s, tenant, found[0].id)


def kinds(events) -> list[str]:
    return [event.kind.value for event in events]


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


# --- the real SDK ---------------------------------------------------------------------------


@both_registries
def test_sdk_spans_become_one_governed_trajectory(live) -> None:
    server, engine, keys = live
    tracer, provider, exporter = sdk_tracer(server, keys["acme"])
    run_agent(tracer)
    assert provider.force_flush(10)
    assert exporter.results == [SpanExportResult.SUCCESS]

    trajectory, events = stored_session(server, engine, "acme", "conv-1")
    assert (trajectory.agent, trajectory.versions.agent_version_id) == (
        "support-bot",
        "support-bot@v1",
    )
    assert kinds(events) == ["user_message", "llm_call", "tool_call", "llm_call"]
    assert [event.seq for event in events] == [0, 1, 2, 3]
    user, ask, tool, answer = events
    assert user.observation.messages[0].content == "Where is order 42? Mail me at [REDACTED:EMAIL]."
    assert ask.parent_id == user.id and tool.parent_id == ask.id and answer.parent_id == tool.id
    assert [m.role for m in ask.observation.messages] == ["system", "user"]
    assert ask.observation.messages[0].content == SYSTEM
    assert [(c.id, c.name, c.arguments) for c in ask.action.tool_calls] == [
        ("call-1", "lookup_order", LOOKUP_ARGS)
    ]
    assert (tool.action.call.name, tool.outcome.tool_return, tool.outcome.success) == (
        "lookup_order",
        {"status": "shipped", "eta": "tomorrow"},
        True,
    )
    assert answer.action.content == ANSWER and answer.action.finish_reason == "stop"
    assert (answer.metadata.tokens.prompt, answer.metadata.tokens.completion) == (31, 9)
    assert answer.metadata.model_checkpoint == "scripted-model-2026"
    assert answer.metadata.decoding.temperature == 0.2
    assert answer.metadata.latency_ms is not None
    assert answer.metadata.extra["source"] == "otlp"
    assert answer.metadata.extra["provider"] == "openai"
    assert answer.replay.replay_class is ReplayClass.APPROXIMATE
    assert "not served by the gateway" in answer.replay.reason
    assert user.replay.replay_class is ReplayClass.NON_REPLAYABLE
    assert {e.governance.redaction.value for e in events} >= {"redacted", "clean"}
    assert "pii:email" in user.governance.labels
    # Stored and spooled without the raw address; the trajectory is read like any other.
    assert EMAIL not in every_stored_value(engine)
    assert EMAIL not in spool_files(server.config.spool_dir)
    read = httpx.get(f"{server.base_url}/trajectories/{trajectory.id}", headers=auth(keys["acme"]))
    assert read.status_code == 200 and len(read.json()["events"]) == 4
    provider.shutdown()


def test_spans_exported_one_by_one_continue_one_trajectory(live) -> None:
    """A simple span processor sends each span as it ends, the agent's root span last."""
    server, engine, keys = live
    tracer, provider, exporter = sdk_tracer(
        server,
        keys["acme"],
        batch=False,
        service="billing-service",
        headers={"X-Evoplane-Agent": "support-bot"},
    )
    with tracer.start_as_current_span("turn") as root:
        trace_id = format(root.get_span_context().trace_id, "032x")
        run_agent(tracer, conversation=None, agent_name=False)
    assert exporter.results == [SpanExportResult.SUCCESS] * 5

    trajectory, events = stored_session(server, engine, "acme", trace_id)  # no conversation id
    assert trajectory.id == trajectory_id("acme", trace_id)
    assert kinds(events) == ["user_message", "llm_call", "tool_call", "llm_call"]
    assert [event.seq for event in events] == [0, 1, 2, 3]
    assert events[3].parent_id == events[2].id
    provider.shutdown()


def test_a_gzip_export_of_the_sdk_is_read(live) -> None:
    server, engine, keys = live
    tracer, provider, exporter = sdk_tracer(server, keys["acme"], compression=Compression.Gzip)
    run_agent(tracer, conversation="gz-1")
    assert provider.force_flush(10) and exporter.results == [SpanExportResult.SUCCESS]
    _, events = stored_session(server, engine, "acme", "gz-1")
    assert kinds(events) == ["user_message", "llm_call", "tool_call", "llm_call"]
    provider.shutdown()


# --- OTLP/JSON by hand ------------------------------------------------------------------------

TRACE = "5b8efff798038103d269b633813fc60c"
NOW_NS = 1_767_225_600_000_000_000  # 2026-01-01


def value(item) -> dict:
    if isinstance(item, bool):
        return {"boolValue": item}
    if isinstance(item, int):
        return {"intValue": str(item)}  # int64 is a string in OTLP/JSON
    if isinstance(item, float):
        return {"doubleValue": item}
    if isinstance(item, list):
        return {"arrayValue": {"values": [value(i) for i in item]}}
    return {"stringValue": item}


def attributes(**items) -> list[dict]:
    return [{"key": key.replace("__", "."), "value": value(v)} for key, v in items.items()]


def span(span_id: str, name: str, start_ms: int, attrs: dict, **more) -> dict:
    return {
        "traceId": more.pop("trace_id", TRACE),
        "spanId": span_id,
        "name": name,
        "kind": 3,
        "startTimeUnixNano": str(NOW_NS + start_ms * 1_000_000),
        "endTimeUnixNano": str(NOW_NS + (start_ms + 5) * 1_000_000),
        "attributes": [{"key": k, "value": value(v)} for k, v in attrs.items()],
        **more,
    }


def export_body(*spans: dict, service: str = "support-bot") -> dict:
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": attributes(service__name=service)},
                "scopeSpans": [{"scope": {"name": "hand"}, "spans": list(spans)}],
            }
        ]
    }


def post_json(server, key: str, body, **headers) -> httpx.Response:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httpx.post(
        f"{server.base_url}/traces",
        content=content,
        headers={**auth(key), "Content-Type": "application/json", **headers},
    )


def old_style_chat(span_id: str, start_ms: int, user: str, **more) -> dict:
    """A chat span of semantic conventions 1.36 and before: messages as span events."""
    return span(
        span_id,
        "chat scripted-model",
        start_ms,
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.system": "openai",
            "gen_ai.request.model": "scripted-model",
            "gen_ai.conversation.id": "old-1",
            "gen_ai.usage.input_tokens": 12,
            "gen_ai.usage.output_tokens": 4,
        },
        events=[
            {
                "name": "gen_ai.system.message",
                "timeUnixNano": str(NOW_NS),
                "attributes": attributes(content=SYSTEM),
            },
            {
                "name": "gen_ai.user.message",
                "timeUnixNano": str(NOW_NS),
                "attributes": attributes(content=user),
            },
            {
                "name": "gen_ai.choice",
                "timeUnixNano": str(NOW_NS),
                "attributes": [
                    {
                        "key": "gen_ai.event.content",
                        "value": value(
                            json.dumps(
                                {
                                    "index": 0,
                                    "finish_reason": "tool_calls",
                                    "message": {
                                        "role": "assistant",
                                        "tool_calls": [
                                            {
                                                "id": "call-9",
                                                "type": "function",
                                                "function": {
                                                    "name": "refund",
                                                    "arguments": {"order_id": "42"},
                                                },
                                            }
                                        ],
                                    },
                                }
                            )
                        ),
                    }
                ],
            },
        ],
        **more,
    )


def test_gzip_json_with_old_style_events_and_a_span_that_is_not_genai(live) -> None:
    server, engine, keys = live
    body = export_body(
        span("00f067aa0ba902b7", "GET /orders/42", 0, {"http.request.method": "GET"}),
        old_style_chat("00f067aa0ba902b8", 1, "Refund order 42, please."),
        span(
            "00f067aa0ba902b9",
            "execute_tool refund",
            10,
            {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.call.id": "call-9"},
            status={"code": 2, "message": "refund service timed out"},
        ),
    )
    response = post_json(
        server,
        keys["acme"],
        gzip.compress(json.dumps(body).encode()),
        **{"Content-Encoding": "gzip"},
    )
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/json"
    assert response.json() == {
        "partialSuccess": {
            "errorMessage": "1 span(s) ignored: not a GenAI model call, tool run or agent run"
        }
    }
    trajectory, events = stored_session(server, engine, "acme", "old-1")
    assert response.headers["x-evoplane-trajectory-id"] == str(trajectory.id)
    assert kinds(events) == ["user_message", "llm_call", "tool_call"]
    _, llm, tool = events
    assert [m.role for m in llm.observation.messages] == ["system", "user"]
    assert [(c.name, c.arguments) for c in llm.action.tool_calls] == [
        ("refund", '{"order_id":"42"}')
    ]
    assert llm.metadata.extra["provider"] == "openai"  # from gen_ai.system, the older name
    # The tool span names no tool: its name comes from the span name; it failed, with no result.
    assert tool.action.call.name == "refund" and tool.parent_id == llm.id
    assert (tool.outcome.success, tool.outcome.error_class) == (False, "error")
    assert tool.outcome.error_message == "refund service timed out"
    assert tool.replay.replay_class is ReplayClass.NON_REPLAYABLE


def test_invalid_genai_spans_are_rejected_and_the_rest_recorded(live) -> None:
    server, engine, keys = live
    good = chat_attributes(FIRST_INPUT, [{"role": "assistant", "parts": [text(ANSWER)]}])
    body = export_body(
        span("a1a1a1a1a1a1a1a1", "chat", 0, {**good, "gen_ai.conversation.id": "mixed-1"}),
        span("b2b2b2b2b2b2b2b2", "chat", 1, {**good, "gen_ai.input.messages": "[{not json"}),
        span("c3c3c3c3c3c3c3c3", "chat", 2, {**good, "gen_ai.usage.output_tokens": -3}),
        span("d4d4d4d4d4d4d4d4", "chat", 3, {**good, "gen_ai.request.top_p": 7.5}),
        span("e5e5e5e5e5e5e5e5", "chat", 4, {"gen_ai.operation.name": "chat"}),
    )
    response = post_json(server, keys["acme"], body)
    assert response.status_code == 200, response.text
    partial = response.json()["partialSuccess"]
    assert partial["rejectedSpans"] == "4"
    message = partial["errorMessage"]
    assert message.startswith("4 GenAI span(s) rejected: span b2b2b2b2b2b2b2b2 (chat): ")
    assert "gen_ai.input.messages is not valid JSON" in message
    assert "gen_ai.usage.output_tokens must be a non-negative integer" in message
    assert "needs gen_ai.request.model or its messages" in message
    assert message.endswith("(and 1 more)")  # top_p 7.5: refused once built, as ATDP checks it
    _, events = stored_session(server, engine, "acme", "mixed-1")
    assert kinds(events) == ["user_message", "llm_call"]  # the valid span, nothing of the rest
    assert all(e.metadata.extra["otel"]["span_id"] == "a1a1a1a1a1a1a1a1" for e in events)


def test_an_export_sent_again_writes_nothing_twice_even_after_a_restart(live) -> None:
    server, engine, keys = live
    first = export_body(
        span(
            "1111111111111111",
            "chat",
            0,
            chat_attributes(
                FIRST_INPUT,
                [{"role": "assistant", "parts": [lookup_call()]}],
                **{"gen_ai.conversation.id": "again-1"},
            ),
        )
    )
    assert post_json(server, keys["acme"], first).status_code == 200
    assert post_json(server, keys["acme"], first).status_code == 200
    _, events = stored_session(server, engine, "acme", "again-1")
    assert kinds(events) == ["user_message", "llm_call"]

    second = export_body(
        span(
            "2222222222222222",
            "execute_tool lookup_order",
            10,
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "lookup_order",
                "gen_ai.tool.call.id": "call-1",
                "gen_ai.tool.call.result": "Error: order 42 is archived",
            },
        )
    )
    server.__exit__(None, None, None)
    with GatewayServer(server.config) as restarted:  # it knows the trace only from the registry
        assert post_json(restarted, keys["acme"], first).status_code == 200
        assert post_json(restarted, keys["acme"], second).status_code == 200
        _, events = stored_session(restarted, engine, "acme", "again-1")
    assert kinds(events) == ["user_message", "llm_call", "tool_call"]
    assert [event.seq for event in events] == [0, 1, 2]
    assert events[2].outcome.error_class == "tool_error"


def test_a_sealing_tenant_gets_sealed_raw_copies_and_opt_out_is_honoured(
    world, registry_url, tmp_path
) -> None:
    engine, _ = world
    with transaction(engine) as session:
        create_tenant(session, "vault", TenantPolicy(seal_raw=True, sealed_readers=["audit"]))
        grant_agent(session, "vault", "support-bot")
        key = create_api_key(session, "vault").key
    seal_key = Fernet.generate_key().decode()
    config = GatewayConfig(database_url=registry_url, spool_dir=tmp_path / "s", seal_key=seal_key)
    with GatewayServer(config) as server:
        tracer, provider, exporter = sdk_tracer(server, key, headers={"X-Evoplane-Training": "off"})
        run_agent(tracer, conversation="vault-1")
        assert provider.force_flush(10) and exporter.results == [SpanExportResult.SUCCESS]
        provider.shutdown()
        _, events = stored_session(server, engine, "vault", "vault-1")
    assert EMAIL not in every_stored_value(engine)
    user = events[0]
    assert user.governance.sealed_ref == f"sealed:{user.id}"
    assert {e.governance.training.value for e in events} == {"debug_only"}
    with transaction(engine) as session:
        opened = unseal_event(session, "vault", user.id, key=seal_key, reader="audit")
    assert EMAIL in opened.observation.messages[0].content


# --- what the gateway refuses ------------------------------------------------------------------

PROTOBUF = {"Content-Type": "application/x-protobuf"}
MALFORMED = [
    pytest.param(b"\xff\xfe\x00garbage", PROTOBUF, 400, "invalid_otlp", id="not-protobuf"),
    pytest.param(b'{"resourceSpans": [', {}, 400, "invalid_otlp", id="not-json"),
    pytest.param(b"[1, 2]", {}, 400, "invalid_otlp", id="json-array"),
    pytest.param(b'{"resourceSpans": "none"}', {}, 400, "invalid_otlp", id="wrong-shape"),
    pytest.param(
        json.dumps(export_body(span("zz" * 8, "chat", 0, {}))).encode(),
        {},
        400,
        "invalid_otlp",
        id="base64-or-other-id",
    ),
    pytest.param(
        b"\x1f\x8b\x08 not gzip", {"Content-Encoding": "gzip"}, 400, "invalid_otlp", id="bad-gzip"
    ),
    pytest.param(b"{}", {"Content-Encoding": "br"}, 415, "unsupported_media_type", id="brotli"),
    pytest.param(b"{}", {"Content-Type": "text/plain"}, 415, "unsupported_media_type", id="text"),
]


@pytest.mark.parametrize(("body", "headers", "status", "code"), MALFORMED)
def test_malformed_otlp_gets_a_clear_error_and_writes_nothing(
    live, body, headers, status, code
) -> None:
    server, engine, keys = live
    response = post_json(server, keys["acme"], body, **headers)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == code and error["type"] in {"invalid_request_error", "api_error"}
    assert error["message"]
    server.flush()
    with transaction(engine) as s:
        assert list_trajectories(s, "acme") == []
    assert spool_files(server.config.spool_dir) == ""


def test_a_body_that_inflates_past_the_limit_is_refused(live) -> None:
    server, _, keys = live
    bomb = gzip.compress(b" " * (server.config.max_body_bytes * 4))
    response = post_json(server, keys["acme"], bomb, **{"Content-Encoding": "gzip"})
    assert response.status_code == 413 and response.json()["error"]["code"] == "body_too_large"


def test_keys_and_agents_are_checked(live) -> None:
    server, _, keys = live
    body = export_body(old_style_chat("00f067aa0ba902b8", 1, "hello"))
    assert post_json(server, "evp_wrong", body).status_code == 401
    limited = post_json(server, keys["acme-limited"], body)  # a key for internal-bot only
    assert limited.status_code == 403
    unknown = post_json(server, keys["acme"], body, **{"X-Evoplane-Agent": "nobody"})
    assert unknown.status_code == 404
    assert "X-Evoplane-Agent header" in unknown.json()["error"]["message"]
    ungranted = post_json(
        server,
        keys["acme"],
        export_body(old_style_chat("00f067aa0ba902b8", 1, "hello"), service="internal-bot"),
    )
    assert ungranted.status_code == 403  # internal-bot exists, but acme was never granted it
    assert "may not use agent 'internal-bot'" in ungranted.json()["error"]["message"]


def test_another_tenant_cannot_write_into_or_read_a_trajectory(live) -> None:
    server, engine, keys = live
    acme = export_body(old_style_chat("00f067aa0ba902b8", 1, "Acme's question"))
    assert post_json(server, keys["acme"], acme).status_code == 200
    acme_trajectory, acme_events = stored_session(server, engine, "acme", "old-1")

    # globex exports a span of the same trace id: it is globex's own trajectory.
    globex = export_body(old_style_chat("00f067aa0ba902c1", 2, "Globex's question"))
    response = post_json(server, keys["globex"], globex)
    assert response.status_code == 200
    globex_trajectory, globex_events = stored_session(server, engine, "globex", "old-1")
    assert globex_trajectory.id != acme_trajectory.id
    assert response.headers["x-evoplane-trajectory-id"] == str(globex_trajectory.id)
    _, after = stored_session(server, engine, "acme", "old-1")
    assert [e.id for e in after] == [e.id for e in acme_events]
    assert "Globex" not in json.dumps([e.model_dump(mode="json") for e in after])

    url = f"{server.base_url}/trajectories/{acme_trajectory.id}"
    assert httpx.get(url, headers=auth(keys["globex"])).status_code == 404
    assert httpx.get(url, headers=auth(keys["acme"])).status_code == 200
    feedback = httpx.post(
        f"{server.base_url}/feedback",
        headers=auth(keys["globex"]),
        json={"event_id": str(acme_events[1].id), "thumbs": "down"},
    )
    assert feedback.status_code == 404


# --- rewards and windows ----------------------------------------------------------------------


def test_window_analysis_counts_ingested_traces_and_their_rewards(live) -> None:
    """Feedback on an ingested llm_call, a correcting next turn and a failed tool run count
    in the evolution's window as they do for served calls."""
    server, engine, keys = live
    tracer, provider, exporter = sdk_tracer(server, keys["acme"])
    run_agent(tracer, conversation="window-1")
    correcting = [
        *FIRST_INPUT,
        {"role": "assistant", "parts": [text(ANSWER)]},
        {"role": "user", "parts": [text("No, that's wrong: order 42 was cancelled.")]},
    ]
    with tracer.start_as_current_span("turn", attributes={"gen_ai.conversation.id": "window-2"}):
        for inputs, output in [(FIRST_INPUT, ANSWER), (correcting, "Sorry, it was cancelled.")]:
            with tracer.start_as_current_span(
                "chat scripted-model",
                attributes=chat_attributes(
                    inputs, [{"role": "assistant", "parts": [text(output)]}]
                ),
            ):
                pass
    with tracer.start_as_current_span(
        "execute_tool lookup_order",
        attributes={
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "lookup_order",
            "gen_ai.tool.call.id": "call-7",
            "gen_ai.tool.call.arguments": '{"order_id": "A17"}',
            "gen_ai.tool.call.result": '{"error": "invalid_argument", "detail": "order_id"}',
            "gen_ai.conversation.id": "window-3",
        },
    ):
        pass
    assert provider.force_flush(10) and exporter.results == [SpanExportResult.SUCCESS]
    provider.shutdown()

    _, events = stored_session(server, engine, "acme", "window-1")
    answer = events[-1]
    feedback = httpx.post(
        f"{server.base_url}/feedback",
        headers=auth(keys["acme"]),
        json={"event_id": str(answer.id), "thumbs": "down", "critique": "It was cancelled."},
    )
    assert feedback.status_code == 201, feedback.text
    server.flush()

    with transaction(engine) as s:
        stats = measure_window(read_window(s, WindowSpec(agent="support-bot", last=10)))
        rewards = list_rewards(s, "acme", trajectory_id=answer.trajectory_id)
    assert (stats.trajectories, stats.sessions, stats.tenants) == (3, 3, ["acme"])
    assert stats.llm_calls == 4 and stats.tool_calls == 2
    assert stats.tool_error_rate.successes == 1  # the invalid_argument run
    assert stats.correction_rate.successes == 1  # "No, that's wrong" after window-2's answer
    assert stats.reward.n >= 1 and stats.reward.mean == 0.0  # the thumbs-down
    assert [(r.event_id, r.name) for r in rewards] == [(answer.id, "user_feedback")]


def test_an_agent_run_without_model_spans_is_its_own_llm_call(live) -> None:
    """A remote agent traced only by its invoke_agent client span: its input and answer."""
    server, engine, keys = live
    body = export_body(
        span(
            "abababababababab",
            "invoke_agent support-bot",
            0,
            {
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": "support-bot",
                "gen_ai.conversation.id": "remote-1",
                "gen_ai.input.messages": json.dumps(FIRST_INPUT),
                "gen_ai.output.messages": json.dumps(
                    [{"role": "assistant", "parts": [text(ANSWER)], "finish_reason": "stop"}]
                ),
            },
        )
    )
    assert post_json(server, keys["acme"], body).status_code == 200
    _, events = stored_session(server, engine, "acme", "remote-1")
    assert kinds(events) == ["user_message", "llm_call"]
    assert events[1].action.content == ANSWER
    assert events[1].metadata.extra["otel"]["operation"] == "invoke_agent"
