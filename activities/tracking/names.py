"""What Evoplane calls things in MLflow: tags, registry names, metric keys, filter literals."""

from __future__ import annotations

import functools
import hashlib
import re
import urllib.parse

from mlflow.utils.validation import MAX_ENTITY_KEY_LENGTH

__all__ = [
    "ACTION_TAG",
    "AGENT_TAG",
    "CHECKPOINT_TAG",
    "EVOLUTION_TAG",
    "EXPERIMENT_KIND",
    "EXPERIMENT_KIND_TAG",
    "FINDINGS_TAG",
    "GATE_TAG",
    "HARNESS_HASH_TAG",
    "OUTCOME_TAG",
    "PROMPT_TAG",
    "VERSION_NUMBER_TAG",
    "VERSION_TAG",
    "metric_key",
    "model_name",
    "prompt_name",
    "quoted",
    "registry_safe",
    "run_link",
    "run_name",
    "runs_link",
    "short_version",
    "version_alias",
    "workflow_link",
]

EVOLUTION_TAG = "evoplane.evolution_id"
AGENT_TAG = "evoplane.agent"
ACTION_TAG = "evoplane.action"
OUTCOME_TAG = "evoplane.outcome"
VERSION_TAG = "evoplane.version_id"
VERSION_NUMBER_TAG = "evoplane.version"  # `v7`: the number people say, on registry versions
HARNESS_HASH_TAG = "evoplane.harness_hash"  # a prompt version's content, to find it again
CHECKPOINT_TAG = "evoplane.checkpoint"
FINDINGS_TAG = "evoplane.findings"  # + ".<gate>"
GATE_TAG = "evoplane.gate"  # + ".<gate>": its latest verdict in words (`skipped` too)
PROMPT_TAG = "mlflow.prompt.is_prompt"  # how MLflow tells a prompt from a model
# An experiment of runs, not of GenAI traces: MLflow's UI offers the Runs and Models views.
EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
EXPERIMENT_KIND = "custom_model_development"

# Registry names: prompts allow only these characters, and models share their namespace.
_REGISTRY_NAME_CHARS = re.compile(r"[^A-Za-z0-9_.-]")
# Metric and param keys: MLflow's allowed set without ':' (refused on Windows servers).
_KEY_CHARS = re.compile(r"[^\w.\- /]")


def registry_safe(text: str) -> str:
    """`text` in registry-name characters; a hash suffix keeps rewritten names distinct."""
    cleaned = _REGISTRY_NAME_CHARS.sub("-", text)
    if cleaned == text:
        return text
    return f"{cleaned}-{hashlib.sha256(text.encode()).hexdigest()[:8]}"


def prompt_name(agent: str) -> str:
    """The Prompt Registry name of an agent's harness."""
    return f"evoplane-{registry_safe(agent)}-harness"


def model_name(agent: str) -> str:
    """The Model Registry name of an agent's checkpoints."""
    return f"evoplane-{registry_safe(agent)}"


def metric_key(key: str) -> str:
    """A metric or param key MLflow accepts: allowed characters, no path tricks, 250 max."""
    cleaned = _KEY_CHARS.sub("_", str(key))
    parts = ["__" if part == ".." else part for part in cleaned.split("/") if part not in ("", ".")]
    joined = "/".join(parts)[:MAX_ENTITY_KEY_LENGTH].rstrip("/")
    if joined.startswith(".."):
        joined = "_" + joined[1:]
    return joined or "_"


def quoted(value: str) -> str:
    """A string literal for MLflow's search filters."""
    if "'" not in value:
        return f"'{value}'"
    if '"' not in value:
        return f'"{value}"'
    raise ValueError(f"{value!r} holds both quote characters; MLflow cannot search for it")


def workflow_link(ui_url: str, namespace: str, workflow_id: str) -> str:
    quote = functools.partial(urllib.parse.quote, safe="")
    return f"{ui_url}/namespaces/{quote(namespace)}/workflows/{quote(workflow_id)}"


def short_version(version_id: str) -> str:
    """`support-bot@v7` -> `v7`: how people name a version within its agent."""
    return version_id.rpartition("@")[2]


def version_alias(version_id: str) -> str:
    """The registry alias of a version: `evoplane-v7` (MLflow reserves `v7` for itself)."""
    return f"evoplane-{registry_safe(short_version(version_id))}"


def run_name(*, parent: str | None, candidate: str | None, action: str | None, state: str) -> str:
    """A run name people tell apart: `v7 harness: promoted`, `from v6: started`,
    `from v6 rollback: rolled back`."""
    subject = (
        short_version(candidate)
        if candidate
        else (f"from {short_version(parent)}" if parent else "evolution")
    )
    doing = f" {action}" if action and action != "noop" else ""
    return f"{subject}{doing}: {state.replace('_', ' ')}"


# MLflow 3.17's UI keeps a GenAI/ML switch per browser, GenAI unless a link says otherwise.
_ML_VIEW = "workflowType=machine_learning"


def runs_link(ui_url: str, experiment_id: str) -> str:
    """The experiment's runs in MLflow's UI (its machine-learning view, where runs live)."""
    return f"{ui_url.rstrip('/')}/#/experiments/{experiment_id}/runs?{_ML_VIEW}"


def run_link(ui_url: str, experiment_id: str, run_id: str) -> str:
    """One run's page in MLflow's UI, in the same view."""
    return f"{ui_url.rstrip('/')}/#/experiments/{experiment_id}/runs/{run_id}?{_ML_VIEW}"
