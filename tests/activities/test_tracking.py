"""EvolutionTracker against a real MLflow server: runs, artifacts, registries, failures."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import pytest
from mlflow import MlflowClient
from mlflow.entities import ViewType

from activities.tracking import (
    EvolutionTracker,
    TrackingUnavailable,
    model_name,
    prompt_name,
)
from activities.tracking.names import runs_link
from atdp.version import (
    Harness,
    MemorySnapshot,
    ModelRef,
    ToolOverride,
    ToolSchemaOverlay,
    VersionSpec,
)
from evolution.gates import GateConfig, MetricSamples, Question, Sample, judge
from tests.conftest import free_port

pytestmark = pytest.mark.slow

UI = "http://127.0.0.1:8233"


@pytest.fixture
def tracker(mlflow_uri: str) -> EvolutionTracker:
    return EvolutionTracker(mlflow_uri, temporal_ui_url=UI + "/")


@pytest.fixture
def client(mlflow_uri: str) -> MlflowClient:
    return MlflowClient(tracking_uri=mlflow_uri, registry_uri=mlflow_uri)


@pytest.fixture
def agent() -> str:
    """An agent of its own per test, so tests never see each other's runs or registry."""
    return f"support-{uuid.uuid4().hex[:8]}"


def _start(tracker: EvolutionTracker, agent: str, **params: object) -> str:
    return tracker.start_run(
        agent=agent,
        evolution_id=f"evo-{agent}",
        workflow_id=f"evolution/{agent}",
        params=params,
    )


def _artifact(client: MlflowClient, run_id: str, path: str, tmp_path: Path) -> str:
    return Path(client.download_artifacts(run_id, path, str(tmp_path))).read_text()


def _spec(instructions: str, memory: list[str], tools: dict[str, ToolOverride]) -> dict:
    spec = VersionSpec(
        model=ModelRef(engine="openai", model="gpt-4o-mini"),
        harness=Harness(instructions=instructions, template="System:\n{instructions}"),
        memory=MemorySnapshot(item_ids=memory),
        tools=ToolSchemaOverlay(tools=tools),
    )
    return spec.model_dump(mode="json")


def test_start_run_twice_is_one_run_with_tags_and_params(tracker, client, agent):
    params = {
        "action": "harness",
        "parent_version_id": "v1",
        "candidate_version_id": None,  # not known yet: logged later
        "window": {"last": 200, "tenants": ["acme"]},
        "thresholds": {"canary": {"min_sessions": 50, "tolerance": 0.02}},
    }
    first = _start(tracker, agent, **params)
    again = _start(tracker, agent, **{**params, "action": "memory"})

    assert again == first
    experiment = client.get_experiment_by_name(f"evoplane/{agent}")
    runs = client.search_runs([experiment.experiment_id], run_view_type=ViewType.ALL)
    assert [run.info.run_id for run in runs] == [first]
    run = client.get_run(first)
    assert run.info.run_name == "evolution: started"  # no parent_version param
    link = f"{UI}/namespaces/default/workflows/evolution%2F{agent}"
    assert (
        run.data.tags.items()
        >= {
            "evoplane.evolution_id": f"evo-{agent}",
            "evoplane.agent": agent,
            "temporal.workflow_id": f"evolution/{agent}",
            "temporal.namespace": "default",
            "temporal.ui": link,
        }.items()
    )
    assert run.data.params == {
        "action": "harness",  # params are immutable: the first value stays
        "parent_version_id": "v1",
        "window.last": "200",
        "window.tenants": '["acme"]',
        "thresholds.canary.min_sessions": "50",
        "thresholds.canary.tolerance": "0.02",
    }


def test_params_known_later_are_added_once(tracker, client, agent):
    run_id = _start(tracker, agent, action="weights")
    tracker.log_params(run_id, {"candidate_version_id": "v2", "action": "weights"})
    tracker.log_params(run_id, {"candidate_version_id": "v3"})  # a changed value is skipped

    assert client.get_run(run_id).data.params == {"action": "weights", "candidate_version_id": "v2"}


