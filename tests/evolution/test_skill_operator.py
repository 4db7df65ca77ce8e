"""The skill operator on a real registry: a procedure users keep walking the agent through
is measured as a procedural failure, decided as `skill`, distilled from the successful
trajectories and the users' guidance, and proven to reach the failures it targets."""

from __future__ import annotations

import random
from datetime import timedelta

import pytest

from activities.evidence import read_window
from activities.operators import skill_operator
from atdp import utcnow
from evolution.analysis import measure_window
from evolution.decision import Action, decide
from evolution.operators import OperatorError
from evolution.window import FailureKind, WindowSpec
from registry import current_aliases, get_version, transaction
from runtime.version.skills import SkillIndex
from tests.evolution.window_helpers import (
    AGENT,
    Recorder,
    decision_for,
    failure_cluster,
    implicit_correction,
    store,
    task_success,
    trajectory,
    world,
)

TASK = "restore"
PROCEDURE = [
    ("find_backup", {"project": "p"}),
    ("stop_service", {"service": "s"}),
    ("verify_checksum", {"backup": "b"}),
    ("restore_backup", {"backup": "b", "server": "x"}),
]
GUIDANCE = [
    "No, first verify the checksum of the backup before you restore it.",
    "Stop, you must verify the backup checksum first, then restore.",
    "Verify the checksum before restoring please.",
]


class Window:
    """Restores (most guided at their third answer, some right unaided) and other tasks."""

    def __init__(self, engine) -> None:
        self.engine, self.base, self.rec = engine, utcnow(), Recorder()
        self.trajectories, self.rewards = [], []
        self.random = random.Random(5)

    def _start(self, tenant: str, task: str, text: str):
        at = self.base - timedelta(minutes=5 * (len(self.trajectories) + 1))
        t = trajectory(tenant, at, task_type=task)
        self.trajectories.append(t)
        self.rec.opening(t, text)
        return t

    def restore(self, tenant: str, *, guided_at: int | None) -> None:
        project = self.random.randint(100, 999)
        t = self._start(tenant, TASK, f"Please restore project {project} from last night's backup")
        steps = PROCEDURE if guided_at is None else [*PROCEDURE[:2], PROCEDURE[3]]
        answers = []
        for tool, arguments in steps:
            call = self.rec.llm_call(t)
            self.rec.tool_call(t, tool, arguments=arguments, parent=call)
            answers.append(call)
            if len(answers) == guided_at:
                self.rec.user_message(t, self.random.choice(GUIDANCE), parent=call)
                self.rewards.append(implicit_correction(t, call))
                again = self.rec.llm_call(t)
                self.rec.tool_call(t, "verify_checksum", arguments={"backup": "b"}, parent=again)
                self.rec.tool_call(t, "restore_backup", arguments=PROCEDURE[3][1], parent=again)
                break
            self.rec.user_message(t, "ok, go on", parent=call)
        self.rewards.append(task_success(t, True))

    def other(self, tenant: str) -> None:
        t = self._start(tenant, "invoice", "What is the total of my latest invoice?")
        call = self.rec.llm_call(t)
        self.rec.tool_call(t, "get_invoice", arguments={"id": "i"}, parent=call)
        self.rewards.append(task_success(t, True))

    def store(self) -> WindowSpec:
        store(self.engine, self.trajectories, self.rec.events, self.rewards)
        return WindowSpec(agent=AGENT, since=self.base - timedelta(days=1), until=self.base)


def restores(
    engine,
    *,
    guided: int = 18,
    unguided: int = 8,
    others: int = 12,
    tenants: tuple[str, ...] = ("acme", "globex", "initech"),
) -> WindowSpec:
    """The window of restores; the agent and its tenants must exist (`world`)."""
    window = Window(engine)
    for i in range(guided):
        window.restore(tenants[i % len(tenants)], guided_at=3)
    for i in range(unguided):
        window.restore(tenants[i % len(tenants)], guided_at=None)
    for i in range(others):
        window.other(tenants[i % len(tenants)])
    return window.store()


def test_a_guided_procedure_is_decided_distilled_and_reaches_its_requests(engine) -> None:
    world(engine)
    window = restores(engine)
    with transaction(engine) as session:
        stats = measure_window(read_window(session, window))
        (procedure,) = stats.procedures
        assert (procedure.task_type, procedure.step, procedure.trajectories) == (TASK, 3, 18)
        assert procedure.consistency == 1.0 and procedure.fixed.rate == 1.0
        record = decide(stats)
        assert record.action is Action.SKILL, record.reason
        parent = get_version(session, current_aliases(session, AGENT).stable)
        candidate = skill_operator().run(session, parent, record, window)

    (skill,) = candidate.spec.skills.items
    assert skill.task_types == [TASK] and skill.tenants == []  # seen in three tenants
    assert [call.tool for call in skill.tool_calls] == [tool for tool, _ in PROCEDURE]
    assert skill.tool_calls[3].arguments == ["backup", "server"]
    # The users' guidance stands at the step where the agent went wrong.
    assert skill.steps[2].startswith("At step 3") and "checksum" in skill.steps[2]
    assert "restore" in skill.description and "backup" in skill.description
    replay = candidate.evidence["replay"]
    assert replay == {"targeted": 18, "reached": 18, "others": 12, "leaked": 0}
    assert candidate.spec.model_copy(update={"skills": parent.spec.skills}) == parent.spec
    # What the gateway would do with it: a new restore request gets it, an invoice does not.
    index = SkillIndex(candidate.spec.skills)
    assert index.search("restore project 4 from the backup", "acme", None)
    assert not index.search("What is the total of my latest invoice?", "acme", None)


def test_without_the_pattern_the_decision_is_not_skill(engine) -> None:
    # Guided at scattered steps: no consistent step, no skill.
    world(engine)
    window = Window(engine)
    for i in range(24):
        window.restore(["acme", "globex"][i % 2], guided_at=[1, 2, 3, 4][i % 4])
    for _ in range(10):
        window.other("acme")
    spec = window.store()
    with transaction(engine) as session:
        stats = measure_window(read_window(session, spec))
    record = decide(stats)
    assert record.action is not Action.SKILL
    assert record.signals["top_procedure_consistency"] in (None, pytest.approx(0.25, abs=0.1))


def test_a_decision_aimed_elsewhere_is_an_operator_error(engine) -> None:
    world(engine)
    window = restores(engine, guided=6, unguided=2, others=2)
    target = failure_cluster(FailureKind.MISSING_FACT, "refund window")
    with transaction(engine) as session:
        parent = get_version(session, current_aliases(session, AGENT).stable)
        with pytest.raises(OperatorError, match="skill operator distils a procedure"):
            skill_operator().run(
                session, parent, decision_for(window, Action.SKILL, target), window
            )


def test_with_only_guided_trajectories_the_corrected_step_moves_after_the_guided_one(
    engine,
) -> None:
    # Nothing succeeded unguided: the order is learned from what the guidance led to, the
    # call made at the corrected answer going where the agent made it again.
    world(engine)
    window = restores(engine, guided=20, unguided=0, others=12)
    with transaction(engine) as session:
        record = decide(measure_window(read_window(session, window)))
        assert record.action is Action.SKILL, record.reason
        parent = get_version(session, current_aliases(session, AGENT).stable)
        candidate = skill_operator().run(session, parent, record, window)
    (skill,) = candidate.spec.skills.items
    assert [call.tool for call in skill.tool_calls] == [tool for tool, _ in PROCEDURE]
