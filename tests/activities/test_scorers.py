"""Code scorers on captured traffic: their scores are rewards the window reads, and a
scorer that fails, hangs or answers nonsense says so without stopping anything."""

from __future__ import annotations

from datetime import timedelta

import pytest

from activities.evidence import read_window
from activities.models import ScoreRequest
from activities.scorers import ScorerActivities
from atdp import MessageAction, RewardSource, utcnow
from evolution.analysis import measure_window
from evolution.window import WindowSpec
from registry import list_rewards, scorer_summaries, set_agent_settings, transaction
from tests.evolution.window_helpers import AGENT, Recorder, store, trajectory, world
from tests.support.scorers import ScoringEndpoint

MINUTE = timedelta(minutes=1)
SCORERS = "tests.support.scorers"


def traffic(engine, answers: list[str]) -> tuple[WindowSpec, list]:
    """One trajectory per answer, one llm call each, no rewards: nobody said how it went."""
    world(engine)
    base = utcnow() - 30 * MINUTE
    rec, made = Recorder(), []
    for index, answer in enumerate(answers):
        t = trajectory(("acme", "globex")[index % 2], base + index * MINUTE)
        call = rec.llm_call(t)
        rec.events[-1] = call.model_copy(update={"action": MessageAction(content=answer)})
        made.append(t)
    store(engine, made, rec.events)
    return WindowSpec(agent=AGENT, since=base - MINUTE), made


def configure(engine, *scorers: dict) -> None:
    with transaction(engine) as session:
        set_agent_settings(session, AGENT, {"scorers": list(scorers)})


def test_a_code_scorers_rewards_reach_the_window(engine) -> None:
    window, made = traffic(engine, ["Booked for Friday.", "Sorry, no rooms.", "Booked!"])
    configure(
        engine,
        {"name": "booking", "entry_point": f"{SCORERS}:says_booked", "reward": "task_success"},
    )
    with transaction(engine) as session:
        before = measure_window(read_window(session, window))
    assert before.task_success.total == 0  # nobody said how any went

    activities = ScorerActivities(engine)
    report = activities.score_traffic(ScoreRequest(window=window))
    assert (report.scorers["booking"].scored, report.scorers["booking"].failed) == (3, 0)
    with transaction(engine) as session:
        after = measure_window(read_window(session, window))
        rewards = list_rewards(session, made[0].tenant, trajectory_id=made[0].id)
    assert (after.task_success.successes, after.task_success.total) == (2, 3)
    assert [(r.name, r.source, r.critique) for r in rewards] == [
        ("task_success", RewardSource.TEST, "a booking was confirmed")
    ]
    # Scored once: a second run (a retried activity) sends nothing and adds nothing.
    again = activities.score_traffic(ScoreRequest(window=window))
    assert again.scorers["booking"].scored == 0


def test_an_endpoint_gets_batches_and_a_missing_answer_is_tried_again(engine) -> None:
    window, made = traffic(engine, [f"answer {i}" for i in range(5)])
    missing = str(made[0].id)

    def score(item: dict) -> float:
        if item["trajectory_id"] == missing:
            raise LookupError  # left out of the endpoint's answer
        return 0.25

    with ScoringEndpoint(score) as endpoint:
        configure(engine, {"name": "remote", "url": endpoint.url, "batch_size": 2, "retries": 0})
        report = ScorerActivities(engine).score_traffic(ScoreRequest(window=window))
        run = report.scorers["remote"]
        assert (run.scored, run.failed) == (4, 1)
        assert [len(batch) for batch in endpoint.batches] == [2, 2, 1]
        assert "returned no result" in run.errors[0]
        assert endpoint.batches[0][0]["messages"][-1] == {
            "role": "assistant",
            "content": endpoint.batches[0][0]["answer"],
        }
        second = ScorerActivities(engine).score_traffic(ScoreRequest(window=window))
        assert [b[0]["trajectory_id"] for b in endpoint.batches[3:]] == [missing]
        assert second.scorers["remote"].failed == 1
    with transaction(engine) as session:
        assert scorer_summaries(session, AGENT)[0].model_dump(
            include={"scorer", "scored", "failed"}
        ) == {"scorer": "remote", "scored": 4, "failed": 1}


