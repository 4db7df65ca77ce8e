"""Turn one chat-completion exchange into ATDP events.

Per request, in order: the tool results the agent sends back (linked to the llm_call that
asked for them), the new user messages, then the llm_call itself (the request after
overlays, the response, tokens, timings, and the versions in force). What is "new" is
found by comparing the request's history with what this session already recorded.

Events are built as documents: plain dicts in the JSON shape of `atdp.Event`, which go
through redaction and onto the spool as they are. The capture drain validates each into
an `Event` off the request path (see `proxy.capture.drain`): building, validating, copying
and serialising the models on every request was, measured, the largest part of the
gateway's own CPU per request.
"""

from __future__ import annotations

import hashlib
import re
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import orjson

from atdp import (
    AGENT_REQUEST,
    PROTOCOL_REQUEST,
    EventKind,
    MessageAction,
    ReplayClass,
    Traffic,
    Trajectory,
    VersionRefs,
    new_id,
    utcnow,
)
from proxy.capture.tool_results import tool_error_class
from registry import AgentVersion, SessionProgress
from runtime.version.overlays import Overlaid, task_type_of

__all__ = [
    "EventDocument",
    "Exchange",
    "PendingExchange",
    "SessionBook",
    "SessionState",
    "answer_key",
    "atdp_name",
    "begin_exchange",
    "chat_message_document",
    "finish_exchange",
    "message_key",
    "new_trajectory",
    "resumed_state",
    "shown_answer",
    "task_type_of",
    "tool_call_document",
]

# An event in the JSON shape of `atdp.Event` (ids and times as strings, defaults left out).
EventDocument = dict[str, Any]

_DECODING = ("temperature", "top_p", "max_tokens", "seed", "n", "stop")
_ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def message_key(message: dict[str, Any]) -> int:
    """A fingerprint of a message that survives clients re-serialising it differently.

    Compared only with this process's own records of the session, so Python's hash does
    (a collision, at 2**-64, would skip recording one message).
    """
    calls = tuple(sorted(c.get("id", "") for c in message.get("tool_calls") or []))
    content = message.get("content")
    text = content if isinstance(content, str) else _canonical(content)
    return hash((message.get("role"), text, calls, message.get("tool_call_id")))


def answer_key(message: dict[str, Any]) -> str | None:
    """A key of an assistant message that any process computes alike, so a gateway that did
    not serve a session's last turn can find the recorded llm_call a request shows again:
    its tool calls' ids if it made any (an SDK may re-serialise the text around them),
    else its text, trimmed. None for any other message."""
    if message.get("role") != "assistant":
        return None
    calls = sorted(str(c.get("id") or "") for c in message.get("tool_calls") or [])
    if calls:
        said = "calls:" + "\x1f".join(calls)
    else:
        content = message.get("content")
        if isinstance(content, list):  # text parts, as some SDKs send an answer back
            content = "".join(p.get("text") or "" for p in content if isinstance(p, dict))
        said = "text:" + (content.strip() if isinstance(content, str) else "")
    return hashlib.blake2b(said.encode(), digest_size=16).hexdigest()


def _canonical(value: Any) -> str:
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    except TypeError:  # not JSON (a client cannot send that, but a caller might)
        return repr(value)


@dataclass
class SessionState:
    """What the gateway remembers of a session to link events across requests."""

    trajectory: Trajectory
    next_seq: int = 0
    history: list[int] = field(default_factory=list)  # message keys already recorded
    # The tool calls the model asked for, by call id: (its llm_call, the call's document).
    calls: dict[str, tuple[uuid.UUID, dict[str, str]]] = field(default_factory=dict)
    # Calls whose outcome was recorded first-hand (the MCP proxy ran them): the result the
    # agent then shows the model is not recorded again.
    answered: set[str] = field(default_factory=set)
    last_llm_event: uuid.UUID | None = None
    answers: set[str] = field(default_factory=set)  # `answer_key`s this process recorded
    last_request_key: int | None = None  # the last request whose answer was delivered
    # The last answer the client never received: (its request's key, the event it answered,
    # its llm_call), so the client's retry of that request links to it and is no re-ask.
    undelivered: tuple[int, str | None, uuid.UUID] | None = None
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
        return self.put(SessionState(trajectory))

    def put(self, state: SessionState) -> SessionState:
        trajectory = state.trajectory
        key = (trajectory.tenant, trajectory.agent, trajectory.session)
        self._states[key] = state
        self._states.move_to_end(key)
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


