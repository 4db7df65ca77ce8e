"""Why the chosen action was chosen (or nothing was), in a sentence a person can check."""

from __future__ import annotations

from evolution.decision.records import Action, ActionScore, PolicyConfig
from evolution.decision.scoring import (
    ActionCase,
    argmax,
    drift_note,
    regression_finding,
    rollback_findings,
)
from evolution.decision.words import (
    breadth_text,
    cluster_symptom,
    evidence_text,
    rate_text,
    tenants_text,
)
from evolution.window import (
    WindowStats,
)

__all__ = [
    "chosen_reason",
    "excluded_note",
    "forced_reason",
    "margin_text",
    "noop_reason",
    "regression_note",
]


_REMEDY = {
    Action.MEMORY: "a memory item is the cheapest change that addresses it",
    Action.SKILL: "a skill (the procedure users walk it through) is the cheapest change "
    "that addresses it",
    Action.TOOL_SCHEMA: "a schema fix is the cheapest change that addresses it",
    Action.HARNESS: "a harness change (instructions, tool routing, demos) addresses it",
    Action.WEIGHTS: "a context fix for one tenant's setup will not generalise, so train weights",
}


def chosen_reason(option: ActionCase, stats: WindowStats, config: PolicyConfig) -> str:
    if option.action is Action.ROLLBACK:
        return _rollback_reason(stats, config)
    return _change_reason(option)


def _change_reason(option: ActionCase) -> str:
    cluster = option.target
    if cluster is None:  # only a zero-gain change lacks a target, and those lose to noop
        return option.evidence
    wide = option.action is Action.WEIGHTS
    where = f"across {breadth_text(cluster)}" if wide else tenants_text(cluster)
    symptom = cluster_symptom(cluster)
    plan = option.plan
    unanswered = "" if plan is None or plan.answerable else f"; its canary: {plan.words()}"
    return (
        f"{cluster.share:.0%} of trajectories {symptom} {where}; {_REMEDY[option.action]}"
        f"{unanswered}"
    )


def _rollback_reason(stats: WindowStats, config: PolicyConfig) -> str:
    """Only the confirmed findings, each with what the rollback does about it."""
    (regression_drop, regression), (canary_drop, canary) = rollback_findings(stats, config)
    parts = []
    if regression_drop is not None and stats.regression is not None:
        parts.append(f"{regression}; restore {stats.regression.parent_id}")
    if canary_drop is not None:
        parts.append(f"{canary}; clear the canary")
    return "; and ".join(parts)


def noop_reason(stats: WindowStats, config: PolicyConfig, change: ActionScore | None) -> str:
    """Why nothing changes: thin evidence, nothing recurring, or nothing worth its price."""
    if stats.trajectories < config.min_trajectories:
        return (
            f"only {stats.trajectories} trajectories in the window, below the "
            f"{config.min_trajectories} needed to act; too little evidence to change the agent"
        )
    if not any(c.trajectories >= config.min_cluster_trajectories for c in stats.failures):
        return (
            f"nothing to fix: success {rate_text(stats.task_success)} over "
            f"{stats.trajectories} trajectories ({evidence_text(stats)}) and no failure "
            f"cluster reaches {config.min_cluster_trajectories} trajectories"
        )
    if change is None:
        return "no change is allowed for this agent"
    if change.expected_gain < config.min_gain:
        return (
            f"the best allowed change, {change.action}, expects a gain of "
            f"{change.expected_gain:.3f}, below min_gain {config.min_gain:.3f}"
            f"{drift_note(stats, config)}"
        )
    return (
        f"the best allowed change, {change.action}, does not pay for its cost and risk "
        f"(gain {change.expected_gain:.3f}, score {change.score:.3f}){drift_note(stats, config)}"
    )


def regression_note(stats: WindowStats, config: PolicyConfig) -> str:
    """After a promotion, why its comparison with the parent did not call for a rollback."""
    if stats.regression is None:
        return ""
    _, found = regression_finding(stats.regression, config)
    return f"; {found}"


def forced_reason(action: Action, best: ActionScore, scores: list[ActionScore]) -> str:
    own = next(score for score in scores if score.action is action)
    return (
        f"forced by the operator: {action} (score {own.score:.3f}); the policy would have "
        f"chosen {best.action} (score {best.score:.3f})"
    )


def margin_text(chosen: ActionScore, scores: list[ActionScore], permitted: set[Action]) -> str:
    runner_up = argmax(scores, permitted - {chosen.action})
    return f" (score {chosen.score:.3f} vs {runner_up.action} {runner_up.score:.3f})"


def excluded_note(scores: list[ActionScore], permitted: set[Action]) -> str:
    """Name the action `allowed` ruled out, when it would have won."""
    best = argmax(scores, set(Action))
    if best.action in permitted:
        return ""
    return f"; {best.action} would score higher ({best.score:.3f}) but is not allowed"
