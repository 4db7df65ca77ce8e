"""Versions named as a person names them, and what changed between two, part by part."""

from __future__ import annotations

import pytest

from atdp import Guardrails, MemorySnapshot, Skill, SkillSet, ToolOverride, ToolSchemaOverlay
from registry import (
    Alias,
    InvalidRecordError,
    MemoryKind,
    NotFoundError,
    add_memory_item,
    diff_versions,
    register_version,
    resolve_version,
    set_alias,
    transaction,
)
from registry.version_diff import changed_parts, diff_specs
from tests.registry.helpers import seed_world, spec

AGENT = "support-bot"


@pytest.fixture
def two_versions(engine):
    """v1 (stable) and v2 (canary), a child of v1."""
    seed_world(engine)
    with transaction(engine) as session:
        v2 = register_version(
            session, AGENT, spec("Be brief."), parent_id=f"{AGENT}@v1", author="ana", reason="r"
        )
        set_alias(session, AGENT, Alias.CANARY, v2.id, weight=0.1, actor="ana")
    return engine


@pytest.mark.parametrize(
    ("reference", "expected"),
    [
        (f"{AGENT}@v2", "v2"),
        ("v2", "v2"),
        ("2", "v2"),
        ("stable", "v1"),
        (f"{AGENT}@canary", "v2"),
        (" v1 ", "v1"),
    ],
)
def test_a_version_is_found_by_id_number_or_alias(two_versions, reference, expected) -> None:
    with transaction(two_versions) as session:
        assert resolve_version(session, AGENT, reference).id == f"{AGENT}@{expected}"


@pytest.mark.parametrize(
    ("reference", "error", "words"),
    [
        ("v9", NotFoundError, f"{AGENT}@v9"),
        ("shadow", NotFoundError, "no shadow version now"),
        ("other-bot@v1", InvalidRecordError, "not a version of agent support-bot"),
        ("latest", InvalidRecordError, "give support-bot@v3, v3, 3 or an alias"),
    ],
)
def test_a_reference_to_nothing_says_why(two_versions, reference, error, words) -> None:
    with transaction(two_versions) as session, pytest.raises(error, match=words):
        resolve_version(session, AGENT, reference)


def test_an_unknown_agent_is_not_found(two_versions) -> None:
    with transaction(two_versions) as session, pytest.raises(NotFoundError, match="nobody"):
        resolve_version(session, "nobody", "v1")


def test_a_diff_reads_each_part_that_changed(two_versions) -> None:
    with transaction(two_versions) as session:
        old_fact = add_memory_item(session, AGENT, "acme", MemoryKind.FACT, "Refunds: 14 days.")
        new_fact = add_memory_item(
            session, AGENT, "acme", MemoryKind.FACT, "Refunds: 30 days.", key=old_fact.key
        )
        extra = add_memory_item(session, AGENT, None, MemoryKind.PROCEDURE, "Greet by name.")
        before = spec("Be helpful.\nAsk one question.").model_copy(
            update={"memory": MemorySnapshot(item_ids=[str(old_fact.id)])}
        )
        after = spec("Be helpful.\nAsk two questions.", model="m2").model_copy(
            update={
                "memory": MemorySnapshot(item_ids=[str(new_fact.id), str(extra.id)], top_k=5),
                "tools": ToolSchemaOverlay(tools={"lookup": ToolOverride(description="Find.")}),
                "guardrails": Guardrails(max_tokens=200),
            }
        )
        a = register_version(session, AGENT, before, author="t", reason="a")
        b = register_version(session, AGENT, after, parent_id=a.id, author="t", reason="b")
        diff = diff_versions(session, a, b)
        same = diff_versions(session, b, b)
    assert (diff["from"], diff["to"]) == (a.id, b.id)
    assert diff["changed"] == ["model", "harness", "memory", "tools", "guardrails"]
    parts = diff["parts"]
    assert parts["model"] == {"model": {"from": "m", "to": "m2"}}
    assert "-Ask one question.\n+Ask two questions.\n" in parts["harness"]["diff"]
    assert "+++ b/harness/instructions" in parts["harness"]["diff"]
    memory = parts["memory"]
    assert [item["content"] for item in memory["added"]] == ["Greet by name."]
    assert memory["removed"] == []
    assert [(c["from"]["content"], c["to"]["content"]) for c in memory["changed"]] == [
        ("Refunds: 14 days.", "Refunds: 30 days.")
    ]
    assert memory["top_k"] == {"from": 3, "to": 5}
    assert (
        parts["tools"]["added"] == ["lookup"]
        and '+  "description": "Find."' in (parts["tools"]["diff"])
    )
    assert parts["guardrails"] == {"max_tokens": {"from": None, "to": 200}}
    assert same == {"from": b.id, "to": b.id, "changed": [], "parts": {}}


def test_a_memory_item_unknown_to_the_registry_is_shown_by_its_id(two_versions) -> None:
    with transaction(two_versions) as session:
        a = resolve_version(session, AGENT, "v1")
        hand_written = a.spec.model_copy(update={"memory": MemorySnapshot(item_ids=["no-such"])})
        b = register_version(session, AGENT, hand_written, author="t", reason="t")
        diff = diff_versions(session, a, b)
    assert diff["parts"]["memory"]["added"] == [{"id": "no-such", "content": None}]


def test_a_skills_change_is_its_own_part_by_skill_name() -> None:
    before = spec("be brief")
    first = Skill(name="onboard procedure", description="onboard", steps=["a"])
    after = before.model_copy(update={"skills": SkillSet(items=[first])})
    assert changed_parts(before, after) == ["skills"]
    assert changed_parts(before, before.model_copy()) == []
    diff = diff_specs(before, after, {})
    assert [s["name"] for s in diff["parts"]["skills"]["added"]] == ["onboard procedure"]
    edited = after.model_copy(
        update={"skills": SkillSet(items=[first.model_copy(update={"steps": ["a", "b"]})])}
    )
    changed = diff_specs(after, edited, {})["parts"]["skills"]
    assert [c["name"] for c in changed["changed"]] == ["onboard procedure"]
    assert changed["added"] == changed["removed"] == []
