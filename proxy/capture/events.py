"""Turn one chat-completion exchange into ATDP events.

Per request, in order: the tool results the agent sends back (linked to the llm_call that
asked for them), the new user messages, then the llm_call itself (the request after
overlays, the response, tokens, timings, and the versions in force). What is "new" is
found by comparing the request's history with what this session already recorded.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from atdp import (
    ChatMessage,
    DecodingParams,
    Event,
    EventKind,
    EventMetadata,
    Governance,
    HiddenState,
    MessageAction,
    Observation,
    Outcome,
    ReplayClass,
    ReplayInfo,
    TokenUsage,
    ToolCall,
    ToolCallAction,
    ToolSpec,
    Traffic,
    Trajectory,
    VersionRefs,
    new_id,
    utcnow,
)
from proxy.overlays import Overlaid
from registry import AgentVersion

__all__ = [
    "Exchange",
    "PendingExchange",
    "SessionBook",
    "SessionState",
    "begin_exchange",
    "finish_exchange",
    "message_key",
]

_DECODING = ("temperature", "top_p", "max_tokens", "seed", "n", "stop")
_ERROR_MARKERS = ("error", "exception", "traceback", "invalid", "failed")


def message_key(message: dict[str, Any]) -> str:
    """A fingerprint of a message that survives clients re-serialising it differently."""
    calls = sorted(c.get("id", "") for c in message.get("tool_calls") or [])
    content = message.get("content")
    text = content if isinstance(content, str) else json.dumps(content, sort_keys=True)
    raw = json.dumps([message.get("role"), text, calls, message.get("tool_call_id")])
    return hashlib.sha1(raw.encode()).hexdigest()


@dataclass
class SessionState:
    """What the gateway remembers of a session to link events across requests."""

    trajectory: Trajectory
    next_seq: int = 0
    history: list[str] = field(default_factory=list)  # message keys already recorded
    calls: dict[str, tuple[uuid.UUID, ToolCall]] = field(default_factory=dict)
    last_llm_event: uuid.UUID | None = None
    last_request_key: str | None = None
    recorded: bool = False  # the trajectory record has been handed to the writer
    last_seen: float = field(default_factory=time.monotonic)
    outcome_reported: bool = False  # the agent reported a task outcome (/v1/events)

    def seq(self) -> int:
        self.next_seq += 1
        return self.next_seq - 1


class SessionBook:
    """Recent sessions' state, least recently used evicted first."""

    def __init__(self, capacity: int = 50_000) -> None:
        self._states: OrderedDict[tuple[str, str, str], SessionState] = OrderedDict()
        self.capacity = capacity

    def get(self, tenant: str, agent: str, session: str) -> SessionState | None:
        key = (tenant, agent, session)
        state = self._states.get(key)
        if state is not None:
            self._states.move_to_end(key)
        return state

    def start(self, trajectory: Trajectory) -> SessionState:
        state = SessionState(trajectory)
        self._states[(trajectory.tenant, trajectory.agent, trajectory.session)] = state
        if len(self._states) > self.capacity:
            self._states.popitem(last=False)
        return state

    def idle(self, older_than: float) -> list[SessionState]:
        """Sessions whose last request is more than `older_than` seconds ago."""
        cutoff = time.monotonic() - older_than
        return [state for state in self._states.values() if state.last_seen < cutoff]

    def forget(self, state: SessionState) -> None:
        trajectory = state.trajectory
        self._states.pop((trajectory.tenant, trajectory.agent, trajectory.session), None)

    def find_session(
        self, tenant: str, session: str, agent: str | None = None
    ) -> SessionState | None:
        """The most recent live state of a tenant's session (of `agent`, if given)."""
        for (key_tenant, key_agent, key_session), state in reversed(self._states.items()):
            if (key_tenant, key_session) == (tenant, session) and agent in (None, key_agent):
                return state
        return None

    def find_trajectory(self, trajectory_id: uuid.UUID) -> SessionState | None:
        for state in reversed(self._states.values()):
            if state.trajectory.id == trajectory_id:
                return state
        return None


@dataclass
class Exchange:
    """One served request: what the agent sent and what went upstream."""

    tenant: str
    agent: str
    session: str
    request: dict[str, Any]
    overlaid: Overlaid
    version: AgentVersion
    traffic: Traffic = Traffic.USER
    governance: Governance = field(default_factory=Governance)


@dataclass
class PendingExchange:
    """Phase one of an exchange's capture, built while the upstream is still answering.

    `before` holds the new tool results and user messages; `draft` is the llm_call with
    everything but the answer. `finish_exchange` completes it once the response is in.
    """

    exchange: Exchange
    keys: list[str]
    before: list[Event]
    draft: Event


