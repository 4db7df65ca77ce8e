"""MLflow I/O for evolutions: one run per evolution, and registry mirrors of our versions.

Every evolution gets a run in the experiment `evoplane/<agent>`: its parameters, the
decision, the candidate's diff against its parent, each gate's statistics per step (and
its findings about the agent, failures the parent shares, as a tag), and the outcome.
Harness versions are mirrored into MLflow's Prompt Registry and checkpoints into its Model
Registry, with `stable`/`canary` aliases following Evoplane's own aliases (Evoplane's
registry stays the source of truth; MLflow is where people look).

Temporal retries activities, and a timed-out attempt may still be running when the next
one starts, so every method is idempotent: runs are found by their evolution id, registry
versions by their `evoplane.version_id` tag, and parameters are written once.

Arguments are plain JSON values (a spec is `VersionSpec.model_dump(mode="json")`), so this
module does not depend on our pydantic models.
"""

from __future__ import annotations

import difflib
import functools
import hashlib
import json
import logging
import math
import re
import urllib.parse
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, TypeVar, cast

import requests
from mlflow import MlflowClient
from mlflow.entities import Metric, Param, Run, ViewType
from mlflow.exceptions import MlflowException
from mlflow.utils.time import get_current_time_millis
from mlflow.utils.validation import (
    MAX_ENTITY_KEY_LENGTH,
    MAX_METRICS_PER_BATCH,
    MAX_PARAM_VAL_LENGTH,
    MAX_PARAMS_TAGS_PER_BATCH,
    MAX_TAG_VAL_LENGTH,
)

__all__ = [
    "OUTCOMES",
    "EvolutionTracker",
    "TrackingUnavailable",
    "harness_prompt_text",
    "model_name",
    "prompt_name",
]

logger = logging.getLogger(__name__)

EVOLUTION_TAG = "evoplane.evolution_id"
AGENT_TAG = "evoplane.agent"
ACTION_TAG = "evoplane.action"
OUTCOME_TAG = "evoplane.outcome"
VERSION_TAG = "evoplane.version_id"
CHECKPOINT_TAG = "evoplane.checkpoint"
FINDINGS_TAG = "evoplane.findings"  # + ".<gate>"
PROMPT_TAG = "mlflow.prompt.is_prompt"  # how MLflow tells a prompt from a model

# Run status per evolution outcome: the MLflow UI colours runs by status.
OUTCOMES: dict[str, str] = {
    "promoted": "FINISHED",
    "rolled_back": "FINISHED",
    "noop": "FINISHED",
    "aborted": "KILLED",
    "rejected": "KILLED",
    "failed": "FAILED",
}
_VERDICT_SCORES = {"pass": 1.0, "marginal": 0.5, "fail": 0.0}

# MLflow error codes that mean "the request was wrong". Everything else is retryable, including
# BAD_REQUEST: MLflow's SQL store answers a unique-key collision between racers with it.
_BAD_INPUT_CODES = {
    "RESOURCE_DOES_NOT_EXIST",
    "INVALID_PARAMETER_VALUE",
    "RESOURCE_ALREADY_EXISTS",
    "INVALID_STATE",
}
# Registry names: prompts allow only these characters, and models share their namespace.
_REGISTRY_NAME_CHARS = re.compile(r"[^A-Za-z0-9_.-]")
# Metric and param keys: MLflow's allowed set without ':' (refused on Windows servers).
_KEY_CHARS = re.compile(r"[^\w.\- /]")
# Where a local checkpoint is registered: MLflow refuses local paths as version sources.
_PLACEHOLDER_SOURCE = "evoplane-checkpoint:/"

_Method = TypeVar("_Method", bound=Callable[..., Any])
_Item = TypeVar("_Item")