@pytest.mark.parametrize(
    ("scorer", "said"),
    [
        (
            {"entry_point": f"{SCORERS}:raises"},
            "raised RuntimeError: the bookings database is down",
        ),
        ({"entry_point": f"{SCORERS}:hangs", "timeout_seconds": 0.2}, "took longer than 0.2 s"),
        ({"entry_point": f"{SCORERS}:answers_nonsense"}, "not a score: got str 'looks fine"),
    ],
)
def test_a_failing_scorer_says_why_and_gives_up_after_its_attempts(engine, scorer, said) -> None:
    window, _ = traffic(engine, ["one", "two"])
    configure(engine, {"name": "broken", "retries": 1, "max_attempts": 2, **scorer})
    activities = ScorerActivities(engine)
    first = activities.score_traffic(ScoreRequest(window=window)).scorers["broken"]
    assert (first.scored, first.failed) == (0, 2) and said in first.errors[0]
    activities.score_traffic(ScoreRequest(window=window))
    third = activities.score_traffic(ScoreRequest(window=window)).scorers["broken"]
    assert (third.scored, third.failed) == (0, 0)  # given up after two runs
    with transaction(engine) as session:
        summary = scorer_summaries(session, AGENT)[0]
    assert summary.failed == 2 and said in summary.last_error


def test_a_scorer_that_cannot_load_or_answer_in_its_budget_leaves_the_rest(engine) -> None:
    window, _ = traffic(engine, ["one", "two", "three"])
    configure(
        engine,
        {"name": "missing", "entry_point": "no_such_package.scorers:check"},
        {"name": "number", "entry_point": f"{SCORERS}:NOT_A_FUNCTION"},
        {
            "name": "slow",
            "entry_point": f"{SCORERS}:hangs",
            "timeout_seconds": 0.5,
            "budget_seconds": 0.1,
            "batch_size": 1,
        },
        {"name": "booking", "entry_point": f"{SCORERS}:says_booked"},
    )
    report = ScorerActivities(engine).score_traffic(ScoreRequest(window=window)).scorers
    assert (
        "cannot load no_such_package.scorers:check (ModuleNotFoundError" in report["missing"].error
    )
    assert "is not a function" in report["number"].error
    # The slow one spent its budget on its first call (a run makes one at least, and a
    # call takes up to its timeout); the others wait for a later run.
    assert (report["slow"].failed, report["slow"].left) == (1, 2)
    assert report["booking"].scored == 3  # and the others ran all the same


def test_a_scorer_scores_only_the_tenants_and_task_types_it_names(engine) -> None:
    world(engine)
    base = utcnow() - 30 * MINUTE
    rec, made = Recorder(), []
    for index, (tenant, task) in enumerate(
        [("acme", "booking"), ("acme", "refund"), ("globex", "booking"), ("acme", None)]
    ):
        t = trajectory(tenant, base + index * MINUTE, task_type=task)
        rec.events.append(
            rec.llm_call(t).model_copy(update={"action": MessageAction(content="Booked.")})
        )
        rec.events.pop(-2)
        made.append(t)
    store(engine, made, rec.events)
    configure(
        engine,
        {
            "name": "booking",
            "entry_point": f"{SCORERS}:says_booked",
            "tenants": ["acme"],
            "task_types": ["booking"],
        },
    )
    window = WindowSpec(agent=AGENT, since=base - MINUTE)
    report = ScorerActivities(engine).score_traffic(ScoreRequest(window=window))
    assert report.scorers["booking"].scored == 1
    with transaction(engine) as session:
        assert [r.name for r in list_rewards(session, "acme", trajectory_id=made[0].id)] == [
            "booking"
        ]
