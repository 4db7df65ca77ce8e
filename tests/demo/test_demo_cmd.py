"""`evoplane demo` as a command: its options, and what it says when there is no stack."""

from __future__ import annotations

import typer
from typer.testing import CliRunner

from evoplane.cli import demo_cmd
from evoplane.stack.launcher import StackError
from tests.conftest import free_port


def app() -> typer.Typer:
    cli = typer.Typer()
    cli.command("demo")(demo_cmd.demo)
    cli.command("other")(lambda: None)  # two commands, so `demo` is a sub-command
    return cli


def test_the_command_offers_its_options() -> None:
    result = CliRunner().invoke(app(), ["demo", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    for option in ("--rounds", "--seed", "--keep-up", "--use-running", "--only", "--small"):
        assert option in result.output


def test_using_a_running_stack_that_is_not_there_says_how_to_start_one(tmp_path) -> None:
    env = {
        "EVOPLANE_DATA_DIR": str(tmp_path),
        "EVOPLANE_API_PORT": str(free_port()),
        "EVOPLANE_GATEWAY_PORT": str(free_port()),
        "EVOPLANE_TEMPORAL_PORT": str(free_port()),
        "EVOPLANE_MLFLOW_PORT": str(free_port()),
    }
    result = CliRunner().invoke(app(), ["demo", "--use-running", "--rounds", "1"], env=env)
    assert isinstance(result.exception, StackError)
    assert "evoplane up" in str(result.exception)