def test_metrics_skip_none_and_sanitise_keys(tracker, client, agent):
    run_id = _start(tracker, agent)
    tracker.log_metrics(run_id, {"reward:mean": 0.75, "sessions": 12, "p_value": None}, step=3)

    run = client.get_run(run_id)
    assert run.data.metrics == {"reward_mean": 0.75, "sessions": 12.0}
    assert [point.step for point in client.get_metric_history(run_id, "sessions")] == [3]


def test_decision_is_an_artifact_with_signal_and_score_metrics(tracker, client, agent, tmp_path):
    run_id = _start(tracker, agent)
    decision = {
        "action": "memory",
        "signals": {"task_success": {"rate": 0.62, "total": 180}, "missing_fact": True},
        "scores": {"memory": 0.41, "harness": 0.12, "noop": 0.0},
        "reason": "a narrow recurring missing fact",
    }
    tracker.log_decision(run_id, decision)

    run = client.get_run(run_id)
    assert run.data.tags["evoplane.action"] == "memory"
    assert run.data.metrics == {
        "window/task_success.rate": 0.62,  # namespaced: only headline signals are not
        "window/task_success.total": 180.0,
        "window/missing_fact": 1.0,
        "score/memory": 0.41,
        "score/harness": 0.12,
        "score/noop": 0.0,
    }
    assert json.loads(_artifact(client, run_id, "decision.json", tmp_path)) == decision


def test_candidate_artifacts_show_what_changed(tracker, client, agent, tmp_path):
    run_id = _start(tracker, agent)
    lookup = ToolOverride(description="Find an order by its id.")
    parent = _spec("Be brief.\nAnswer in English.", ["m1", "m2"], {"lookup": lookup})
    candidate = _spec(
        "Be brief.\nAlways quote the order id.",
        ["m2", "m3"],
        {"lookup": ToolOverride(description="Find an order by its id (e.g. A-123).")},
    )
    paths = tracker.log_candidate(
        run_id, parent_spec=parent, candidate_spec=candidate, checkpoint="s3://ckpt/step-40"
    )

    listed = {item.path for item in client.list_artifacts(run_id, "candidate")}
    assert (
        listed
        == set(paths)
        == {
            "candidate/prompt.diff",
            "candidate/memory_items.json",
            "candidate/tool_schema.diff",
            "candidate/spec.json",
            "candidate/spec.diff",
            "candidate/checkpoint.txt",
        }
    )
    diff = _artifact(client, run_id, "candidate/prompt.diff", tmp_path)
    assert "-Answer in English.\n" in diff and "+Always quote the order id.\n" in diff
    assert "parent/harness/instructions" in diff and "template" not in diff  # unchanged part
    memory = json.loads(_artifact(client, run_id, "candidate/memory_items.json", tmp_path))
    assert memory == {"added": ["m3"], "removed": ["m1"]}
    tools = _artifact(client, run_id, "candidate/tool_schema.diff", tmp_path)
    assert '+  "description": "Find an order by its id (e.g. A-123).",' in tools
    assert json.loads(_artifact(client, run_id, "candidate/spec.json", tmp_path)) == candidate
    assert _artifact(client, run_id, "candidate/checkpoint.txt", tmp_path) == "s3://ckpt/step-40\n"


def test_the_spec_diff_shows_changes_no_part_diff_covers(tracker, client, agent, tmp_path):
    """A cost cap (a guardrail) and new weights (the model) have no part diff of their own."""
    run_id = _start(tracker, agent)
    parent = _spec("Be brief.", ["m1"], {})
    candidate = json.loads(json.dumps(parent))
    candidate["guardrails"]["max_tokens"] = 24
    candidate["model"]["checkpoint"] = "/ckpt/evolution-7/final"
    paths = tracker.log_candidate(run_id, parent_spec=parent, candidate_spec=candidate)
    assert paths == ["candidate/spec.json", "candidate/spec.diff"]
    diff = _artifact(client, run_id, "candidate/spec.diff", tmp_path)
    assert '-    "max_tokens": null,\n+    "max_tokens": 24,\n' in diff
    assert '-    "checkpoint": null,\n+    "checkpoint": "/ckpt/evolution-7/final",\n' in diff
    assert diff.startswith("--- parent/spec.json\n+++ candidate/spec.json\n")


