"""`evoplane demo`: the whole loop on one machine, from traffic to promotion and rollback."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import typer
from rich.console import Console

from evoplane.cli.progress import PhaseProgress
from evoplane.settings import load_settings

console = Console()


def demo(
    rounds: int = typer.Option(7, "--rounds", min=1, max=7, help="Play the first N rounds."),
    only: list[str] = typer.Option(
        [],
        "--only",
        help="Play only these rounds (repeatable): memory, tool_schema, harness, "
        "weights, gate, rollback, review.",
    ),
    seed: int = typer.Option(0, "--seed", help="Seeds the customers and the model's sampling."),
    keep_up: bool = typer.Option(
        False, "--keep-up", help="Leave the stack running afterwards (Ctrl-C stops it)."
    ),
    use_running: bool = typer.Option(
        False, "--use-running", help="Use the stack `evoplane up` runs instead of starting one."
    ),
    small: bool = typer.Option(
        False, "--small", help="Less traffic and lower thresholds (the CI scale)."
    ),
    data_dir: Path | None = typer.Option(None, help="Data directory [env: EVOPLANE_DATA_DIR]."),
) -> None:
    """Run the demo: four shops' support bot drifts and Evoplane evolves it (about 6-10 min)."""
    from evoplane.demo.drifts import by_name
    from evoplane.demo.report import facts, print_facts, round_block, summary
    from evoplane.demo.runner import run_demo
    from evoplane.demo.scale import FULL, SMALL
    from evoplane.simulation.stack import stack

    settings = load_settings(data_dir=data_dir)
    chosen = by_name(only or None, rounds)
    started = time.monotonic()
    with stack(settings, use_running=use_running, started=_announce) as endpoints:
        with PhaseProgress(console, round_block) as reporter:
            result = run_demo(
                endpoints, chosen, scale=SMALL if small else FULL, seed=seed, reporter=reporter
            )
        console.print()
        console.print(summary(result.rows, f"Evoplane demo: {result.agent}, all rounds"))
        console.print()
        shown = facts(result.rows)
        print_facts(console, shown)
        minutes = (time.monotonic() - started) / 60
        missed = sum(not fact.shown for fact in shown)
        verdict = "every claim shown" if not missed else f"{missed} of {len(shown)} claims missed"
        console.print(
            f"{verdict}; {result.tickets} tickets, {len(result.rows)} evolutions in "
            f"{minutes:.1f} min.",
            highlight=False,
        )
        console.print(
            f"Temporal UI (filter Agent = {result.agent}): {endpoints.temporal_ui}",
            soft_wrap=True,
            highlight=False,
        )
        console.print(f"MLflow: {endpoints.mlflow}", soft_wrap=True, highlight=False)
        if keep_up and not use_running:
            console.print("The stack stays up; Ctrl-C stops it.")
            _wait_for_interrupt()
    if not all(fact.shown for fact in shown):
        raise typer.Exit(1)


def _announce(name: str) -> None:
    console.print(f"[green]✓[/green] {name} is up")


def _wait_for_interrupt() -> None:
    """Until Ctrl-C, or a SIGTERM (a service manager, or a shell that started it in the
    background, where SIGINT is ignored)."""
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        while True:
            time.sleep(1.0)
    except KeyboardInterrupt:
        pass