def new_trajectory(tenant: str, agent: str, session: str, version: AgentVersion) -> Trajectory:
    parts = version.spec.part_hashes()
    return Trajectory(
        id=new_id(),
        tenant=tenant,
        agent=agent,
        session=session,
        versions=VersionRefs(
            agent_version_id=version.id,
            model=parts["model"],
            harness=parts["harness"],
            memory=parts["memory"],
            tool_schema=parts["tools"],
            guardrails=parts["guardrails"],
        ),
        started_at=utcnow(),
    )


def begin_exchange(state: SessionState, exchange: Exchange) -> PendingExchange:
    """Phase one: the events the request alone determines (no upstream answer needed)."""
    state.last_seen = time.monotonic()
    messages = exchange.request.get("messages") or []
    keys = [message_key(m) for m in messages]
    common = 0
    while common < min(len(keys), len(state.history)) and keys[common] == state.history[common]:
        common += 1
    before: list[Event] = []
    for message in messages[common:]:
        role = message.get("role")
        if role == "tool":
            before.append(_tool_result(state, exchange, message))
        elif role == "user":
            before.append(_user_message(state, exchange, message))
    parent = before[-1].id if before else state.last_llm_event
    # The request's messages are recorded now: a retry after a failed upstream call does
    # not record them twice.
    state.history = keys
    return PendingExchange(exchange, keys, before, _llm_draft(state, exchange, parent))


def finish_exchange(
    state: SessionState, pending: PendingExchange, response: dict[str, Any], latency_ms: float
) -> Event:
    """Phase two: the llm_call completed with the answer; the session state moves on."""
    choices = response.get("choices") or [{}]
    usage = response.get("usage") or {}
    extra: dict[str, Any] = {"response_id": response.get("id")}
    if len(choices) > 1:
        extra["other_choices"] = [c.get("message") for c in choices[1:]]
    action, logprob_extra = _message_action(choices[0])
    extra.update(logprob_extra)
    tokens = TokenUsage(
        prompt=usage.get("prompt_tokens") or 0, completion=usage.get("completion_tokens") or 0
    )
    model = pending.exchange.version.spec.model
    metadata = pending.draft.metadata.model_copy(
        update={
            "latency_ms": round(latency_ms, 3),
            "tokens": tokens,
            "cost_usd": model.cost_usd(tokens.prompt, tokens.completion),
            "model_checkpoint": response.get("model") or pending.exchange.overlaid.model,
            "extra": {k: v for k, v in extra.items() if v is not None},
        }
    )
    llm = pending.draft.model_copy(update={"action": action, "metadata": metadata})
    state.last_llm_event = llm.id
    state.history = [
        *pending.keys,
        message_key({"role": "assistant", **(choices[0].get("message") or {})}),
    ]
    for call in action.tool_calls:
        state.calls[call.id] = (llm.id, call)
    return llm


def _metadata(exchange: Exchange, **fields: Any) -> EventMetadata:
    return EventMetadata(
        tenant=exchange.tenant,
        session=exchange.session,
        traffic=exchange.traffic,
        agent_version_id=exchange.version.id,
        harness_version=exchange.overlaid.fingerprints.get("harness"),
        tool_schema_version=exchange.overlaid.fingerprints.get("tools"),
        memory_version=exchange.overlaid.fingerprints.get("memory"),
        guardrail_config_id=exchange.overlaid.fingerprints.get("guardrails"),
        retrieval_snapshot_id=exchange.overlaid.fingerprints.get("retrieval"),
        **fields,
    )


def _event(state: SessionState, exchange: Exchange, kind: EventKind, **fields: Any) -> Event:
    return Event(
        id=new_id(),
        trajectory_id=state.trajectory.id,
        seq=state.seq(),
        kind=kind,
        created_at=utcnow(),
        governance=exchange.governance,
        **fields,
    )


def _user_message(state: SessionState, exchange: Exchange, message: dict) -> Event:
    return _event(
        state,
        exchange,
        EventKind.USER_MESSAGE,
        parent_id=state.last_llm_event,
        observation=Observation(messages=[_chat_message(message)]),
        metadata=_metadata(exchange),
        replay=ReplayInfo(replay_class=ReplayClass.NON_REPLAYABLE, reason="a person's input"),
    )


def _tool_result(state: SessionState, exchange: Exchange, message: dict) -> Event:
    call_id = message.get("tool_call_id") or ""
    parent, call = state.calls.get(call_id, (state.last_llm_event, None))
    call = call or ToolCall(
        id=call_id or "unknown", name=message.get("name") or "unknown", arguments=""
    )
    content = message.get("content")
    returned = _parse_json(content) if isinstance(content, str) else content
    error = _error_class(returned)
    return _event(
        state,
        exchange,
        EventKind.TOOL_CALL,
        parent_id=parent,
        action=ToolCallAction(call=call),
        outcome=Outcome(tool_return=returned, error_class=error, success=error is None),
        metadata=_metadata(exchange),
        replay=ReplayInfo(
            replay_class=ReplayClass.APPROXIMATE,
            reason="executed by the agent; the recorded output can be substituted in replay",
        ),
    )