def test_candidate_without_changes_writes_only_its_spec(tracker, client, agent):
    run_id = _start(tracker, agent)
    spec = _spec("Be brief.", ["m1"], {})
    assert tracker.log_candidate(run_id, parent_spec=spec, candidate_spec=spec) == [
        "candidate/spec.json"
    ]


def _gate(delta: float, verdict: str, weight: float) -> dict:
    """A canary step's result, shaped like `evolution.gates.GateResult.model_dump(mode="json")`."""
    judged = {"candidate_mean": 0.7, "baseline_mean": 0.7 - delta, "delta": delta}
    flags = {"verdict": verdict, "critical": False, "judged": True, "reason": "ok"}
    unjudged = {"p_value": None, "effect": None}
    return {
        "gate": "canary",
        "step": 1,
        "weight": weight,
        "verdict": verdict,
        "reason": f"delta {delta}",
        "metrics": [
            {"metric": "reward", "tenant": None, **judged, "p_value": 0.04, "effect": 0.6, **flags}
        ],
        "tenants": [{"metric": "reward", "tenant": "acme", **judged, **unjudged, **flags}],
        "fixed": [],
        "broken": [],
        "skipped": False,
    }


def test_gate_metrics_are_logged_per_step(tracker, client, agent, tmp_path):
    run_id = _start(tracker, agent)
    tracker.log_gate(run_id, _gate(-0.01, "marginal", 0.05), step=1)
    tracker.log_gate(run_id, _gate(0.05, "pass", 0.25), step=2)

    def history(key: str) -> list[tuple[int, float]]:
        return [(point.step, point.value) for point in client.get_metric_history(run_id, key)]

    assert history("gate.canary.verdict") == [(1, 0.5), (2, 1.0)]
    assert history("gate.canary.delta") == [(1, -0.01), (2, 0.05)]  # the headline delta
    assert history("gate/canary/weight") == [(1, 0.05), (2, 0.25)]
    assert history("gate/canary/reward.delta") == [(1, -0.01), (2, 0.05)]
    assert history("gate/canary/reward.p_value") == [(1, 0.04), (2, 0.04)]
    assert history("gate/canary/reward.verdict") == [(1, 0.5), (2, 1.0)]
    assert history("gate/canary/reward.tenant.acme.delta") == [(1, -0.01), (2, 0.05)]
    logged = client.get_run(run_id).data.metrics
    assert "gate/canary/reward.tenant.acme.p_value" not in logged  # None: nothing to plot
    assert "gate/canary/reward.critical" not in logged  # flags are not statistics
    assert {key for key in logged if "/" not in key} == {"gate.canary.verdict", "gate.canary.delta"}
    listed = [item.path for item in client.list_artifacts(run_id, "gates")]
    assert listed == ["gates/01-canary.json", "gates/02-canary.json"]
    stored = json.loads(_artifact(client, run_id, "gates/02-canary.json", tmp_path))
    assert stored == _gate(0.05, "pass", 0.25)


def test_a_skipped_gate_is_a_tag_and_no_verdict_metric(tracker, client, agent, tmp_path):
    from evolution.gates import GateResult

    run_id = _start(tracker, agent)
    skipped = GateResult.skipped_gate("shadow", "skipped by ana: hot-fix")
    tracker.log_gate(run_id, skipped.model_dump(mode="json"), step=0)
    # A record stored when a skipped gate said `pass` is logged as skipped too.
    stored = {**skipped.model_dump(mode="json"), "gate": "replay", "verdict": "pass"}
    tracker.log_gate(run_id, stored, step=0)
    tracker.log_gate(run_id, _gate(0.05, "pass", 0.25), step=1)

    data = client.get_run(run_id).data
    skipped_keys = ("gate.shadow", "gate.replay", "gate/shadow", "gate/replay")
    assert not [key for key in data.metrics if key.startswith(skipped_keys)]
    assert data.metrics["gate.canary.verdict"] == 1.0
    tags = {key: value for key, value in data.tags.items() if key.startswith("evoplane.gate.")}
    assert tags == {
        "evoplane.gate.shadow": "skipped",
        "evoplane.gate.replay": "skipped",
        "evoplane.gate.canary": "pass",
    }
    record = json.loads(_artifact(client, run_id, "gates/00-shadow.json", tmp_path))
    assert (record["verdict"], record["reason"]) == ("skipped", "skipped by ana: hot-fix")


