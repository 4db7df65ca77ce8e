"""Each action's case for a window: expected gain, cost and risk, and the evidence behind them."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace

from evolution.decision.records import Action, ActionScore, PolicyConfig
from evolution.decision.words import (
    breadth_text,
    evidence_text,
    interval_text,
    rate_text,
    span_text,
)
from evolution.gates import GateConfig, Question, question_for
from evolution.gates.plan import CanaryPlan, plan_canary
from evolution.window import (
    CanaryDelta,
    FailureCluster,
    FailureKind,
    Mean,
    ProcedureFailure,
    Regression,
    RegressionDesign,
    WindowStats,
)

__all__ = [
    "CHANGES",
    "PREFERENCE",
    "ActionCase",
    "action_options",
    "argmax",
    "drift_note",
    "is_holdback_answered",
    "regression_finding",
    "removable_share",
    "rollback_findings",
    "rounded_score",
    "skill_shortfalls",
    "window_traffic",
]


CHANGES = (Action.MEMORY, Action.SKILL, Action.HARNESS, Action.TOOL_SCHEMA, Action.WEIGHTS)


# On equal scores the less invasive action wins, so ties never escalate a change.
PREFERENCE = (
    Action.NOOP,
    Action.ROLLBACK,
    Action.MEMORY,
    Action.SKILL,
    Action.TOOL_SCHEMA,
    Action.HARNESS,
    Action.WEIGHTS,
)


# How much of a cluster's failures each context change can remove, by where the failure
# points. A prior, not a measurement: the replay and canary gates measure the real effect.
_CONTEXT_FIT: Mapping[FailureKind, Mapping[Action, float]] = {
    FailureKind.MISSING_FACT: {Action.MEMORY: 0.9, Action.HARNESS: 0.3, Action.TOOL_SCHEMA: 0.0},
    FailureKind.TOOL_ARGUMENT: {Action.MEMORY: 0.1, Action.HARNESS: 0.4, Action.TOOL_SCHEMA: 0.9},
    FailureKind.TOOL_ROUTING: {Action.MEMORY: 0.1, Action.HARNESS: 0.8, Action.TOOL_SCHEMA: 0.4},
    FailureKind.INSTRUCTION: {Action.MEMORY: 0.1, Action.HARNESS: 0.9, Action.TOOL_SCHEMA: 0.0},
    FailureKind.TASK: {Action.MEMORY: 0.2, Action.HARNESS: 0.3, Action.TOOL_SCHEMA: 0.1},
    FailureKind.PROCEDURE: {Action.MEMORY: 0.2, Action.HARNESS: 0.3, Action.TOOL_SCHEMA: 0.0},
}


# A skill removes a procedural failure users fix by guidance, in the share of the task
# type's guided trajectories that go wrong at that one step (its consistency).
_SKILL_FIT = 0.9


# Weights can learn any kind of failure, but only a wide one justifies their cost.
_WEIGHTS_FIT = 0.8


_NOTABLE_DRIFT = 0.1


@dataclass(frozen=True)
class ActionCase:
    """One action's best case before rounding: aimed at `target` when it has one."""

    action: Action
    gain: float
    cost: float
    risk: float
    evidence: str
    target: FailureCluster | None = None
    plan: CanaryPlan | None = None

    @property
    def score(self) -> float:
        return self.gain - self.cost - self.risk


def action_options(
    stats: WindowStats, config: PolicyConfig, gate: GateConfig | None = None
) -> dict[Action, ActionCase]:
    """Every action's case; with the agent's `gate`, each change carries its canary's plan
    at today's traffic, and one the canary cannot answer within its budget costs more."""
    options = {
        action: _change_option(action, stats, config)
        for action in CHANGES
        if action is not Action.SKILL
    }
    options[Action.SKILL] = _skill_option(stats, config)
    if gate is not None:
        for action in CHANGES:
            options[action] = _planned(options[action], stats, config, gate)
    options[Action.ROLLBACK] = _rollback_option(stats, config)
    options[Action.NOOP] = ActionCase(Action.NOOP, 0.0, 0.0, 0.0, _baseline(stats, config))
    return options


