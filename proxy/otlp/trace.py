"""One trace's GenAI operations as ATDP events, continued as more of the trace arrives.

A trace is one trajectory. Its operations become the events the gateway records for a call
it serves, in span start order: the tool results and user messages a model call's input adds
to the conversation, then the llm_call; an execute_tool span is a tool_call linked to the
llm_call that asked for it; an agent run records the user's input. A batch span processor
exports spans as they end (the root last), so one trace often arrives over several exports:
what was recorded is kept in a `TraceState`, and the next export continues it.

Ids come from the tenant, trace and span, so an export sent twice (an exporter retrying
after a timeout) writes nothing twice.
"""

from __future__ import annotations

import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from atdp import EventKind, ReplayClass
from proxy.capture.events import (
    EventDocument,
    SessionState,
    atdp_name,
    chat_message_document,
    message_key,
    tool_call_document,
)
from proxy.capture.tool_results import tool_error_class
from proxy.otlp.decode import Span
from proxy.otlp.genai import INVOKE_AGENT, ModelCall, ToolRun
from proxy.otlp.messages import parsed_json
from registry import AgentVersion

__all__ = ["Recorded", "TraceBook", "TraceRecorder", "TraceState", "trajectory_id"]

_IDS = uuid.UUID("5d1c0b6e-7f0a-4c33-9d55-0e3a7c1f2b48")  # namespace of ingested records' ids
SOURCE = "otlp"
_MODEL_REPLAY = (
    "recorded from an OpenTelemetry span, not served by the gateway: the request is rebuilt "
    "from the span's messages, with the decoding parameters and tools it records"
)
_NO_CONTENT = (
    "recorded from an OpenTelemetry span without its messages (the instrumentation did not "
    "capture content): there is no request to send again"
)
_TOOL_REPLAY = "executed by the agent; the recorded output can be substituted in replay"
_NO_RESULT = (
    "executed by the agent, and its span records no result (gen_ai.tool.call.result): "
    "there is no output to substitute"
)


def trajectory_id(tenant: str, trace_id: str) -> uuid.UUID:
    """The trajectory of a tenant's trace: the same for every export of the trace, and
    another tenant's trace of the same id is another trajectory."""
    return uuid.uuid5(_IDS, f"{tenant}\x1f{trace_id}")


@dataclass
class TraceState:
    """What is recorded of an ingested trace, to continue it.

    `session` is the gateway's own session state (sequence numbers, the conversation seen
    so far, the tool calls asked for, the last llm_call); beside it the spans recorded, the
    tool calls whose result is recorded, and the user messages an agent run recorded that
    no model call has shown yet (they must not be recorded twice).
    """

    session: SessionState
    version: AgentVersion
    spans: set[str] = field(default_factory=set)
    results: dict[str, str] = field(default_factory=dict)  # tool call id -> its event's id
    announced: dict[int, str] = field(default_factory=dict)  # message key -> its event's id

    @property
    def trajectory_id(self) -> uuid.UUID:
        return self.session.trajectory.id

    def checkpoint(self) -> Callable[[], None]:
        """A function that puts the state back as it is now (a span that proves invalid
        once built must leave no trace)."""
        session = self.session
        saved = (
            session.next_seq,
            list(session.history),
            dict(session.calls),
            session.last_llm_event,
            session.last_request_key,
        )
        spans, results, announced = set(self.spans), dict(self.results), dict(self.announced)

        def restore() -> None:
            (
                session.next_seq,
                session.history,
                session.calls,
                session.last_llm_event,
                session.last_request_key,
            ) = saved
            self.spans, self.results, self.announced = spans, results, announced

        return restore


class TraceBook:
    """Recently ingested traces' state, least recently used evicted first."""

    def __init__(self, capacity: int = 50_000) -> None:
        self._states: OrderedDict[uuid.UUID, TraceState] = OrderedDict()
        self.capacity = capacity

    def get(self, trajectory: uuid.UUID) -> TraceState | None:
        state = self._states.get(trajectory)
        if state is not None:
            self._states.move_to_end(trajectory)
        return state

    def keep(self, state: TraceState) -> TraceState:
        """The state the book holds for the trace: one recorded meanwhile wins."""
        kept = self._states.setdefault(state.trajectory_id, state)
        if len(self._states) > self.capacity:
            self._states.popitem(last=False)
        return kept


