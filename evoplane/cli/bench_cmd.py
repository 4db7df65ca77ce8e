"""`evoplane bench scenarios`: the scenario suite, worlds the control plane was not built on;
`evoplane bench demo`: how often the demo shows every claim, over many runs."""

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
    seed: int = typer.Option(
        0, "--seed", help="Seeds the users and their tasks (run i of --runs plays seed + i)."
    ),
    runs: int = typer.Option(
        1, "--runs", min=1, help="Play the suite this many times: each scenario's pass rate."
    ),
    use_running: bool = typer.Option(
        False, "--use-running", help="Use the stack `evoplane up` runs instead of starting one."
    ),
    data_dir: Path | None = typer.Option(
        None, help="Data directory for the stack the suite starts [default: .evoplane/bench]."
    ),
) -> None:
    """Play the scenario suite: each scenario injects one failure into another world and
    checks that the control plane chooses the right change and that it works (about 12 min
    on an idle 2-core host). With --runs N, the suite is played N times on one stack, each
    run with its own seed, and each scenario's pass rate is printed."""
    from evoplane.scenarios.catalog import SCENARIOS, by_name
    from evoplane.simulation.stack import stack

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
    played: list[tuple[int, list]] = []
    with stack(settings, use_running=use_running, started=_announce) as endpoints:
        for run in range(runs):
            if runs > 1:
                console.rule(f"run {run + 1} of {runs}: seed {seed + run}")
            run_started = time.monotonic()
            played.append((seed + run, _play(endpoints, chosen, settings, seed + run)))
            if runs > 1:
                _report(played[-1][1], time.monotonic() - run_started, None, None)
    seconds = time.monotonic() - started
    if runs == 1:
        _report(played[0][1], seconds, json_file, markdown_file)
    else:
        _report_rates(played, seconds, json_file, markdown_file)
    if not all(result.passed for _, results in played for result in results):
        raise typer.Exit(1)


@app.command("demo")
def demo(
    runs: int = typer.Option(20, "--runs", min=1, help="How many times to play the demo."),
    only: list[str] = typer.Option(
        [],
        "--only",
        help="Play only these rounds (repeatable), to measure a round on its own; "
        "every round by default.",
    ),
    seed: int = typer.Option(0, "--seed", help="The first run's seed; run i plays seed + i."),
    jsonl_file: Path | None = typer.Option(
        None,
        "--jsonl",
        help="Append each run as a JSON line when it ends (read back with --report).",
    ),
    markdown_file: Path | None = typer.Option(
        None, "--markdown", help="Write the summary as Markdown (for RESULTS.md)."
    ),
    report: Path | None = typer.Option(
        None, "--report", help="Summarise the runs an earlier --jsonl file holds, and exit."
    ),
    keep_data: bool = typer.Option(
        False, "--keep-data", help="Keep each run's data directory (registry, logs)."
    ),
    data_dir: Path | None = typer.Option(
        None, help="Where the runs' data directories go [default: .evoplane/bench-demo]."
    ),
) -> None:
    """Play the whole demo N times, each on a fresh embedded stack (as `make run` does), and
    print each claim's pass rate, each round's gain and time, and the share of runs that
    showed every claim (about 8 min a run on 2 cores)."""
    from evoplane.demo.drifts import by_name
    from evoplane.demo.reliability import play_runs, read_runs, summarise

    if report is not None:
        if not report.exists():
            raise typer.BadParameter(f"{report} does not exist", param_hint="--report")
        _demo_summary(summarise(read_runs(report)), markdown_file)
        return
    try:
        chosen = by_name(only or None)
    except ValueError as error:
        raise typer.BadParameter(str(error), param_hint="--only") from None
    root = data_dir or load_settings().data_dir / "bench-demo"
    if jsonl_file is not None:
        jsonl_file.parent.mkdir(parents=True, exist_ok=True)

    def kept(run) -> None:
        _run_line(run, runs)
        if jsonl_file is not None:
            with jsonl_file.open("a") as out:
                out.write(json.dumps(run.as_json()) + "\n")

    done = play_runs(
        runs,
        seed=seed,
        data_root=root,
        play=lambda seed, data, shown: _play_demo(chosen, seed, data, shown),
        reporter=lambda index: _RunReporter(console, f"run {index + 1}/{runs}"),
        on_run=kept,
        keep_data=keep_data,
    )
    summary = summarise(done)
    _demo_summary(summary, markdown_file)
    if summary.passed < summary.runs:
        raise typer.Exit(1)


def _play_demo(rounds, seed: int, data_dir: Path, reporter):
    from evoplane.demo.runner import run_demo
    from evoplane.demo.scale import FULL
    from evoplane.simulation.stack import stack

    with stack(load_settings(data_dir=data_dir)) as endpoints, reporter:
        return run_demo(endpoints, rounds, scale=FULL, seed=seed, reporter=reporter)


class _RunReporter(PhaseProgress):
    """One run's progress: a bar per phase, a line per finished round."""

    def __init__(self, console: Console, name: str) -> None:
        from evoplane.demo.report import summary

        super().__init__(console, lambda row: summary([row], f"{name}: {row.round}"))


def _run_line(run, runs: int) -> None:
    from evoplane.demo.reliability import Run

    assert isinstance(run, Run)
    head = f"seed {run.seed} ({run.seconds / 60:.1f} min): "
    if run.error:
        console.print(f"[red]✗[/red] {head}stopped: {run.error}", soft_wrap=True)
    elif run.passed:
        gains = ", ".join(f"{r.round} {r.gain:+.3f}" for r in run.rounds if r.gain is not None)
        console.print(f"[green]✓[/green] {head}every claim shown; {gains}", highlight=False)
    else:
        console.print(f"[red]✗[/red] {head}{len(run.missed)} claims missed", highlight=False)
        for line in run.missed:
            console.print(f"  {line}", soft_wrap=True, highlight=False)


def _demo_summary(summary, markdown_file: Path | None) -> None:
    from evoplane.demo.reliability import markdown

    text = markdown(summary)
    console.print(text, highlight=False, soft_wrap=True)
    if markdown_file is not None:
        markdown_file.write_text(text)


def _bench_settings():
    settings = load_settings()
    return settings.model_copy(update={"data_dir": settings.data_dir / "bench"})


def _play(endpoints, chosen, settings, seed: int):
    from evoplane.scenarios.report import block
    from evoplane.scenarios.runner import run_scenarios

    env = {
        "EVOPLANE_DATA_DIR": str(settings.data_dir),
        "EVOPLANE_DATABASE_URL": settings.registry_url,
    }
    with PhaseProgress(console, block) as reporter:
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


def _report_rates(
    played, seconds: float, json_file: Path | None, markdown_file: Path | None
) -> None:
    from evoplane.scenarios.report import pass_rates, rates_markdown, rates_table

    rates = pass_rates(played)
    every = sum(rate.passed == rate.runs for rate in rates)
    title = f"Scenario suite, {len(played)} runs: {every} of {len(rates)} passed every run"
    console.print(rates_table(rates, title))
    console.print(f"{len(played)} runs in {seconds / 60:.1f} min.")
    if json_file is not None:
        body = {
            "seconds": round(seconds, 1),
            "runs": [
                {"seed": seed, "results": [r.as_json() for r in results]}
                for seed, results in played
            ],
        }
        json_file.write_text(json.dumps(body, indent=2) + "\n")
    if markdown_file is not None:
        markdown_file.write_text(rates_markdown(rates))


def _announce(name: str) -> None:
    console.print(f"[green]✓[/green] {name} is up")
