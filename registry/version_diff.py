"""What changed between two versions of an agent, part by part, as a person reads it.

The harness as unified diffs of its text, memory as items added, removed and changed (an
item replaced by one with the same key), tool overrides per tool, guardrails and the model
as the fields that differ.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from typing import Any

from sqlmodel import Session

from atdp import VersionSpec
from registry.memory import MemoryItem, find_memory_items
from registry.versions import AgentVersion

__all__ = [
    "changed_parts",
    "diff_specs",
    "diff_versions",
    "harness_diff",
    "pretty_json",
    "tools_diff",
    "unified_diff",
]

PARTS = ("model", "harness", "memory", "tools", "guardrails", "skills")


def changed_parts(before: VersionSpec, after: VersionSpec) -> list[str]:
    """The parts of the spec (model, harness, memory, tools, guardrails, skills) that differ."""
    old, new = before.part_hashes(), after.part_hashes()
    return [part for part in PARTS if old.get(part) != new.get(part)]


def diff_versions(session: Session, before: AgentVersion, after: AgentVersion) -> dict[str, Any]:
    """The readable diff of `before` -> `after`, memory items read from the registry."""
    ids = {*before.spec.memory.item_ids, *after.spec.memory.item_ids}
    return {
        "from": before.id,
        "to": after.id,
        **diff_specs(before.spec, after.spec, find_memory_items(session, before.agent, ids)),
    }


def diff_specs(
    before: VersionSpec, after: VersionSpec, items: Mapping[str, MemoryItem]
) -> dict[str, Any]:
    """`changed` (the parts that differ) and `parts`: the diff of each changed part."""
    changed = changed_parts(before, after)
    old, new = before.model_dump(mode="json"), after.model_dump(mode="json")
    readers = {
        "model": _fields,
        "harness": _harness,
        "memory": lambda a, b: _memory(a, b, items),
        "tools": _tools,
        "guardrails": _fields,
        "skills": _skills,
    }
    return {
        "changed": changed,
        "parts": {part: readers[part](old[part], new[part]) for part in changed},
    }


def unified_diff(before: str, after: str, path: str, sides: tuple[str, str] = ("a", "b")) -> str:
    """A unified diff of two texts, its files named `sides[0]/path` and `sides[1]/path`."""
    lines = difflib.unified_diff(
        before.splitlines(keepends=True),
        after.splitlines(keepends=True),
        fromfile=f"{sides[0]}/{path}",
        tofile=f"{sides[1]}/{path}",
    )
    # A text without a final newline would glue the next hunk header onto its last line.
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def pretty_json(value: Any) -> str:
    """JSON as a person diffs it: indented, keys sorted, non-ASCII kept."""
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str) + "\n"


def harness_diff(
    before: Mapping[str, Any], after: Mapping[str, Any], sides: tuple[str, str] = ("a", "b")
) -> str:
    """Per-part unified diffs of two harnesses (JSON form): instructions, template, demos."""
    texts = {
        "instructions": lambda harness: harness.get("instructions") or "",
        "template": lambda harness: harness.get("template") or "",
        "demos.json": lambda harness: pretty_json(harness.get("demos") or []),
    }
    return "".join(
        unified_diff(text(before), text(after), f"harness/{name}", sides)
        for name, text in texts.items()
    )


def tools_diff(
    before: Mapping[str, Any], after: Mapping[str, Any], sides: tuple[str, str] = ("a", "b")
) -> str:
    """Per-tool unified diffs of two sets of tool overrides (description, parameters, map)."""
    return "".join(
        unified_diff(
            pretty_json(before[tool]) if tool in before else "",
            pretty_json(after[tool]) if tool in after else "",
            f"tools/{tool}.json",
            sides,
        )
        for tool in sorted(set(before) | set(after))
    )


def _fields(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, Any]:
    """Each field that differs, as {field: {"from": ..., "to": ...}}."""
    return {
        field: {"from": before.get(field), "to": after.get(field)}
        for field in sorted(set(before) | set(after))
        if before.get(field) != after.get(field)
    }


def _harness(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, Any]:
    return {"diff": harness_diff(before, after)}


def _memory(
    before: Mapping[str, Any], after: Mapping[str, Any], items: Mapping[str, MemoryItem]
) -> dict[str, Any]:
    old, new = before.get("item_ids") or [], after.get("item_ids") or []
    added = [item for item in new if item not in old]
    removed = [item for item in old if item not in new]
    changed = []
    for item_id in list(added):  # an item replaced by one with the same key: a change
        key = _key(items.get(item_id))
        was = next((i for i in removed if key and _key(items.get(i)) == key), None)
        if was is not None:
            added.remove(item_id)
            removed.remove(was)
            changed.append({"from": _described(was, items), "to": _described(item_id, items)})
    change: dict[str, Any] = {
        "added": [_described(i, items) for i in added],
        "removed": [_described(i, items) for i in removed],
        "changed": changed,
    }
    if before.get("top_k") != after.get("top_k"):
        change["top_k"] = {"from": before.get("top_k"), "to": after.get("top_k")}
    return change


def _key(item: MemoryItem | None) -> tuple[str | None, str] | None:
    return (item.tenant, item.key) if item is not None else None


def _described(item_id: str, items: Mapping[str, MemoryItem]) -> dict[str, Any]:
    item = items.get(item_id)
    if item is None:  # not in the registry (a hand-written spec may name anything)
        return {"id": item_id, "content": None}
    return {
        "id": item_id,
        "tenant": item.tenant,
        "kind": item.kind.value,
        "key": item.key,
        "content": item.content,
    }


def _tools(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, Any]:
    old, new = before.get("tools") or {}, after.get("tools") or {}
    return {
        "added": sorted(set(new) - set(old)),
        "removed": sorted(set(old) - set(new)),
        "changed": sorted(tool for tool in set(old) & set(new) if old[tool] != new[tool]),
        "diff": tools_diff(old, new),
    }


def _skills(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, Any]:
    """Skills added, removed and changed, by name (a changed one shown whole, both sides)."""
    old = {skill["name"]: skill for skill in before.get("items") or []}
    new = {skill["name"]: skill for skill in after.get("items") or []}
    return {
        "added": [new[name] for name in new if name not in old],
        "removed": [old[name] for name in old if name not in new],
        "changed": [
            {"name": name, "before": old[name], "after": new[name]}
            for name in new
            if name in old and old[name] != new[name]
        ],
        **_fields(
            {k: v for k, v in before.items() if k != "items"},
            {k: v for k, v in after.items() if k != "items"},
        ),
    }
