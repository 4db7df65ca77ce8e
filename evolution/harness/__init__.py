"""The harness operator: the agent's instructions and demos, optimised with DSPy on the
window's recorded traffic. dspy itself is imported only when an operator runs."""

from evolution.harness.operator import (
    METRIC,
    HarnessCase,
    HarnessConfig,
    HarnessEvidence,
    LMFactory,
    case_score,
    harness_cases,
    harness_changes,
    harness_config,
    propose_harness,
)

__all__ = [
    "METRIC",
    "HarnessCase",
    "HarnessConfig",
    "HarnessEvidence",
    "LMFactory",
    "case_score",
    "harness_cases",
    "harness_changes",
    "harness_config",
    "propose_harness",
]