@dataclass
class Recorded:
    """One span's events, and the llm_call it repeats when its prompt is the last one's."""

    events: list[EventDocument]
    regenerated: uuid.UUID | None = None


class TraceRecorder:
    """Builds the events of one export's operations of one trace, on the trace's state.

    Args:
        governance: the `atdp.Governance` document every event gets.
        model_calls: whether the trace has model-call spans (this export or before); if it
            has none, an agent run that records an answer stands in for them.
    """

    def __init__(self, state: TraceState, governance: dict[str, Any], *, model_calls: bool) -> None:
        self.state, self.governance, self.model_calls = state, governance, model_calls
        trajectory = state.session.trajectory
        self.metadata = {
            "tenant": trajectory.tenant,
            "session": trajectory.session,
            "traffic": "user",
            "agent_version_id": state.version.id,
        }

    def record(self, operation: ModelCall | ToolRun) -> Recorded:
        """The operation's events (none for a span recorded before); the state moves on."""
        span = operation.span
        if span.span_id in self.state.spans:  # sent again: recorded already
            return Recorded([])
        if isinstance(operation, ToolRun):
            recorded = Recorded(self._tool_run(operation))
        elif operation.operation == INVOKE_AGENT and (self.model_calls or not operation.answers):
            recorded = Recorded(self._agent_input(operation))
        else:
            recorded = self._model_call(operation)
        self.state.spans.add(span.span_id)
        return recorded

    def _event(
        self, span: Span, part: str, kind: EventKind, offset: int, **parts: Any
    ) -> EventDocument:
        """An event of `span`; `offset` orders the events of one span by their time."""
        session = self.state.session
        created = _time(span.start_unix_nano) + timedelta(microseconds=offset)
        key = f"{session.trajectory.id}\x1f{span.span_id}\x1f{part}"
        return {
            "id": str(uuid.uuid5(_IDS, key)),
            "trajectory_id": str(session.trajectory.id),
            "seq": session.seq(),
            "kind": kind.value,
            "created_at": created.isoformat(),
            "governance": self.governance,
            **parts,
        }

    def _metadata(self, span: Span, operation: str, **known: Any) -> dict[str, Any]:
        otel = {"trace_id": span.trace_id, "span_id": span.span_id, "operation": operation}
        extra = {"source": SOURCE, "otel": otel, **known.pop("extra", {})}
        return {**self.metadata, **known, "extra": extra}

    def _user_message(self, span: Span, message: dict, index: int, offset: int) -> EventDocument:
        return self._event(
            span,
            f"message-{index}",
            EventKind.USER_MESSAGE,
            offset,
            parent_id=_text_id(self.state.session.last_llm_event),
            observation={"messages": [chat_message_document(message)]},
            metadata=self._metadata(span, "user_message"),
            replay={"class": ReplayClass.NON_REPLAYABLE.value, "reason": "a person's input"},
        )

    def _tool_result(self, span: Span, message: dict, index: int, offset: int) -> EventDocument:
        """A tool result a model call's input shows, which no execute_tool span recorded."""
        call_id = message.get("tool_call_id") or ""
        parent, call = self.state.session.calls.get(
            call_id, (self.state.session.last_llm_event, None)
        )
        call = call or {"id": call_id or "unknown", "name": "unknown", "arguments": ""}
        returned = parsed_json(message.get("content"))
        error = tool_error_class(returned, name=atdp_name)
        event = self._event(
            span,
            f"message-{index}",
            EventKind.TOOL_CALL,
            offset,
            parent_id=_text_id(parent),
            action={"type": "tool_call", "call": call},
            outcome={"tool_return": returned, "error_class": error, "success": error is None},
            metadata=self._metadata(span, "tool_result"),
            replay={"class": ReplayClass.APPROXIMATE.value, "reason": _TOOL_REPLAY},
        )
        self.state.results[call_id] = event["id"]
        return event

    def _tool_run(self, run: ToolRun) -> list[EventDocument]:
        if run.call_id and run.call_id in self.state.results:
            return []  # a model call's input showed its result already
        session = self.state.session
        parent, call = session.calls.get(run.call_id, (session.last_llm_event, None))
        call = call or {"id": run.call_id, "name": atdp_name(run.name), "arguments": run.arguments}
        event = self._event(
            run.span,
            "tool",
            EventKind.TOOL_CALL,
            0,
            parent_id=_text_id(parent),
            action={"type": "tool_call", "call": call},
            outcome=_tool_outcome(run),
            metadata=self._metadata(run.span, "execute_tool", latency_ms=_latency_ms(run.span)),
            replay={
                "class": (
                    ReplayClass.APPROXIMATE if run.has_result else ReplayClass.NON_REPLAYABLE
                ).value,
                "reason": _TOOL_REPLAY if run.has_result else _NO_RESULT,
            },
        )
        if run.call_id:
            self.state.results[run.call_id] = event["id"]
        return [event]

    def _agent_input(self, run: ModelCall) -> list[EventDocument]:
        """An agent run's new user messages (those its model calls have not shown)."""
        events = []
        history = set(self.state.session.history)
        for index in range(_after_last_answer(run.messages), len(run.messages)):
            message = run.messages[index]
            key = message_key(message)
            if message.get("role") != "user" or key in history or key in self.state.announced:
                continue
            events.append(self._user_message(run.span, message, index, len(events)))
            self.state.announced[key] = events[-1]["id"]
        return events

    def _model_call(self, call: ModelCall) -> Recorded:
        session = self.state.session
        keys = [message_key(m) for m in call.messages]
        before, last_input = self._new_inputs(call, keys)
        request_key = hash(tuple(keys))
        regenerated = (
            session.last_llm_event
            if call.messages and request_key == session.last_request_key
            else None
        )
        session.last_request_key = request_key
        parent = last_input or _text_id(session.last_llm_event)
        llm = self._event(
            call.span,
            "llm",
            EventKind.LLM_CALL,
            len(before),
            parent_id=parent,
            **_llm_parts(call),
            metadata=self._metadata(call.span, call.operation, **_llm_metadata(call, self.state)),
        )
        session.last_llm_event = uuid.UUID(llm["id"])
        answer = call.answers[0] if call.answers else None
        session.history = [*keys, message_key(answer)] if answer else keys
        for tool_call in (llm.get("action") or {}).get("tool_calls", []):
            session.calls[tool_call["id"]] = (session.last_llm_event, tool_call)
        return Recorded([*before, llm], regenerated)

    def _new_inputs(
        self, call: ModelCall, keys: list[int]
    ) -> tuple[list[EventDocument], str | None]:
        """The tool results and user messages this call's input adds to the conversation:
        those after what the last call saw and answered, and after the last answer in it
        (an input may repeat a conversation recorded before, or interleave another agent's).
        Also the id of the last input event, recorded now or by a tool run: the call's cause.
        """
        history = self.state.session.history
        common = 0
        while common < min(len(keys), len(history)) and keys[common] == history[common]:
            common += 1
        events: list[EventDocument] = []
        last: str | None = None
        start = max(common, _after_last_answer(call.messages))
        for index in range(start, len(call.messages)):
            message, role = call.messages[index], call.messages[index].get("role")
            if role == "tool" and message.get("tool_call_id") in self.state.results:
                last = self.state.results[message["tool_call_id"]]  # a tool run recorded it
            elif role == "tool":
                events.append(self._tool_result(call.span, message, index, len(events)))
                last = events[-1]["id"]
            elif role == "user" and keys[index] in self.state.announced:
                last = self.state.announced.pop(keys[index])  # an agent run recorded it
            elif role == "user":
                events.append(self._user_message(call.span, message, index, len(events)))
                last = events[-1]["id"]
        return events, last


