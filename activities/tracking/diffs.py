"""What a candidate changes against its parent, as the files a run shows."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

from activities.tracking.values import pretty_json

__all__ = ["candidate_files", "harness_prompt_text"]


def harness_prompt_text(harness: Mapping[str, Any]) -> str:
    """The system prompt a harness gives, as the gateway renders it (without memory or demos)."""
    instructions = harness.get("instructions") or ""
    template = harness.get("template")
    return template.replace("{instructions}", instructions) if template else instructions


def _unified(before: str, after: str, path: str) -> str:
    lines = difflib.unified_diff(
        before.splitlines(keepends=True),
        after.splitlines(keepends=True),
        fromfile=f"parent/{path}",
        tofile=f"candidate/{path}",
    )
    # A file without a final newline would glue the next hunk header onto its last line.
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def _prompt_diff(parent: Mapping[str, Any], candidate: Mapping[str, Any]) -> str:
    """Per-part unified diffs of the harness: instructions, template, demos."""
    parts = {
        "instructions": lambda harness: harness.get("instructions") or "",
        "template": lambda harness: harness.get("template") or "",
        "demos.json": lambda harness: pretty_json(harness.get("demos") or []),
    }
    return "".join(
        _unified(render(parent), render(candidate), f"harness/{name}")
        for name, render in parts.items()
    )


def _memory_change(parent: Mapping[str, Any], candidate: Mapping[str, Any]) -> dict[str, Any]:
    before, after = parent.get("item_ids") or [], candidate.get("item_ids") or []
    change: dict[str, Any] = {
        "added": [item for item in after if item not in before],
        "removed": [item for item in before if item not in after],
    }
    if parent.get("top_k") != candidate.get("top_k"):
        change["top_k"] = {"parent": parent.get("top_k"), "candidate": candidate.get("top_k")}
    return change if any(change.values()) else {}


def _tool_schema_diff(parent: Mapping[str, Any], candidate: Mapping[str, Any]) -> str:
    """Per-tool unified diffs of the overrides' JSON (description, parameters, argument map)."""
    before, after = parent.get("tools") or {}, candidate.get("tools") or {}
    return "".join(
        _unified(
            pretty_json(before[tool]) if tool in before else "",
            pretty_json(after[tool]) if tool in after else "",
            f"tools/{tool}.json",
        )
        for tool in sorted(set(before) | set(after))
    )


def candidate_files(
    parent_spec: Mapping[str, Any], candidate_spec: Mapping[str, Any], checkpoint: str | None
) -> dict[str, str]:
    """The artifacts that describe a candidate, by file name; empty ones are left out."""
    memory = _memory_change(parent_spec.get("memory") or {}, candidate_spec.get("memory") or {})
    files = {
        "prompt.diff": _prompt_diff(
            parent_spec.get("harness") or {}, candidate_spec.get("harness") or {}
        ),
        "memory_items.json": pretty_json(memory) if memory else "",
        "tool_schema.diff": _tool_schema_diff(
            parent_spec.get("tools") or {}, candidate_spec.get("tools") or {}
        ),
        "spec.json": pretty_json(candidate_spec),
        # The whole spec against the parent's: what the part diffs above do not cover (a
        # guardrail, the model and its checkpoint) shows here too.
        "spec.diff": _unified(pretty_json(parent_spec), pretty_json(candidate_spec), "spec.json"),
        "checkpoint.txt": f"{checkpoint}\n" if checkpoint else "",
    }
    return {name: text for name, text in files.items() if text}
