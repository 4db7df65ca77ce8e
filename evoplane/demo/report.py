"""The demo's tables, and the facts they must show (checked by the CLI and the tests)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.table import Table

from evoplane.demo.reporting import EvolutionRow

__all__ = ["Fact", "facts", "table"]


@dataclass(frozen=True)
class Fact:
    """One thing the demo set out to show, and whether this run showed it."""

    claim: str
    shown: bool
    detail: str


def facts(rows: Sequence[EvolutionRow]) -> list[Fact]:
    """Each drift diagnosed as its surface, bad candidates stopped with stable unchanged,
    the regression rolled back, and every promoted evolution measurably better."""
    found: list[Fact] = []
    for row in rows:
        if row.forced:
            if row.expected in {"replay", "shadow", "canary"}:
                stopped = row.outcome in {"aborted", "rolled_back"}
                unchanged = row.stable_after == row.stable_before
                gate = _failed_gate(row)
                found.append(
                    Fact(
                        f"{row.round}: a bad candidate is stopped by a gate, stable unchanged",
                        stopped and unchanged,
                        f"{row.outcome} at {gate or 'no gate'}; stable {row.stable_before} -> "
                        f"{row.stable_after}",
                    )
                )
            continue
        found.append(
            Fact(
                f"{row.round}: diagnosed as {row.expected}",
                row.action == row.expected,
                f"chose {row.action}: {row.reason[:160]}",
            )
        )
        if row.action == "rollback":
            restored = row.outcome == "rolled_back" and row.stable_after != row.stable_before
            found.append(
                Fact(
                    f"{row.round}: the regressed version is rolled back",
                    restored,
                    f"{row.outcome}; stable {row.stable_before} -> {row.stable_after}",
                )
            )
        elif row.outcome == "promoted" or row.expected != "noop":
            better = (
                row.outcome == "promoted"
                and row.reward_before is not None
                and row.reward_after is not None
                and row.reward_after > row.reward_before
            )
            found.append(
                Fact(
                    f"{row.round}: promoted with a measured reward improvement",
                    better,
                    f"{row.outcome}; reward {_change(row.reward_before, row.reward_after)}"
                    + ("" if row.outcome == "promoted" else f" ({row.outcome_reason})"),
                )
            )
    return found


def table(rows: Sequence[EvolutionRow], title: str) -> Table:
    """One row per evolution: the drift, the signals, the decision, the gates, the outcome."""
    grid = Table(title=title, show_lines=True, expand=True)
    grid.add_column("round", ratio=2)
    grid.add_column("signals", ratio=4)
    grid.add_column("decision", ratio=3)
    grid.add_column("gates", ratio=3)
    grid.add_column("outcome", ratio=3)
    grid.add_column("reward before -> after", ratio=2)
    grid.add_column("links", ratio=3, overflow="fold")
    for row in rows:
        grid.add_row(
            f"[bold]{row.round}[/bold]\n{row.drift}",
            _signals(row),
            _decision(row),
            _gates(row),
            _outcome(row),
            _reward(row),
            _links(row),
        )
    return grid


def _signals(row: EvolutionRow) -> str:
    s = row.signals
    if not s:
        return "-"
    lines = [
        f"{s.get('trajectories')} trajectories, {s.get('tenants')} tenants",
        f"success {_pct(s.get('success_rate'))}, reward {_num(s.get('reward_mean'))}",
        f"corrections {_pct(s.get('correction_rate'))}, tool errors "
        f"{_pct(s.get('tool_error_rate'))}",
    ]
    if s.get("top_cluster_kind"):
        lines.append(
            f"top: {s['top_cluster_kind']} '{s['top_cluster_key']}' "
            f"{_pct(s.get('top_cluster_share'))} ({s.get('top_cluster_tenants')} tenants, "
            f"{s.get('top_cluster_task_types')} task types, "
            f"{s.get('top_cluster_tool_setups')} tool setups)"
        )
    if s.get("top_procedure_step") is not None:
        lines.append(
            f"procedure: '{s['top_procedure_task_type']}' guided at step "
            f"{s['top_procedure_step']} in {s.get('top_procedure_sessions')} sessions "
            f"({_pct(s.get('top_procedure_consistency'))} consistent, fixed "
            f"{_pct(s.get('top_procedure_fixed_rate'))})"
        )
    if s.get("regression_delta") is not None:
        against = "held-back parent" if s.get("regression_design") == "holdback" else "parent"
        lines.append(f"since promotion: reward {s['regression_delta']:+.2f} vs {against}")
    return "\n".join(lines)


def _decision(row: EvolutionRow) -> str:
    if row.forced:
        return f"[bold]{row.action}[/bold] (a person's candidate)"
    mark = "[green]✓[/green]" if row.action == row.expected else "[red]✗[/red]"
    top = sorted(row.scores.items(), key=lambda item: -item[1])[:3]
    scores = ", ".join(f"{action} {score:+.3f}" for action, score in top)
    return f"[bold]{row.action}[/bold] {mark} (expected {row.expected})\n{scores}"


def _gates(row: EvolutionRow) -> str:
    if not row.gates:
        return "-"
    lines = []
    for gate in row.gates:
        name = gate["gate"]
        if gate.get("weight"):
            name += f" {gate['weight']:.0%}"
        verdict = "skipped" if gate.get("skipped") else gate["verdict"]
        colour = {"pass": "green", "fail": "red", "marginal": "yellow"}.get(verdict, "dim")
        lines.append(f"{name}: [{colour}]{verdict}[/{colour}]")
    return "\n".join(lines)


def _outcome(row: EvolutionRow) -> str:
    outcome = row.outcome or "?"
    if outcome == "promoted":
        return f"[green]promoted[/green] {row.candidate}"
    if outcome == "rolled_back" and row.action == "rollback":
        return f"[yellow]rolled back[/yellow]\nstable {row.stable_before} -> {row.stable_after}"
    if outcome in {"aborted", "rolled_back"}:
        gate = _failed_gate(row) or "a gate"
        same = "unchanged" if row.stable_after == row.stable_before else "CHANGED"
        return f"[red]stopped[/red] at {gate}\nstable {row.stable_after} {same}"
    return outcome


def _reward(row: EvolutionRow) -> str:
    text = f"{_num(row.reward_before)} -> {_num(row.reward_after)}"
    if row.scenario_before is not None or row.scenario_after is not None:
        text += f"\nscenario solved {_pct(row.scenario_before)} -> {_pct(row.scenario_after)}"
    return text


def _links(row: EvolutionRow) -> str:
    return "\n".join(link for link in (row.temporal_url, row.mlflow_url) if link) or "-"


def _failed_gate(row: EvolutionRow) -> str | None:
    """The gate that stopped a candidate: the one that failed, else the last undecided."""
    failed = [g["gate"] for g in row.gates if g.get("verdict") == "fail"]
    undecided = [g["gate"] for g in row.gates if g.get("verdict") not in ("pass", "skipped")]
    return (failed or undecided or [None])[-1]


def _change(before: float | None, after: float | None) -> str:
    """`before -> after (+delta)`, to three places: a small gain must not read as none."""
    if before is None or after is None:
        return f"{_num(before)} -> {_num(after)}"
    return f"{before:.3f} -> {after:.3f} ({after - before:+.3f})"


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"