def _change_option(action: Action, stats: WindowStats, config: PolicyConfig) -> ActionCase:
    """The action aimed at the cluster where it scores best (the largest on ties)."""
    cost, risk = config.cost(action), config.risk(action)
    if stats.trajectories < config.min_trajectories:
        evidence = f"only {stats.trajectories} trajectories (< {config.min_trajectories})"
        return ActionCase(action, 0.0, cost, risk, f"{evidence}: too little evidence to change")
    clusters = [c for c in stats.failures if c.trajectories >= config.min_cluster_trajectories]
    if not clusters:
        evidence = f"no failure cluster reaches {config.min_cluster_trajectories} trajectories"
        return ActionCase(action, 0.0, cost, risk, evidence)
    aimed = [_aim(action, cluster, stats, config) for cluster in clusters]
    best = max(aimed, key=lambda option: option.score)
    if best.gain > 0:
        return best
    return ActionCase(action, 0.0, cost, risk, _nothing_to_address(action, clusters, config))


def _aim(
    action: Action, cluster: FailureCluster, stats: WindowStats, config: PolicyConfig
) -> ActionCase:
    """Gain = fit x confident share x drift factor; risk shrinks as the cluster grows."""
    fit = removable_share(action, cluster, config)
    share = _wilson_low(cluster.share, stats.trajectories)
    gain = fit * share * _drift_factor(stats, config)
    evidence_weight = math.sqrt(
        config.min_cluster_trajectories / max(cluster.trajectories, config.min_cluster_trajectories)
    )
    risk = config.risk(action) * evidence_weight
    evidence = (
        f"{cluster.kind} '{cluster.key}': {cluster.share:.0%} of trajectories "
        f"({cluster.trajectories}, >= {share:.0%} at 95%) across {breadth_text(cluster)}; "
        f"{action} removes about {fit:.0%} of it{drift_note(stats, config)}"
    )
    return ActionCase(action, gain, config.cost(action), risk, evidence, cluster)


def _skill_option(stats: WindowStats, config: PolicyConfig) -> ActionCase:
    """A skill, aimed at the procedural failure where it scores best: one task type going
    wrong at one step across sessions, fixed when users guide it."""
    cost, risk = config.cost(Action.SKILL), config.risk(Action.SKILL)
    if stats.trajectories < config.min_trajectories:
        evidence = f"only {stats.trajectories} trajectories (< {config.min_trajectories})"
        return ActionCase(
            Action.SKILL, 0.0, cost, risk, f"{evidence}: too little evidence to change"
        )
    eligible = [p for p in stats.procedures if not skill_shortfalls(p, config)]
    if not eligible:
        return ActionCase(Action.SKILL, 0.0, cost, risk, _no_procedure(stats, config))
    aimed = [_aim_skill(procedure, stats, config) for procedure in eligible]
    return max(aimed, key=lambda option: option.score)


def _planned(
    option: ActionCase, stats: WindowStats, config: PolicyConfig, gate: GateConfig
) -> ActionCase:
    """The change with its canary's plan. A plan longer than the canary's budget at today's
    traffic costs `unanswered_cost` and risks `unanswered_risk`, each times the share of the
    plan the budget cannot cover: the canary would end inconclusive, after serving users a
    change whose effect stays unknown, and a person would have to decide."""
    traffic = window_traffic(stats)
    if traffic is None:
        return option
    rate, variance = traffic
    question = gate.question or question_for(option.action.value)
    fix = question is Question.SUPERIORITY and option.gain > 0
    plan = plan_canary(
        gate,
        question,
        variance=variance,
        rate_per_hour=rate,
        distance=option.gain if fix else None,
    )
    if option.gain <= 0 or plan.answerable:
        return replace(option, plan=plan)
    return replace(
        option,
        cost=option.cost + config.unanswered_cost * plan.shortfall,
        risk=option.risk + config.unanswered_risk * plan.shortfall,
        evidence=f"{option.evidence}; its canary: {plan.words()}",
        plan=plan,
    )


