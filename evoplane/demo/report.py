"""What the demo prints, and the facts it must show (checked by the CLI and the tests).

Everything here reads well at 80 columns and in a log: a round is a block of labelled lines
whose text wraps at word boundaries, never a table squeezing seven columns; links stand on
lines of their own, whole: print a block with `crop=False`, so a terminal may wrap a link
but nothing splits or cuts it; a missed claim says in one line what was expected, what
happened and why.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.console import Console, RenderableType
from rich.text import Text

from evoplane.demo.reporting import EvolutionRow
from evoplane.simulation.report import LABEL, labelled_block, number, summary_table

__all__ = ["Fact", "facts", "print_facts", "round_block", "summary"]


@dataclass(frozen=True)
class Fact:
    """One thing the demo set out to show, and whether this run showed it.

    Args:
        claim: what the demo claims ("weights: diagnosed as weights").
        shown: whether this run showed it.
        detail: what happened.
        expected: what showing it takes, said when it was not shown.
        why: the evidence behind what happened (a gate's reason, the decision's).
    """

    claim: str
    shown: bool
    detail: str
    expected: str = ""
    why: str = ""

    @property
    def line(self) -> str:
        """The fact in one line: shown, or expected / happened / why."""
        mark = "✓" if self.shown else "✗"
        if self.shown:
            return f"{mark} {self.claim}: {self.detail}"
        said = [f"expected {self.expected}" if self.expected else "", f"got {self.detail}"]
        if self.why:
            said.append(f"because {self.why}")
        return f"{mark} {self.claim}: " + "; ".join(s for s in said if s)


def facts(rows: Sequence[EvolutionRow]) -> list[Fact]:
    """Each drift diagnosed as its surface, bad candidates stopped with stable unchanged,
    the regression rolled back, and every promoted evolution measurably better."""
    found: list[Fact] = []
    for row in rows:
        if row.forced:
            if row.expected in {"replay", "shadow", "canary"}:
                found.append(_stopped(row))
            continue
        if row.expected == "noop":
            found.append(_unchanged(row))
        elif row.reviewed is None:
            found.append(
                Fact(
                    f"{row.round}: diagnosed as {row.expected}",
                    row.action == row.expected,
                    f"chose {row.action}",
                    expected=f"the policy to choose {row.expected}",
                    why=_first_sentence(row.reason),
                )
            )
        else:
            found.append(_relabelled(row))
        if row.action == "rollback":
            found.append(_rolled_back(row))
        elif row.outcome == "promoted" or row.expected != "noop":
            found.append(_improved(row))
    return found


def _as_expected(row: EvolutionRow) -> bool:
    """The policy did what the round expects. An evolution expected to change nothing did
    so when the agent is as it was, whatever it tried: a change chosen on thin evidence
    whose candidate came to nothing leaves the agent as a noop does."""
    if row.expected == "noop":
        return row.outcome != "promoted" and row.stable_after == row.stable_before
    return row.action == row.expected


def _unchanged(row: EvolutionRow) -> Fact:
    return Fact(
        f"{row.round}: the agent is left as it was",
        _as_expected(row),
        f"chose {row.action}, {row.outcome}; stable {row.stable_before} -> {row.stable_after}",
        expected=f"no promotion and stable to stay {row.stable_before}",
        why=_first_sentence(row.reason),
    )


def _relabelled(row: EvolutionRow) -> Fact:
    """The evolution after a person labelled what the one before it queued for review."""
    return Fact(
        f"{row.round}: diagnosed as {row.expected} once a person labelled the queue",
        bool(row.reviewed) and row.action == row.expected,
        f"{row.reviewed} corrections labelled, then chose {row.action}",
        expected=f"queued corrections labelled and the policy to choose {row.expected}",
        why=_first_sentence(row.reason),
    )


def _stopped(row: EvolutionRow) -> Fact:
    stopped = row.outcome in {"aborted", "rolled_back"}
    unchanged = row.stable_after == row.stable_before
    gate = _failed_gate(row)
    return Fact(
        f"{row.round}: a bad candidate is stopped by a gate, stable unchanged",
        stopped and unchanged,
        f"{row.outcome} at {gate or 'no gate'}; stable {row.stable_before} -> {row.stable_after}",
        expected=f"the {row.expected} gate to stop it and stable to stay {row.stable_before}",
        why=_plain_reason(row.outcome_reason),
    )


def _rolled_back(row: EvolutionRow) -> Fact:
    restored = row.outcome == "rolled_back" and row.stable_after != row.stable_before
    return Fact(
        f"{row.round}: the regressed version is rolled back",
        restored,
        f"{row.outcome}; stable {row.stable_before} -> {row.stable_after}",
        expected=f"stable to move back from {row.stable_before}",
        why=row.outcome_reason,
    )


def _improved(row: EvolutionRow) -> Fact:
    better = (
        row.outcome == "promoted"
        and row.reward_before is not None
        and row.reward_after is not None
        and row.reward_after > row.reward_before
    )
    return Fact(
        f"{row.round}: promoted with a measured reward improvement",
        better,
        f"{row.outcome}; reward {_change(row.reward_before, row.reward_after)}",
        expected="the canary to promote a candidate whose reward is higher than stable's",
        why="" if row.outcome == "promoted" else _plain_reason(row.outcome_reason),
    )


# --- blocks ---------------------------------------------------------------------------------


def round_block(row: EvolutionRow) -> RenderableType:
    """One evolution as a block: a rule with the round's name, a labelled line each for its
    result, drift, signals, decision, gates, outcome, reward and time, then its links, each
    on a line of its own that never wraps (print the block with `crop=False`)."""
    said = [("result", _verdict(row)), *_lines(row)]
    lines = [(label, Text.from_markup(text)) for label, text in said]
    named = (("Temporal", row.temporal_url), ("MLflow", row.mlflow_url))
    links = [
        Text(f"{name:<{LABEL}} {url}", no_wrap=True, overflow="ignore")
        for name, url in named
        if url
    ]
    return labelled_block(row.round, lines, *links)


def summary(rows: Sequence[EvolutionRow], title: str) -> RenderableType:
    """One line per evolution (round, decision, outcome, reward), within 80 columns."""
    grid = summary_table(title)
    grid.add_column("round", no_wrap=True)
    grid.add_column("decision", no_wrap=True)
    grid.add_column("outcome", overflow="fold")
    grid.add_column("reward", no_wrap=True)
    for row in rows:
        mark = "" if row.forced else (" ✓" if _as_expected(row) else " ✗")
        decision = f"{row.action or '?'}{mark}" + (" (person)" if row.forced else "")
        grid.add_row(
            row.round,
            decision,
            _outcome_words(row),
            _change(row.reward_before, row.reward_after),
        )
    return grid


def print_facts(console: Console, shown: Sequence[Fact]) -> None:
    """Each fact on one line (a missed one with what was expected, what happened and why)."""
    for fact in shown:
        colour = "green" if fact.shown else "red"
        line = Text(fact.line)
        line.stylize(colour, 0, 1)
        console.print(line, soft_wrap=not fact.shown, highlight=False)


def _verdict(row: EvolutionRow) -> str:
    outcome = _outcome_words(row)
    if row.forced:
        return f"a person's {row.action} candidate: {outcome}"
    mark = "[green]✓[/green]" if _as_expected(row) else "[red]✗[/red]"
    expected = "no change" if row.expected == "noop" else row.expected
    return f"chose {row.action} {mark} (expected {expected}): {outcome}"


def _lines(row: EvolutionRow) -> list[tuple[str, str]]:
    lines = [("drift", _escape(row.drift))]
    if row.reviewed is not None:
        lines.append(("review", f"a person labelled {row.reviewed} queued corrections first"))
    if row.signals:
        lines.append(("signals", _escape(_signals(row))))
    lines.append(("decision", _decision(row)))
    if row.gates:
        lines.append(("gates", _gates(row)))
    lines.append(("outcome", _escape(_outcome_detail(row))))
    lines.append(("reward", _escape(_reward(row))))
    lines.append(("took", f"{row.seconds:.0f} s"))
    return lines


def _signals(row: EvolutionRow) -> str:
    s = row.signals
    said = [
        f"{s.get('trajectories')} trajectories, {s.get('tenants')} tenants; success "
        f"{_pct(s.get('success_rate'))}, reward {number(s.get('reward_mean'))}, corrections "
        f"{_pct(s.get('correction_rate'))}, tool errors {_pct(s.get('tool_error_rate'))}"
    ]
    if s.get("top_cluster_kind"):
        said.append(
            f"top failure: {s['top_cluster_kind']} '{s['top_cluster_key']}' in "
            f"{_pct(s.get('top_cluster_share'))} ({s.get('top_cluster_tenants')} tenants, "
            f"{s.get('top_cluster_task_types')} task types, "
            f"{s.get('top_cluster_tool_setups')} tool setups)"
        )
    if s.get("top_procedure_step") is not None:
        said.append(
            f"procedure: '{s['top_procedure_task_type']}' guided at step "
            f"{s['top_procedure_step']} in {s.get('top_procedure_sessions')} sessions "
            f"({_pct(s.get('top_procedure_consistency'))} consistent, fixed "
            f"{_pct(s.get('top_procedure_fixed_rate'))})"
        )
    if s.get("regression_delta") is not None:
        against = "held-back parent" if s.get("regression_design") == "holdback" else "parent"
        said.append(f"since promotion: reward {s['regression_delta']:+.2f} vs {against}")
    return "; ".join(said)


def _decision(row: EvolutionRow) -> str:
    if row.forced:
        return f"[bold]{row.action}[/bold], a person's candidate: {_escape(row.reason)}"
    top = sorted(row.scores.items(), key=lambda item: -item[1])[:3]
    scores = ", ".join(f"{action} {score:+.3f}" for action, score in top)
    return f"[bold]{row.action}[/bold] (scores {scores}): {_escape(_first_sentence(row.reason))}"


def _gates(row: EvolutionRow) -> str:
    said = []
    for gate in row.gates:
        name = gate["gate"]
        if gate.get("weight"):
            name += f" {gate['weight']:.0%}"
        verdict = "skipped" if gate.get("skipped") else gate["verdict"]
        colour = {"pass": "green", "fail": "red", "marginal": "yellow"}.get(verdict, "dim")
        said.append(f"{name} [{colour}]{verdict}[/{colour}]")
    return ", ".join(said)


def _outcome_words(row: EvolutionRow) -> str:
    outcome = row.outcome or "?"
    if outcome == "promoted":
        return f"promoted {row.candidate}"
    if outcome == "rolled_back" and row.action == "rollback":
        return f"rolled back to {row.stable_after}"
    if outcome in {"aborted", "rolled_back"}:
        same = "unchanged" if row.stable_after == row.stable_before else "CHANGED"
        return f"stopped at {_failed_gate(row) or 'a gate'}, stable {same}"
    return outcome


def _outcome_detail(row: EvolutionRow) -> str:
    words = _outcome_words(row)
    if row.outcome != "promoted" and row.outcome_reason:
        words += f": {_plain_reason(row.outcome_reason)}"
    return f"{words} (stable {row.stable_before} -> {row.stable_after})"


def _reward(row: EvolutionRow) -> str:
    text = _change(row.reward_before, row.reward_after)
    if row.scenario_before is not None or row.scenario_after is not None:
        text += (
            f"; the round's tickets solved first time {_pct(row.scenario_before)} -> "
            f"{_pct(row.scenario_after)}"
        )
    return text


def _failed_gate(row: EvolutionRow) -> str | None:
    """The gate that stopped a candidate: the one that failed, else the last undecided."""
    failed = [g["gate"] for g in row.gates if g.get("verdict") == "fail"]
    undecided = [g["gate"] for g in row.gates if g.get("verdict") not in ("pass", "skipped")]
    return (failed or undecided or [None])[-1]


def _plain_reason(reason: str) -> str:
    """'canary gate marginal: ...' for 'canary gate: canary gate marginal: ...'."""
    head, _, rest = reason.partition(": ")
    return rest if rest.startswith(head) else reason


def _first_sentence(reason: str) -> str:
    """A decision's reason up to its score breakdown, which the decision line shows."""
    return reason.split(" (score ")[0]


def _change(before: float | None, after: float | None) -> str:
    """`before -> after (+delta)`, to three places: a small gain must not read as none."""
    if before is None or after is None:
        return f"{number(before)} -> {number(after)}"
    return f"{before:.3f} -> {after:.3f} ({after - before:+.3f})"


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"
