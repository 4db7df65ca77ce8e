"""What a candidate changes against its parent, as the files a run shows."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from activities.tracking.values import pretty_json
from registry.version_diff import harness_diff, tools_diff, unified_diff

__all__ = ["candidate_files", "harness_prompt_text"]

_SIDES = ("parent", "candidate")  # how the run's diffs name the two versions


def harness_prompt_text(harness: Mapping[str, Any]) -> str:
    """The system prompt a harness gives, as the gateway renders it (without memory or demos)."""
    instructions = harness.get("instructions") or ""
    template = harness.get("template")
    return template.replace("{instructions}", instructions) if template else instructions


def _memory_change(parent: Mapping[str, Any], candidate: Mapping[str, Any]) -> dict[str, Any]:
    before, after = parent.get("item_ids") or [], candidate.get("item_ids") or []
    change: dict[str, Any] = {
        "added": [item for item in after if item not in before],
        "removed": [item for item in before if item not in after],
    }
    if parent.get("top_k") != candidate.get("top_k"):
        change["top_k"] = {"parent": parent.get("top_k"), "candidate": candidate.get("top_k")}
    return change if any(change.values()) else {}


def _overrides(spec: Mapping[str, Any]) -> Mapping[str, Any]:
    """The spec's tool overrides by tool name."""
    return (spec.get("tools") or {}).get("tools") or {}


def candidate_files(
    parent_spec: Mapping[str, Any], candidate_spec: Mapping[str, Any], checkpoint: str | None
) -> dict[str, str]:
    """The artifacts that describe a candidate, by file name; empty ones are left out."""
    memory = _memory_change(parent_spec.get("memory") or {}, candidate_spec.get("memory") or {})
    files = {
        "prompt.diff": harness_diff(
            parent_spec.get("harness") or {}, candidate_spec.get("harness") or {}, _SIDES
        ),
        "memory_items.json": pretty_json(memory) if memory else "",
        "tool_schema.diff": tools_diff(_overrides(parent_spec), _overrides(candidate_spec), _SIDES),
        "skills.diff": unified_diff(
            pretty_json(parent_spec.get("skills") or {}),
            pretty_json(candidate_spec.get("skills") or {}),
            "skills.json",
            _SIDES,
        ),
        "spec.json": pretty_json(candidate_spec),
        # The whole spec against the parent's: what the part diffs above do not cover (a
        # guardrail, the model and its checkpoint) shows here too.
        "spec.diff": unified_diff(
            pretty_json(parent_spec), pretty_json(candidate_spec), "spec.json", _SIDES
        ),
        "checkpoint.txt": f"{checkpoint}\n" if checkpoint else "",
    }
    return {name: text for name, text in files.items() if text}
