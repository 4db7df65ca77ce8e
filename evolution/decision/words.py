"""The decision's words for numbers and clusters: counts, rates, intervals, what a cluster fails."""

from __future__ import annotations

from evolution.window import (
    FailureCluster,
    FailureKind,
    Mean,
    Rate,
    WindowStats,
)

__all__ = [
    "breadth_text",
    "cluster_symptom",
    "evidence_text",
    "interval_text",
    "rate_text",
    "span_text",
    "tenants_text",
]


def cluster_symptom(cluster: FailureCluster) -> str:
    """What the failing trajectories have in common, in the domain's words."""
    match cluster.kind:
        case FailureKind.TOOL_ARGUMENT if cluster.tool and cluster.parameter:
            symptom = f"fail {cluster.tool}.{cluster.parameter}"
            return f"{symptom} with {cluster.error_class}" if cluster.error_class else symptom
        case FailureKind.TOOL_ARGUMENT:
            return f"pass bad tool arguments ({cluster.key})"
        case FailureKind.TOOL_ROUTING:
            return f"route to the wrong tool ({cluster.key})"
        case FailureKind.MISSING_FACT:
            return f"lack the fact '{cluster.key}'"
        case FailureKind.INSTRUCTION:
            return f"break the instruction '{cluster.key}'"
        case FailureKind.PROCEDURE if cluster.task_types and cluster.step:
            return (
                f"go wrong at step {cluster.step} of '{cluster.task_types[0]}' until users guide it"
            )
        case _:
            return f"fail the task ('{cluster.key}')"


def tenants_text(cluster: FailureCluster) -> str:
    if len(cluster.tenants) == 1:
        return f"in tenant {cluster.tenants[0]}"
    return f"across {_count(len(cluster.tenants), 'tenant')}"


def breadth_text(cluster: FailureCluster) -> str:
    return span_text(len(cluster.tenants), len(cluster.task_types), len(cluster.tool_setups))


def span_text(tenants: int, task_types: int, tool_setups: int) -> str:
    return (
        f"{_count(tenants, 'tenant')}, {_count(task_types, 'task type')} and "
        f"{_count(tool_setups, 'tool setup')}"
    )


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def evidence_text(stats: WindowStats) -> str:
    """Which evidence judged task success, and what follow-ups said: "judged by ratings 40,
    follow-ups 12; follow-ups dissatisfied in 45% [33%, 58%] of trajectories"."""
    sources = ", ".join(f"{_EVIDENCE[k]} {n}" for k, n in sorted(stats.success_evidence.items()))
    judged = f"judged by {sources}" if sources else "no outcome, rating or follow-up judged it"
    heard = stats.follow_ups
    if heard is None or heard.read == 0:
        return judged
    said = (
        f"; follow-ups read as dissatisfied in {rate_text(heard.dissatisfied)} of "
        f"trajectories ({heard.read} follow-ups read"
    )
    judge = f"; judge model {heard.judge}" if heard.judge else ""
    return f"{judged}{said}{judge})"


_EVIDENCE = {"outcome": "outcomes", "rating": "ratings", "follow_up": "follow-ups"}


def rate_text(rate: Rate) -> str:
    if rate.rate is None:
        return "unknown"
    return f"{rate.rate:.0%} [{rate.low:.0%}, {rate.high:.0%}]"


def interval_text(mean: Mean) -> str:
    if mean.mean is None or mean.low is None or mean.high is None:
        return "n/a"
    return f"{mean.mean:.2f} [{mean.low:.2f}, {mean.high:.2f}]"
