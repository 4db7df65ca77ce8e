"""Evaluation sets in use: their cases replayed by the gate and learned from by the harness
optimiser, and the cases a promotion's fixed failures become. The sets themselves live in
the registry (`registry.evaluation_sets`)."""

from evolution.evaluation.cases import (
    fixed_failure_cases,
    replay_cases,
    required_safety_cases,
    with_required,
)
from evolution.evaluation.settings import EvaluationSettings

__all__ = [
    "EvaluationSettings",
    "fixed_failure_cases",
    "replay_cases",
    "required_safety_cases",
    "with_required",
]