def window_traffic(stats: WindowStats) -> tuple[float, float] | None:
    """(rewarded sessions an hour, one session's reward variance) in the window: today's
    traffic, as a canary would see it; None without two rewards or a span of time.

    The variance is the one the reward's 95% Student-t interval was computed from."""
    reward, hours = stats.reward, (stats.until - stats.since).total_seconds() / 3600.0
    if reward.n < 2 or reward.mean is None or reward.high is None or hours <= 0:
        return None
    from scipy.stats import t as student_t

    scale = stats.sampled_from / stats.trajectories if stats.sampled_from else 1.0
    spread = (reward.high - reward.mean) / float(student_t.ppf(0.975, reward.n - 1))
    return reward.n * scale / hours, reward.n * spread * spread


def skill_shortfalls(procedure: ProcedureFailure, config: PolicyConfig) -> list[str]:
    """What keeps a procedural failure from being a skill's to fix (empty: nothing)."""
    fixed = procedure.fixed.rate
    found = []
    if procedure.trajectories < config.min_cluster_trajectories:
        found.append(f"{procedure.trajectories} trajectories (< {config.min_cluster_trajectories})")
    if procedure.sessions < config.skill_min_sessions:
        found.append(f"{procedure.sessions} sessions (< {config.skill_min_sessions})")
    if procedure.consistency < config.skill_min_consistency:
        found.append(
            f"consistency {procedure.consistency:.0%} (< {config.skill_min_consistency:.0%})"
        )
    if fixed is None or fixed < config.skill_min_fixed:
        seen = "unknown" if fixed is None else f"{fixed:.0%}"
        found.append(f"guidance fixed {seen} (< {config.skill_min_fixed:.0%})")
    return found


def _aim_skill(procedure: ProcedureFailure, stats: WindowStats, config: PolicyConfig) -> ActionCase:
    fit = _SKILL_FIT * procedure.consistency
    share = _wilson_low(procedure.share, stats.trajectories)
    gain = fit * share * _drift_factor(stats, config)
    evidence_weight = math.sqrt(
        config.min_cluster_trajectories
        / max(procedure.trajectories, config.min_cluster_trajectories)
    )
    evidence = (
        f"procedure '{procedure.task_type}' goes wrong at step {procedure.step} in "
        f"{procedure.share:.0%} of trajectories ({procedure.trajectories} in "
        f"{procedure.sessions} sessions, >= {share:.0%} at 95%; {procedure.consistency:.0%} of "
        f"its guided trajectories first go wrong there, {rate_text(procedure.fixed)} then "
        f"succeed once users guide it); a skill removes about {fit:.0%} of it"
        f"{drift_note(stats, config)}"
    )
    risk = config.risk(Action.SKILL) * evidence_weight
    return ActionCase(
        Action.SKILL, gain, config.cost(Action.SKILL), risk, evidence, procedure.cluster()
    )


def _no_procedure(stats: WindowStats, config: PolicyConfig) -> str:
    if not stats.procedures:
        return "no task type goes wrong at a consistent later step until users guide it"
    top = stats.procedures[0]
    why = "; ".join(skill_shortfalls(top, config))
    return f"procedure '{top.task_type}' at step {top.step} falls short: {why}"


