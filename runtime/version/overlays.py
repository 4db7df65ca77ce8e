"""Apply an agent version to a request: harness, memory, tool schemas, guardrails, model route.

The agent sends its own request; the upstream receives the version's view of it. Responses
are mapped back (renamed tool arguments return under the agent's names), so the agent never
sees that anything changed. The replay engine applies versions through these same
functions, so what is evaluated is exactly what would be served.
"""

from __future__ import annotations

import copy
import hashlib
import re
from dataclasses import dataclass, field
from typing import Any

from atdp import VersionSpec, rename_arguments
from runtime.version.memory import MemoryIndex, ScoredItem
from runtime.version.skills import ScoredSkill, SkillIndex, skill_block

__all__ = [
    "MEMORY_BLOCK_END",
    "MEMORY_BLOCK_START",
    "Overlaid",
    "apply_overlays",
    "restore_response",
    "served_tools",
    "skill_index",
    "task_type_of",
]

MEMORY_BLOCK_START = "<evoplane-memory>"
MEMORY_BLOCK_END = "</evoplane-memory>"
_MEMORY_PREAMBLE = "Facts and procedures known to be relevant to this conversation:"


@dataclass
class Overlaid:
    """The upstream request and what is needed to explain it and to map the answer back."""

    body: dict[str, Any]
    model: str | None
    argument_maps: dict[str, dict[str, str]] = field(default_factory=dict)  # tool -> model->agent
    blocked_tools: frozenset[str] = frozenset()
    retrieved: list[ScoredItem] = field(default_factory=list)
    skills: list[ScoredSkill] = field(default_factory=list)
    fingerprints: dict[str, str] = field(default_factory=dict)
    # How to get the agent's own request back from `body` (`atdp.agent_request` reads it back):
    # empty when the overlays changed nothing.
    undo: dict[str, Any] = field(default_factory=dict)
    task_type: str | None = None  # the workload class the agent's request names


def apply_overlays(
    body: dict[str, Any],
    spec: VersionSpec,
    memory: MemoryIndex | None = None,
    *,
    tenant: str | None = None,
) -> Overlaid:
    """The request `spec` sends upstream for the agent's `body` (which is not modified).

    `tenant` scopes the version's skills (None: only those scoped to no tenant apply).

    The upstream body shares the agent's messages and tools where no overlay changes them:
    every overlay builds new dicts and lists instead of changing those it was given.
    """
    body = dict(body)
    agent_messages = list(body.get("messages") or [])
    agent_tools = body.get("tools")
    retrieved = _retrieve(agent_messages, spec, memory)
    task_type = task_type_of(body)
    skills = _skills(agent_messages, spec, tenant, task_type)
    messages, added, consumed = _with_harness(agent_messages, spec, retrieved, skills)
    blocked = frozenset(spec.guardrails.blocked_tools)
    maps = {name: dict(o.argument_map) for name, o in spec.tools.tools.items() if o.argument_map}
    messages = [_to_model_names(message, maps) for message in messages]
    body["messages"] = messages
    if agent_tools:
        body["tools"] = [
            _overlay_tool(t, spec) for t in agent_tools if _tool_name(t) not in blocked
        ]
        if not body["tools"]:
            del body["tools"]
            body.pop("tool_choice", None)
    undo = _undo(agent_messages, agent_tools, added, consumed, body, maps)
    _cap_tokens(body, spec.guardrails.max_tokens)
    model = spec.model.adapter or spec.model.model
    if model:
        body["model"] = model
    parts = spec.part_hashes()
    fingerprints = {
        part: parts[part] for part in ("model", "harness", "memory", "tools", "guardrails")
    }
    if retrieved:
        ids = ",".join(str(hit.item.id) for hit in retrieved)
        fingerprints["retrieval"] = hashlib.sha256(ids.encode()).hexdigest()[:16]
    if "skills" in parts:
        fingerprints["skills"] = parts["skills"]
    return Overlaid(body, model, maps, blocked, retrieved, skills, fingerprints, undo, task_type)