def _llm_parts(call: ModelCall) -> dict[str, Any]:
    """The llm_call's observation, action, outcome and replay class."""
    observation = {
        "messages": [chat_message_document(m) for m in call.messages],
        "tools": [_tool_spec(tool) for tool in call.tools],
    }
    parts: dict[str, Any] = {
        "observation": observation,
        "replay": {
            "class": (
                ReplayClass.APPROXIMATE if call.messages else ReplayClass.NON_REPLAYABLE
            ).value,
            "reason": _MODEL_REPLAY if call.messages else _NO_CONTENT,
        },
    }
    if call.answers:
        parts["action"] = _action(call.answers[0])
    if call.error is not None:
        kind, message = call.error
        parts["outcome"] = {
            "error_class": atdp_name(kind),
            "error_message": message or None,
            "success": False,
        }
    return parts


def _llm_metadata(call: ModelCall, state: TraceState) -> dict[str, Any]:
    model = state.version.spec.model
    served = call.response_model or call.request_model
    metadata: dict[str, Any] = {
        "latency_ms": _latency_ms(call.span),
        "decoding": call.decoding,
        "model_checkpoint": served,
    }
    if call.input_tokens is not None or call.output_tokens is not None:
        prompt, completion = call.input_tokens or 0, call.output_tokens or 0
        metadata["tokens"] = {"prompt": prompt, "completion": completion}
        if served and served in {model.model, model.adapter}:  # the version's prices apply
            metadata["cost_usd"] = model.cost_usd(prompt, completion)
    extra = {
        "provider": call.provider,
        "request_model": call.request_model,
        "response_id": call.response_id,
        "other_choices": [chat_message_document(a) for a in call.answers[1:]] or None,
    }
    metadata["extra"] = {key: value for key, value in extra.items() if value is not None}
    return {key: value for key, value in metadata.items() if value is not None}


