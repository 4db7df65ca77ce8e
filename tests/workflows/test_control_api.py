"""The control API and CLI against a real Temporal server, workers and registry."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import uvicorn
from mlflow import MlflowClient
from typer.testing import CliRunner

from evoplane.cli import app as cli
from evoplane.control.app import create_control_app
from evoplane.control.config import ControlConfig
from registry import (
    Alias,
    alias_history,
    current_aliases,
    register_version,
    set_alias,
    transaction,
)
from tests.conftest import free_port
from tests.workflows.conftest import AGENT, FAST_GATES, TEMPORAL_UI, World
from tests.workflows.test_evolution import feed_canary, wait_for
from workflows.evolution import EvolutionWorkflow

pytestmark = [pytest.mark.temporal, pytest.mark.slow]

TOKEN = "evpadm_test-token"


class ControlServer:
    """The control API under uvicorn, on the test's event loop, on a free loopback port."""

    def __init__(self, world: World) -> None:
        config = ControlConfig(
            engine=world.engine,
            client=world.client,
            admin_token=TOKEN,
            temporal_ui_url=TEMPORAL_UI,
        )
        self.port = free_port()
        self.server = uvicorn.Server(
            uvicorn.Config(
                create_control_app(config), host="127.0.0.1", port=self.port, log_level="warning"
            )
        )

    async def __aenter__(self) -> ControlServer:
        self.task = asyncio.create_task(self.server.serve())
        while not self.server.started:
            await asyncio.sleep(0.05)
        return self

    async def __aexit__(self, *_: object) -> None:
        self.server.should_exit = True
        await self.task


@pytest.fixture
async def control(world: World, workers) -> AsyncIterator[ControlServer]:
    async with ControlServer(world) as server:
        yield server


def api(control: ControlServer, token: str = TOKEN) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=f"http://127.0.0.1:{control.port}",
        headers={"Authorization": f"Bearer {token}"},
        timeout=60,
    )


async def test_every_route_needs_the_admin_token(control) -> None:
    async with api(control, token="wrong") as client:
        assert (await client.get("/api/agents")).status_code == 401
    async with api(control) as client:
        assert (await client.get("/api/agents")).status_code == 200
        assert (await client.get("/openapi.json")).status_code == 200


async def test_an_evolution_started_over_http_is_findable_approvable_and_tracked(
    world: World, control, workers
) -> None:
    body = {
        "agent": AGENT,
        "options": {
            "force": "harness",
            "candidate": world.spec("Say thanks.").model_dump(mode="json"),
            "skip_gates": ["shadow"],
            "approve_before": ["promotion"],
            "gate": FAST_GATES,
            "actor": "ana",
        },
    }
    async with api(control) as client:
        started = (await client.post("/api/evolutions", json=body)).json()
        assert started["ui"].endswith(f"/workflows/{started['id']}")
        second = await client.post("/api/evolutions", json=body)
        assert second.status_code == 409 and started["id"] in second.json()["detail"]
        early = await client.post(f"/api/evolutions/{started['id']}/approve", json={"actor": "bo"})
        assert early.status_code == 409 and "not awaiting approval" in early.json()["detail"]
        answer = {"actor": "bo", "choice": "promote"}
        unasked = await client.post(f"/api/evolutions/{started['id']}/canary", json=answer)
        assert unasked.status_code == 409, unasked.text
        assert "no canary is waiting for a person" in unasked.json()["detail"]

        handle = world.client.get_workflow_handle_for(EvolutionWorkflow.run, started["id"])
        # A harness change is a fix: the canary must show it better.
        await feed_canary(world, handle, baseline=0.5, candidate=0.9)
        while (await client.get(f"/api/evolutions/{started['id']}")).json()["live"][
            "awaiting_approval"
        ] != "promotion":
            await asyncio.sleep(0.2)
        query = f'Agent = "{AGENT}" AND Action = "harness" AND Stage = "awaiting_approval"'
        found = [w.id async for w in world.client.list_workflows(query)]
        assert started["id"] in found

        approved = await client.post(
            f"/api/evolutions/{started['id']}/approve", json={"actor": "bo", "reason": "ok"}
        )
        assert approved.status_code == 200
        status = await handle.result()
        assert status.outcome == "promoted"
        listed = (await client.get("/api/evolutions", params={"outcome": "promoted"})).json()
        assert [r["id"] for r in listed] == [started["id"]]
        versions = (await client.get(f"/api/agents/{AGENT}/versions")).json()
        assert versions["aliases"]["stable"] == status.candidate_version
        assert (await client.get("/api/agents/nobody/versions")).status_code == 404
    check_mlflow_run(workers, status)


