"""Skills as a version surface: stored in the spec (hashed, validated), retrieved within
their scope and the set's size budget, and injected by the same overlays the gateway uses."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from atdp import ModelRef, Skill, SkillCall, SkillSet, VersionSpec
from runtime.version.overlays import apply_overlays
from runtime.version.skills import SKILL_BLOCK_START, SkillIndex, skill_text

MODEL = ModelRef(engine="openai", model="m")

TRANSFER = Skill(
    name="mailbox transfer",
    description="move a mailbox from one employee to another when someone leaves",
    steps=["look up both accounts", "freeze the old mailbox", "grant access to the new owner"],
    tool_calls=[SkillCall(tool="find_account", arguments=["email"]), SkillCall(tool="freeze")],
    task_types=["offboarding"],
)
PRINTER = Skill(
    name="printer queue",
    description="clear a stuck printer queue",
    steps=["list the jobs", "cancel the stuck one"],
    tenants=["acme"],
)


def spec(*skills: Skill, **settings) -> VersionSpec:
    return VersionSpec(model=MODEL, skills=SkillSet(items=list(skills), **settings))


def ask(text: str, **metadata) -> dict:
    body: dict = {"messages": [{"role": "user", "content": text}]}
    if metadata:
        body["metadata"] = metadata
    return body


def test_a_version_without_skills_keeps_the_hash_it_had_before_skills() -> None:
    plain = VersionSpec(model=MODEL)
    assert "skills" not in plain.part_hashes()
    # The hash of a spec dumped without the skills field: what stored versions carry.
    legacy = VersionSpec.model_validate(plain.model_dump(exclude={"skills"}))
    assert legacy.content_hash() == plain.content_hash()
    with_skill = spec(TRANSFER)
    assert with_skill.content_hash() != plain.content_hash()
    assert "skills" in with_skill.part_hashes()


def test_skills_round_trip_and_are_validated() -> None:
    stored = spec(TRANSFER, PRINTER)
    assert VersionSpec.model_validate_json(stored.model_dump_json()) == stored
    with pytest.raises(ValidationError, match="unique"):
        spec(TRANSFER, TRANSFER)
    with pytest.raises(ValidationError):
        Skill(name="empty", description="no steps", steps=[])


def test_a_request_gets_the_skill_its_words_match() -> None:
    index = SkillIndex(spec(TRANSFER, PRINTER).skills)
    hits = index.search("an employee leaves, move the mailbox", "acme", None)
    assert [hit.skill.name for hit in hits] == ["mailbox transfer"]
    assert index.search("what is the weather", "acme", None) == []


def test_scope_tenants_and_task_types() -> None:
    index = SkillIndex(spec(TRANSFER, PRINTER).skills)
    assert [h.skill.name for h in index.search("stuck printer queue", "acme", None)] == [
        "printer queue"
    ]
    assert index.search("stuck printer queue", "globex", None) == []  # another tenant's
    assert index.search("stuck printer queue", None, None) == []
    # A request that names another task type never gets a skill scoped to its own.
    assert index.search("move the mailbox", "acme", "billing") == []
    # One that names the skill's task type gets it, whatever its words.
    named = index.search("hello", "globex", "offboarding")
    assert [h.skill.name for h in named] == ["mailbox transfer"]


def test_the_size_budget_passes_over_what_does_not_fit() -> None:
    long = Skill(
        name="long mailbox",
        description="mailbox mailbox mailbox",
        steps=["x" * 500],
    )
    budget = len(skill_text(TRANSFER)) + 10
    index = SkillIndex(spec(long, TRANSFER, top_k=2, max_chars=budget).skills)
    hits = index.search("mailbox", None, None)
    # The best match does not fit the budget; the next one does.
    assert [h.skill.name for h in hits] == ["mailbox transfer"]


@given(
    budget=st.integers(min_value=1, max_value=3000),
    top_k=st.integers(min_value=1, max_value=4),
    steps=st.lists(st.integers(min_value=1, max_value=400), min_size=1, max_size=6),
)
def test_injected_skills_never_exceed_top_k_or_the_budget(
    budget: int, top_k: int, steps: list[int]
) -> None:
    skills = [
        Skill(name=f"mailbox {i}", description="mailbox procedure", steps=["s" * n])
        for i, n in enumerate(steps)
    ]
    hits = SkillIndex(spec(*skills, top_k=top_k, max_chars=budget).skills).search(
        "mailbox", None, None
    )
    assert len(hits) <= top_k
    assert sum(len(skill_text(h.skill)) for h in hits) <= budget


def test_overlays_inject_the_block_and_fingerprint_it_and_undo_recovers_the_request() -> None:
    version = spec(TRANSFER, PRINTER)
    body = ask("Dana leaves on Friday: move her mailbox", task_type="offboarding")
    overlaid = apply_overlays(body, version, tenant="acme")
    blocks = [m["content"] for m in overlaid.body["messages"] if m["role"] == "system"]
    assert len(blocks) == 1 and blocks[0].startswith(SKILL_BLOCK_START)
    assert "2. freeze the old mailbox" in blocks[0]
    assert "find_account(email) -> freeze()" in blocks[0]
    assert [hit.skill.name for hit in overlaid.skills] == ["mailbox transfer"]
    assert overlaid.fingerprints["skills"] == version.part_hashes()["skills"]
    # The block is counted among the messages the overlays put in front of the agent's.
    assert overlaid.undo["added"] == 1
    assert overlaid.body["messages"][1:] == body["messages"]
    # Nothing matched: nothing injected, the skill set's fingerprint still recorded.
    quiet = apply_overlays(ask("hi there"), version, tenant="acme")
    assert quiet.skills == [] and quiet.body["messages"] == ask("hi there")["messages"]
    assert "skills" in quiet.fingerprints
    assert "skills" not in apply_overlays(ask("hi"), VersionSpec(model=MODEL)).fingerprints


def test_later_turns_of_a_task_still_get_its_skill() -> None:
    # Users walking through a procedure say little more than "ok, next"; the task is in
    # the first turn.
    conversation = {
        "messages": [
            {"role": "user", "content": "Dana leaves on Friday: move her mailbox"},
            {"role": "assistant", "content": "Looked up both accounts."},
            {"role": "user", "content": "ok, next"},
            {"role": "assistant", "content": "Frozen."},
            {"role": "user", "content": "go on"},
        ]
    }
    overlaid = apply_overlays(conversation, spec(TRANSFER), tenant="acme")
    assert [hit.skill.name for hit in overlaid.skills] == ["mailbox transfer"]