def removable_share(action: Action, cluster: FailureCluster, config: PolicyConfig) -> float:
    """Share of the cluster's failures `action` removes: weights need breadth, context
    fixes lose effect as the failure spreads (they are tuned to the setups they saw)."""
    if action is Action.SKILL:
        # Only a procedural failure is a skill's (its consistency is weighed where it is aimed).
        return _SKILL_FIT if cluster.kind is FailureKind.PROCEDURE else 0.0
    spread = _spread(cluster, config)
    if action is Action.WEIGHTS:
        return _WEIGHTS_FIT if spread >= 1.0 else 0.0
    return _CONTEXT_FIT[cluster.kind][action] * (1.0 - config.spread_loss * spread)


def _spread(cluster: FailureCluster, config: PolicyConfig) -> float:
    """0 for one tenant, task type and tool setup; 1 once every weights_min_* is reached."""
    return min(
        _breadth(len(cluster.tenants), config.weights_min_tenants),
        _breadth(len(cluster.task_types), config.weights_min_task_types),
        _breadth(len(cluster.tool_setups), config.weights_min_tool_setups),
    )


def _breadth(count: int, needed: int) -> float:
    if needed <= 1:
        return 1.0 if count >= needed else 0.0
    return min(1.0, max(0, count - 1) / (needed - 1))


def _wilson_low(share: float, total: int, z: float = 1.96) -> float:
    """The share we are 95% sure of: small windows count for less than large ones."""
    if total <= 0:
        return 0.0
    p = min(max(share, 0.0), 1.0)
    centre = p + z * z / (2 * total)
    margin = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total))
    return max(0.0, (centre - margin) / (1 + z * z / total))


def _drift_factor(stats: WindowStats, config: PolicyConfig) -> float:
    """A moving workload makes any fix built on this window less likely to pay off."""
    divergence = _drift(stats, config)
    if divergence is None:
        return 1.0
    return max(0.0, 1.0 - config.drift_sensitivity * divergence)


def _drift(stats: WindowStats, config: PolicyConfig) -> float | None:
    """The workload's drift from the period before, when that period had enough traffic."""
    if stats.drift is None or stats.drift.previous_trajectories < config.drift_min_trajectories:
        return None
    return stats.drift.divergence


def _rollback_option(stats: WindowStats, config: PolicyConfig) -> ActionCase:
    """A confirmed regression or a clearly worse canary outranks every fix-forward."""
    findings = rollback_findings(stats, config)
    drops = [drop for drop, _ in findings if drop is not None]
    gain = config.rollback_priority + max(drops) if drops else 0.0
    evidence = "; ".join(text for _, text in findings)
    return ActionCase(Action.ROLLBACK, gain, config.rollback_cost, config.rollback_risk, evidence)


def rollback_findings(
    stats: WindowStats, config: PolicyConfig
) -> tuple[tuple[float | None, str], tuple[float | None, str]]:
    """(confirmed reward drop or None, what was found) for the promotion and the canary."""
    return regression_finding(stats.regression, config), _canary_finding(stats.canary, config)


def _shortfall(
    current: Mean, reference: Mean, delta: float | None, min_samples: int, tolerance: float
) -> tuple[float | None, str | None]:
    """How much worse `current` is than `reference`, when that is confirmed.

    Confirmed when the drop exceeds tolerance on enough samples and the current interval's
    upper end sits below the reference mean (not just noise). Otherwise (None, why not).
    """
    if delta is None or current.mean is None or reference.mean is None or current.high is None:
        return None, "no rewards yet to compare"
    samples = min(current.n, reference.n)
    if samples < min_samples:
        return None, f"only {samples} rewards on one side"
    if delta >= -tolerance:
        return None, f"{delta:+.2f} is within tolerance"
    if current.high >= reference.mean:
        return None, f"{delta:+.2f}, but the interval reaches the reference: noise"
    return -delta, None


