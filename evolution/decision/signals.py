"""Every window statistic the policy read, flat, for the record."""

from __future__ import annotations

from evolution.decision.records import Signal
from evolution.decision.scoring import window_traffic
from evolution.window import (
    FailureCluster,
    ProcedureFailure,
    WindowStats,
)

__all__ = ["window_signals"]


def window_signals(stats: WindowStats) -> dict[str, Signal]:
    """Every window statistic the policy read, flat, so a person can check its arithmetic."""
    return {
        "trajectories": stats.trajectories,
        "sampled_from": stats.sampled_from,
        "sessions": stats.sessions,
        "tenants": len(stats.tenants),
        "task_types": len(stats.task_types),
        "tool_setups": len(stats.tool_setups),
        "success_rate": stats.task_success.rate,
        "success_low": stats.task_success.low,
        "success_high": stats.task_success.high,
        "reward_mean": stats.reward.mean,
        "reward_low": stats.reward.low,
        "reward_high": stats.reward.high,
        "correction_rate": stats.correction_rate.rate,
        **_evidence_signals(stats),
        "tool_error_rate": stats.tool_error_rate.rate,
        "failure_clusters": len(stats.failures),
        **_top_cluster_signals(stats.failures[0] if stats.failures else None),
        "procedures": len(stats.procedures),
        **_top_procedure_signals(stats.procedures[0] if stats.procedures else None),
        "drift": stats.drift.divergence if stats.drift else None,
        "drift_previous_trajectories": stats.drift.previous_trajectories if stats.drift else None,
        "canary_delta": stats.canary.delta if stats.canary else None,
        "canary_samples": stats.canary.canary.n if stats.canary else None,
        "regression_delta": stats.regression.delta if stats.regression else None,
        "regression_samples": stats.regression.current.n if stats.regression else None,
        "regression_parent_samples": stats.regression.parent.n if stats.regression else None,
        "regression_design": stats.regression.design.value if stats.regression else None,
        **_traffic_signals(stats),
        "cost_usd": stats.cost_usd,
        "cost_per_success": stats.cost_per_success,
    }


def _evidence_signals(stats: WindowStats) -> dict[str, Signal]:
    """Which evidence judged success, and what users' follow-ups said."""
    heard = stats.follow_ups
    return {
        **{
            f"success_judged_by_{source}": stats.success_evidence.get(source, 0)
            for source in ("outcome", "rating", "follow_up")
        },
        "follow_ups_read": heard.read if heard else None,
        "dissatisfied_rate": heard.dissatisfied.rate if heard else None,
        "dissatisfied_low": heard.dissatisfied.low if heard else None,
        "dissatisfied_high": heard.dissatisfied.high if heard else None,
        "follow_up_judge_agreement": heard.judge_agreement if heard else None,
    }


def _traffic_signals(stats: WindowStats) -> dict[str, Signal]:
    """What a canary's plan reads: rewarded sessions an hour and one session's variance."""
    traffic = window_traffic(stats)
    rate, variance = traffic if traffic is not None else (None, None)
    return {"rewarded_per_hour": rate, "reward_variance": variance}


def _top_cluster_signals(cluster: FailureCluster | None) -> dict[str, Signal]:
    if cluster is None:
        keys = ("kind", "key", "share", "trajectories", "tenants", "task_types", "tool_setups")
        return {f"top_cluster_{key}": None for key in keys}
    return {
        "top_cluster_kind": str(cluster.kind),
        "top_cluster_key": cluster.key,
        "top_cluster_share": cluster.share,
        "top_cluster_trajectories": cluster.trajectories,
        "top_cluster_tenants": len(cluster.tenants),
        "top_cluster_task_types": len(cluster.task_types),
        "top_cluster_tool_setups": len(cluster.tool_setups),
    }


def _top_procedure_signals(procedure: ProcedureFailure | None) -> dict[str, Signal]:
    """The skill's evidence: which task type, at which step, how consistently, how often
    users guided it, and how often their guidance fixed it."""
    keys = (
        "task_type", "step", "trajectories", "sessions", "consistency", "guided", "fixed_rate",
        "share",
    )  # fmt: skip
    if procedure is None:
        return {f"top_procedure_{key}": None for key in keys}
    return {
        "top_procedure_task_type": procedure.task_type,
        "top_procedure_step": procedure.step,
        "top_procedure_trajectories": procedure.trajectories,
        "top_procedure_sessions": procedure.sessions,
        "top_procedure_consistency": procedure.consistency,
        "top_procedure_guided": procedure.located,
        "top_procedure_fixed_rate": procedure.fixed.rate,
        "top_procedure_share": procedure.share,
    }