def _undo(
    agent_messages: list[dict],
    agent_tools: list | None,
    added: int,
    consumed: bool,
    body: dict,
    maps: dict[str, dict[str, str]],
) -> dict[str, Any]:
    """The smallest record that recovers the agent's request from the upstream's (read by
    `atdp.agent_request`): how many messages the overlays put in front of the agent's, its
    first message if they took it in, its tools if they changed them, the renamed arguments.
    Empty when the overlays changed nothing."""
    if body["messages"] == agent_messages and body.get("tools") == agent_tools and not maps:
        return {}
    undo: dict[str, Any] = {"added": added}
    if consumed:
        first = agent_messages[0]
        undo.update({"first": first} if body["messages"][:1] != [first] else {"keeps_first": True})
    if agent_tools and body.get("tools") != agent_tools:
        undo["tools"] = agent_tools
    if maps:
        undo["argument_maps"] = maps
    return undo


def _retrieve(
    messages: list[dict], spec: VersionSpec, memory: MemoryIndex | None
) -> list[ScoredItem]:
    if memory is None or not len(memory):
        return []
    user_turns = [_text(m.get("content")) for m in messages if m.get("role") == "user"]
    return memory.search(" ".join(user_turns[-2:]), spec.memory.top_k)


_TASK_TYPE = re.compile(r"^[^\x00-\x1f\x7f]{1,200}$")


def task_type_of(request: dict[str, Any]) -> str | None:
    """The workload class an agent names in `metadata.task_type` (OpenAI's free-form request
    metadata), or None: a value that is not a short printable string is not one."""
    metadata = request.get("metadata")
    found = metadata.get("task_type") if isinstance(metadata, dict) else None
    return found if isinstance(found, str) and _TASK_TYPE.match(found) else None


# Skill indexes by the skill set's content: a version's set is indexed once, not per request.
_SKILL_INDEXES: dict[str, SkillIndex] = {}
_SKILL_INDEXES_KEPT = 256


def skill_index(spec: VersionSpec) -> SkillIndex:
    """The index of a version's skill set, cached by the set's fingerprint (the spec keeps
    its part hashes, so a request pays for no hashing)."""
    key = spec.part_hashes().get("skills", "")
    index = _SKILL_INDEXES.get(key)
    if index is None:
        if len(_SKILL_INDEXES) >= _SKILL_INDEXES_KEPT:
            _SKILL_INDEXES.pop(next(iter(_SKILL_INDEXES)))
        index = _SKILL_INDEXES[key] = SkillIndex(spec.skills)
    return index


def _skills(
    messages: list[dict], spec: VersionSpec, tenant: str | None, task_type: str | None
) -> list[ScoredSkill]:
    if not spec.skills.items:
        return []
    # A skill is a whole task's procedure: the task is said in the first user turn, and
    # the latest says where it stands.
    user_turns = [_text(m.get("content")) for m in messages if m.get("role") == "user"]
    query = " ".join(dict.fromkeys(user_turns[:1] + user_turns[-1:]))
    return skill_index(spec).search(query, tenant, task_type)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


def _with_harness(
    messages: list[dict], spec: VersionSpec, retrieved: list[ScoredItem], skills: list[ScoredSkill]
) -> tuple[list[dict], int, bool]:
    """The messages with instructions, memory, skills and demos in front; also how many messages
    now precede the agent's remaining ones, and whether its first message was taken in."""
    harness = spec.harness
    prefix: list[dict] = []
    instructions = (
        harness.template.replace("{instructions}", harness.instructions)
        if harness.template
        else harness.instructions
    )
    rest = messages
    if instructions:
        if (
            rest
            and rest[0].get("role") in {"system", "developer"}
            and isinstance(rest[0].get("content"), str)
        ):
            first = dict(rest[0])
            first["content"] = f"{instructions}\n\n{first['content']}"
            prefix, rest = [first], rest[1:]
        else:
            prefix = [{"role": "system", "content": instructions}]
    elif rest and rest[0].get("role") in {"system", "developer"}:
        prefix, rest = [rest[0]], rest[1:]
    if retrieved:
        lines = "\n".join(f"- {hit.item.content}" for hit in retrieved)
        block = f"{MEMORY_BLOCK_START}\n{_MEMORY_PREAMBLE}\n{lines}\n{MEMORY_BLOCK_END}"
        prefix.append({"role": "system", "content": block})
    procedures = skill_block(skills)
    if procedures is not None:
        prefix.append({"role": "system", "content": procedures})
    demos = [m.to_openai() for d in harness.demos for m in d.messages]
    consumed = len(rest) < len(messages)
    return [*prefix, *demos, *rest], len(prefix) + len(demos), consumed


