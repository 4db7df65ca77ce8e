"""How an event's body is stored: its ATDP document less what can be rebuilt exactly.

A stored body (marked `"codec": 1`) leaves out what the row's columns hold (ids, seq, kind,
times, tenant, traffic, training, replay class) and every field at its model default. One
that refers to an earlier llm_call of its trajectory (`"ref"`) also leaves out the context
metadata and hidden state that call had too and, for an llm_call, the messages that call
recorded, its answer when it is the next message, and its tools when the same (`ref.tools`
names the call whose body holds them, for the SQL readers of tools). A body without the
marker is a whole document (rows written before the codec, and any event the encoder had
a doubt about). `decode(encode(d, e), Columns.of(d), e.document) == d` for every document
`d`: `encode` checks it and stores the whole document otherwise.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pydantic_core
from pydantic import BaseModel

from atdp import (
    ChatMessage,
    DecodingParams,
    Event,
    EventMetadata,
    HiddenState,
    MessageAction,
    Observation,
    Outcome,
    TokenUsage,
    ToolCallAction,
)
from atdp.governance import Governance, ReplayInfo

__all__ = ["CODEC", "Columns", "Earlier", "decode", "encode", "may_refer", "reference"]

CODEC = 1
_MARK = "codec"
# {"event": the earlier llm_call's id, "messages": how many of its messages this call's begin
# with, "answer": its answer follows them, "tools": the call whose body holds the tools}
_REF = "ref"
_LLM_CALL = "llm_call"


@dataclass(frozen=True)
class Columns:
    """The event's columns a stored body leaves out, as the row holds them."""

    id: uuid.UUID
    trajectory_id: uuid.UUID
    seq: int
    kind: str
    parent_id: uuid.UUID | None
    created_at: datetime
    expires_at: datetime | None
    tenant: str
    traffic: str
    training: str
    replay_class: str

    @classmethod
    def of(cls, document: dict[str, Any]) -> Columns:
        """The columns an event's row gets from its document."""
        parent = document.get("parent_id")
        expires = document["governance"]["expires_at"]
        return cls(
            id=uuid.UUID(document["id"]),
            trajectory_id=uuid.UUID(document["trajectory_id"]),
            seq=document["seq"],
            kind=document["kind"],
            parent_id=uuid.UUID(parent) if parent else None,
            created_at=_utc(document["created_at"]),
            expires_at=_utc(expires) if expires else None,
            tenant=document["metadata"]["tenant"],
            traffic=document["metadata"]["traffic"],
            training=document["governance"]["training"],
            replay_class=document["replay"]["class"],
        )

    def fill(self, document: dict[str, Any]) -> None:
        """Put the columns' values back where the document holds them."""
        document["id"] = str(self.id)
        document["trajectory_id"] = str(self.trajectory_id)
        document["seq"] = self.seq
        document["kind"] = self.kind
        document["parent_id"] = str(self.parent_id) if self.parent_id else None
        document.setdefault("created_at", _json_time(self.created_at))
        document["metadata"]["tenant"] = self.tenant
        document["metadata"]["traffic"] = self.traffic
        document["governance"]["training"] = self.training
        expires = self.expires_at
        document["governance"].setdefault("expires_at", expires and _json_time(expires))
        document["replay"]["class"] = self.replay_class


def _shallow(document: dict[str, Any]) -> dict[str, Any]:
    """A copy of a document whose objects the codec edits (the top level, the models of
    `_AT`, the action, the message list and its messages) are copies; the rest is shared."""
    out = dict(document)
    for path in _AT:
        if path:
            parent: Any = out
            for key in path[:-1]:
                parent = parent.get(key) if isinstance(parent, dict) else None
            if isinstance(parent, dict) and isinstance(parent.get(path[-1]), dict):
                parent[path[-1]] = dict(parent[path[-1]])
    if isinstance(out.get("action"), dict):
        out["action"] = dict(out["action"])
    observation = out.get("observation")
    if isinstance(observation, dict) and isinstance(observation.get("messages"), list):
        observation["messages"] = [
            dict(m) if isinstance(m, dict) else m for m in observation["messages"]
        ]
    return out


