"""What an operator reads and does through the control API and the CLI: versions shown and
diffed, a hot-fix written from a shown version, the evolution records."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest
from typer.testing import CliRunner

from atdp import VersionSpec
from evoplane.cli import app as cli
from registry import Alias, register_version, set_alias, transaction
from tests.workflows.conftest import AGENT, World
from tests.workflows.test_control_api import TOKEN, ControlServer, api
from tests.workflows.test_evolution import wait_for
from workflows.search_attributes import TENANT

pytestmark = [pytest.mark.temporal, pytest.mark.slow]


@pytest.fixture
async def control(world: World, workers) -> AsyncIterator[ControlServer]:
    async with ControlServer(world) as server:
        yield server


@pytest.fixture
def cli_env(control, monkeypatch, tmp_path):
    """The CLI pointed at the test's control API; `run(*args)` runs one command."""
    monkeypatch.setenv("EVOPLANE_API_PORT", str(control.port))
    monkeypatch.setenv("EVOPLANE_ADMIN_TOKEN", TOKEN)
    monkeypatch.setenv("EVOPLANE_DATA_DIR", str(tmp_path))

    async def run(*args: str):  # the CLI blocks; the servers share this event loop
        return await asyncio.to_thread(CliRunner().invoke, cli, list(args))

    return run


def second_version(world: World) -> tuple[str, str]:
    """(stable, a child of it on canary)."""
    stable = world.stable()
    with transaction(world.engine) as session:
        child = register_version(
            session, AGENT, world.spec("Be warm.\nSay thanks."), parent_id=stable,
            author="ana", reason="warmer",
        )  # fmt: skip
        set_alias(session, AGENT, Alias.CANARY, child.id, weight=0.2, actor="ana")
    return stable, child.id


async def test_a_version_is_shown_and_diffed_over_http(world: World, control) -> None:
    stable, child = second_version(world)
    async with api(control) as client:
        shown = (await client.get(f"/api/agents/{AGENT}/versions/{child}")).json()
        by_alias = (await client.get(f"/api/agents/{AGENT}/versions/canary")).json()
        diff = (await client.get(f"/api/agents/{AGENT}/versions/stable/diff/v2")).json()
        bad = await client.get(f"/api/agents/{AGENT}/versions/latest")
        missing = await client.get(f"/api/agents/{AGENT}/versions/v9")
        elsewhere = await client.get(f"/api/agents/{AGENT}/versions/other@v1/diff/v2")
    spec = VersionSpec.model_validate(shown["spec"])
    assert shown["id"] == child and by_alias == shown
    assert (shown["parent_id"], shown["author"], shown["reason"]) == (stable, "ana", "warmer")
    assert shown["aliases"] == ["canary"]
    assert shown["content_hash"] == spec.content_hash()
    assert shown["parts"] == spec.part_hashes()
    assert (diff["from"], diff["to"], diff["changed"]) == (stable, child, ["harness"])
    assert (
        "-You help Acme's customers.\n+Be warm.\n+Say thanks.\n" in diff["parts"]["harness"]["diff"]
    )
    assert bad.status_code == 400 and "give support-bot@v3, v3, 3 or an alias" in bad.text
    assert missing.status_code == 404 and f"{AGENT}@v9" in missing.text
    assert elsewhere.status_code == 400 and "not a version of agent" in elsewhere.text


async def test_the_cli_shows_and_diffs_versions(world: World, cli_env) -> None:
    stable, child = second_version(world)
    shown = await cli_env("versions", "show", f"{AGENT}@canary")
    assert shown.exit_code == 0, shown.output
    assert f"{child}  aliases: canary" in shown.output
    assert f"parent: {stable}" in shown.output and "by ana at " in shown.output
    diff = await cli_env("versions", "diff", f"{AGENT}@stable", "v2")
    assert diff.exit_code == 0, diff.output
    lines = diff.output.splitlines()
    assert lines[:2] == [f"{stable} -> {child}", "harness"]
    assert "+Say thanks." in lines
    same = await cli_env("versions", "diff", child, child)
    assert "no change: the two versions have the same content" in same.output
    vague = await cli_env("versions", "show", "v2")
    assert vague.exit_code != 0 and "name the agent and the version" in vague.output
    listed = await cli_env("versions", "--agent", AGENT)
    assert "canary 20%" in listed.output, listed.output