def _action(answer: dict[str, Any]) -> dict[str, Any]:
    """A model's answer as the `MessageAction` document the gateway records."""
    content = answer.get("content")
    if isinstance(content, list):  # the text of an answer that holds other parts too
        texts = [part.get("text") for part in content if isinstance(part.get("text"), str)]
        content = "\n".join(texts) if texts else None
    return {
        "type": "message",
        "content": content,
        "tool_calls": [tool_call_document(call) for call in answer.get("tool_calls") or []],
        "finish_reason": answer.get("finish_reason"),
        "token_ids": None,
        "logprobs": None,
    }


def _tool_outcome(run: ToolRun) -> dict[str, Any]:
    returned = run.result if run.has_result else None
    if run.error is not None:
        kind, message = run.error
        return {
            "tool_return": returned,
            "error_class": atdp_name(kind),
            "error_message": message or None,
            "success": False,
        }
    error = tool_error_class(returned, name=atdp_name) if run.has_result else None
    success = (error is None) if run.has_result or run.span.status_code == 1 else None
    return {"tool_return": returned, "error_class": error, "success": success}


def _tool_spec(tool: dict[str, Any]) -> dict[str, Any]:
    function = tool.get("function") or {}
    return {
        "name": atdp_name(function.get("name") or "unknown"),
        "description": function.get("description"),
        "parameters": function.get("parameters"),
    }


def _after_last_answer(messages: list[dict[str, Any]]) -> int:
    """The index after the input's last assistant message (0 when it has none)."""
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].get("role") == "assistant":
            return index + 1
    return 0


def _time(unix_nano: int) -> datetime:
    return datetime.fromtimestamp(unix_nano / 1e9, UTC)


def _latency_ms(span: Span) -> float | None:
    if span.end_unix_nano < span.start_unix_nano:
        return None
    return round((span.end_unix_nano - span.start_unix_nano) / 1e6, 3)


def _text_id(value: uuid.UUID | None) -> str | None:
    return None if value is None else str(value)
