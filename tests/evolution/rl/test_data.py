"""The training-data builders read a training export: what goes in, and what never does.

Each conversation is recorded as real user traffic and, with words of its own, as shadow
traffic, evaluation traffic, `debug_only` and `audit_only` data. Only the user copies may
reach any builder's output or any teacher.
"""

from __future__ import annotations

import json

import pytest

from atdp import (
    ChatMessage,
    Governance,
    MessageAction,
    Observation,
    Outcome,
    ToolCall,
    ToolCallAction,
    ToolSpec,
    Traffic,
    TrainingEligibility,
)
from evolution.rl.data import (
    OpenAITeacher,
    call_text,
    correction_pairs,
    teacher_targets,
)
from evolution.rl.rewards import ToolCallReward
from evolution.rl.samples import RecordedPrompt, recorded_prompts
from registry import (
    add_rewards,
    get_events,
    insert_events,
    list_trajectories,
    record_trajectory,
    training_records,
    transaction,
)
from tests.registry.helpers import event, reward, seed_world, trajectory
from tests.support.upstream import ScriptedUpstream

ORDER = {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}
TOOLS = [
    ToolSpec(name="lookup_order", parameters=ORDER),
    ToolSpec(name="cancel_order", parameters=ORDER),
]
SYSTEM = ChatMessage(role="system", content="You are the shop's assistant.")
WRONG = {"order_id": "A1"}
CORRECTION = "no, cancel it instead"
EXCLUDED = {
    "shadow": (Traffic.SHADOW, TrainingEligibility.ELIGIBLE),
    "evaluation": (Traffic.EVALUATION, TrainingEligibility.ELIGIBLE),
    "debug": (Traffic.USER, TrainingEligibility.DEBUG_ONLY),
    "audit": (Traffic.USER, TrainingEligibility.AUDIT_ONLY),
}


def ask(label: str) -> str:
    """A user's request; the scripted teacher answers it with a cancel_order call."""
    return f"[{label}] call cancel_order with " + json.dumps(WRONG)


def conversation(label: str, kind: str, traffic: Traffic, training: TrainingEligibility):
    """A wrong lookup (rated 0, its tool failed), then a rewarded cancel: the agent's retry
    of the same user turn, or its answer after the user's correcting turn."""
    owner = trajectory("acme", session=f"{label}-{kind}")
    governance = Governance(training=training)
    request = ChatMessage(role="user", content=ask(label))
    wrong_call = ToolCall(id="c1", name="lookup_order", arguments=json.dumps(WRONG))
    wrong = event(
        owner,
        0,
        observation=Observation(messages=[SYSTEM, request], tools=TOOLS),
        action=MessageAction(tool_calls=[wrong_call]),
    )
    failed = event(
        owner,
        1,
        kind="tool_call",
        parent_id=wrong.id,
        action=ToolCallAction(call=wrong_call),
        outcome=Outcome(
            error_class="OrderClosed", error_message="order A1 is closed", success=False
        ),
    )
    history = [
        SYSTEM,
        request,
        ChatMessage(role="assistant", tool_calls=[wrong_call]),
        ChatMessage(role="tool", tool_call_id="c1", content="order A1 is closed"),
    ]
    made = [wrong, failed]
    if kind == "correction":
        correcting = ChatMessage(role="user", content=f"{CORRECTION} [{label}]")
        made.append(
            event(
                owner,
                2,
                kind="user_message",
                parent_id=wrong.id,
                observation=Observation(messages=[correcting]),
            )
        )
        history.append(correcting)
    right_call = ToolCall(id="c2", name="cancel_order", arguments=json.dumps(WRONG))
    made.append(
        event(
            owner,
            len(made),
            observation=Observation(messages=history, tools=TOOLS),
            action=MessageAction(tool_calls=[right_call]),
        )
    )
    made = [
        e.model_copy(
            update={
                "governance": governance,
                "metadata": e.metadata.model_copy(update={"traffic": traffic}),
            }
        )
        for e in made
    ]
    return owner, made, [reward(owner, 0.0, made[0]), reward(owner, 1.0, made[-1])]