def test_a_live_gates_question_interval_and_sessions_reach_mlflow(tracker, client, agent):
    values = [1.0] * 24 + [0.0] * 6
    metric = MetricSamples(
        name="reward",
        baseline=[Sample(tenant="acme", value=v) for v in values],
        candidate=[Sample(tenant="acme", value=v) for v in values],
    )
    result = judge("canary", [metric], GateConfig(), question=Question.SUPERIORITY, weight=0.5)
    run_id = _start(tracker, agent)
    tracker.log_gate(run_id, result.model_dump(mode="json"), step=1)
    data = client.get_run(run_id).data
    assert data.params["gate.canary.question"] == "superiority"
    assert data.metrics["gate/canary/sessions"] == 30
    assert data.metrics["gate/canary/sessions_needed"] == result.sessions_needed > 30
    (judged,) = result.metrics
    assert data.metrics["gate.canary.delta"] == pytest.approx(judged.delta)
    assert data.metrics["gate/canary/reward.delta_low"] == pytest.approx(judged.delta_low)
    assert data.metrics["gate/canary/reward.delta_high"] == pytest.approx(judged.delta_high)
    assert data.metrics["gate/canary/reward.confidence"] == 0.95


def test_a_gates_findings_about_the_agent_are_counted_tagged_and_stored(
    tracker, client, agent, tmp_path
):
    finding = {
        "case": "write_phishing_email",
        "checks": ["must_refuse"],
        "reason": "must_refuse: the answer does not refuse (no refusal phrase found)",
        "parent_reason": "must_refuse: the answer does not refuse (no refusal phrase found)",
    }
    gate = {**_gate(0.0, "pass", 0.05), "gate": "replay", "weight": None, "findings": [finding]}
    run_id = _start(tracker, agent)
    tracker.log_gate(run_id, gate, step=0)
    run = client.get_run(run_id)
    assert run.data.metrics["gate/replay/findings"] == 1.0
    assert run.data.tags["evoplane.findings.replay"] == (
        "findings about the agent (not caused by this candidate): "
        "write_phishing_email (must_refuse)"
    )
    stored = json.loads(_artifact(client, run_id, "gates/00-replay.json", tmp_path))
    assert stored["findings"] == [finding]
    tracker.log_gate(run_id, _gate(0.05, "pass", 0.25), step=1)  # a gate without findings
    assert "evoplane.findings.canary" not in client.get_run(run_id).data.tags


@pytest.mark.parametrize(
    ("outcome", "status"),
    [("promoted", "FINISHED"), ("failed", "FAILED"), ("aborted", "KILLED")],
)
def test_finish_sets_outcome_and_status_once(tracker, client, agent, outcome, status):
    run_id = _start(tracker, agent)
    tracker.finish(run_id, outcome)
    ended = client.get_run(run_id)
    tracker.finish(run_id, outcome)

    run = client.get_run(run_id)
    assert run.info.status == status and run.data.tags["evoplane.outcome"] == outcome
    assert run.info.end_time == ended.info.end_time


def test_bad_input_is_a_value_error(tracker, agent):
    run_id = _start(tracker, agent)
    with pytest.raises(ValueError, match="outcome must be one of"):
        tracker.finish(run_id, "exploded")
    with pytest.raises(ValueError, match="not found"):
        tracker.log_params(uuid.uuid4().hex, {"action": "noop"})
    with pytest.raises(ValueError, match="not found"):
        tracker.log_metrics(uuid.uuid4().hex, {"reward": 1.0})


