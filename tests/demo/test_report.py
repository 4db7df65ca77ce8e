"""The demo's claims, read off its rows."""

from __future__ import annotations

import pytest

from evoplane.demo.report import facts
from evoplane.demo.reporting import EvolutionRow


def _promoted(before: float | None, after: float | None) -> EvolutionRow:
    return EvolutionRow(
        round="harness",
        drift="a new policy",
        expected="harness",
        evolution_id="evolution-1",
        action="harness",
        outcome="promoted",
        reward_before=before,
        reward_after=after,
    )


@pytest.mark.parametrize(
    ("before", "after", "shown", "detail"),
    [
        (0.818, 0.824, True, "0.818 -> 0.824 (+0.006)"),  # read as 0.82 -> 0.82 before
        (0.824, 0.818, False, "0.824 -> 0.818 (-0.006)"),
        (0.8, 0.8, False, "0.800 -> 0.800 (+0.000)"),
        (None, 0.8, False, "- -> 0.80"),
    ],
)
def test_a_promotion_claims_an_improvement_only_when_the_canary_measured_one(
    before, after, shown, detail
) -> None:
    (diagnosed, improved) = facts([_promoted(before, after)])
    assert diagnosed.shown
    assert improved.shown is shown
    assert detail in improved.detail


def test_the_signals_column_says_a_procedural_failure() -> None:
    from evoplane.demo.report import _signals

    row = _promoted(0.4, 0.9)
    row.signals = {
        "trajectories": 60,
        "top_procedure_task_type": "onboard",
        "top_procedure_step": 3,
        "top_procedure_sessions": 36,
        "top_procedure_consistency": 1.0,
        "top_procedure_fixed_rate": 0.97,
    }
    assert "procedure: 'onboard' guided at step 3 in 36 sessions" in _signals(row)


# --- how it reads at 80 columns, in a log ------------------------------------------------

_TEMPORAL = (
    "http://127.0.0.1:8233/namespaces/default/workflows/"
    "evolution-support-bot-20261205T192432062399Z"
)
_MLFLOW = (
    "http://127.0.0.1:5000/#/experiments/1/runs/633644c37d3b4ae7894970"
    "93d16bc96e?workflowType=machine_learning"
)


def _weights_row(outcome: str = "promoted") -> EvolutionRow:
    return EvolutionRow(
        round="weights",
        drift="a new wave of customers writes tersely, in slang and in German, in every shop",
        expected="weights",
        evolution_id="evolution-support-bot-20261205T192432062399Z",
        action="weights",
        reason="weights: 42% of trajectories route to the wrong tool (wrong_tool) across 4 "
        "tenants, 4 task types and 2 tool setups; a context fix for one tenant's setup will "
        "not reach the others (score 0.210 vs harness 0.054)",
        signals={
            "trajectories": 59,
            "tenants": 4,
            "success_rate": 0.83,
            "reward_mean": 0.717,
            "correction_rate": 0.416,
            "tool_error_rate": 0.0,
            "top_cluster_kind": "tool_routing",
            "top_cluster_key": "wrong_tool",
            "top_cluster_share": 0.42,
            "top_cluster_tenants": 4,
            "top_cluster_task_types": 4,
            "top_cluster_tool_setups": 2,
            "regression_delta": 0.16,
            "regression_design": "holdback",
        },
        scores={"weights": 0.21, "harness": 0.054, "noop": 0.0},
        gates=[
            {"gate": "replay", "verdict": "skipped", "skipped": True},
            {"gate": "shadow", "verdict": "pass"},
            {"gate": "canary", "verdict": "marginal", "weight": 0.5},
        ],
        outcome=outcome,
        outcome_reason="canary gate: canary gate marginal: metric reward is worse by 0.0491, "
        "not yet shown better (superiority; 95% interval of the gain over every look -0.136 "
        "to +0.0374); needs ~2398 sessions a side to tell a 0.05 gain; has 416",
        stable_before="support-bot@v4",
        stable_after="support-bot@v4" if outcome != "promoted" else "support-bot@v5",
        candidate="support-bot@v5",
        reward_before=0.713,
        reward_after=0.661,
        scenario_before=0.36,
        scenario_after=0.41,
        temporal_url=_TEMPORAL,
        mlflow_url=_MLFLOW,
        seconds=172.4,
    )