class TrackingUnavailable(RuntimeError):
    """MLflow could not be reached or failed on its side; retrying later is safe."""

    def __init__(self, tracking_uri: str, error: BaseException) -> None:
        super().__init__(
            f"MLflow at {tracking_uri} is unavailable ({error}); check that the tracking "
            "server is running and reachable, or point EVOPLANE_MLFLOW_URI at one that is"
        )
        self.tracking_uri = tracking_uri


def _is_transport_failure(error: BaseException) -> bool:
    """True when a requests-level failure (refused, timeout, retries spent) caused `error`."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, requests.RequestException):
            return True
        if isinstance(current, MlflowException) and "API request to" in current.message:
            return True  # MLflow drops the cause of some transport errors
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


def _classified(tracking_uri: str, action: str, error: MlflowException) -> Exception:
    if _is_transport_failure(error) or error.error_code not in _BAD_INPUT_CODES:
        return TrackingUnavailable(tracking_uri, error)
    return ValueError(f"MLflow refused {action}: {error.message}")


def _mlflow_call(method: _Method) -> _Method:
    """Turn MLflow errors into TrackingUnavailable (retry) or ValueError (fix the input)."""

    @functools.wraps(method)
    def wrapper(tracker: EvolutionTracker, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(tracker, *args, **kwargs)
        except MlflowException as error:
            raise _classified(tracker.tracking_uri, method.__name__, error) from error
        except requests.RequestException as error:
            raise TrackingUnavailable(tracker.tracking_uri, error) from error

    return cast(_Method, wrapper)


def _code(error: MlflowException) -> str:
    return str(error.error_code)


# Names and keys


def _registry_safe(text: str) -> str:
    """`text` in registry-name characters; a hash suffix keeps rewritten names distinct."""
    cleaned = _REGISTRY_NAME_CHARS.sub("-", text)
    if cleaned == text:
        return text
    return f"{cleaned}-{hashlib.sha256(text.encode()).hexdigest()[:8]}"


def prompt_name(agent: str) -> str:
    """The Prompt Registry name of an agent's harness."""
    return f"evoplane-{_registry_safe(agent)}-harness"


def model_name(agent: str) -> str:
    """The Model Registry name of an agent's checkpoints."""
    return f"evoplane-{_registry_safe(agent)}"


def _key(key: str) -> str:
    """A metric or param key MLflow accepts: allowed characters, no path tricks, 250 max."""
    cleaned = _KEY_CHARS.sub("_", str(key))
    parts = ["__" if part == ".." else part for part in cleaned.split("/") if part not in ("", ".")]
    joined = "/".join(parts)[:MAX_ENTITY_KEY_LENGTH].rstrip("/")
    if joined.startswith(".."):
        joined = "_" + joined[1:]
    return joined or "_"


def _quoted(value: str) -> str:
    """A string literal for MLflow's search filters."""
    if "'" not in value:
        return f"'{value}'"
    if '"' not in value:
        return f'"{value}"'
    raise ValueError(f"{value!r} holds both quote characters; MLflow cannot search for it")


def _workflow_link(ui_url: str, namespace: str, workflow_id: str) -> str:
    quote = functools.partial(urllib.parse.quote, safe="")
    return f"{ui_url}/namespaces/{quote(namespace)}/workflows/{quote(workflow_id)}"


# Values