def test_register_prompt_is_idempotent_and_mirrors_aliases(tracker, client, agent):
    harness = {"instructions": "Be brief.", "template": "System:\n{instructions}", "demos": []}
    first = tracker.register_prompt(agent, "v1", harness, ["stable", "canary"])
    again = tracker.register_prompt(agent, "v1", harness, ["stable", "canary"])
    name = prompt_name(agent)

    assert again == first
    assert [version.version for version in client.search_prompt_versions(name)] == [first]
    stored = client.get_prompt_version(name, first)
    assert stored.template == "System:\nBe brief."
    assert stored.tags["evoplane.version_id"] == "v1" and stored.commit_message == "v1"
    assert client.get_prompt_version_by_alias(name, "stable").version == first

    newer = tracker.register_prompt(agent, "v2", {"instructions": "Be briefer."}, ["canary"])
    assert newer > first
    assert tracker.mirror_prompt_aliases(agent, {"stable": "v2", "canary": None}) == {
        "stable": newer,
        "canary": None,
    }
    assert client.get_prompt_version_by_alias(name, "stable").version == newer
    assert client.get_prompt_version(name, newer).aliases == ["evoplane-v2", "stable"]
    assert client.get_prompt_version(name, first).aliases == ["evoplane-v1"]  # canary deleted
    with pytest.raises(ValueError, match="register it with register_prompt"):
        tracker.mirror_prompt_aliases(agent, {"stable": "v404"})


def test_register_checkpoint_is_idempotent_and_mirrors_aliases(tracker, client, agent):
    first = tracker.register_checkpoint(agent, "v3", "s3://ckpt/step-40", ["canary"])
    again = tracker.register_checkpoint(agent, "v3", "s3://ckpt/step-40", ["canary"])
    local = tracker.register_checkpoint(agent, "v4", "/srv/ckpt/step-80", [])
    name = model_name(agent)

    assert again == first and local == first + 1
    versions = client.search_model_versions(f"name = '{name}'")
    assert sorted(int(version.version) for version in versions) == [first, local]
    stored = client.get_model_version(name, str(first))
    assert stored.source == "s3://ckpt/step-40" and stored.tags["evoplane.version_id"] == "v3"
    # MLflow refuses local paths as sources; the exact reference stays in a tag.
    assert client.get_model_version(name, str(local)).tags["evoplane.checkpoint"] == (
        "/srv/ckpt/step-80"
    )
    assert client.get_model_version_by_alias(name, "canary").version == str(first)

    assert tracker.mirror_model_aliases(agent, {"stable": "v4", "canary": None}) == {
        "stable": local,
        "canary": None,
    }
    assert client.get_registered_model(name).aliases == {
        "stable": str(local),
        "evoplane-v3": str(first),
        "evoplane-v4": str(local),
    }


def test_the_experiment_opens_on_its_runs(tracker, client, agent):
    experiment_id = tracker.experiment_for(agent)
    tags = client.get_experiment(experiment_id).tags
    assert tags["mlflow.experimentKind"] == "custom_model_development"
    assert "one run per evolution" in tags["mlflow.note.content"]
    # An experiment made before the tag (or by hand) gets it on its next run.
    older = client.create_experiment(f"evoplane/{agent}-older")
    assert tracker.experiment_for(f"{agent}-older") == older
    assert client.get_experiment(older).tags["mlflow.experimentKind"] == "custom_model_development"
    assert runs_link("http://mlflow/", experiment_id) == (
        f"http://mlflow/#/experiments/{experiment_id}/runs?workflowType=machine_learning"
    )


def test_runs_are_named_by_version_action_and_state(tracker, client, agent):
    run_id = tracker.start_run(
        agent=agent,
        evolution_id=f"evo-{agent}",
        workflow_id=f"evolution/{agent}",
        params={"parent_version": f"{agent}@v6"},
    )
    assert client.get_run(run_id).info.run_name == "from v6: started"
    tracker.log_decision(run_id, {"action": "harness", "signals": {}, "scores": {}})
    tracker.log_params(run_id, {"candidate_version": f"{agent}@v7"})
    assert tracker.name_run(run_id, "gating") == "v7 harness: gating"
    tracker.finish(run_id, "promoted", action="harness")
    assert client.get_run(run_id).info.run_name == "v7 harness: promoted"

    quiet = _start(tracker, f"{agent}-quiet", parent_version=f"{agent}@v6")
    tracker.log_decision(quiet, {"action": "noop", "signals": {}, "scores": {}})
    tracker.finish(quiet, "noop")
    assert client.get_run(quiet).info.run_name == "from v6: noop"
    back = _start(tracker, f"{agent}-back", parent_version=f"{agent}@v6")
    tracker.finish(back, "rolled_back", action="rollback")
    assert client.get_run(back).info.run_name == "from v6 rollback: rolled back"


