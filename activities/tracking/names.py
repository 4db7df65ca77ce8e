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
    "FINDINGS_TAG",
    "GATE_TAG",
    "OUTCOME_TAG",
    "PROMPT_TAG",
    "VERSION_TAG",
    "metric_key",
    "model_name",
    "prompt_name",
    "quoted",
    "registry_safe",
    "workflow_link",
]

EVOLUTION_TAG = "evoplane.evolution_id"
AGENT_TAG = "evoplane.agent"
ACTION_TAG = "evoplane.action"
OUTCOME_TAG = "evoplane.outcome"
VERSION_TAG = "evoplane.version_id"
CHECKPOINT_TAG = "evoplane.checkpoint"
FINDINGS_TAG = "evoplane.findings"  # + ".<gate>"
GATE_TAG = "evoplane.gate"  # + ".<gate>": its latest verdict in words (`skipped` too)
PROMPT_TAG = "mlflow.prompt.is_prompt"  # how MLflow tells a prompt from a model

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