def shown_answer(messages: list[dict[str, Any]]) -> tuple[int, str] | None:
    """(the index, the `answer_key`) of the last answer a request shows again, if any."""
    for index in range(len(messages) - 1, -1, -1):
        key = answer_key(messages[index])
        if key is not None:
            return index, key
    return None


def resumed_state(
    progress: SessionProgress,
    messages: list[dict[str, Any]],
    shown: tuple[int, str],
    known: SessionState | None = None,
) -> SessionState | None:
    """A session's state rebuilt from the registry, for a request whose last shown answer
    (`shown`) is recorded there: the messages up to it count as recorded, its llm_call is
    the parent of what follows, and every recorded tool call links its result. None if
    the answer is not (yet) recorded. `known`: this process's own state of the session,
    whose records of the same trajectory may not be committed yet."""
    index, key = shown
    matched = [answer for answer in progress.answers if answer.key == key]
    if not matched:
        return None
    state = SessionState(progress.trajectory, next_seq=progress.next_seq, recorded=True)
    state.history = [message_key(m) for m in messages[: index + 1]]
    for answer in progress.answers:
        for call in answer.tool_calls:
            state.calls[call["id"]] = (answer.event_id, call)
    state.last_llm_event = matched[-1].event_id
    state.answers.add(key)
    if known is not None and known.trajectory.id == state.trajectory.id:
        state.next_seq = max(state.next_seq, known.next_seq)
        state.last_request_key = known.last_request_key
        state.outcome_reported = known.outcome_reported
    return state


@dataclass
class Exchange:
    """One served request: what the agent sent and what went upstream.

    `governance` is the document of the `atdp.Governance` decided for the request.
    `protocol`: for a request that came in over another protocol than chat completions
    (`request` is then its chat-completions translation), that protocol's name and the
    agent's own request in it. `stored_response`: the Responses API response this call
    stores (its id, times), recorded in the llm_call's `metadata.extra` (see
    `proxy.protocols.recorded`).
    """

    tenant: str
    agent: str
    session: str
    request: dict[str, Any]
    overlaid: Overlaid
    version: AgentVersion
    traffic: Traffic = Traffic.USER
    governance: dict[str, Any] = field(default_factory=dict)
    protocol: tuple[str, dict[str, Any]] | None = None
    stored_response: dict[str, Any] | None = None


@dataclass
class PendingExchange:
    """Phase one of an exchange's capture, built while the upstream is still answering.

    `before` holds the new tool results and user messages; `draft` is the llm_call with
    everything but the answer. `finish_exchange` completes it once the response is in.
    """

    exchange: Exchange
    keys: list[int]
    before: list[EventDocument]
    draft: EventDocument
    draft_id: uuid.UUID  # the llm_call's id (`draft["id"]` as text)
    retry_of: uuid.UUID | None = None  # the undelivered call this request is a retry of


