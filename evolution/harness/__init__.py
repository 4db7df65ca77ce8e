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
    make_harness_operator,
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
    "make_harness_operator",
    "propose_harness",
]
