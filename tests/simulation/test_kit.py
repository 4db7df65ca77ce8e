"""The simulation kit the demo and the scenario suite share: sessions, evolutions, feedback."""

from __future__ import annotations

import threading
import time

import pytest

from evoplane.simulation.evolutions import Operator, SimulationError, persons_change
from evoplane.simulation.feedback import widget_report
from evoplane.simulation.traffic import first_time_success, play_sessions


def test_sessions_are_played_a_few_at_a_time_until_the_count_is_reached() -> None:
    lock, running, most = threading.Lock(), [0], [0]

    def session() -> int:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.01)
        with lock:
            running[0] -= 1
        return 1

    ended: list[None] = []
    done = play_sessions(session, 10, concurrency=3, on_done=lambda: ended.append(None))

    assert done == [1] * 10 and len(ended) == 10
    assert most[0] == 3


def test_sessions_go_on_for_at_least_the_time_asked() -> None:
    started = time.monotonic()
    done = play_sessions(lambda: time.sleep(0.02), 1, concurrency=2, at_least=0.2)
    assert time.monotonic() - started >= 0.2 and len(done) > 1


def test_first_time_success_is_a_share_to_three_places_or_none() -> None:
    assert first_time_success([True, False, False]) == 0.333
    assert first_time_success([]) is None


@pytest.mark.parametrize(
    ("rating", "good", "expected"),
    [
        ("score", True, {"score": 1.0}),
        ("thumbs", False, {"thumbs": "down"}),
        ("none", False, {}),
    ],
)
def test_a_widget_report_says_only_what_the_user_said(rating, good, expected) -> None:
    assert widget_report(rating, good=good) == expected
    said = widget_report(rating, good=good, category="policy", correction="No, 30 days.")
    assert said == {
        **expected,
        "category": "policy",
        "category_score": 0.0,
        "correction": "No, 30 days.",
    }


def test_a_persons_hotfix_skips_every_gate_and_a_candidate_goes_through_them() -> None:
    hotfix = persons_change("harness", {"harness": {}}, actor="ana", reason="r", gated=False)
    assert hotfix["skip_gates"] == ["replay", "shadow", "canary"]
    assert persons_change("memory", {}) == {"force": "memory", "candidate": {}}


class _Control:
    """The control API's answers for one evolution, stage by stage."""

    def __init__(self, stages: list[str | None]) -> None:
        self.stages = stages
        self.polls = 0

    def evolve(self, agent: str, options: dict) -> dict:
        return {"id": "evo-1", "ui": "http://ui/evo-1"}

    def evolution(self, evolution_id: str) -> dict:
        stage = self.stages[min(self.polls, len(self.stages) - 1)]
        self.polls += 1
        live = {"stage": stage, "candidate_version": "bot@v2"}
        if stage == "done":
            live["outcome"] = "promoted"
        return {"live": live}


def test_an_evolution_is_followed_to_its_end_with_traffic_while_live_gates_watch() -> None:
    control = _Control(["shadow", "canary", "canary", "done"])
    stages: list[str] = []
    traffic: list[None] = []
    operator = Operator(control, timeout=10, catalog_ttl=0)  # type: ignore[arg-type]

    evolution = operator.evolve(
        "bot", {}, on_stage=stages.append, live_traffic=lambda: traffic.append(None)
    )

    assert (evolution.id, evolution.ui, evolution.live["outcome"]) == (
        "evo-1",
        "http://ui/evo-1",
        "promoted",
    )
    assert stages == ["shadow gate on bot@v2", "canary gate on bot@v2", "done: promoted"]
    assert len(traffic) == 3


def test_an_evolution_that_does_not_end_stops_the_run_and_says_where_to_look() -> None:
    operator = Operator(_Control(["building"]), timeout=0.5, catalog_ttl=0)  # type: ignore[arg-type]
    with pytest.raises(SimulationError, match="Temporal UI"):
        operator.follow("evo-1", on_stage=lambda words: None, live_traffic=lambda: None)