def _printed(renderable, width: int = 80, **options) -> str:
    import io

    from rich.console import Console

    out = io.StringIO()
    Console(file=out, width=width, force_terminal=False, color_system=None).print(
        renderable, **options
    )
    return out.getvalue()


def _words(*texts: str) -> set[str]:
    return {word for text in texts for word in text.split()}


def test_a_round_reads_at_80_columns_in_a_log_with_every_word_and_link_whole() -> None:
    from evoplane.demo.report import round_block

    row = _weights_row("rolled_back")
    printed = _printed(round_block(row), crop=False)
    lines = printed.splitlines()
    assert _TEMPORAL in printed and _MLFLOW in printed  # each on one line, unsplit
    for line in lines:
        assert len(line) <= 80 or _TEMPORAL in line or _MLFLOW in line, line
    assert "…" not in printed
    printed_words = set(printed.split())
    said = row.outcome_reason.partition(": ")[2]  # "canary gate: " is said once, not twice
    for word in _words(row.drift, said):
        assert word in printed_words, f"{word!r} was cut or split"


def test_the_summary_and_the_claims_fit_80_columns() -> None:
    from evoplane.demo.report import facts, print_facts, summary

    rows = [_weights_row("promoted"), _weights_row("rolled_back")]
    rows[0].reward_after = 0.851
    printed = _printed(summary(rows, "Evoplane demo: support-bot, all rounds"))
    assert all(len(line) <= 80 for line in printed.splitlines()), printed
    assert "0.713 -> 0.851 (+0.138)" in printed and "…" not in printed

    import io

    from rich.console import Console

    out = io.StringIO()
    print_facts(Console(file=out, width=80, force_terminal=False, color_system=None), facts(rows))
    lines = out.getvalue().splitlines()
    missed = [line for line in lines if line.startswith("✗")]
    # A missed claim is one line: what was expected, what happened, and why.
    assert len(missed) == 1
    assert "expected the canary to promote" in missed[0]
    assert "got rolled_back; reward 0.713 -> 0.661 (-0.052)" in missed[0]
    assert "because canary gate marginal" in missed[0] and "has 416" in missed[0]
    shown = [line for line in lines if not line.startswith("✗")]
    assert all(len(line) <= 80 for line in shown)


@pytest.mark.parametrize(
    ("reviewed", "action", "shown"),
    [(15, "memory", True), (0, "memory", False), (15, "harness", False)],
)
def test_the_review_round_claims_a_decision_made_on_a_persons_labels(
    reviewed: int, action: str, shown: bool
) -> None:
    row = _promoted(0.6, 0.8)
    row.round, row.expected, row.action, row.reviewed = "review", "memory", action, reviewed
    (diagnosed, _improved) = facts([row])
    assert diagnosed.claim == "review: diagnosed as memory once a person labelled the queue"
    assert diagnosed.shown is shown
    assert f"{reviewed} corrections labelled, then chose {action}" in diagnosed.detail


@pytest.mark.parametrize(
    ("action", "outcome", "stable_after", "shown"),
    [
        ("noop", "noop", "v1", True),
        ("harness", "noop", "v1", True),  # chose a change whose candidate came to nothing
        ("harness", "promoted", "v2", False),
        ("rollback", "rolled_back", "v0", False),
    ],
)
def test_an_evolution_expected_to_change_nothing_is_judged_by_the_agent_it_leaves(
    action: str, outcome: str, stable_after: str, shown: bool
) -> None:
    row = EvolutionRow("review", "d", "noop", "e1", action=action, outcome=outcome)
    row.stable_before, row.stable_after = "v1", stable_after
    (unchanged, *rest) = facts([row])
    assert unchanged.claim == "review: the agent is left as it was"
    assert unchanged.shown is shown
    assert f"chose {action}, {outcome}; stable v1 -> {stable_after}" in unchanged.detail
