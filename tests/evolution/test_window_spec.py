"""One `WindowSpec` names one window: every reader of a window queries the registry for the
same trajectories (version, tenants and the open end read alike)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest

import evolution.window
import registry.windows
from activities.evidence import canary_traffic, read_window, recorded_cases, shadow_traffic
from activities.operators import memory_operator, tool_schema_operator
from atdp import Traffic, utcnow
from evolution.analysis import measure_window
from evolution.decision import Action
from evolution.operators import OperatorError
from evolution.samples import canary_metrics
from evolution.window import FailureKind, WindowSpec, trajectory_window
from registry import TrajectoryWindow, get_version, transaction
from tests.evolution.window_helpers import (
    AGENT,
    Recorder,
    decision_for,
    failure_cluster,
    new_version,
    score,
    store,
    trajectory,
    world,
)

NOW = utcnow()
SPECS = {
    "version": WindowSpec(agent=AGENT, since=NOW - timedelta(hours=1), until=NOW, version_id="v"),
    "no tenants": WindowSpec(agent=AGENT, tenants=[], since=NOW - timedelta(hours=1)),
    "tenants, count, open end": WindowSpec(agent=AGENT, tenants=["acme"], last=10),
}


def test_an_empty_tenant_list_is_every_tenant() -> None:
    spec = WindowSpec(agent=AGENT, tenants=[], last=5)
    assert spec.tenants is None
    assert trajectory_window(spec).tenants is None


_TOOL_ARGUMENT = failure_cluster(
    FailureKind.TOOL_ARGUMENT,
    "lookup.order_id:format",
    tool="lookup",
    parameter="order_id",
    error_class="format",
)


def _readers(session, spec: WindowSpec, stable: str) -> dict[str, Callable[[], object]]:
    parent = get_version(session, stable)
    memory = decision_for(spec, Action.MEMORY)
    tools = decision_for(spec, Action.TOOL_SCHEMA, _TOOL_ARGUMENT)
    return {
        "analysis": lambda: measure_window(read_window(session, spec, now=NOW)),
        "replay cases": lambda: recorded_cases(session, spec),
        "memory operator": lambda: memory_operator().run(session, parent, memory, spec),
        "tool-schema operator": lambda: tool_schema_operator().run(session, parent, tools, spec),
    }


@pytest.fixture
def queried(monkeypatch) -> list[TrajectoryWindow]:
    """Every window the registry is asked about, as of NOW (the holdback left aside)."""
    monkeypatch.setattr(evolution.window, "utcnow", lambda: NOW)
    seen: list[TrajectoryWindow] = []
    select = registry.windows._select

    def spy(window: TrajectoryWindow, *columns):
        seen.append(window.model_copy(update={"held_back": None}))
        return select(window, *columns)

    monkeypatch.setattr(registry.windows, "_select", spy)
    return seen


@pytest.mark.parametrize("name", SPECS)
def test_every_reader_queries_the_same_window(engine, queried, name: str) -> None:
    stable = world(engine)
    spec = SPECS[name]
    expected = trajectory_window(spec, until=NOW)
    with transaction(engine) as session:
        for reader, read in _readers(session, spec, stable).items():
            queried.clear()
            try:
                read()
            except OperatorError:
                pass  # an empty window proposes nothing; what it read is the point
            # the windows that end where the spec's does (the analysis also reads the
            # window before it, for drift)
            current = [window for window in queried if window.until == expected.until]
            assert current, f"{reader} read no window ending at {expected.until}"
            assert all(window == expected for window in current), f"{reader} read {current}"


@pytest.mark.parametrize("name", SPECS)
def test_the_live_gates_read_the_spec_window_per_version(engine, queried, name: str) -> None:
    stable = world(engine)
    spec = SPECS[name]
    expected = trajectory_window(spec, until=NOW)
    with transaction(engine) as session:
        canary_traffic(session, spec, stable, "candidate")
        shadow_traffic(session, spec, stable, "candidate")
    served = {
        expected.model_copy(update={"version_ids": (version,), "traffic": traffic})
        for version, traffic in [
            (stable, Traffic.USER),
            ("candidate", Traffic.USER),
            ("candidate", Traffic.SHADOW),
        ]
    }
    if spec.since is not None:  # stable's success per tenant before it: the covariate
        before = spec.model_copy(update={"since": None, "until": spec.since, "last": 500})
        served.add(
            trajectory_window(before).model_copy(
                update={"version_ids": (stable,), "traffic": Traffic.USER}
            )
        )
    assert set(queried) == served


def test_canary_rewards_carry_each_tenants_success_before_the_window(engine) -> None:
    stable = world(engine)
    candidate = new_version(engine, "Be precise.")
    recorder, start = Recorder(), NOW - timedelta(minutes=30)
    served, rewards = [], []
    for tenant, value, version, minutes in [
        ("acme", 0.2, stable, -50),
        ("acme", 0.4, stable, -40),
        ("globex", 0.8, stable, -45),
        ("globex", 0.9, candidate, -35),  # not stable's: not its success before
        ("acme", 1.0, stable, 5),
        ("globex", 0.5, candidate, 6),
        ("initech", 0.7, candidate, 7),  # a tenant stable never served before: the mean
    ]:
        item = trajectory(tenant, start + timedelta(minutes=minutes), version=version)
        recorder.llm_call(item)
        served.append(item)
        rewards.append(score(item, value))
    store(engine, served, recorder.events, rewards)
    spec = WindowSpec(agent=AGENT, since=start, until=NOW)
    with transaction(engine) as session:
        reward, _ = canary_metrics(canary_traffic(session, spec, stable, candidate))
    assert [(s.tenant, s.value, s.covariate) for s in reward.baseline] == [
        ("acme", 1.0, pytest.approx(0.3))
    ]
    found = sorted((s.tenant, s.covariate) for s in reward.candidate)
    assert found == [("globex", pytest.approx(0.8)), ("initech", pytest.approx(0.55))]


def test_a_silent_session_counts_as_accepted_once_its_user_had_the_time_to_complain(
    engine,
) -> None:
    """Users who never rate complain when an answer fails them and say nothing when it
    served them: a session no reward reached is accepted (1.0) once its last answer is older
    than the gate's silence, and left out while it may still be complained about."""
    stable = world(engine)
    candidate = new_version(engine, "Be precise.")
    recorder, start = Recorder(), NOW - timedelta(minutes=30)
    served, rewards = [], []
    for version, minutes, complained in [
        (stable, 1, True),  # an implicit 0: the next turn denied the answer
        (stable, 2, False),  # silent, long ago: accepted
        (candidate, 3, False),  # silent, long ago: accepted
        (candidate, 29, False),  # silent, answered a moment ago: not yet
    ]:
        item = trajectory("acme", start + timedelta(minutes=minutes), version=version)
        recorder.llm_call(item)
        served.append(item)
        if complained:
            rewards.append(score(item, 0.0))
    store(engine, served, recorder.events, rewards)
    spec = WindowSpec(agent=AGENT, since=start, until=NOW)
    settled = NOW - timedelta(minutes=5)
    with transaction(engine) as session:
        traffic = canary_traffic(session, spec, stable, candidate)
    reward, _ = canary_metrics(traffic, settled_before=settled)
    strict, _ = canary_metrics(traffic)
    assert sorted(s.value for s in reward.baseline) == [0.0, 1.0]
    assert [s.value for s in reward.candidate] == [1.0]
    assert str(served[3].id) not in {s.key for s in reward.candidate}
    # Without a settled moment, silence counts for nothing: only rewarded sessions.
    assert [s.value for s in strict.baseline] == [0.0] and strict.candidate == []