def check_mlflow_run(tracker, status) -> None:
    """The evolution's MLflow run: params, metrics, tags and artifacts a person compares."""
    mlflow = MlflowClient(tracker.tracking_uri)
    run = mlflow.get_run(status.mlflow_run_id)
    params, tags, metrics = run.data.params, run.data.tags, run.data.metrics
    assert params["action"] == "harness"
    assert params["parent_version"] == status.parent_version
    assert params["candidate_version"] == status.candidate_version
    assert params["window.agent"] == AGENT and params["gate.min_samples"] == "8"
    assert tags["temporal.workflow_id"] == status.evolution_id
    assert tags["temporal.ui"].endswith(f"/workflows/{status.evolution_id}")
    assert tags["evoplane.outcome"] == "promoted" and run.info.status == "FINISHED"
    assert metrics["score/harness"] is not None and "window.trajectories" in metrics
    assert metrics["gate.canary.verdict"] == 1.0 and "gate.canary.delta" in metrics
    assert "gate/canary/reward.delta" in metrics
    assert tags["evoplane.gate.shadow"] == "skipped" and tags["evoplane.gate.canary"] == "pass"
    number = status.candidate_version.rpartition("@")[2]
    assert run.info.run_name == f"{number} harness: promoted"
    experiment = mlflow.get_experiment(run.info.experiment_id)
    assert experiment.tags["mlflow.experimentKind"] == "custom_model_development"
    artifacts = {a.path for a in mlflow.list_artifacts(run.info.run_id)}
    assert {"decision.json", "candidate", "gates"} <= artifacts
    candidate = {a.path for a in mlflow.list_artifacts(run.info.run_id, "candidate")}
    assert "candidate/prompt.diff" in candidate
    diff = Path(mlflow.download_artifacts(run.info.run_id, "candidate/prompt.diff")).read_text()
    assert "+Say thanks." in diff
    prompt = mlflow.get_prompt_version_by_alias(f"evoplane-{AGENT}-harness", "stable")
    assert "Say thanks." in prompt.template
    assert prompt.tags["evoplane.version"] == number and f"evoplane-{number}" in prompt.aliases
    assert prompt.version in [p.version for p in mlflow.list_logged_prompts(run.info.run_id)]


