"""An evolution's records as MLflow takes them: params, metrics, gate statistics, tags."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

from mlflow.utils.validation import MAX_PARAM_VAL_LENGTH, MAX_TAG_VAL_LENGTH

from registry.version_diff import pretty_json  # one JSON for every diff a person reads

__all__ = [
    "HEADLINE_SIGNALS",
    "OUTCOMES",
    "action_scores",
    "chunks",
    "findings_text",
    "flatten",
    "gate_metrics",
    "gate_verdict",
    "is_number",
    "numeric_leaves",
    "param_value",
    "pretty_json",
]

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
# The few numbers a run list shows at the top level (`window.<signal>`, and each gate's
# `gate.<gate>.verdict` and `.delta`); every other metric sits under a `/` namespace
# (`window/`, `score/`, `gate/<gate>/`), which MLflow's UI groups in sections of their own.
HEADLINE_SIGNALS = frozenset({"trajectories", "success_rate", "reward_mean"})

_Item = TypeVar("_Item")


def flatten(values: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Nested mappings as (dotted key, leaf) pairs; empty mappings carry nothing."""
    for key, value in values.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping):
            yield from flatten(value, f"{path}.")
        else:
            yield path, value


def param_value(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return text[:MAX_PARAM_VAL_LENGTH]  # MLflow would truncate it the same way


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not (isinstance(value, float) and math.isnan(value))


def numeric_leaves(values: Mapping[str, Any]) -> dict[str, float]:
    """The numbers in a nested mapping (booleans as 1/0), keyed by dotted path."""
    return {key: float(value) for key, value in flatten(values) if is_number(value)}


def action_scores(scores: Any) -> dict[str, float]:
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
        if action is not None and is_number(score):
            found[str(action)] = float(score)
    return found


def chunks(items: Sequence[_Item], size: int) -> Iterator[Sequence[_Item]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _judgement_metrics(gate: str, row: Mapping[str, Any]) -> dict[str, float]:
    """`gate/<gate>/<metric>.<field>` (per tenant: `...<metric>.tenant.<tenant>.<field>`)."""
    prefix = f"gate/{gate}/{row.get('metric', 'metric')}"
    if row.get("tenant") not in (None, "", "*"):
        prefix += f".tenant.{row['tenant']}"
    found = {
        f"{prefix}.{field}": float(value)
        for field, value in row.items()
        if is_number(value) and not isinstance(value, bool)  # flags are not statistics
    }
    if row.get("verdict") in _VERDICT_SCORES:
        found[f"{prefix}.verdict"] = _VERDICT_SCORES[row["verdict"]]
    return found


def gate_verdict(gate: Mapping[str, Any]) -> str:
    """The gate's verdict in words; `skipped` for a skipped gate, also in records stored when
    a skipped gate said `pass`."""
    verdict = "skipped" if gate.get("skipped") else gate.get("verdict")
    if verdict not in (*_VERDICT_SCORES, "skipped"):
        known = sorted([*_VERDICT_SCORES, "skipped"])
        raise ValueError(f"gate verdict must be one of {known}: {verdict!r}")
    return str(verdict)


def gate_metrics(gate: Mapping[str, Any]) -> dict[str, float]:
    """A gate result's numbers: verdict as 1/0.5/0, canary weight, replay and finding counts,
    judgements. A skipped gate measured nothing and has none (its tag says `skipped`)."""
    name, verdict = str(gate.get("gate")), gate_verdict(gate)
    if verdict == "skipped":
        return {}
    found = {f"gate.{name}.verdict": _VERDICT_SCORES[verdict]}
    primary = _primary(gate)
    if primary is not None:
        found[f"gate.{name}.delta"] = primary
    for number in ("weight", "sessions_needed", "sessions"):
        if is_number(gate.get(number)):
            found[f"gate/{name}/{number}"] = float(gate[number])
    for listed in ("fixed", "broken", "findings"):
        if isinstance(gate.get(listed), list):
            found[f"gate/{name}/{listed}"] = float(len(gate[listed]))
    for row in [*(gate.get("metrics") or []), *(gate.get("tenants") or [])]:
        found.update(_judgement_metrics(name, row))
    return found


def _primary(gate: Mapping[str, Any]) -> float | None:
    """The delta of the judgement the gate's question was about (a live gate's primary
    metric over all tenants), else of its first aggregate judgement; None without one."""
    rows = [row for row in gate.get("metrics") or [] if is_number(row.get("delta"))]
    question = gate.get("question")
    asked = [row for row in rows if question and row.get("question") == question]
    chosen = (asked or rows or [None])[0]
    return None if chosen is None else float(chosen["delta"])


def findings_text(findings: Sequence[Mapping[str, Any]]) -> str:
    """A gate's findings for the run's tag: each case and the checks the agent fails."""
    said = "; ".join(
        f"{finding.get('case')} ({', '.join(finding.get('checks') or [])})" for finding in findings
    )
    text = f"findings about the agent (not caused by this candidate): {said}"
    return text[:MAX_TAG_VAL_LENGTH]
