"""Evolution runs in MLflow: one per evolution, found again by its id after any retry."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from mlflow import MlflowClient
from mlflow.entities import Metric, Param, Run, ViewType
from mlflow.exceptions import MlflowException
from mlflow.utils.time import get_current_time_millis
from mlflow.utils.validation import MAX_METRICS_PER_BATCH, MAX_PARAMS_TAGS_PER_BATCH

from activities.tracking.diffs import candidate_files
from activities.tracking.errors import error_code, mlflow_call
from activities.tracking.names import (
    ACTION_TAG,
    AGENT_TAG,
    EVOLUTION_TAG,
    EXPERIMENT_KIND,
    EXPERIMENT_KIND_TAG,
    FINDINGS_TAG,
    GATE_TAG,
    OUTCOME_TAG,
    metric_key,
    quoted,
    registry_safe,
    run_name,
    workflow_link,
)
from activities.tracking.values import (
    HEADLINE_SIGNALS,
    OUTCOMES,
    action_scores,
    chunks,
    findings_text,
    flatten,
    gate_metrics,
    gate_verdict,
    numeric_leaves,
    param_value,
    pretty_json,
)

__all__ = ["EvolutionRuns"]

logger = logging.getLogger(__name__)


class EvolutionRuns:
    """One MLflow run per evolution: its params, decision, candidate, gates and outcome.

    A part of `EvolutionTracker`, which holds the client (`_client`) and the addresses.
    """

    _client: MlflowClient
    tracking_uri: str
    temporal_ui_url: str | None

    @mlflow_call
    def experiment_for(self, agent: str) -> str:
        """The id of the experiment `evoplane/<agent>`, created on first use and tagged as an
        experiment of runs (`mlflow.experimentKind`), so MLflow's UI offers its runs and
        models rather than an empty traces overview."""
        name = f"evoplane/{agent}"
        experiment = self._client.get_experiment_by_name(name)
        if experiment is None:
            try:
                return self._client.create_experiment(name, tags=_experiment_tags(agent))
            except MlflowException as error:
                if error_code(error) != "RESOURCE_ALREADY_EXISTS":
                    raise
                experiment = self._client.get_experiment_by_name(name)  # another worker won
                assert experiment is not None
        if experiment.lifecycle_stage == "deleted":
            # A deleted experiment still holds its name; bring it back rather than fail.
            self._client.restore_experiment(experiment.experiment_id)
        if experiment.tags.get(EXPERIMENT_KIND_TAG) != EXPERIMENT_KIND:  # made by an older one
            for key, value in _experiment_tags(agent).items():
                self._client.set_experiment_tag(experiment.experiment_id, key, value)
        return experiment.experiment_id

    @mlflow_call
    def start_run(
        self,
        *,
        agent: str,
        evolution_id: str,
        workflow_id: str,
        namespace: str = "default",
        params: Mapping[str, Any] | None = None,
    ) -> str:
        """The run of this evolution, created on the first call; returns its id."""
        experiment_id = self.experiment_for(agent)
        runs = self._evolution_runs(experiment_id, evolution_id)
        if runs:
            run_id = runs[0].info.run_id
        else:
            tags = self._run_tags(agent, evolution_id, workflow_id, namespace)
            parent = (params or {}).get("parent_version")
            named = run_name(parent=parent, candidate=None, action=None, state="started")
            created = self._client.create_run(experiment_id, tags=tags, run_name=named)
            run_id = self._settle_run(experiment_id, evolution_id, created.info.run_id)
        self.log_params(run_id, params or {})
        return run_id

    def _run_tags(
        self, agent: str, evolution_id: str, workflow_id: str, namespace: str
    ) -> dict[str, str]:
        tags = {
            EVOLUTION_TAG: evolution_id,
            AGENT_TAG: agent,
            "temporal.workflow_id": workflow_id,
            "temporal.namespace": namespace,
        }
        if self.temporal_ui_url:
            link = workflow_link(self.temporal_ui_url, namespace, workflow_id)
            tags["temporal.ui"] = link
            tags["mlflow.note.content"] = f"Temporal workflow: [{workflow_id}]({link})"
        return tags

    def _evolution_runs(self, experiment_id: str, evolution_id: str) -> list[Run]:
        """Live runs tagged with this evolution, oldest first."""
        runs = self._client.search_runs(
            [experiment_id],
            filter_string=f"tags.`{EVOLUTION_TAG}` = {quoted(evolution_id)}",
            run_view_type=ViewType.ACTIVE_ONLY,
            max_results=50,
        )
        return sorted(runs, key=lambda run: (run.info.start_time, run.info.run_id))

    def _settle_run(self, experiment_id: str, evolution_id: str, created: str) -> str:
        """After two attempts raced to create the run, keep the oldest and drop ours."""
        runs = self._evolution_runs(experiment_id, evolution_id)
        winner = runs[0].info.run_id if runs else created
        if winner != created:
            logger.info(
                "evolution %s already had run %s; dropping %s", evolution_id, winner, created
            )
            self._client.delete_run(created)
        return winner

    @mlflow_call
    def log_params(self, run_id: str, params: Mapping[str, Any]) -> None:
        """Log params once: nested dicts get dotted keys, None waits for a later call.

        MLflow params are immutable; a param already logged with another value is kept
        (and the new one skipped with a debug log), so retries never fail on them.
        """
        wanted = {
            metric_key(key): param_value(value)
            for key, value in flatten(params)
            if value is not None
        }
        missing = self._missing_params(run_id, wanted)
        try:
            self._log_params_batch(run_id, missing)
        except MlflowException as error:
            if error_code(error) not in ("INVALID_PARAMETER_VALUE", "BAD_REQUEST"):
                raise
            # Another attempt logged some of them in between (a changed value, or a unique-key
            # collision on the server); log only what is still missing.
            self._log_params_batch(run_id, self._missing_params(run_id, missing))

    def _missing_params(self, run_id: str, wanted: Mapping[str, str]) -> dict[str, str]:
        logged = self._client.get_run(run_id).data.params
        for key in wanted.keys() & logged.keys():
            if logged[key] != wanted[key]:
                logger.debug(
                    "run %s keeps param %s=%r; skipped new value %r",
                    run_id,
                    key,
                    logged[key],
                    wanted[key],
                )
        return {key: value for key, value in wanted.items() if key not in logged}

    def _log_params_batch(self, run_id: str, params: Mapping[str, str]) -> None:
        entries = [Param(key, value) for key, value in params.items()]
        for chunk in chunks(entries, MAX_PARAMS_TAGS_PER_BATCH):
            self._client.log_batch(run_id, params=list(chunk))

    @mlflow_call
    def log_metrics(
        self, run_id: str, metrics: Mapping[str, float | int | None], step: int | None = None
    ) -> None:
        """Log numeric metrics at `step`; None values are skipped, keys made MLflow-safe."""
        timestamp = get_current_time_millis()
        entries = [
            Metric(metric_key(key), self._metric_value(key, value), timestamp, step or 0)
            for key, value in metrics.items()
            if value is not None
        ]
        for chunk in chunks(entries, MAX_METRICS_PER_BATCH):
            self._client.log_batch(run_id, metrics=list(chunk))

    @staticmethod
    def _metric_value(key: str, value: Any) -> float:
        if not isinstance(value, int | float):
            raise ValueError(f"metric {key!r} must be a number or None, not {value!r}")
        return float(value)

    @mlflow_call
    def log_decision(self, run_id: str, decision: Mapping[str, Any]) -> None:
        """The decision record as `decision.json`, its signals and action scores as metrics."""
        if decision.get("action") is not None:
            self._client.set_tag(run_id, ACTION_TAG, str(decision["action"]))
        signals = numeric_leaves(decision.get("signals") or {})
        metrics = {
            f"window.{key}" if key in HEADLINE_SIGNALS else f"window/{key}": value
            for key, value in signals.items()
        }
        for action, score in action_scores(decision.get("scores")).items():
            metrics[f"score/{action}"] = score
        self.log_metrics(run_id, metrics)
        self._client.log_text(run_id, pretty_json(decision), "decision.json")

    @mlflow_call
    def log_candidate(
        self,
        run_id: str,
        *,
        parent_spec: Mapping[str, Any],
        candidate_spec: Mapping[str, Any],
        checkpoint: str | None = None,
    ) -> list[str]:
        """What the candidate changes, as artifacts under `candidate/`; returns their paths."""
        files = candidate_files(parent_spec or {}, candidate_spec, checkpoint)
        for name, text in files.items():
            self._client.log_text(run_id, text, f"candidate/{name}")
        return [f"candidate/{name}" for name in files]

    @mlflow_call
    def log_gate(self, run_id: str, gate: Mapping[str, Any], step: int) -> None:
        """One gate judgement: its statistics as metrics at `step` (the interval, planned and
        actual sessions among them), the question it asked as a param, the record as JSON, and
        its findings about the agent (failures the parent shares) as the tag
        `evoplane.findings.<gate>`, where people see them in the run list.

        The verdict in words is the tag `evoplane.gate.<gate>`. A skipped gate gets that tag,
        `skipped`, and no metric: a number would plot it as a pass (or a failure)."""
        self.log_metrics(run_id, gate_metrics(gate), step=step)
        name = registry_safe(str(gate.get("gate")))
        self._client.set_tag(run_id, f"{GATE_TAG}.{name}", gate_verdict(gate))
        if gate.get("question"):
            self.log_params(run_id, {f"gate.{name}.question": str(gate["question"])})
        self._client.log_text(run_id, pretty_json(gate), f"gates/{step:02d}-{name}.json")
        if gate.get("findings"):
            self._client.set_tag(run_id, f"{FINDINGS_TAG}.{name}", findings_text(gate["findings"]))

    @mlflow_call
    def name_run(self, run_id: str, state: str) -> str:
        """Name the run for what it is now, from its params and action tag: `v7 harness:
        gating`, `v7 harness: promoted`, `from v6: noop`. Returns the name."""
        run = self._client.get_run(run_id)
        params, tags = run.data.params, run.data.tags
        named = run_name(
            parent=params.get("parent_version"),
            candidate=params.get("candidate_version"),
            action=tags.get(ACTION_TAG),
            state=state,
        )
        if run.info.run_name != named:
            self._client.update_run(run_id, name=named)
        return named

    @mlflow_call
    def finish(self, run_id: str, outcome: str, action: str | None = None) -> None:
        """Tag the outcome (and the action it ended with: a fallback's, say), name the run
        after both, and end it (FINISHED, or FAILED/KILLED); a repeat is a no-op."""
        if outcome not in OUTCOMES:
            raise ValueError(f"outcome must be one of {sorted(OUTCOMES)}: {outcome!r}")
        status = OUTCOMES[outcome]
        run = self._client.get_run(run_id)
        if run.data.tags.get(OUTCOME_TAG) == outcome and run.info.status == status:
            return  # keep the first end time
        if action is not None:
            self._client.set_tag(run_id, ACTION_TAG, action)
        self._client.set_tag(run_id, OUTCOME_TAG, outcome)
        self.name_run(run_id, outcome)
        self._client.set_terminated(run_id, status=status)


def _experiment_tags(agent: str) -> dict[str, str]:
    return {
        AGENT_TAG: agent,
        EXPERIMENT_KIND_TAG: EXPERIMENT_KIND,
        "mlflow.note.content": (
            f"Evolutions of agent `{agent}`: one run per evolution, named after its candidate, "
            "action and outcome (`v7 harness: promoted`). Headline metrics are `window.*` and "
            "`gate.<gate>.verdict`/`.delta`; the rest sit under `window/`, `score/` and "
            "`gate/<gate>/`. Its harness and checkpoints are in the Prompt and Model "
            "Registries, each version aliased `evoplane-v<N>`."
        ),
    }