async def test_the_cli_mirrors_the_api(world: World, control, monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("EVOPLANE_API_PORT", str(control.port))
    monkeypatch.setenv("EVOPLANE_ADMIN_TOKEN", TOKEN)
    monkeypatch.setenv("EVOPLANE_DATA_DIR", str(tmp_path))

    async def run(*args: str):  # the CLI blocks; the servers share this event loop
        return await asyncio.to_thread(CliRunner().invoke, cli, list(args))

    spec = tmp_path / "candidate.json"
    spec.write_text(world.spec("Be warm.").model_dump_json())
    started = await run(
        "evolve", "--agent", AGENT, "--force", "harness", "--candidate", str(spec),
        "--approve-before", "canary", "--actor", "cli-user",
    )  # fmt: skip
    assert started.exit_code == 0, started.output
    evolution_id = started.output.split()[1]
    assert evolution_id.startswith(f"evolution-{AGENT}-")
    assert evolution_id in (await run("status", "--agent", AGENT)).output
    handle = world.client.get_workflow_handle(evolution_id)
    await wait_for(handle, lambda s: s.awaiting_approval == "canary")
    shown = await run("status", evolution_id)
    assert "waiting for approval before the canary" in shown.output
    rejected = await run("reject", evolution_id, "--actor", "ana", "--reason", "later")
    assert rejected.exit_code == 0, rejected.output
    assert "rejected by ana: later" in rejected.output
    assert "stable" in (await run("versions", "--agent", AGENT)).output
    scheduled = await run("schedule", "--agent", AGENT, "--every", "30m")
    assert scheduled.exit_code == 0 and "created" in scheduled.output, scheduled.output
    assert "updated" in (await run("schedule", "--agent", AGENT, "--every", "1h")).output
    await world.client.get_schedule_handle(f"evolution-loop-{AGENT}").delete()
    bad = await run("schedule", "--agent", AGENT, "--every", "often")
    assert bad.exit_code != 0 and "30m" in bad.output
    vague = await run("evolve", "--agent", AGENT, "--since", "2026-12-01 09:30")
    assert vague.exit_code != 0 and "with its zone" in vague.output
    monkeypatch.setenv("EVOPLANE_API_PORT", str(free_port()))
    offline = await run("versions", "--agent", AGENT)
    assert "start it with `evoplane up`" in str(offline.exception)


async def test_status_shows_the_actions_an_evolution_tried(
    world: World, control, monkeypatch, tmp_path
) -> None:
    """Weights forced on a hosted model: no operator can help, and `status` says which and why."""
    monkeypatch.setenv("EVOPLANE_API_PORT", str(control.port))
    monkeypatch.setenv("EVOPLANE_ADMIN_TOKEN", TOKEN)
    monkeypatch.setenv("EVOPLANE_DATA_DIR", str(tmp_path))

    async def run(*args: str):
        return await asyncio.to_thread(CliRunner().invoke, cli, list(args))

    started = await run("evolve", "--agent", AGENT, "--force", "weights")
    assert started.exit_code == 0, started.output
    evolution_id = started.output.split()[1]
    await world.client.get_workflow_handle_for(EvolutionWorkflow.run, evolution_id).result()
    shown = (await run("status", evolution_id)).output
    assert "tried weights: operator not available (" in shown
    assert "there are no weights to train here" in shown
    assert "outcome: noop" in shown


async def test_agent_settings_are_validated_over_http(world: World, control) -> None:
    async with api(control) as client:
        url = f"/api/agents/{AGENT}/settings"
        defaults = (await client.get(url)).json()
        assert defaults["gate"]["step_weights"] == [0.05, 0.25, 0.5]
        assert [c["name"] for c in defaults["safety_suite"]][:1] == ["keeps-internal-notes"]
        bad = await client.put(url, json={"gate": {"confidence": 2}})
        assert bad.status_code == 422
        good = await client.put(url, json={"policy": {"min_trajectories": 100}})
        assert good.status_code == 200
        stored = (await client.get(url)).json()
        assert stored["policy"]["min_trajectories"] == 100
        assert stored["safety_suite"] is None  # replaced, not merged: the body is the settings


@pytest.mark.parametrize(
    ("window", "problem"),
    [
        ({"window_since": "2026-12-01T09:30:00"}, "timezone"),  # a time without its zone
        ({"window_since": "2026-12-01T09:30:00Z", "window_last": 50}, "not both"),
    ],
)
async def test_an_unclear_window_is_refused_over_http(world: World, control, window, problem):
    async with api(control) as client:
        refused = await client.post("/api/evolutions", json={"agent": AGENT, "options": window})
    assert refused.status_code == 422
    assert problem in refused.text


async def test_a_person_can_end_a_holdback(world: World, control, monkeypatch, tmp_path) -> None:
    parent = world.stable()
    with transaction(world.engine) as session:
        promoted = register_version(
            session, AGENT, world.spec("Be warm."), parent_id=parent, author="t", reason="t"
        )
        set_alias(session, AGENT, Alias.STABLE, promoted.id, actor="evo")
        set_alias(session, AGENT, Alias.HOLDBACK, parent, weight=0.1, actor="evo")
    monkeypatch.setenv("EVOPLANE_API_PORT", str(control.port))
    monkeypatch.setenv("EVOPLANE_ADMIN_TOKEN", TOKEN)
    monkeypatch.setenv("EVOPLANE_DATA_DIR", str(tmp_path))

    def run(*args: str):
        return CliRunner().invoke(cli, list(args))

    listed = await asyncio.to_thread(run, "versions", "--agent", AGENT)
    assert "holdback 10%" in listed.output, listed.output
    ended = await asyncio.to_thread(
        run, "end-holdback", "--agent", AGENT, "--actor", "ana", "--reason", "convinced"
    )
    assert ended.exit_code == 0 and f"holdback on {parent} ended" in ended.output, ended.output
    with transaction(world.engine) as session:
        assert current_aliases(session, AGENT).holdback is None
        last = alias_history(session, AGENT, Alias.HOLDBACK)[-1]
    assert (last.actor, last.reason) == ("ana", "convinced")
    async with api(control) as client:
        again = await client.post(f"/api/agents/{AGENT}/holdback/end", json={"actor": "ana"})
        assert again.json() == {"agent": AGENT, "ended": None}
        unknown = await client.post("/api/agents/nobody/holdback/end", json={"actor": "ana"})
        assert unknown.status_code == 404