def _flatten(values: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Nested mappings as (dotted key, leaf) pairs; empty mappings carry nothing."""
    for key, value in values.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping):
            yield from _flatten(value, f"{path}.")
        else:
            yield path, value


def _param_value(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return text[:MAX_PARAM_VAL_LENGTH]  # MLflow would truncate it the same way


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not (isinstance(value, float) and math.isnan(value))


def _numeric_leaves(values: Mapping[str, Any]) -> dict[str, float]:
    """The numbers in a nested mapping (booleans as 1/0), keyed by dotted path."""
    return {key: float(value) for key, value in _flatten(values) if _is_number(value)}


def _action_scores(scores: Any) -> dict[str, float]:
    """Action -> score from `{action: score}`, `{action: {score: ..}}` or `[{action, score}]`."""
    if isinstance(scores, Mapping):
        pairs: Iterable[tuple[Any, Any]] = scores.items()
    elif isinstance(scores, Sequence) and not isinstance(scores, str):
        pairs = [(row.get("action"), row) for row in scores if isinstance(row, Mapping)]
    else:
        return {}
    found = {}
    for action, score in pairs:
        if isinstance(score, Mapping):
            score = score.get("score", score.get("total"))
        if action is not None and _is_number(score):
            found[str(action)] = float(score)
    return found


def _pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str) + "\n"


def _chunks(items: Sequence[_Item], size: int) -> Iterator[Sequence[_Item]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


# Candidate diffs


def harness_prompt_text(harness: Mapping[str, Any]) -> str:
    """The system prompt a harness gives, as the gateway renders it (without memory or demos)."""
    instructions = harness.get("instructions") or ""
    template = harness.get("template")
    return template.replace("{instructions}", instructions) if template else instructions


def _unified(before: str, after: str, path: str) -> str:
    lines = difflib.unified_diff(
        before.splitlines(keepends=True),
        after.splitlines(keepends=True),
        fromfile=f"parent/{path}",
        tofile=f"candidate/{path}",
    )
    # A file without a final newline would glue the next hunk header onto its last line.
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def _prompt_diff(parent: Mapping[str, Any], candidate: Mapping[str, Any]) -> str:
    """Per-part unified diffs of the harness: instructions, template, demos."""
    parts = {
        "instructions": lambda harness: harness.get("instructions") or "",
        "template": lambda harness: harness.get("template") or "",
        "demos.json": lambda harness: _pretty_json(harness.get("demos") or []),
    }
    return "".join(
        _unified(render(parent), render(candidate), f"harness/{name}")
        for name, render in parts.items()
    )


def _memory_change(parent: Mapping[str, Any], candidate: Mapping[str, Any]) -> dict[str, Any]:
    before, after = parent.get("item_ids") or [], candidate.get("item_ids") or []
    change: dict[str, Any] = {
        "added": [item for item in after if item not in before],
        "removed": [item for item in before if item not in after],
    }
    if parent.get("top_k") != candidate.get("top_k"):
        change["top_k"] = {"parent": parent.get("top_k"), "candidate": candidate.get("top_k")}
    return change if any(change.values()) else {}


def _tool_schema_diff(parent: Mapping[str, Any], candidate: Mapping[str, Any]) -> str:
    """Per-tool unified diffs of the overrides' JSON (description, parameters, argument map)."""
    before, after = parent.get("tools") or {}, candidate.get("tools") or {}
    return "".join(
        _unified(
            _pretty_json(before[tool]) if tool in before else "",
            _pretty_json(after[tool]) if tool in after else "",
            f"tools/{tool}.json",
        )
        for tool in sorted(set(before) | set(after))
    )


def _candidate_files(
    parent_spec: Mapping[str, Any], candidate_spec: Mapping[str, Any], checkpoint: str | None
) -> dict[str, str]:
    """The artifacts that describe a candidate, by file name; empty ones are left out."""
    memory = _memory_change(parent_spec.get("memory") or {}, candidate_spec.get("memory") or {})
    files = {
        "prompt.diff": _prompt_diff(
            parent_spec.get("harness") or {}, candidate_spec.get("harness") or {}
        ),
        "memory_items.json": _pretty_json(memory) if memory else "",
        "tool_schema.diff": _tool_schema_diff(
            parent_spec.get("tools") or {}, candidate_spec.get("tools") or {}
        ),
        "spec.json": _pretty_json(candidate_spec),
        # The whole spec against the parent's: what the part diffs above do not cover (a
        # guardrail, the model and its checkpoint) shows here too.
        "spec.diff": _unified(_pretty_json(parent_spec), _pretty_json(candidate_spec), "spec.json"),
        "checkpoint.txt": f"{checkpoint}\n" if checkpoint else "",
    }
    return {name: text for name, text in files.items() if text}


def _judgement_metrics(gate: str, row: Mapping[str, Any]) -> dict[str, float]:
    """`gate.<gate>.<metric>.<field>` (per tenant: `...<metric>.tenant.<tenant>.<field>`)."""
    prefix = f"gate.{gate}.{row.get('metric', 'metric')}"
    if row.get("tenant") not in (None, "", "*"):
        prefix += f".tenant.{row['tenant']}"
    found = {
        f"{prefix}.{field}": float(value)
        for field, value in row.items()
        if _is_number(value) and not isinstance(value, bool)  # flags are not statistics
    }
    if row.get("verdict") in _VERDICT_SCORES:
        found[f"{prefix}.verdict"] = _VERDICT_SCORES[row["verdict"]]
    return found


def _gate_metrics(gate: Mapping[str, Any]) -> dict[str, float]:
    """A gate result's numbers: verdict as 1/0.5/0, canary weight, replay and finding counts,
    judgements."""
    name, verdict = str(gate.get("gate")), gate.get("verdict")
    if verdict not in _VERDICT_SCORES:
        raise ValueError(f"gate verdict must be one of {sorted(_VERDICT_SCORES)}: {verdict!r}")
    found = {f"gate.{name}.verdict": _VERDICT_SCORES[verdict]}
    if _is_number(gate.get("weight")):
        found[f"gate.{name}.weight"] = float(gate["weight"])
    for listed in ("fixed", "broken", "findings"):
        if isinstance(gate.get(listed), list):
            found[f"gate.{name}.{listed}"] = float(len(gate[listed]))
    for row in [*(gate.get("metrics") or []), *(gate.get("tenants") or [])]:
        found.update(_judgement_metrics(name, row))
    return found


def _findings_text(findings: Sequence[Mapping[str, Any]]) -> str:
    """A gate's findings for the run's tag: each case and the checks the agent fails."""
    said = "; ".join(
        f"{finding.get('case')} ({', '.join(finding.get('checks') or [])})" for finding in findings
    )
    text = f"findings about the agent (not caused by this candidate): {said}"
    return text[:MAX_TAG_VAL_LENGTH]


class EvolutionTracker:
    """Records evolutions in one MLflow server; safe to call again after any failure.

    Args:
        tracking_uri: the MLflow tracking server (also used as its model registry).
        temporal_ui_url: base URL of the Temporal Web UI, to link runs to their workflow.
    """

    def __init__(self, tracking_uri: str, temporal_ui_url: str | None = None) -> None:
        self.tracking_uri = tracking_uri
        self.temporal_ui_url = temporal_ui_url.rstrip("/") if temporal_ui_url else None
        # An explicit client, never mlflow's globals: two trackers must not interfere.
        self._client = MlflowClient(tracking_uri=tracking_uri, registry_uri=tracking_uri)

    # Runs

    @_mlflow_call
    def experiment_for(self, agent: str) -> str:
        """The id of the experiment `evoplane/<agent>`, created on first use."""
        name = f"evoplane/{agent}"
        experiment = self._client.get_experiment_by_name(name)
        if experiment is None:
            try:
                return self._client.create_experiment(name, tags={AGENT_TAG: agent})
            except MlflowException as error:
                if _code(error) != "RESOURCE_ALREADY_EXISTS":
                    raise
                experiment = self._client.get_experiment_by_name(name)  # another worker won
                assert experiment is not None
        if experiment.lifecycle_stage == "deleted":
            # A deleted experiment still holds its name; bring it back rather than fail.
            self._client.restore_experiment(experiment.experiment_id)
        return experiment.experiment_id

    @_mlflow_call
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
            created = self._client.create_run(experiment_id, tags=tags, run_name=evolution_id)
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
            link = _workflow_link(self.temporal_ui_url, namespace, workflow_id)
            tags["temporal.ui"] = link
            tags["mlflow.note.content"] = f"Temporal workflow: [{workflow_id}]({link})"
        return tags

    def _evolution_runs(self, experiment_id: str, evolution_id: str) -> list[Run]:
        """Live runs tagged with this evolution, oldest first."""
        runs = self._client.search_runs(
            [experiment_id],
            filter_string=f"tags.`{EVOLUTION_TAG}` = {_quoted(evolution_id)}",
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

    @_mlflow_call
    def log_params(self, run_id: str, params: Mapping[str, Any]) -> None:
        """Log params once: nested dicts get dotted keys, None waits for a later call.

        MLflow params are immutable; a param already logged with another value is kept
        (and the new one skipped with a debug log), so retries never fail on them.
        """
        wanted = {
            _key(key): _param_value(value) for key, value in _flatten(params) if value is not None
        }
        missing = self._missing_params(run_id, wanted)
        try:
            self._log_params_batch(run_id, missing)
        except MlflowException as error:
            if _code(error) not in ("INVALID_PARAMETER_VALUE", "BAD_REQUEST"):
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
        for chunk in _chunks(entries, MAX_PARAMS_TAGS_PER_BATCH):
            self._client.log_batch(run_id, params=list(chunk))

    @_mlflow_call
    def log_metrics(
        self, run_id: str, metrics: Mapping[str, float | int | None], step: int | None = None
    ) -> None:
        """Log numeric metrics at `step`; None values are skipped, keys made MLflow-safe."""
        timestamp = get_current_time_millis()
        entries = [
            Metric(_key(key), self._metric_value(key, value), timestamp, step or 0)
            for key, value in metrics.items()
            if value is not None
        ]
        for chunk in _chunks(entries, MAX_METRICS_PER_BATCH):
            self._client.log_batch(run_id, metrics=list(chunk))

    @staticmethod
    def _metric_value(key: str, value: Any) -> float:
        if not isinstance(value, int | float):
            raise ValueError(f"metric {key!r} must be a number or None, not {value!r}")
        return float(value)

    @_mlflow_call
    def log_decision(self, run_id: str, decision: Mapping[str, Any]) -> None:
        """The decision record as `decision.json`, its signals and action scores as metrics."""
        if decision.get("action") is not None:
            self._client.set_tag(run_id, ACTION_TAG, str(decision["action"]))
        signals = _numeric_leaves(decision.get("signals") or {})
        metrics = {f"window.{key}": value for key, value in signals.items()}
        for action, score in _action_scores(decision.get("scores")).items():
            metrics[f"score.{action}"] = score
        self.log_metrics(run_id, metrics)
        self._client.log_text(run_id, _pretty_json(decision), "decision.json")

    @_mlflow_call
    def log_candidate(
        self,
        run_id: str,
        *,
        parent_spec: Mapping[str, Any],
        candidate_spec: Mapping[str, Any],
        checkpoint: str | None = None,
    ) -> list[str]:
        """What the candidate changes, as artifacts under `candidate/`; returns their paths."""
        files = _candidate_files(parent_spec or {}, candidate_spec, checkpoint)
        for name, text in files.items():
            self._client.log_text(run_id, text, f"candidate/{name}")
        return [f"candidate/{name}" for name in files]

    @_mlflow_call
    def log_gate(self, run_id: str, gate: Mapping[str, Any], step: int) -> None:
        """One gate judgement: its statistics as metrics at `step`, the record as JSON, and
        its findings about the agent (failures the parent shares) as the tag
        `evoplane.findings.<gate>`, where people see them in the run list."""
        self.log_metrics(run_id, _gate_metrics(gate), step=step)
        name = _registry_safe(str(gate.get("gate")))
        self._client.log_text(run_id, _pretty_json(gate), f"gates/{step:02d}-{name}.json")
        if gate.get("findings"):
            self._client.set_tag(run_id, f"{FINDINGS_TAG}.{name}", _findings_text(gate["findings"]))

    @_mlflow_call
    def finish(self, run_id: str, outcome: str) -> None:
        """Tag the outcome and end the run (FINISHED, or FAILED/KILLED); a repeat is a no-op."""
        if outcome not in OUTCOMES:
            raise ValueError(f"outcome must be one of {sorted(OUTCOMES)}: {outcome!r}")
        status = OUTCOMES[outcome]
        run = self._client.get_run(run_id)
        if run.data.tags.get(OUTCOME_TAG) == outcome and run.info.status == status:
            return  # keep the first end time
        self._client.set_tag(run_id, OUTCOME_TAG, outcome)
        self._client.set_terminated(run_id, status=status)

    # Prompt Registry

    @_mlflow_call
    def register_prompt(
        self,
        agent: str,
        version_id: str,
        harness: Mapping[str, Any],
        aliases: Iterable[str] = (),
    ) -> int:
        """Register a version's harness as a prompt version (once), point `aliases` at it.

        Returns:
            The prompt version number in MLflow.
        """
        name = prompt_name(agent)
        version = self._registered_version(name, version_id, prompt=True)
        if version is None:
            created = self._create_prompt_version(name, agent, version_id, harness)
            version = self._settle_version(name, version_id, created, prompt=True)
        for alias in aliases:
            self._point_alias(self._client.set_prompt_alias, name, alias, version)
        return version

    def _create_prompt_version(
        self, name: str, agent: str, version_id: str, harness: Mapping[str, Any]
    ) -> int:
        def register() -> int:
            created = self._client.register_prompt(
                name,
                template=harness_prompt_text(harness),
                commit_message=version_id,
                tags={VERSION_TAG: version_id, AGENT_TAG: agent},
            )
            return int(created.version)

        try:
            return register()
        except MlflowException as error:
            # Two first registrations raced to create the prompt itself; it exists now.
            if _code(error) != "RESOURCE_ALREADY_EXISTS":
                raise
            return register()

    @_mlflow_call
    def mirror_prompt_aliases(
        self, agent: str, aliases: Mapping[str, str | None]
    ) -> dict[str, int | None]:
        """Point each alias at the prompt version of our version id; None deletes the alias.

        Returns:
            alias -> the prompt version it now names (None: deleted).
        """
        name = prompt_name(agent)
        mirrored: dict[str, int | None] = {}
        for alias, version_id in aliases.items():
            if version_id is None:
                self._ignore_missing(self._client.delete_prompt_alias, name, alias)
                mirrored[alias] = None
                continue
            version = self._require_version(name, version_id, prompt=True, how="register_prompt")
            self._point_alias(self._client.set_prompt_alias, name, alias, version)
            mirrored[alias] = version
        return mirrored

    # Model Registry

    @_mlflow_call
    def register_checkpoint(
        self, agent: str, version_id: str, uri: str, aliases: Iterable[str] = ()
    ) -> int:
        """Register a version's checkpoint as a model version (once), point `aliases` at it.

        Returns:
            The model version number in MLflow.
        """
        name = model_name(agent)
        self._ensure_registered_model(name, agent)
        version = self._registered_version(name, version_id, prompt=False)
        if version is None:
            created = self._create_checkpoint_version(name, version_id, uri)
            version = self._settle_version(name, version_id, created, prompt=False)
        for alias in aliases:
            self._point_alias(self._client.set_registered_model_alias, name, alias, str(version))
        return version

    def _ensure_registered_model(self, name: str, agent: str) -> None:
        try:
            self._client.create_registered_model(
                name, tags={AGENT_TAG: agent}, description=f"Checkpoints of agent {agent}"
            )
        except MlflowException as error:
            if _code(error) != "RESOURCE_ALREADY_EXISTS":
                raise

    def _create_checkpoint_version(self, name: str, version_id: str, uri: str) -> int:
        """A model version whose source is the checkpoint URI where MLflow accepts it.

        MLflow servers refuse local paths (and http URLs) as sources; those checkpoints are
        registered under a placeholder source, with the exact reference in a tag either way.
        """
        tags = {VERSION_TAG: version_id, CHECKPOINT_TAG: uri}
        try:
            created = self._client.create_model_version(
                name, source=uri, tags=tags, description=version_id, await_creation_for=0
            )
        except MlflowException as error:
            if _code(error) != "INVALID_PARAMETER_VALUE":
                raise
            logger.debug("MLflow refused source %r (%s); using a placeholder", uri, error.message)
            created = self._client.create_model_version(
                name,
                source=_PLACEHOLDER_SOURCE + _registry_safe(version_id),
                tags=tags,
                description=version_id,
                await_creation_for=0,
            )
        return int(created.version)

    @_mlflow_call
    def mirror_model_aliases(
        self, agent: str, aliases: Mapping[str, str | None]
    ) -> dict[str, int | None]:
        """Point each alias at the model version of our version id; None deletes the alias.

        Returns:
            alias -> the model version it now names (None: deleted).
        """
        name = model_name(agent)
        mirrored: dict[str, int | None] = {}
        for alias, version_id in aliases.items():
            if version_id is None:
                self._ignore_missing(self._client.delete_registered_model_alias, name, alias)
                mirrored[alias] = None
                continue
            version = self._require_version(
                name, version_id, prompt=False, how="register_checkpoint"
            )
            self._point_alias(self._client.set_registered_model_alias, name, alias, str(version))
            mirrored[alias] = version
        return mirrored

    # Registry versions, found by our version id

    def _tagged_versions(self, name: str, version_id: str, *, prompt: bool) -> list[int]:
        """The registry versions of `name` tagged with our version id, lowest first."""
        filters = [f"name = {_quoted(name)}", f"tag.`{VERSION_TAG}` = {_quoted(version_id)}"]
        if prompt:
            filters.append(f"tag.`{PROMPT_TAG}` = 'true'")  # without it MLflow hides prompts
        found = self._client.search_model_versions(" AND ".join(filters))
        return sorted(int(version.version) for version in found)

    def _registered_version(self, name: str, version_id: str, *, prompt: bool) -> int | None:
        versions = self._tagged_versions(name, version_id, prompt=prompt)
        return versions[0] if versions else None

    def _require_version(self, name: str, version_id: str, *, prompt: bool, how: str) -> int:
        version = self._registered_version(name, version_id, prompt=prompt)
        if version is None:
            raise ValueError(f"{name} has no version for {version_id}; register it with {how}")
        return version

    def _settle_version(self, name: str, version_id: str, created: int, *, prompt: bool) -> int:
        """After two attempts raced to register, keep the lowest version and drop ours.

        Version numbers come from the server, so every racer agrees on the lowest one.
        """
        winner = min(self._tagged_versions(name, version_id, prompt=prompt), default=created)
        if winner != created:
            logger.info(
                "%s already had version %s for %s; dropping %s", name, winner, version_id, created
            )
            if prompt:
                self._client.delete_prompt_version(name, str(created))
            else:
                self._client.delete_model_version(name, str(created))
        return winner

    @staticmethod
    def _point_alias(set_alias: Callable[..., None], name: str, alias: str, version: Any) -> None:
        """Set an alias, once more if a concurrent first set of the same alias collided.

        MLflow inserts a new alias row without a lock, so two racers can hit its unique key;
        the second try finds the row and updates it.
        """
        try:
            set_alias(name, alias, version)
        except MlflowException as error:
            if _code(error) != "BAD_REQUEST":
                raise
            set_alias(name, alias, version)

    @staticmethod
    def _ignore_missing(delete: Callable[..., None], *args: str) -> None:
        """Run a delete that is done already when its target does not exist."""
        try:
            delete(*args)
        except MlflowException as error:
            if _code(error) != "RESOURCE_DOES_NOT_EXIST":
                raise
