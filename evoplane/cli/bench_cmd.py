"""`evoplane bench scenarios`: the scenario suite, worlds the control plane was not built on."""

from __future__ import annotations

import json
import time
from pathlib import Path

import typer
from rich.console import Console

from evoplane.cli.progress import PhaseProgress
from evoplane.settings import load_settings

app = typer.Typer(help="Benchmarks of the whole product.", no_args_is_help=True)
console = Console()


@app.command("scenarios")
def scenarios(
    only: list[str] = typer.Option(
        [], "--only", help="Run only these scenarios (repeatable); `--list` names them."
    ),
    listed: bool = typer.Option(False, "--list", help="List the scenarios and exit."),
    json_file: Path | None = typer.Option(None, "--json", help="Write the results as JSON."),
    markdown_file: Path | None = typer.Option(
        None, "--markdown", help="Write the result table as Markdown (for RESULTS.md)."
    ),
    seed: int = typer.Option(0, "--seed", help="Seeds the users and their tasks."),
    use_running: bool = typer.Option(
        False, "--use-running", help="Use the stack `evoplane up` runs instead of starting one."
    ),
    data_dir: Path | None = typer.Option(
        None, help="Data directory for the stack the suite starts [default: .evoplane/bench]."
    ),
) -> None:
    """Play the scenario suite: each scenario injects one failure into another world and
    checks that the control plane chooses the right change and that it works (about 30 min
    on 2 cores)."""
    from evoplane.demo.stack import stack
    from evoplane.scenarios.catalog import SCENARIOS, by_name

    if listed:
        for scenario in SCENARIOS:
            console.print(f"[bold]{scenario.name}[/bold] ({scenario.domain}): {scenario.story}")
        return
    try:
        chosen = by_name(only)
    except ValueError as error:
        raise typer.BadParameter(str(error), param_hint="--only") from None
    settings = load_settings(data_dir=data_dir) if data_dir or use_running else _bench_settings()
    started = time.monotonic()
    with stack(settings, use_running=use_running, started=_announce) as endpoints:
        results = _play(endpoints, chosen, settings, seed)
    _report(results, time.monotonic() - started, json_file, markdown_file)
    if not all(result.passed for result in results):
        raise typer.Exit(1)


def _bench_settings():
    settings = load_settings()
    return settings.model_copy(update={"data_dir": settings.data_dir / "bench"})


def _play(endpoints, chosen, settings, seed: int):
    from evoplane.scenarios.report import table
    from evoplane.scenarios.runner import run_scenarios

    env = {
        "EVOPLANE_DATA_DIR": str(settings.data_dir),
        "EVOPLANE_DATABASE_URL": settings.registry_url,
    }
    with PhaseProgress(console, lambda row: table([row], row.name)) as reporter:
        return run_scenarios(
            endpoints,
            chosen,
            settings_env=env,
            seed=seed,
            reporter=reporter,
            on_result=reporter.row,
        )


def _report(results, seconds: float, json_file: Path | None, markdown_file: Path | None) -> None:
    from evoplane.scenarios.report import markdown, table

    passed = sum(result.passed for result in results)
    console.print(table(results, f"Scenario suite: {passed} of {len(results)} passed"))
    console.print(f"{len(results)} scenarios in {seconds / 60:.1f} min.")
    if json_file is not None:
        body = {"seconds": round(seconds, 1), "results": [r.as_json() for r in results]}
        json_file.write_text(json.dumps(body, indent=2) + "\n")
    if markdown_file is not None:
        markdown_file.write_text(markdown(results))


def _announce(name: str) -> None:
    console.print(f"[green]✓[/green] {name} is up")