@pytest.fixture
def recorded(engine):
    seed_world(engine)
    everything = [
        conversation("user", kind, Traffic.USER, TrainingEligibility.ELIGIBLE)
        for kind in ("retry", "correction")
    ]
    for label, (traffic, training) in EXCLUDED.items():
        everything += [
            conversation(label, kind, traffic, training) for kind in ("retry", "correction")
        ]
    with transaction(engine) as session:
        for owner, _, _ in everything:
            record_trajectory(session, owner)
        insert_events(session, [e for _, events, _ in everything for e in events])
        add_rewards(session, [r for _, _, rewards in everything for r in rewards])
    return engine


def test_the_excluded_copies_are_recorded_and_the_export_leaves_them_out(recorded) -> None:
    with transaction(recorded) as session:
        stored = list_trajectories(session, "acme", agent="support-bot", limit=100)
        held = sum(len(get_events(session, "acme", t.id)) for t in stored)
    assert len(stored) == 2 + 2 * len(EXCLUDED) and held == 7 * (1 + len(EXCLUDED))
    exported = records(recorded)
    assert len(exported) == 2
    never_excluded(json.dumps(exported))


def records(engine) -> list[dict]:
    with transaction(engine) as session:
        return list(training_records(session, "support-bot", ["acme", "globex"]))


def never_excluded(text: str) -> None:
    for label in EXCLUDED:
        assert f"[{label}]" not in text, f"{label} data reached training: {text[:200]}"


def test_dpo_pairs_prefer_the_rewarded_retry_or_correction_over_the_answer_it_fixed(
    recorded,
) -> None:
    pairs = correction_pairs(records(recorded))
    assert sorted(p.source for p in pairs) == ["correction", "retry"]
    for pair in pairs:
        assert pair.chosen == call_text("cancel_order", WRONG)
        assert pair.rejected == call_text("lookup_order", WRONG)
        # The prompt is the one the wrong answer was given to.
        assert pair.prompt.messages[-1]["content"] == ask("user")
        never_excluded(json.dumps(pair.prompt.messages))


def test_a_step_rewarded_later_with_the_same_call_makes_no_pair(recorded) -> None:
    data = records(recorded)
    for record in data:  # the "fix" now repeats the wrong call: it was never wrong
        record["steps"][-1]["completion"] = record["steps"][0]["completion"]
    assert correction_pairs(data) == []


def test_teacher_targets_replay_failed_steps_and_keep_what_the_verifier_accepts(
    recorded,
) -> None:
    with transaction(recorded) as session:
        prompts = recorded_prompts(training_records(session, "support-bot", ["acme"]))
    with ScriptedUpstream() as upstream:
        teacher = OpenAITeacher(upstream.base_url, "scripted-model")
        targets = teacher_targets(prompts, teacher, ToolCallReward(), n=2)
        asked = [json.dumps(r["messages"]) for r in upstream.requests]
    # Both wrong steps were replayed; only the retry's has a reference the answer can be
    # verified against (the corrected one's fix came in a later user turn).
    assert len(asked) == 2
    for text in asked:
        never_excluded(text)
    (target,) = targets
    assert target.completion == call_text("cancel_order", WRONG)
    assert target.messages[-1]["content"] == ask("user")


def test_a_teacher_that_refuses_says_where_and_what_to_check() -> None:
    prompt = RecordedPrompt(
        event_id="e", tenant="acme", messages=[{"role": "user", "content": "hi"}], reward=0.0
    )
    with ScriptedUpstream(api_key="right") as upstream:
        teacher = OpenAITeacher(upstream.base_url, "scripted-model", api_key="wrong")
        with pytest.raises(RuntimeError, match="answered 401.*base URL, model and key"):
            teacher(prompt, 1)
