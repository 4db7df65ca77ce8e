"""The ATDP event <o, h, a, y, m>: one step of a trajectory, immutable once written.

Rewards (the r of <o, h, a, y, r, m>) are stored apart, see `atdp.reward`.
"""

from __future__ import annotations

import json
import uuid
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import AwareDatetime, Field, NonNegativeFloat, NonNegativeInt, model_validator

from atdp._base import ATDP_VERSION, ATDPModel, JsonObject, JsonValue, Name, Text
from atdp.governance import Governance, ReplayInfo

__all__ = [
    "Action",
    "ChatMessage",
    "DecodingParams",
    "Event",
    "EventKind",
    "EventMetadata",
    "HiddenState",
    "MessageAction",
    "Observation",
    "Outcome",
    "TokenUsage",
    "ToolCall",
    "ToolCallAction",
    "ToolSpec",
    "Traffic",
    "UserAction",
]

# Bounded revelation: hidden state is a summary, never a full chain of thought.
HIDDEN_TEXT_LIMIT = 4000
MAX_INT32 = 2**31 - 1


class EventKind(StrEnum):
    LLM_CALL = "llm_call"
    TOOL_CALL = "tool_call"
    RETRIEVAL = "retrieval"
    MEMORY_READ = "memory_read"
    MEMORY_WRITE = "memory_write"
    FILE_OP = "file_op"
    BROWSER_OP = "browser_op"
    APPROVAL = "approval"
    USER_MESSAGE = "user_message"
    FEEDBACK = "feedback"
    TASK_OUTCOME = "task_outcome"


class Traffic(StrEnum):
    """Who the event was produced for: only `user` traffic counts as real usage."""

    USER = "user"
    SHADOW = "shadow"  # a copy served to a shadow version, never returned
    EVALUATION = "evaluation"  # replay and optimiser calls; never training-eligible


class ToolCall(ATDPModel):
    """A typed tool call as the model emitted it."""

    id: Text
    name: Name
    arguments: Text = Field(description="The arguments exactly as emitted (usually JSON text).")

    @classmethod
    def from_openai(cls, call: dict[str, Any]) -> ToolCall:
        """A chat-completions tool call (`{"id", "function": {"name", "arguments"}}`)."""
        function = call.get("function") or {}
        return cls(
            id=call.get("id") or "",
            name=function.get("name") or "unknown",
            arguments=function.get("arguments") or "",
        )


# The key of an llm_call's `observation.data` under which the gateway records how to undo the
# version's overlays (`runtime.version.overlays.Overlaid.undo`): the agent's own first message
# and tools, the messages the overlays added, the argument maps.
AGENT_REQUEST = "agent_request"


def agent_request(data: dict[str, Any] | None) -> dict[str, Any]:
    """The overlays' undo record in an llm_call's `observation.data`; empty when the
    overlays changed nothing (or the event is not an llm_call)."""
    undo = (data or {}).get(AGENT_REQUEST)
    return undo if isinstance(undo, dict) else {}


# The key of an llm_call's `observation.data` under which the gateway records a request that
# came in over another protocol than chat completions: {"protocol": "responses" | "messages",
# "request": the body as the agent sent it}. Its messages and tools are recorded, like every
# llm_call's, as the chat-completions request the gateway served it as.
PROTOCOL_REQUEST = "protocol_request"


def protocol_request(data: dict[str, Any] | None) -> tuple[str, dict[str, Any] | None]:
    """(the protocol an llm_call came in on, the agent's request in it): ("chat", None)
    for chat completions, whose request is the recorded observation itself."""
    found = (data or {}).get(PROTOCOL_REQUEST)
    if isinstance(found, dict) and isinstance(found.get("protocol"), str):
        request = found.get("request")
        return found["protocol"], request if isinstance(request, dict) else None
    return "chat", None


def rename_arguments(arguments: str, mapping: dict[str, str]) -> str:
    """Tool-call arguments with their top-level keys renamed (`mapping`: old -> new name).

    Argument maps rename a tool's parameters between the agent's names and the ones a
    version shows the model; arguments that are not a JSON object pass unchanged.
    """
    try:
        parsed = json.loads(arguments)
    except (json.JSONDecodeError, TypeError):
        return arguments
    if not isinstance(parsed, dict):
        return arguments
    return json.dumps({mapping.get(key, key): value for key, value in parsed.items()})


class ToolSpec(ATDPModel):
    """A tool offered to the model (OpenAI function-tool shape)."""

    name: Name
    description: Text | None = None
    parameters: JsonObject | None = Field(default=None, description="JSON Schema of arguments.")


class ChatMessage(ATDPModel):
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: Text | list[JsonObject] | None = None
    name: Text | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_id: Text | None = None

    @classmethod
    def from_openai(cls, message: dict[str, Any]) -> ChatMessage:
        """A chat-completions message (tool calls under `function`) as an ATDP message."""
        calls = [ToolCall.from_openai(call) for call in message.get("tool_calls") or []]
        fields = {
            k: message[k] for k in ("role", "content", "name", "tool_call_id") if k in message
        }
        return cls(**fields, tool_calls=calls)

    def to_openai(self) -> dict[str, Any]:
        """This message in the chat-completions shape an upstream accepts."""
        out: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.name is not None:
            out["name"] = self.name
        if self.tool_calls:
            out["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
                for call in self.tool_calls
            ]
        if self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
        return out


