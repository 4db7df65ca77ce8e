"""The demo's reliability benchmark: runs kept as they end, claims counted over runs."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from evoplane.demo.reliability import (
    RoundRun,
    Run,
    markdown,
    play_runs,
    read_runs,
    summarise,
)
from evoplane.demo.reporting import DemoResult, EvolutionRow
from evoplane.simulation.progress import QuietReporter


def _row(round_: str, action: str, before: float, after: float, outcome="promoted"):
    return EvolutionRow(
        round=round_,
        drift="a drift",
        expected=round_,
        evolution_id=f"evolution-{round_}",
        action=action,
        outcome=outcome,
        reward_before=before,
        reward_after=after,
        seconds=30.0,
    )


def test_runs_are_kept_as_they_end_and_a_crashed_run_is_a_failed_result(tmp_path) -> None:
    played: list[tuple[int, str]] = []

    def play(seed, data_dir, reporter) -> DemoResult:
        played.append((seed, data_dir.name))
        (data_dir / "registry.db").parent.mkdir(parents=True, exist_ok=True)
        (data_dir / "registry.db").write_text("x")
        if seed == 11:
            raise RuntimeError("the gateway did not start")
        after = 0.9 if seed == 10 else 0.5  # seed 12's weights round is no better
        rows = [_row("memory", "memory", 0.6, 0.95), _row("weights", "weights", 0.7, after)]
        return DemoResult(rows, "support-bot", 300.0, 800)

    jsonl = tmp_path / "runs.jsonl"

    def kept(run: Run) -> None:
        with jsonl.open("a") as out:
            out.write(json.dumps(run.as_json()) + "\n")

    runs = play_runs(
        3,
        seed=10,
        data_root=tmp_path / "data",
        play=play,
        reporter=lambda index: QuietReporter(),
        on_run=kept,
    )
    assert played == [(10, "run-10"), (11, "run-11"), (12, "run-12")]
    assert not (tmp_path / "data" / "run-10").exists()  # each run's data is removed after it
    assert [run.passed for run in runs] == [True, False, False]
    assert "the gateway did not start" in (runs[1].error or "")
    assert runs[2].missed and "weights: promoted with a measured reward" in runs[2].missed[0]
    assert read_runs(jsonl) == runs

    summary = summarise(runs)
    assert (summary.runs, summary.passed) == (3, 1)
    rates = {rate.claim: rate.shown for rate in summary.claims}
    # The crashed run reached no claim: it counts as missing every one.
    assert rates["memory: diagnosed as memory"] == 2
    assert rates["weights: promoted with a measured reward improvement"] == 1
    text = markdown(summary)
    assert "**1 of 3**" in text and "| weights: promoted with a measured reward" in text
    assert "seed 11: RuntimeError: the gateway did not start" in text


_claims = st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), st.booleans(), min_size=1)
_rounds = st.lists(
    st.builds(
        RoundRun,
        round=st.sampled_from(["memory", "weights"]),
        action=st.just("x"),
        outcome=st.sampled_from(["promoted", "rolled_back"]),
        reward_before=st.floats(0, 1),
        reward_after=st.floats(0, 1),
        seconds=st.floats(0, 1000),
    ),
    max_size=3,
)
_runs = st.lists(
    st.builds(
        Run,
        seed=st.integers(0, 100),
        seconds=st.floats(0, 1000),
        claims=_claims,
        rounds=_rounds,
        error=st.none() | st.just("boom"),
    ),
    min_size=1,
    max_size=8,
)


@given(_runs)
def test_a_claim_counts_only_the_runs_that_showed_it(runs: list[Run]) -> None:
    summary = summarise(runs)
    every = {claim for run in runs for claim in run.claims}
    assert summary.passed == sum(
        run.error is None and all(run.claims.get(claim) is True for claim in every) for run in runs
    )
    for rate in summary.claims:
        assert rate.runs == len(runs)
        assert rate.shown == sum(run.claims.get(rate.claim) is True for run in runs)
        # Every run that passed showed every claim any run made.
        assert rate.shown >= summary.passed
    for figures in summary.rounds:
        played = [r for run in runs for r in run.rounds if r.round == figures.round]
        assert sum(figures.outcomes.values()) == figures.runs == len(played)
    assert Run.of_json(json.loads(json.dumps(runs[0].as_json()))) == runs[0]