def regression_finding(
    regression: Regression | None, config: PolicyConfig
) -> tuple[float | None, str]:
    """The current stable against its parent since the promotion."""
    if regression is None:
        return None, "no promotion to compare against"
    current, parent = regression.current, regression.parent
    drop, why_not = _shortfall(
        current,
        parent,
        regression.delta,
        config.regression_min_samples,
        config.regression_tolerance,
    )
    if drop is None:
        held = " (held back)" if regression.design is RegressionDesign.HOLDBACK else ""
        return None, f"stable {regression.version_id} vs its parent{held}: {why_not}"
    if regression.design is RegressionDesign.HOLDBACK:
        against = f"its parent {regression.parent_id}, held back, on the same traffic"
    else:
        against = f"its parent {regression.parent_id} since its promotion"
    return drop, (
        f"stable {regression.version_id} earns {drop:.2f} less reward than {against} "
        f"({interval_text(current)} vs {parent.mean:.2f}, n={current.n})"
    )


def is_holdback_answered(regression: Regression | None, config: PolicyConfig) -> bool:
    if regression is None or regression.design is not RegressionDesign.HOLDBACK:
        return False
    if regression.delta is None:
        return False
    samples = min(regression.current.n, regression.parent.n)
    return samples >= config.regression_min_samples and (
        regression.delta >= -config.regression_tolerance
    )


def _canary_finding(canary: CanaryDelta | None, config: PolicyConfig) -> tuple[float | None, str]:
    """Same test as a regression, on the live canary against stable in the same window."""
    if canary is None:
        return None, "no live canary"
    live, stable = canary.canary, canary.stable
    drop, why_not = _shortfall(
        live, stable, canary.delta, config.canary_min_samples, config.canary_tolerance
    )
    if drop is None:
        return None, f"canary {canary.canary_version} vs stable: {why_not}"
    return drop, (
        f"the canary {canary.canary_version} earns {drop:.2f} less reward than stable "
        f"{canary.stable_version} ({interval_text(live)} vs {stable.mean:.2f}, n={live.n})"
    )


def rounded_score(option: ActionCase) -> ActionScore:
    """Four decimals keep the record readable; the score is computed from what is shown."""
    gain, cost, risk = (round(value, 4) for value in (option.gain, option.cost, option.risk))
    return ActionScore(
        action=option.action,
        expected_gain=gain,
        cost=cost,
        risk=risk,
        score=round(gain - cost - risk, 4),
        evidence=option.evidence,
        target=option.target,
        plan=option.plan,
    )


def argmax(scores: list[ActionScore], among: set[Action]) -> ActionScore:
    """Highest score among `among`; on equal scores the less invasive action wins."""
    candidates = [score for score in scores if score.action in among]
    return min(candidates, key=lambda s: (-s.score, PREFERENCE.index(s.action)))


def _nothing_to_address(
    action: Action, clusters: list[FailureCluster], config: PolicyConfig
) -> str:
    if action is not Action.WEIGHTS:
        kinds = ", ".join(sorted({str(c.kind) for c in clusters}))
        return f"no failure cluster of a kind {action} can address ({kinds})"
    widest = max(clusters, key=lambda c: _spread(c, config))
    needed = span_text(
        config.weights_min_tenants, config.weights_min_task_types, config.weights_min_tool_setups
    )
    return f"the widest failure '{widest.key}' spans {breadth_text(widest)}; weights need {needed}"


def _baseline(stats: WindowStats, config: PolicyConfig) -> str:
    return (
        f"change nothing: success {rate_text(stats.task_success)} over "
        f"{stats.trajectories} trajectories{sample_note(stats)} ({evidence_text(stats)})"
        f"{drift_note(stats, config)}"
    )


def sample_note(stats: WindowStats) -> str:
    """Where the window was measured on a sample, of how many."""
    return f" (a uniform sample of {stats.sampled_from})" if stats.sampled_from else ""


def drift_note(stats: WindowStats, config: PolicyConfig) -> str:
    divergence = _drift(stats, config)
    if divergence is None or divergence < _NOTABLE_DRIFT:
        return ""
    return f" (gains discounted for workload drift {divergence:.2f})"
