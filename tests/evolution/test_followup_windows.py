"""Windows whose only evidence is what users wrote next: no score, no outcome, no widget.

Recorded in the registry as the gateway records them and read by the window analysis, the
decision and the operators' case reader, on SQLite and PostgreSQL."""

from __future__ import annotations

import random
from datetime import timedelta

from activities.evidence import correction_records, read_window, recorded_cases
from atdp import ChatMessage, EventKind, MessageAction, Observation, utcnow
from evolution.analysis import measure_window
from evolution.corrections import CorrectionKind, correction_groups
from evolution.decision import Action, decide
from evolution.window import WindowSpec
from registry import transaction
from tests.evolution.window_helpers import AGENT, TENANTS, Recorder, store, trajectory, world

MINUTE = timedelta(minutes=1)


def answer(rec: Recorder, t, text: str, parent):
    """An llm call that answered `text` after `parent` (the gateway's llm_call event)."""
    return rec._event(
        t,
        EventKind.LLM_CALL,
        parent_id=parent.id,
        observation=Observation(messages=[ChatMessage(role="user", content="...")]),
        action=MessageAction(content=text),
    )


def window(engine, base) -> WindowSpec:
    return WindowSpec(agent=AGENT, since=base - MINUTE)


def two_turn_denials(engine, sessions: int = 40, wrong: float = 0.6):
    """Customers ask when the shop closes; the agent says 20:00, the shop now closes at
    22:00. Those it answered wrong first only deny, then say the time in their next
    message; the others say nothing more."""
    rng = random.Random(7)
    world(engine)
    base = utcnow() - 60 * MINUTE
    rec, trajectories = Recorder(), []
    for i in range(sessions):
        t = trajectory(TENANTS[i % 3], base + i * MINUTE)
        trajectories.append(t)
        asked = rec.opening(t, rng.choice(["Wann schließt der Laden?", "Bis wann ist offen?"]))
        first = answer(rec, t, "Der Laden schließt um 20:00.", asked)
        if i < sessions * wrong:
            denial = rec.user_message(t, rng.choice(["Das stimmt nicht.", "Nein, falsch."]), first)
            again = answer(rec, t, "Entschuldigung, was ist richtig?", denial)
            rec.user_message(t, rng.choice(STATED).format(v="22:00"), again)
    store(engine, trajectories, rec.events)
    return base


STATED = (
    "Der Laden schließt jetzt um {v}.",
    "Seit Montag ist bis {v} offen.",
    "Wir haben bis {v} geöffnet, steht an der Tür.",
)


def test_a_denial_then_a_statement_in_the_next_turn_is_one_correction(engine) -> None:
    base = two_turn_denials(engine, sessions=10, wrong=1.0)
    with transaction(engine) as session:
        found = correction_records(session, window(engine, base)).corrections()
    assert len(found) == 10  # one per trajectory, not one per message
    for correction in found:
        assert correction.text.startswith(("Das stimmt nicht.", "Nein, falsch."))
        assert "22:00" in correction.text
        assert correction.kind is CorrectionKind.MISSING_FACT and correction.supplies_fact
    groups = correction_groups(found)
    assert [len(g.members) for g in groups] == [10], [
        (g.key, [c.text for c in g.members]) for g in groups
    ]


def test_a_window_whose_only_evidence_is_follow_ups_is_a_failing_window_with_a_fix(
    engine,
) -> None:
    base = two_turn_denials(engine)
    with transaction(engine) as session:
        stats = measure_window(read_window(session, window(engine, base)))
        cases = recorded_cases(session, window(engine, base))

    assert stats.task_success.rate == 0.0 and stats.success_evidence == {"follow_up": 24}
    assert stats.follow_ups is not None
    assert stats.follow_ups.dissatisfied.rate == 24 / 40
    assert stats.failures[0].kind == "missing_fact" and stats.failures[0].trajectories == 24
    decision = decide(stats)
    assert decision.action is Action.MEMORY, decision.reason
    assert decision.signals["success_judged_by_follow_up"] == 24
    assert decision.signals["dissatisfied_rate"] == 0.6
    # The operators' cases: each corrected trajectory is a past failure that must state it.
    assert len(cases) == 20 and not any(c.recorded_success for c in cases)
    assert all(c.context.required_facts for c in cases)


def test_users_asking_back_for_what_the_answer_left_out_call_for_the_harness(engine) -> None:
    """No words in common but the thing asked for: the agent, asked, gives back the day
    and time the user had said, which its first answer left out."""
    rng = random.Random(3)
    world(engine)
    base = utcnow() - 60 * MINUTE
    rec, trajectories = Recorder(), []
    asks = (
        "予約の日時をもう一度確認してもらえますか？",
        "何日の何時で予約されましたか？",
        "¿Para qué día y hora quedó la reserva?",
        "Wait, which day and time is it for?",
    )
    for i in range(40):
        t = trajectory(TENANTS[i % 3], base + i * MINUTE)
        trajectories.append(t)
        day, time = f"3月{rng.randrange(1, 28)}日", rng.choice(["18:00", "19:30", "20:00"])
        opened = rec.opening(t, f"{day}の{time}に2名で予約をお願いします。")
        first = answer(rec, t, "ご予約を承りました。", opened)
        if i % 4:
            asked = rec.user_message(t, asks[i % len(asks)], first)
            answer(rec, t, f"ご予約内容：{day} {time}、2名様です。", asked)
    store(engine, trajectories, rec.events)

    with transaction(engine) as session:
        stats = measure_window(read_window(session, window(engine, base)))
        cases = recorded_cases(session, window(engine, base))

    top = stats.failures[0]
    assert top.kind == "instruction" and top.trajectories == 30, stats.failures
    assert decide(stats).action is Action.HARNESS
    # Replay requires of the first answer what the agent gave once asked: the day and time.
    assert len(cases) == 20
    for case in cases:
        (wanted,) = case.context.asked_for
        assert "日" in wanted and ":" in wanted