def _tool_name(tool: dict) -> str | None:
    return (tool.get("function") or {}).get("name")


def _overlay_tool(tool: dict, spec: VersionSpec) -> dict:
    override = spec.tools.tools.get(_tool_name(tool) or "")
    if override is None:
        return tool
    function = dict(tool.get("function") or {})
    if override.description is not None:
        function["description"] = override.description
    if override.parameters is not None:
        function["parameters"] = override.parameters
    return {**tool, "function": function}


def _to_model_names(message: dict, maps: dict[str, dict[str, str]]) -> dict:
    """Earlier assistant tool calls in the history, renamed to what the model now sees."""
    calls = message.get("tool_calls")
    if not calls or not maps:
        return message
    message = dict(message)
    message["tool_calls"] = [_map_call(call, maps, to_agent=False) for call in calls]
    return message


def _map_call(call: dict, maps: dict[str, dict[str, str]], *, to_agent: bool) -> dict:
    function = call.get("function") or {}
    mapping = maps.get(function.get("name") or "")
    if not mapping:
        return call
    if not to_agent:
        mapping = {agent: model for model, agent in mapping.items()}
    renamed = rename_arguments(function.get("arguments", ""), mapping)
    return {**call, "function": {**function, "arguments": renamed}}


def _cap_tokens(body: dict, cap: int | None) -> None:
    if cap is None:
        return
    for key in ("max_tokens", "max_completion_tokens"):
        if key in body and body[key] is not None:
            body[key] = min(int(body[key]), cap)
            return
    body["max_tokens"] = cap


def served_tools(overlaid: Overlaid) -> list[dict]:
    """The tools as the version presented them to the model, in the agent's argument names:
    what a call the agent receives back must satisfy (a version may describe, constrain or
    rename a tool's parameters; an argument map takes a rename back to the agent's name)."""
    return [_agent_named(tool, overlaid.argument_maps) for tool in overlaid.body.get("tools") or []]


def _agent_named(tool: dict, maps: dict[str, dict[str, str]]) -> dict:
    function = tool.get("function") or {}
    mapping = maps.get(function.get("name") or "")
    schema = function.get("parameters")
    if not mapping or not isinstance(schema, dict):
        return tool
    properties = {mapping.get(k, k): v for k, v in (schema.get("properties") or {}).items()}
    renamed = {**schema, "properties": properties}
    if "required" in schema:
        renamed["required"] = [mapping.get(name, name) for name in schema["required"]]
    return {**tool, "function": {**function, "parameters": renamed}}


def restore_response(response: dict, overlaid: Overlaid) -> dict:
    """Map a chat.completion back to the agent's view: its tool argument names, no blocked tools."""
    if not overlaid.argument_maps and not overlaid.blocked_tools:
        return response
    response = copy.deepcopy(response)
    for choice in response.get("choices") or []:
        message = choice.get("message") or {}
        calls = message.get("tool_calls")
        if not calls:
            continue
        kept = [
            _map_call(call, overlaid.argument_maps, to_agent=True)
            for call in calls
            if (call.get("function") or {}).get("name") not in overlaid.blocked_tools
        ]
        message["tool_calls"] = kept or None
        if not kept:
            message.pop("tool_calls")
            if choice.get("finish_reason") == "tool_calls":
                choice["finish_reason"] = "stop"
    return response
