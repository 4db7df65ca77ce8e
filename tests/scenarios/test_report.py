"""The scenario suite's output reads at 80 columns and in a log: no word cut or squeezed."""

from __future__ import annotations

import io

from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from evoplane.scenarios.report import (
    block,
    markdown,
    pass_rates,
    rates_markdown,
    rates_table,
    table,
)
from evoplane.scenarios.runner import EvolutionRecord, ScenarioResult

_NAMES = ["instruction_categorised", "two_failures", "helps_two_hurts_third", "enum_values"]
_ACTIONS = ["memory", "tool_schema", "harness", "rollback", "noop", "skill", "weights"]
_OUTCOMES = ["promoted", "rolled_back", "noop", "failed"]


def _printed(renderable, width: int = 80) -> str:
    out = io.StringIO()
    Console(file=out, width=width, force_terminal=False, color_system=None).print(renderable)
    return out.getvalue()


records = st.builds(
    EvolutionRecord,
    expected=st.lists(st.sampled_from(_ACTIONS), min_size=1, max_size=2, unique=True).map(tuple),
    action=st.sampled_from(_ACTIONS),
    outcome=st.sampled_from(_OUTCOMES),
    gates=st.just(["replay:pass", "shadow1:pass", "canary1:fail"]),
    before=st.floats(0, 1),
    after=st.none() | st.floats(0, 1),
)
results = st.builds(
    ScenarioResult,
    name=st.sampled_from(_NAMES),
    domain=st.sampled_from(["helpdesk", "onboarding", "restaurant"]),
    story=st.just("a story"),
    evolutions=st.lists(records, min_size=1, max_size=2),
    passed=st.booleans(),
    why=st.just("expected the canary to promote; got rolled_back at canary1"),
    seconds=st.floats(1, 999),
)


@settings(max_examples=50, deadline=None)
@given(st.lists(results, min_size=1, max_size=6))
def test_the_summary_and_each_block_fit_80_columns_with_every_word_whole(found) -> None:
    summary = _printed(table(found, f"Scenario suite: {len(found)} run"))
    assert all(len(line) <= 80 for line in summary.splitlines()), summary
    assert "…" not in summary
    words = set(summary.split())
    for result in found:
        assert result.name in words
        for record in result.evolutions:
            assert record.action in words and record.outcome in words
    for result in found:
        shown = _printed(block(result))
        assert all(len(line) <= 80 for line in shown.splitlines()), shown
        assert "…" not in shown
        said = set(shown.split())
        for gate in result.evolutions[0].gates:
            assert gate in said
        assert ("pass" in said) is result.passed


def test_a_chosen_action_outside_the_expected_is_marked_and_the_failure_said() -> None:
    wrong = ScenarioResult(
        name="fact_shared",
        domain="clinic",
        story="",
        evolutions=[EvolutionRecord(expected=("memory",), action="harness", outcome="promoted")],
        passed=False,
        why="expected memory, chose harness",
    )
    summary = _printed(table([wrong], "Scenario suite: 0 of 1 passed"))
    assert "harness ✗" in summary and "FAIL" in summary
    assert "fact_shared: expected memory, chose harness" in summary
    assert "harness ✗" in _printed(block(wrong))
    # The Markdown for RESULTS.md keeps every column, the gates included.
    assert "| fact_shared | clinic | memory | harness |" in markdown([wrong])


@settings(max_examples=50, deadline=None)
@given(
    st.lists(
        st.lists(results, min_size=1, max_size=4, unique_by=lambda r: r.name),
        min_size=1,
        max_size=5,
    )
)
def test_pass_rates_count_every_run_and_name_each_failure_with_its_seed(played) -> None:
    runs = [(100 + index, found) for index, found in enumerate(played)]
    rates = pass_rates(runs)

    assert len({rate.name for rate in rates}) == len(rates)
    for rate in rates:
        mine = [(seed, r) for seed, found in runs for r in found if r.name == rate.name]
        assert rate.runs == len(mine)
        assert rate.passed == sum(r.passed for _, r in mine)
        assert rate.failures == [(seed, r.why) for seed, r in mine if not r.passed]
        weakest = [
            min(e.after for e in r.evolutions if e.after is not None)
            for _, r in mine
            if any(e.after is not None for e in r.evolutions)
        ]
        assert rate.weakest_after == weakest
    shown = _printed(rates_table(rates, "Scenario suite, runs"))
    assert all(len(line) <= 80 for line in shown.splitlines()), shown
    written = rates_markdown(rates)
    every = sum(rate.passed == rate.runs for rate in rates)
    assert f"{every} of {len(rates)} scenarios passed in every run." in written
    for rate in rates:
        assert f"| {rate.name} | {rate.passed} of {rate.runs} |" in written
        for seed, _ in rate.failures:
            assert f"`{rate.name}`, seed {seed}:" in written