def _llm_draft(state: SessionState, exchange: Exchange, parent: uuid.UUID | None) -> Event:
    sent = exchange.overlaid.body
    depends_on_tools = any(m.get("role") == "tool" for m in sent.get("messages") or [])
    replay = (
        ReplayInfo(
            replay_class=ReplayClass.APPROXIMATE, reason="its prompt holds recorded tool outputs"
        )
        if depends_on_tools
        else ReplayInfo(replay_class=ReplayClass.DETERMINISTIC)
    )
    return _event(
        state,
        exchange,
        EventKind.LLM_CALL,
        parent_id=parent,
        observation=Observation(
            messages=[_chat_message(m) for m in sent.get("messages") or []],
            tools=[_tool_spec(t) for t in sent.get("tools") or []],
            # What the model saw is recorded; this recovers what the agent sent, so a replay
            # can serve the agent's request under another version.
            data={"agent_request": exchange.overlaid.undo} if exchange.overlaid.undo else None,
        ),
        hidden=HiddenState(harness_fingerprint=exchange.overlaid.fingerprints.get("harness")),
        metadata=_metadata(
            exchange,
            decoding=_decoding(sent),
            prompt_template_fingerprint=exchange.overlaid.fingerprints.get("harness"),
        ),
        replay=replay,
    )


def _message_action(choice: dict) -> tuple[MessageAction, dict]:
    message = choice.get("message") or {}
    token_ids = choice.get("token_ids") or choice.get("output_token_ids")
    content_logprobs = ((choice.get("logprobs") or {}).get("content")) or []
    logprobs = [entry.get("logprob") for entry in content_logprobs]
    extra: dict[str, Any] = {}
    if logprobs and not (token_ids and len(token_ids) == len(logprobs)):
        # No aligned token ids: keep the per-token logprobs, but not as the action's tokens.
        extra["logprobs"] = [
            {"token": e.get("token"), "logprob": e.get("logprob")} for e in content_logprobs
        ]
        logprobs = []
    action = MessageAction(
        content=message.get("content") if isinstance(message.get("content"), str) else None,
        tool_calls=[_tool_call(c) for c in message.get("tool_calls") or []],
        finish_reason=choice.get("finish_reason"),
        token_ids=list(token_ids) if token_ids else None,
        logprobs=[min(0.0, float(lp)) for lp in logprobs] if logprobs and token_ids else None,
    )
    return action, extra


def _tool_call(call: dict) -> ToolCall:
    function = call.get("function") or {}
    return ToolCall(
        id=call.get("id") or "",
        name=function.get("name") or "unknown",
        arguments=function.get("arguments") or "",
    )


def _chat_message(message: dict) -> ChatMessage:
    content = message.get("content")
    if content is not None and not isinstance(content, str | list):
        content = json.dumps(content)
    return ChatMessage(
        role=message.get("role")
        if message.get("role") in {"system", "developer", "user", "assistant", "tool"}
        else "user",
        content=content,
        name=message.get("name"),
        tool_calls=[_tool_call(c) for c in message.get("tool_calls") or []],
        tool_call_id=message.get("tool_call_id"),
    )


def _tool_spec(tool: dict) -> ToolSpec:
    function = tool.get("function") or {}
    return ToolSpec(
        name=function.get("name") or "unknown",
        description=function.get("description"),
        parameters=function.get("parameters"),
    )


def _decoding(body: dict) -> DecodingParams:
    known = {k: body[k] for k in _DECODING if body.get(k) is not None}
    if isinstance(known.get("stop"), str):
        known["stop"] = [known["stop"]]
    extra = {
        k: body[k]
        for k in ("tool_choice", "response_format", "top_logprobs", "logprobs")
        if k in body
    }
    return DecodingParams(**known, extra=extra)


def _parse_json(text: str) -> Any:
    try:
        return json.loads(text)
    except (json.JSONDecodeError, ValueError):
        return text


def _error_class(returned: Any) -> str | None:
    """Classify a tool result as an error the way agents usually report one."""
    if isinstance(returned, dict):
        for key in ("error", "error_type", "exception"):
            if returned.get(key):
                value = returned.get("error_type") or returned.get("type") or key
                return str(value)[:200] if not isinstance(value, dict) else "error"
        return None
    if isinstance(returned, str):
        head = returned.strip().lower()[:80]
        if any(head.startswith(marker) for marker in _ERROR_MARKERS):
            return "tool_error"
    return None