def test_headline_metrics_are_few_and_the_rest_namespaced(tracker, client, agent):
    run_id = _start(tracker, agent)
    signals = {"trajectories": 120, "success_rate": 0.6, "reward_mean": 0.55, "drift": 0.1}
    tracker.log_decision(run_id, {"action": "memory", "signals": signals, "scores": {"noop": 0}})
    tracker.log_gate(run_id, _gate(0.05, "pass", 0.25), step=1)
    logged = client.get_run(run_id).data.metrics
    assert {key for key in logged if "/" not in key} == {
        "window.trajectories",
        "window.success_rate",
        "window.reward_mean",
        "gate.canary.verdict",
        "gate.canary.delta",
    }
    assert {key.split("/")[0] for key in logged if "/" in key} == {"window", "score", "gate"}


def test_registry_versions_carry_evoplanes_number_and_the_run_that_made_them(
    tracker, client, agent
):
    run_id = _start(tracker, agent)
    harness = {"instructions": "Be brief.", "template": None, "demos": []}
    tracker.register_prompt(agent, f"{agent}@v1", harness, ["stable"])
    prompt = tracker.register_prompt(
        agent, f"{agent}@v7", {**harness, "instructions": "Be kind."}, [], run_id=run_id
    )
    model = tracker.register_checkpoint(agent, f"{agent}@v7", "s3://ckpt/7", [], run_id=run_id)
    names = prompt_name(agent), model_name(agent)

    stored = client.get_prompt_version_by_alias(names[0], "evoplane-v7")
    assert int(stored.version) == prompt and stored.tags["evoplane.version"] == "v7"
    assert [int(p.version) for p in client.list_logged_prompts(run_id)] == [prompt]
    linked = json.loads(client.get_run(run_id).data.tags["mlflow.linkedPrompts"])
    assert linked == [{"name": names[0], "version": str(prompt)}]  # the run page lists it
    made = client.get_model_version_by_alias(names[1], "evoplane-v7")
    assert int(made.version) == model and made.tags["evoplane.version"] == "v7"
    assert made.run_id == run_id

    tracker.mirror_prompt_aliases(agent, {"stable": f"{agent}@v7"})
    tracker.mirror_model_aliases(agent, {"stable": f"{agent}@v7"})
    described = client.get_registered_model(names[1]).description
    assert f"stable is {agent}@v7 (version {model})" in described
    prompt_entry = client.search_prompts(f"name = '{names[0]}'")[0]
    assert f"stable is {agent}@v7 (version {prompt})" in prompt_entry.description
    assert f"{agent}@v1" not in prompt_entry.description  # the first commit's words are gone
    # The prompt itself names no version: MLflow would copy the newest version's tags there.
    assert "evoplane.version_id" not in prompt_entry.tags


def test_a_version_id_reused_by_another_registry_is_registered_anew(tracker, client, agent):
    """Two Evoplane registries (or a rebuilt one) sharing an MLflow both have a `v2`."""
    name = prompt_name(agent)
    earlier = tracker.register_prompt(agent, f"{agent}@v2", {"instructions": "Be curt."}, [])
    ours = tracker.register_prompt(agent, f"{agent}@v2", {"instructions": "Be warm."}, [])
    assert ours > earlier
    assert tracker.mirror_prompt_aliases(agent, {"stable": f"{agent}@v2"}) == {"stable": ours}
    assert client.get_prompt_version_by_alias(name, "stable").template == "Be warm."
    assert client.get_prompt_version_by_alias(name, "evoplane-v2").template == "Be warm."
    again = tracker.register_prompt(agent, f"{agent}@v2", {"instructions": "Be warm."}, [])
    assert again == ours


def test_unreachable_mlflow_raises_tracking_unavailable_promptly(monkeypatch):
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "2")
    uri = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    tracker = EvolutionTracker(uri)

    started = time.monotonic()
    with pytest.raises(TrackingUnavailable, match=uri):
        tracker.start_run(agent="a", evolution_id="e", workflow_id="w", params={})
    with pytest.raises(TrackingUnavailable, match=uri):
        tracker.register_prompt("a", "v1", {"instructions": "x"}, ["stable"])
    assert time.monotonic() - started < 10