async def test_a_shown_spec_edited_is_a_hot_fix_candidate(
    world: World, control, cli_env, tmp_path
) -> None:
    """`versions show --json > spec.json`, edit, `evolve --candidate spec.json`: unchanged,
    it is the stable version to the hash; edited, it is registered as it was written."""
    shown = await cli_env("versions", "show", f"{AGENT}@stable", "--json")
    assert shown.exit_code == 0, shown.output
    written = json.loads(shown.output)
    stable_hash = VersionSpec.model_validate(written).content_hash()
    path = tmp_path / "spec.json"
    path.write_text(shown.output)
    unchanged = await cli_env("evolve", "--agent", AGENT, "--candidate", str(path))
    assert unchanged.exit_code != 0
    assert f"identical to {world.stable()}" in str(unchanged.exception)
    assert stable_hash in str(unchanged.exception)

    written["harness"]["instructions"] = "You help Acme's customers. Never promise refunds."
    path.write_text(json.dumps(written))
    started = await cli_env(
        "evolve", "--agent", AGENT, "--candidate", str(path), "--force", "harness",
        "--approve-before", "canary", "--actor", "ana", "--reason", "hot-fix",
    )  # fmt: skip
    assert started.exit_code == 0, started.output
    handle = world.client.get_workflow_handle(started.output.split()[1])
    status = await wait_for(handle, lambda s: s.awaiting_approval == "canary")
    registered = await cli_env("versions", "show", status.candidate_version, "--json")
    assert json.loads(registered.output) == written
    expected = VersionSpec.model_validate(written).content_hash()
    async with api(control) as client:
        version = await client.get(f"/api/agents/{AGENT}/versions/{status.candidate_version}")
    assert version.json()["content_hash"] == expected
    await cli_env("reject", handle.id, "--actor", "ana")
    await handle.result()


async def test_a_hot_fix_without_gates_reads_as_skipped_in_the_cli(world: World, cli_env, tmp_path):
    path = tmp_path / "spec.json"
    path.write_text(
        world.spec("You help Acme's customers. Never promise refunds.").model_dump_json()
    )
    started = await cli_env(
        "evolve", "--agent", AGENT, "--candidate", str(path), "--force", "harness",
        "--skip-gate", "replay", "--skip-gate", "shadow", "--skip-gate", "canary",
        "--actor", "ana", "--reason", "hot-fix",
    )  # fmt: skip
    assert started.exit_code == 0, started.output
    handle = world.client.get_workflow_handle(started.output.split()[1])
    status = await handle.result()
    shown = await cli_env("status", handle.id)
    assert shown.exit_code == 0, shown.output
    said = " ".join(shown.output.split())
    for gate in ("replay", "shadow", "canary"):
        assert f"{gate}: skipped (skipped by ana: hot-fix)" in said
    assert f"{status['candidate_version']} promoted without gates by ana: hot-fix" in said
    assert ": pass" not in said and "passed" not in said