def new_trajectory(
    tenant: str, agent: str, session: str, version: AgentVersion, task_type: str | None = None
) -> Trajectory:
    parts = version.spec.part_hashes()
    return Trajectory(
        id=new_id(),
        tenant=tenant,
        agent=agent,
        session=session,
        task_type=task_type,
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
    before: list[EventDocument] = []
    metadata = _metadata(exchange)
    for message in messages[common:]:
        role = message.get("role")
        if role == "tool":
            if message.get("tool_call_id") in state.answered:
                continue
            before.append(_tool_result(state, exchange, message, metadata))
        elif role == "user":
            before.append(_user_message(state, exchange, message, metadata))
    parent = before[-1]["id"] if before else _text_id(state.last_llm_event)
    # The request's messages are recorded now: a retry after a failed upstream call does
    # not record them twice.
    state.history = keys
    draft_id = new_id()
    draft = _llm_draft(state, exchange, parent, draft_id)
    return PendingExchange(exchange, keys, before, draft, draft_id)


def finish_exchange(
    state: SessionState,
    pending: PendingExchange,
    response: dict[str, Any],
    latency_ms: float,
    *,
    delivered: bool = True,
) -> EventDocument:
    """Phase two: the llm_call completed with the answer; the session state moves on,
    unless the client never received it (`delivered` false: it disconnected first), when
    the session stays where the request left it for the client's retry."""
    choices = response.get("choices") or [{}]
    usage = response.get("usage") or {}
    answer = {"role": "assistant", **(choices[0].get("message") or {})}
    extra: dict[str, Any] = {
        "response_id": response.get("id"),
        "answer_key": answer_key(answer),
        # Counted apart only when reported (a Responses API answer shows them).
        "cached_tokens": _count(_detail(usage, "prompt_tokens_details", "cached_tokens")) or None,
        "reasoning_tokens": (
            _count(_detail(usage, "completion_tokens_details", "reasoning_tokens")) or None
        ),
        "stored_response": pending.exchange.stored_response,
        "retry_of": str(pending.retry_of) if pending.retry_of else None,
        "delivered": None if delivered else False,
    }
    if len(choices) > 1:
        extra["other_choices"] = [c.get("message") for c in choices[1:]]
    action, logprob_extra = _action_document(choices[0])
    extra.update(logprob_extra)
    shown = ((choices[0].get("logprobs") or {}).get("content")) or []
    if pending.exchange.stored_response is not None and shown and "logprobs" not in extra:
        # The action keeps only the floats (aligned with token ids); the stored response
        # shows the tokens and their alternatives too.
        extra["logprobs"] = _logprob_entries(shown)
    prompt, completion = _count(usage.get("prompt_tokens")), _count(usage.get("completion_tokens"))
    model = pending.exchange.version.spec.model
    metadata = {
        **pending.draft["metadata"],
        "latency_ms": round(latency_ms, 3),
        "tokens": {"prompt": prompt, "completion": completion},
        "cost_usd": model.cost_usd(prompt, completion),
        "model_checkpoint": response.get("model") or pending.exchange.overlaid.model,
        "extra": {k: v for k, v in extra.items() if v is not None},
    }
    llm = {**pending.draft, "action": action, "metadata": metadata}
    if not delivered:
        key = hash(tuple(pending.keys))
        if key != state.last_request_key:  # else the client's retry was answered already
            state.undelivered = (key, pending.draft.get("parent_id"), pending.draft_id)
        return llm
    state.undelivered = None
    state.last_llm_event = pending.draft_id
    state.answers.add(extra["answer_key"])
    state.history = [*pending.keys, message_key(answer)]
    for call in action["tool_calls"]:
        state.calls[call["id"]] = (state.last_llm_event, call)
    return llm


def _detail(usage: dict[str, Any], details: str, key: str) -> Any:
    found = usage.get(details)
    return found.get(key) if isinstance(found, dict) else None


def _count(value: Any) -> int:
    """A token count as reported, or 0 when the upstream reports none (or nonsense)."""
    return int(value) if isinstance(value, int | float) and value > 0 else 0


def atdp_name(value: Any) -> str:
    """`value` as an ATDP `Name` (1-200 printable characters): model output is not checked
    like a request is, and a recorded event must not be refused for a tool's odd name."""
    cleaned = _CONTROL.sub(" ", str(value)[:200]).strip()
    return cleaned or "unknown"


def _text_id(value: uuid.UUID | None) -> str | None:
    return None if value is None else str(value)


def _metadata(exchange: Exchange) -> dict[str, Any]:
    fingerprints = exchange.overlaid.fingerprints
    metadata = {
        "tenant": exchange.tenant,
        "session": exchange.session,
        "traffic": exchange.traffic.value,
        "agent_version_id": exchange.version.id,
        "harness_version": fingerprints.get("harness"),
        "tool_schema_version": fingerprints.get("tools"),
        "memory_version": fingerprints.get("memory"),
        "guardrail_config_id": fingerprints.get("guardrails"),
        "retrieval_snapshot_id": fingerprints.get("retrieval"),
    }
    return {key: value for key, value in metadata.items() if value is not None}


def _event(
    state: SessionState,
    exchange: Exchange,
    kind: EventKind,
    event_id: uuid.UUID | None = None,
    **parts: Any,
) -> EventDocument:
    return {
        "id": str(event_id or new_id()),
        "trajectory_id": str(state.trajectory.id),
        "seq": state.seq(),
        "kind": kind.value,
        "created_at": utcnow().isoformat(),
        "governance": exchange.governance,
        **parts,
    }


def _user_message(
    state: SessionState, exchange: Exchange, message: dict, metadata: dict[str, Any]
) -> EventDocument:
    return _event(
        state,
        exchange,
        EventKind.USER_MESSAGE,
        parent_id=_text_id(state.last_llm_event),
        observation={"messages": [chat_message_document(message)]},
        metadata=metadata,
        replay={"class": ReplayClass.NON_REPLAYABLE.value, "reason": "a person's input"},
    )


def _tool_result(
    state: SessionState, exchange: Exchange, message: dict, metadata: dict[str, Any]
) -> EventDocument:
    call_id = message.get("tool_call_id") or ""
    parent, call = state.calls.get(call_id, (state.last_llm_event, None))
    call = call or {
        "id": call_id or "unknown",
        "name": atdp_name(message.get("name") or "unknown"),
        "arguments": "",
    }
    content = message.get("content")
    returned = _parse_json(content) if isinstance(content, str) else content
    error = _error_class(returned)
    return _event(
        state,
        exchange,
        EventKind.TOOL_CALL,
        parent_id=_text_id(parent),
        action={"type": "tool_call", "call": call},
        outcome={"tool_return": returned, "error_class": error, "success": error is None},
        metadata=metadata,
        replay={
            "class": ReplayClass.APPROXIMATE.value,
            "reason": "executed by the agent; the recorded output can be substituted in replay",
        },
    )


def _replay_info(sent: dict[str, Any]) -> dict[str, Any]:
    """Deterministic only when re-sending the recorded request must give the recorded answer:
    no recorded tool outputs in the prompt, and greedy decoding or a fixed seed."""
    reasons = []
    if any(m.get("role") == "tool" for m in sent.get("messages") or []):
        reasons.append("its prompt holds recorded tool outputs")
    temperature = sent.get("temperature")
    if isinstance(temperature, int | float) and temperature > 0 and sent.get("seed") is None:
        reasons.append(f"sampled at temperature {temperature} without a seed: a re-run draws anew")
    if not reasons:
        return {"class": ReplayClass.DETERMINISTIC.value}
    return {"class": ReplayClass.APPROXIMATE.value, "reason": "; ".join(reasons)}


def _llm_draft(
    state: SessionState, exchange: Exchange, parent: str | None, event_id: uuid.UUID
) -> EventDocument:
    sent = exchange.overlaid.body
    harness = exchange.overlaid.fingerprints.get("harness")
    observation: dict[str, Any] = {
        "messages": [chat_message_document(m) for m in sent.get("messages") or []],
        "tools": [_tool_spec(t) for t in sent.get("tools") or []],
    }
    if exchange.overlaid.undo:
        # What the model saw is recorded; this recovers what the agent sent, so a replay
        # can serve the agent's request under another version.
        observation["data"] = {AGENT_REQUEST: exchange.overlaid.undo}
    if exchange.protocol is not None:
        name, request = exchange.protocol
        data = observation.setdefault("data", {})
        data[PROTOCOL_REQUEST] = {"protocol": name, "request": request}
    metadata = {**_metadata(exchange), "decoding": _decoding(sent)}
    if harness is not None:
        metadata["prompt_template_fingerprint"] = harness
    return _event(
        state,
        exchange,
        EventKind.LLM_CALL,
        event_id,
        parent_id=parent,
        observation=observation,
        hidden=_hidden(exchange.overlaid),
        metadata=metadata,
        replay=_replay_info(sent),
    )


def _hidden(overlaid: Overlaid) -> dict[str, Any]:
    """The version's parts in force that the event's observation does not show by name."""
    hidden: dict[str, Any] = {"harness_fingerprint": overlaid.fingerprints.get("harness")}
    if "skills" in overlaid.fingerprints:
        hidden["skill_fingerprint"] = overlaid.fingerprints["skills"]
        hidden["skills"] = [hit.skill.name for hit in overlaid.skills]
    return hidden


def _message_action(choice: dict) -> tuple[MessageAction, dict]:
    """The action of a choice as the model the capture drain validates it into."""
    action, extra = _action_document(choice)
    return MessageAction.model_validate(action), extra


def _action_document(choice: dict) -> tuple[dict[str, Any], dict]:
    """A choice's message as a `MessageAction` document, and per-token logprobs kept aside
    when no token ids align with them."""
    message = choice.get("message") or {}
    token_ids = choice.get("token_ids") or choice.get("output_token_ids")
    content_logprobs = ((choice.get("logprobs") or {}).get("content")) or []
    logprobs = [entry.get("logprob") for entry in content_logprobs]
    extra: dict[str, Any] = {}
    if logprobs and not (token_ids and len(token_ids) == len(logprobs)):
        # No aligned token ids: keep the per-token logprobs, but not as the action's tokens.
        extra["logprobs"] = _logprob_entries(content_logprobs)
        logprobs = []
    content = message.get("content")
    action = {
        "type": "message",
        "content": content if isinstance(content, str) else None,
        "tool_calls": [tool_call_document(c) for c in message.get("tool_calls") or []],
        "finish_reason": choice.get("finish_reason"),
        "token_ids": list(token_ids) if token_ids else None,
        "logprobs": [min(0.0, float(lp)) for lp in logprobs] if logprobs and token_ids else None,
    }
    return action, extra


def _logprob_entries(content_logprobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per-token logprobs as reported, with their alternatives and bytes when given (a
    Responses API answer shows them)."""
    return [
        {
            "token": e.get("token"),
            "logprob": e.get("logprob"),
            **{k: e[k] for k in ("bytes", "top_logprobs") if e.get(k)},
        }
        for e in content_logprobs
    ]


def tool_call_document(call: dict) -> dict[str, str]:
    function = call.get("function") or {}
    return {
        "id": call.get("id") or "",
        "name": atdp_name(function.get("name") or "unknown"),
        "arguments": function.get("arguments") or "",
    }


def chat_message_document(message: dict) -> dict[str, Any]:
    role = message.get("role")
    content = message.get("content")
    if content is not None and not isinstance(content, str | list):
        content = orjson.dumps(content).decode()
    document: dict[str, Any] = {"role": role if role in _ROLES else "user", "content": content}
    if message.get("name") is not None:
        document["name"] = message["name"]
    if message.get("tool_calls"):
        document["tool_calls"] = [tool_call_document(c) for c in message["tool_calls"]]
    if message.get("tool_call_id") is not None:
        document["tool_call_id"] = message["tool_call_id"]
    return document


def _tool_spec(tool: dict) -> dict[str, Any]:
    function = tool.get("function") or {}
    return {
        "name": function.get("name") or "unknown",
        "description": function.get("description"),
        "parameters": function.get("parameters"),
    }


def _decoding(body: dict) -> dict[str, Any]:
    known = {k: body[k] for k in _DECODING if body.get(k) is not None}
    if isinstance(known.get("stop"), str):
        known["stop"] = [known["stop"]]
    known["extra"] = {
        k: body[k]
        for k in ("tool_choice", "response_format", "top_logprobs", "logprobs")
        if k in body
    }
    return known


def _parse_json(text: str) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return text


def _error_class(returned: Any) -> str | None:
    """Classify a tool result as an error the way agents and APIs report one."""
    return tool_error_class(returned, name=atdp_name)