def _copied(value: Any) -> Any:
    """A copy of a JSON value (a faster `copy.deepcopy` for dicts, lists and scalars)."""
    if isinstance(value, dict):
        return {key: _copied(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_copied(item) for item in value]
    return value


def _utc(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(UTC)


def _json_time(at: datetime) -> str:
    """A time as the ATDP models write it (UTC)."""
    return pydantic_core.to_json(at.astimezone(UTC)).decode()[1:-1]


def _defaults(model: type[BaseModel], *but: str) -> dict[str, Any]:
    """The JSON value of each of `model`'s fields that has a default, by its JSON name,
    `but` those (held in columns, or telling the model apart)."""
    return {
        field.alias or name: pydantic_core.to_jsonable_python(
            field.get_default(call_default_factory=True)
        )
        for name, field in model.model_fields.items()
        if not field.is_required() and (field.alias or name) not in but
    }


# Where each model sits in an event's document. Tools stay whole: the window queries read
# them in SQL. An action keeps its `type`, which tells which model it is.
_AT: dict[tuple[str, ...], dict[str, Any]] = {
    (): _defaults(Event),
    ("observation",): _defaults(Observation),
    ("hidden",): _defaults(HiddenState),
    ("outcome",): _defaults(Outcome),
    ("metadata",): _defaults(EventMetadata, "tenant", "traffic"),
    ("metadata", "tokens"): _defaults(TokenUsage),
    ("metadata", "decoding"): _defaults(DecodingParams),
    ("governance",): _defaults(Governance, "training", "expires_at"),
    ("replay",): _defaults(ReplayInfo, "class"),
}
_ACTIONS = {
    "message": _defaults(MessageAction, "type"),
    "tool_call": _defaults(ToolCallAction, "type"),
}
_MESSAGE = _defaults(ChatMessage)
_TOP_COLUMNS = ("id", "trajectory_id", "seq", "kind", "parent_id")
# Metadata of each event's own, given relative to the defaults even with a reference (some
# are read inside bodies by SQL: `registry.windows.llm_usage`, `registry.progress`, the
# OTLP span lookup); the rest is the context a trajectory's events share.
_PER_EVENT = ("latency_ms", "tokens", "cost_usd", "extra")
_ABSENT = object()


def _relative(path: tuple[str, ...], defaults: dict[str, Any]) -> dict[str, Any] | None:
    """The defaults at `path` of a document with a reference: only the metadata of each
    event's own; hidden state and the rest of the metadata are relative to the earlier call."""
    if path in (("hidden",), ("metadata", "decoding")):
        return None
    if path == ("metadata",):
        return {key: value for key, value in defaults.items() if key in _PER_EVENT}
    if not path:
        return {key: value for key, value in defaults.items() if key != "hidden"}
    return defaults


_AT_RELATIVE = {
    path: found
    for path, defaults in _AT.items()
    if (found := _relative(path, defaults)) is not None
}


def _objects(
    document: dict[str, Any], *, relative: bool
) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(each object of the document given relative to the defaults, those defaults);
    `relative`: the document refers to an earlier call (see `_relative`)."""
    found = []
    for path, defaults in (_AT_RELATIVE if relative else _AT).items():
        node: Any = document
        for key in path:
            node = node.get(key) if isinstance(node, dict) else None
        if isinstance(node, dict):
            found.append((node, defaults))
    action = document.get("action")
    if isinstance(action, dict) and action.get("type") in _ACTIONS:
        found.append((action, _ACTIONS[action["type"]]))
    observation = document.get("observation")
    if isinstance(observation, dict):
        found += [(m, _MESSAGE) for m in observation.get("messages") or [] if isinstance(m, dict)]
    return found


def may_refer(columns: Columns, earlier: Earlier) -> bool:
    """Whether an event's body may refer to `earlier`: an earlier llm_call of the same
    trajectory that lives and goes with it (same day partition, traffic, training, expiry),
    so that no retention, partition drop or export filter keeps one without the other."""
    previous = earlier.columns
    return (
        previous.kind == _LLM_CALL
        and previous.trajectory_id == columns.trajectory_id
        and previous.seq < columns.seq
        and previous.created_at.date() == columns.created_at.date()
        and (previous.expires_at, previous.traffic, previous.training)
        == (columns.expires_at, columns.traffic, columns.training)
    )


@dataclass(frozen=True)
class Earlier:
    """The trajectory's latest llm_call, as a writer keeps it to encode the next events."""

    document: dict[str, Any]  # whole
    columns: Columns
    tools_at: str  # the id of the event whose stored body holds its tools

    @classmethod
    def of(cls, document: dict[str, Any], stored: dict[str, Any]) -> Earlier:
        """`document`, an llm_call, stored as `stored`."""
        found = stored.get(_REF) if stored.get(_MARK) == CODEC else None
        tools_at = (found or {}).get("tools") or document["id"]
        return cls(document, Columns.of(document), tools_at)


def reference(stored: dict[str, Any]) -> uuid.UUID | None:
    """The earlier llm_call a stored body refers to, if it refers to one."""
    found = stored.get(_REF) if stored.get(_MARK) == CODEC else None
    return uuid.UUID(found["event"]) if found else None


def encode(document: dict[str, Any], earlier: Earlier | None = None) -> dict[str, Any]:
    """The body to store for an event's ATDP `document` (`model_dump(mode="json")`);
    `earlier`: the trajectory's llm_call before it, if the writer knows it."""
    columns = Columns.of(document)
    if earlier is not None and not may_refer(columns, earlier):
        earlier = None
    stored = _encoded(document, columns, earlier)
    previous = earlier.document if earlier else None
    if decode(stored, columns, previous) != document:
        return document  # a case the codec does not cover: keep it whole
    return stored


def _encoded(document: dict[str, Any], columns: Columns, earlier: Earlier | None) -> dict[str, Any]:
    stored = _shallow(document)
    for key in _TOP_COLUMNS:
        stored.pop(key, None)
    if stored["created_at"] == _json_time(columns.created_at):
        del stored["created_at"]
    expires = stored["governance"]["expires_at"]
    if expires is None or expires == _json_time(columns.expires_at):
        del stored["governance"]["expires_at"]
    del stored["metadata"]["tenant"], stored["metadata"]["traffic"]
    del stored["governance"]["training"], stored["replay"]["class"]
    if earlier is not None:
        _refer(stored, document["kind"], earlier)
    for node, defaults in _objects(stored, relative=earlier is not None):
        for key, default in defaults.items():
            if key in node and node[key] == default:
                del node[key]
    stored[_MARK] = CODEC
    return stored


def _refer(stored: dict[str, Any], kind: str, earlier: Earlier) -> None:
    """Leave out what `earlier` recorded already: its context metadata and hidden state
    where the same and, for an llm_call, its messages that begin this call's, its answer
    that follows them, and its tools if the same. With a reference, context metadata and
    hidden state are given relative to `earlier` (absent: as there), not to the defaults."""
    previous = earlier.document
    ref: dict[str, Any] = {"event": previous["id"]}
    stored[_REF] = ref
    metadata = stored["metadata"]
    for key, value in previous["metadata"].items():
        if key in metadata and key not in _PER_EVENT and metadata[key] == value:
            del metadata[key]
    if stored.get("hidden", _ABSENT) == previous["hidden"]:
        del stored["hidden"]
    observation = stored.get("observation")
    given = previous.get("observation") or {}
    if kind == _LLM_CALL and isinstance(observation, dict):
        _refer_observation(observation, ref, given, earlier)
        _refer_answer(observation, ref, previous)


def _refer_observation(
    observation: dict[str, Any], ref: dict[str, Any], given: dict[str, Any], earlier: Earlier
) -> None:
    messages, earlier_messages = observation.get("messages"), given.get("messages")
    if earlier_messages and messages and messages[: len(earlier_messages)] == earlier_messages:
        observation["messages"] = messages[len(earlier_messages) :]
        ref["messages"] = len(earlier_messages)
    if given.get("tools") and observation.get("tools") == given["tools"]:
        del observation["tools"]
        ref["tools"] = earlier.tools_at


def _refer_answer(observation: dict[str, Any], ref: dict[str, Any], previous: dict) -> None:
    """The earlier call's answer, as the next message of the conversation, left out."""
    messages, answer = observation.get("messages"), _answer(previous)
    if "messages" in ref and messages and answer is not None and messages[0] == answer:
        observation["messages"] = messages[1:]
        ref["answer"] = True


def _answer(previous: dict[str, Any]) -> dict[str, Any] | None:
    """An llm_call's answer as the chat message that carries it into the next call."""
    action = previous.get("action")
    if not isinstance(action, dict) or action.get("type") != "message":
        return None
    return {
        "role": action["role"],
        "content": action["content"],
        "name": None,
        "tool_calls": _copied(action["tool_calls"]),
        "tool_call_id": None,
    }


def decode(
    stored: dict[str, Any], columns: Columns, previous: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The whole ATDP document of a stored body; `previous`: the whole document of the
    llm_call it refers to (`reference(stored)`), required when it refers to one."""
    if stored.get(_MARK) != CODEC:
        return stored
    document = _shallow(stored)
    del document[_MARK]
    found = document.pop(_REF, None)
    if found is not None:
        _restore(document, found, previous, columns)
    _fill(document, _AT[()])
    for node, defaults in _objects(document, relative=found is not None):
        _fill(node, defaults)
    columns.fill(document)
    return document


def _fill(node: dict[str, Any], defaults: dict[str, Any]) -> None:
    for key, default in defaults.items():
        if key not in node:
            node[key] = _copied(default) if isinstance(default, dict | list) else default


def _restore(
    document: dict[str, Any], found: dict[str, Any], previous: dict | None, columns: Columns
) -> None:
    """Put back what `_refer` left out."""
    if previous is None or previous["id"] != found["event"]:
        raise ValueError(
            f"event {columns.id} refers to llm_call {found['event']}, which was not given"
        )
    metadata = document["metadata"]
    for key, value in previous["metadata"].items():
        if key not in _PER_EVENT and key not in metadata:
            metadata[key] = _copied(value)
    if "hidden" not in document:
        document["hidden"] = _copied(previous["hidden"])
    if "messages" not in found and "tools" not in found:
        return
    given, observation = previous["observation"], document["observation"]
    if "messages" in found:
        earlier = [dict(message) for message in given["messages"][: found["messages"]]]
        answer = [_answer(previous)] if found.get("answer") else []
        observation["messages"] = earlier + answer + observation.get("messages", [])
    if "tools" in found:
        observation["tools"] = list(given["tools"])