async def test_a_candidate_without_force_is_evaluated_as_its_change(world: World, control) -> None:
    """No traffic: the policy alone would choose noop; the candidate changes the harness, so
    it is evaluated as a harness change, and the record says so."""
    candidate = world.spec("Be warm.").model_dump(mode="json")
    body = {"agent": AGENT, "options": {"candidate": candidate, "approve_before": ["canary"]}}
    async with api(control) as client:
        started = await client.post("/api/evolutions", json=body)
        assert started.status_code == 201, started.text
        handle = world.client.get_workflow_handle(started.json()["id"])
        status = await wait_for(handle, lambda s: s.awaiting_approval == "canary")
        assert status.action == "harness" and status.candidate_version is not None
        record = (await client.get(f"/api/evolutions/{handle.id}")).json()["record"]
        assert record["options"]["force"] == "harness"
        await client.post(f"/api/evolutions/{handle.id}/reject", json={"actor": "ana"})
    await handle.result()


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (
            {"harness": {"instructions": "Be warm."}, "memory": {"item_ids": ["x"]}},
            "changes harness and memory against support-bot@v1",
        ),
        ({"guardrails": {"max_tokens": 10}}, "changes guardrails against support-bot@v1"),
    ],
)
async def test_a_candidate_that_is_no_one_action_is_refused_with_what_to_add(
    world: World, control, change, words
) -> None:
    candidate = {**world.spec("You help Acme's customers.").model_dump(mode="json"), **change}
    body = {"agent": AGENT, "options": {"candidate": candidate}}
    async with api(control) as client:
        refused = await client.post("/api/evolutions", json=body)
        forced = await client.post(
            "/api/evolutions", json={**body, "options": {**body["options"], "force": "harness"}}
        )
        listed = (await client.get("/api/evolutions")).json()
    assert refused.status_code == 400
    assert words in refused.json()["detail"] and "add options.force" in refused.json()["detail"]
    assert forced.status_code == 201, forced.text
    assert [r["id"] for r in listed] == [forced.json()["id"]]  # the refusal left no record
    await world.client.get_workflow_handle(forced.json()["id"]).terminate()


async def test_the_evolution_list_fills_what_it_knows(world: World, control) -> None:
    async with api(control) as client:
        started = (await client.post("/api/evolutions", json={"agent": AGENT})).json()
        handle = world.client.get_workflow_handle(started["id"])
        await handle.result()
        listed = (await client.get("/api/evolutions", params={"agent": AGENT})).json()
    (record,) = listed
    assert record["parent_version_id"] == world.stable()
    assert record["workflow_run_id"] == started["run_id"]
    assert record["mlflow_run_id"] and record["ui"].endswith(f"/workflows/{started['id']}")
    assert (record["action"], record["outcome"], record["stage"]) == ("noop", "noop", "done")


async def test_every_evolution_is_found_by_its_tenants(world: World, control) -> None:
    """Scoped to tenants, the evolution carries them; unscoped, every tenant of the agent."""
    async with api(control) as client:
        ids = []
        for tenants in (None, ["globex"]):
            body = {"agent": AGENT, "tenants": tenants}
            started = (await client.post("/api/evolutions", json=body)).json()
            await world.client.get_workflow_handle(started["id"]).result()
            ids.append(started["id"])
    unscoped, scoped = ids
    for handle_id, expected in ((unscoped, ["acme", "globex"]), (scoped, ["globex"])):
        described = await world.client.get_workflow_handle(handle_id).describe()
        assert sorted(described.typed_search_attributes.get(TENANT)) == expected
    # The Temporal server is the session's: other tests' evolutions are there too.
    ours = f'WorkflowId IN ("{unscoped}", "{scoped}")'
    query = f'{ours} AND Agent = "{AGENT}" AND Tenant = "acme" AND Outcome = "noop"'
    for _ in range(50):  # visibility is eventually consistent
        found = [w.id async for w in world.client.list_workflows(query)]
        if found:
            break
        await asyncio.sleep(0.2)
    assert found == [unscoped]


async def test_a_tenant_policy_is_changed_over_http(world: World, control) -> None:
    url = "/api/tenants/acme"
    change = {"policy": {"retention_days": 14}, "actor": "ana", "reason": "contract"}
    async with api(control) as client:
        updated = (await client.patch(url, json=change)).json()
        again = (await client.patch(url, json=change)).json()
        shown = (await client.get(url)).json()
        bad = await client.patch(url, json={**change, "policy": {"retention": 14}})
        anonymous = await client.patch(url, json={"policy": {"retention_days": 1}})
        unknown = await client.patch("/api/tenants/nobody", json=change)
    assert updated["changed"] == {"retention_days": {"from": None, "to": 14}}
    assert updated["policy"]["retention_days"] == 14 and updated["at"]
    assert again["changed"] == {} and again["at"] is None
    assert shown["policy"]["retention_days"] == 14
    assert [(c["actor"], c["reason"]) for c in shown["history"]] == [("ana", "contract")]
    assert bad.status_code == 400 and "has no retention" in bad.json()["detail"]
    assert anonymous.status_code == 422
    assert unknown.status_code == 404