class Observation(ATDPModel):
    """What the agent (or model) saw before acting."""

    messages: list[ChatMessage] = Field(default_factory=list)
    tools: list[ToolSpec] = Field(default_factory=list)
    content: Text | None = Field(default=None, description="Non-chat observation, e.g. a query.")
    data: JsonObject | None = None


class HiddenState(ATDPModel):
    """Bounded view of internal state: fingerprints and short summaries only."""

    harness_fingerprint: Text | None = None
    skills: list[Name] = Field(
        default_factory=list, description="The skills injected into this call, by name."
    )
    skill_fingerprint: Text | None = Field(
        default=None, description="Fingerprint of the version's skill set, when it has skills."
    )
    plan: Annotated[Text, Field(max_length=HIDDEN_TEXT_LIMIT)] | None = None
    reasoning_summary: Annotated[Text, Field(max_length=HIDDEN_TEXT_LIMIT)] | None = None


class MessageAction(ATDPModel):
    """A model message (possibly with tool calls), with its tokens when the engine gives them."""

    type: Literal["message"] = "message"
    role: Literal["assistant", "user", "system", "tool"] = "assistant"
    content: Text | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    finish_reason: Text | None = None
    token_ids: list[Annotated[int, Field(ge=0, le=MAX_INT32)]] | None = None
    logprobs: list[Annotated[float, Field(le=0.0)]] | None = None

    @model_validator(mode="after")
    def _logprobs_match_tokens(self) -> MessageAction:
        if self.logprobs is not None:
            if self.token_ids is None:
                raise ValueError("logprobs given without token_ids")
            if len(self.logprobs) != len(self.token_ids):
                raise ValueError(
                    f"logprobs has {len(self.logprobs)} entries but token_ids has "
                    f"{len(self.token_ids)}; they must align one per token"
                )
        return self


class ToolCallAction(ATDPModel):
    """A single tool invocation (the agent executing what the model asked for)."""

    type: Literal["tool_call"] = "tool_call"
    call: ToolCall


Action = Annotated[MessageAction | ToolCallAction, Field(discriminator="type")]


class UserAction(StrEnum):
    ACCEPT = "accept"
    EDIT = "edit"
    RETRY = "retry"
    DELETE = "delete"


class Outcome(ATDPModel):
    """What happened after the action: tool return, error, exit code, user response."""

    tool_return: JsonValue = None
    error_class: Name | None = None
    error_message: Text | None = None
    exit_code: int | None = None
    user_action: UserAction | None = None
    success: bool | None = None


class TokenUsage(ATDPModel):
    prompt: NonNegativeInt = 0
    completion: NonNegativeInt = 0

    @property
    def total(self) -> int:
        return self.prompt + self.completion


class DecodingParams(ATDPModel):
    temperature: Annotated[float, Field(ge=0.0)] | None = None
    top_p: Annotated[float, Field(ge=0.0, le=1.0)] | None = None
    max_tokens: NonNegativeInt | None = None
    seed: int | None = None
    n: Annotated[int, Field(ge=1)] | None = None
    stop: list[Text] | None = None
    extra: JsonObject = Field(default_factory=dict)


class EventMetadata(ATDPModel):
    """Context needed to explain, govern and replay the event."""

    tenant: Name
    session: Name
    traffic: Traffic = Traffic.USER
    latency_ms: NonNegativeFloat | None = None
    tokens: TokenUsage | None = None
    cost_usd: NonNegativeFloat | None = None
    decoding: DecodingParams | None = None
    model_checkpoint: Text | None = None
    agent_version_id: Text | None = None
    harness_version: Text | None = None
    tool_schema_version: Text | None = None
    memory_version: Text | None = None
    retrieval_snapshot_id: Text | None = None
    guardrail_config_id: Text | None = None
    prompt_template_fingerprint: Text | None = None
    extra: JsonObject = Field(default_factory=dict)


class Event(ATDPModel):
    """One immutable step <o, h, a, y, m> of a trajectory."""

    atdp_version: Literal["1.0"] = ATDP_VERSION
    id: uuid.UUID
    trajectory_id: uuid.UUID
    seq: Annotated[int, Field(ge=0, le=MAX_INT32)] = Field(
        description="Position within the trajectory, from 0."
    )
    kind: EventKind
    parent_id: uuid.UUID | None = Field(default=None, description="The event that caused this.")
    created_at: AwareDatetime
    observation: Observation | None = None
    hidden: HiddenState | None = None
    action: Action | None = None
    outcome: Outcome | None = None
    metadata: EventMetadata
    governance: Governance = Field(default_factory=Governance)
    replay: ReplayInfo

    @model_validator(mode="after")
    def _not_its_own_parent(self) -> Event:
        if self.parent_id is not None and self.parent_id == self.id:
            raise ValueError("parent_id must differ from id: an event cannot cause itself")
        return self

    @property
    def tenant(self) -> str:
        return self.metadata.tenant
