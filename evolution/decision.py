"""The decision policy: whether and where to change an agent, read off one window of traffic.

    u* = argmax over {memory, harness, tool_schema, weights, rollback, noop}
         of expected_gain(u | window) - cost(u) - risk(u)

Gains, costs and risks share one unit: the share of trajectories expected to stop failing.
A change's gain is the confident share of its best target cluster (Wilson lower bound) times
how much of that failure the change can remove, discounted by workload drift; its risk is
its invasiveness, shrinking like a standard error as the cluster's evidence grows. Noop
scores 0, so a change must pay for itself. Everything is a pure function of `WindowStats`
and `PolicyConfig`: the same window always gives the same `DecisionRecord`, which a Temporal
activity result and an audit trail both need.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from evolution.window import (
    CanaryDelta,
    FailureCluster,
    FailureKind,
    Mean,
    Rate,
    Regression,
    RegressionDesign,
    WindowSpec,
    WindowStats,
)

__all__ = [
    "Action",
    "ActionScore",
    "DecisionRecord",
    "PolicyConfig",
    "decide",
    "fall_back",
    "fallbacks",
]


class Action(StrEnum):
    """Where the control plane may change an agent (or decide not to)."""

    MEMORY = "memory"
    HARNESS = "harness"
    TOOL_SCHEMA = "tool_schema"
    WEIGHTS = "weights"
    ROLLBACK = "rollback"
    NOOP = "noop"


class _Value(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class PolicyConfig(_Value):
    """One agent's decision settings; costs and risks are in shares of trajectories."""

    min_trajectories: int = Field(30, ge=1, description="below it: noop, too little evidence")
    min_cluster_trajectories: int = Field(5, ge=1, description="smallest cluster worth a fix")
    min_gain: float = Field(0.02, ge=0.0, description="smallest expected gain worth a change")
    memory_cost: float = Field(0.005, ge=0.0, description="writing memory items: cheap")
    tool_schema_cost: float = Field(0.005, ge=0.0, description="a schema overlay: cheap")
    harness_cost: float = Field(0.01, ge=0.0, description="prompt optimisation: moderate")
    weights_cost: float = Field(0.04, ge=0.0, description="an RL or SFT run on GPUs: expensive")
    rollback_cost: float = Field(0.002, ge=0.0, description="moving an alias back: nearly free")
    memory_risk: float = Field(0.005, ge=0.0, description="a wrong fact hurts few requests")
    tool_schema_risk: float = Field(0.01, ge=0.0, description="touches every call of one tool")
    harness_risk: float = Field(0.015, ge=0.0, description="touches every request")
    weights_risk: float = Field(0.04, ge=0.0, description="may forget what already works")
    rollback_risk: float = Field(0.005, ge=0.0, description="the parent was proven on traffic")
    weights_min_tenants: int = Field(3, ge=1, description="tenants a failure must span for weights")
    weights_min_task_types: int = Field(3, ge=1, description="task types it must span for weights")
    weights_min_tool_setups: int = Field(
        2, ge=1, description="tool setups it must span for weights"
    )
    spread_loss: float = Field(
        0.75, ge=0.0, le=1.0, description="effect a context fix loses on a weights-wide failure"
    )
    drift_sensitivity: float = Field(
        1.0, ge=0.0, description="gain discount per unit of workload drift (JS divergence)"
    )
    drift_min_trajectories: int = Field(
        30,
        ge=1,
        description="trajectories the period before the window needs for a drift to count "
        "(the mix of a few is noise: three sessions of one task type read as a drift of 0.7)",
    )
    regression_tolerance: float = Field(
        0.05, ge=0.0, description="reward drop vs the parent that warrants a rollback"
    )
    regression_min_samples: int = Field(
        30, ge=1, description="rewards needed on each side before a regression counts"
    )
    canary_tolerance: float = Field(
        0.05, ge=0.0, description="reward drop of the canary vs stable that clears it"
    )
    canary_min_samples: int = Field(
        30, ge=1, description="rewards needed on each side before a canary delta counts"
    )
    rollback_priority: float = Field(
        1.0, ge=0.0, description="gain added to a confirmed rollback so it outranks fixes"
    )

    def cost(self, action: Action) -> float:
        """What `action` costs to build and gate (noop costs nothing)."""
        return 0.0 if action is Action.NOOP else getattr(self, f"{action.value}_cost")

    def risk(self, action: Action) -> float:
        """How much `action` may break before evidence is counted (noop risks nothing)."""
        return 0.0 if action is Action.NOOP else getattr(self, f"{action.value}_risk")


class ActionScore(_Value):
    """One action's case: score = expected_gain - cost - risk, aimed at `target`."""

    action: Action
    expected_gain: float
    cost: float
    risk: float
    score: float
    evidence: str
    # The failure cluster the action was scored against, so a fallback to it knows what
    # to address (None: rollback, noop, or a change with nothing to aim at).
    target: FailureCluster | None = None


Signal = float | int | str | None


class DecisionRecord(_Value):
    """What was decided, why, and every number the policy read: the audit trail."""

    action: Action
    reason: str
    target: FailureCluster | None
    scores: list[ActionScore]
    signals: dict[str, Signal]
    window: WindowSpec
    stable_version: str | None
    forced: bool = False
    # The actions the agent was allowed (noop among them); None for all.
    allowed: list[Action] | None = None
    # The held-back parent has answered: stable is no worse than it (within the regression
    # tolerance) on enough rewards each side, so the holdback may end.
    holdback_answered: bool = False


_CHANGES = (Action.MEMORY, Action.HARNESS, Action.TOOL_SCHEMA, Action.WEIGHTS)
# On equal scores the less invasive action wins, so ties never escalate a change.
_PREFERENCE = (
    Action.NOOP,
    Action.ROLLBACK,
    Action.MEMORY,
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
}
# Weights can learn any kind of failure, but only a wide one justifies their cost.
_WEIGHTS_FIT = 0.8
_NOTABLE_DRIFT = 0.1
_REMEDY = {
    Action.MEMORY: "a memory item is the cheapest change that addresses it",
    Action.TOOL_SCHEMA: "a schema fix is the cheapest change that addresses it",
    Action.HARNESS: "a harness change (instructions, tool routing, demos) addresses it",
    Action.WEIGHTS: "a context fix for one tenant's setup will not generalise, so train weights",
}


@dataclass(frozen=True)
class _Option:
    """One action's best case before rounding: aimed at `target` when it has one."""

    action: Action
    gain: float
    cost: float
    risk: float
    evidence: str
    target: FailureCluster | None = None

    @property
    def score(self) -> float:
        return self.gain - self.cost - self.risk


def decide(
    stats: WindowStats,
    config: PolicyConfig | None = None,
    *,
    allowed: Collection[Action] | None = None,
    force: Action | None = None,
) -> DecisionRecord:
    """Pick the action with the best gain - cost - risk for this window, and say why.

    Args:
        allowed: the actions this agent may take (noop is always allowed); None for all.
        force: take this action whatever the scores say (they are still recorded); it
            overrides `allowed`, because an operator's explicit choice outranks defaults.
    """
    config = config or PolicyConfig()
    options = _options(stats, config)
    scores = [_rounded(options[action]) for action in Action]
    if force is not None:
        action = Action(force)
        reason = _forced_reason(action, _argmax(scores, set(Action)), scores)
    else:
        action, reason = _choose(options, scores, _permitted(allowed), stats, config)
    target = options[action].target
    if force is not None and target is None:
        target = _forced_target(action, stats, config)
    return DecisionRecord(
        action=action,
        reason=reason,
        target=target,
        scores=scores,
        signals=_signals(stats),
        window=stats.spec,
        stable_version=stats.stable_version,
        forced=force is not None,
        allowed=None if allowed is None else _in_order(_permitted(allowed)),
        holdback_answered=_holdback_answered(stats.regression, config),
    )


def _forced_target(
    action: Action, stats: WindowStats, config: PolicyConfig
) -> FailureCluster | None:
    """What a forced change should address when the evidence was too thin to score it:
    the cluster it fits best, however small (the operator chose to act anyway)."""
    if action not in _CHANGES:
        return None
    fitting = [c for c in stats.failures if _fit(action, c, config) > 0]
    return max(fitting, key=lambda c: (_fit(action, c, config) * c.share, c.count), default=None)


# -- scoring ---------------------------------------------------------------------------


def _options(stats: WindowStats, config: PolicyConfig) -> dict[Action, _Option]:
    options = {action: _change_option(action, stats, config) for action in _CHANGES}
    options[Action.ROLLBACK] = _rollback_option(stats, config)
    options[Action.NOOP] = _Option(Action.NOOP, 0.0, 0.0, 0.0, _baseline(stats, config))
    return options


def _change_option(action: Action, stats: WindowStats, config: PolicyConfig) -> _Option:
    """The action aimed at the cluster where it scores best (the largest on ties)."""
    cost, risk = config.cost(action), config.risk(action)
    if stats.trajectories < config.min_trajectories:
        evidence = f"only {stats.trajectories} trajectories (< {config.min_trajectories})"
        return _Option(action, 0.0, cost, risk, f"{evidence}: too little evidence to change")
    clusters = [c for c in stats.failures if c.trajectories >= config.min_cluster_trajectories]
    if not clusters:
        evidence = f"no failure cluster reaches {config.min_cluster_trajectories} trajectories"
        return _Option(action, 0.0, cost, risk, evidence)
    aimed = [_aim(action, cluster, stats, config) for cluster in clusters]
    best = max(aimed, key=lambda option: option.score)
    if best.gain > 0:
        return best
    return _Option(action, 0.0, cost, risk, _nothing_to_address(action, clusters, config))


def _aim(
    action: Action, cluster: FailureCluster, stats: WindowStats, config: PolicyConfig
) -> _Option:
    """Gain = fit x confident share x drift factor; risk shrinks as the cluster grows."""
    fit = _fit(action, cluster, config)
    share = _wilson_low(cluster.share, stats.trajectories)
    gain = fit * share * _drift_factor(stats, config)
    evidence_weight = math.sqrt(
        config.min_cluster_trajectories / max(cluster.trajectories, config.min_cluster_trajectories)
    )
    risk = config.risk(action) * evidence_weight
    evidence = (
        f"{cluster.kind} '{cluster.key}': {cluster.share:.0%} of trajectories "
        f"({cluster.trajectories}, >= {share:.0%} at 95%) across {_breadth_text(cluster)}; "
        f"{action} removes about {fit:.0%} of it{_drift_note(stats, config)}"
    )
    return _Option(action, gain, config.cost(action), risk, evidence, cluster)


def _fit(action: Action, cluster: FailureCluster, config: PolicyConfig) -> float:
    """Share of the cluster's failures `action` removes: weights need breadth, context
    fixes lose effect as the failure spreads (they are tuned to the setups they saw)."""
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


def _rollback_option(stats: WindowStats, config: PolicyConfig) -> _Option:
    """A confirmed regression or a clearly worse canary outranks every fix-forward."""
    findings = _rollback_findings(stats, config)
    drops = [drop for drop, _ in findings if drop is not None]
    gain = config.rollback_priority + max(drops) if drops else 0.0
    evidence = "; ".join(text for _, text in findings)
    return _Option(Action.ROLLBACK, gain, config.rollback_cost, config.rollback_risk, evidence)


def _rollback_findings(
    stats: WindowStats, config: PolicyConfig
) -> tuple[tuple[float | None, str], tuple[float | None, str]]:
    """(confirmed reward drop or None, what was found) for the promotion and the canary."""
    return _regression_finding(stats.regression, config), _canary_finding(stats.canary, config)


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


def _regression_finding(
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
        f"({_interval(current)} vs {parent.mean:.2f}, n={current.n})"
    )


def _holdback_answered(regression: Regression | None, config: PolicyConfig) -> bool:
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
        f"{canary.stable_version} ({_interval(live)} vs {stable.mean:.2f}, n={live.n})"
    )


def _rounded(option: _Option) -> ActionScore:
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
    )


# -- choosing --------------------------------------------------------------------------


def _choose(
    options: dict[Action, _Option],
    scores: list[ActionScore],
    permitted: set[Action],
    stats: WindowStats,
    config: PolicyConfig,
) -> tuple[Action, str]:
    """The best permitted action, unless its gain is too small to be worth a change."""
    chosen = _argmax(scores, permitted)
    excluded = _excluded(scores, permitted)
    if chosen.action is Action.NOOP or chosen.expected_gain < config.min_gain:
        change = _best_change(scores, permitted)
        reason = f"noop: {_noop_reason(stats, config, change)}{_regression_note(stats, config)}"
        return Action.NOOP, f"{reason}{excluded}"
    body = _reason(options[chosen.action], stats, config)
    margin = _margin(chosen, scores, permitted)
    return chosen.action, f"{chosen.action}: {body}{margin}{excluded}"


def _permitted(allowed: Collection[Action] | None) -> set[Action]:
    if allowed is None:
        return set(Action)
    return {Action(action) for action in allowed} | {Action.NOOP}


def _in_order(actions: set[Action]) -> list[Action]:
    return [action for action in Action if action in actions]


def _argmax(scores: list[ActionScore], among: set[Action]) -> ActionScore:
    """Highest score among `among`; on equal scores the less invasive action wins."""
    candidates = [score for score in scores if score.action in among]
    return min(candidates, key=lambda s: (-s.score, _PREFERENCE.index(s.action)))


def _best_change(scores: list[ActionScore], among: set[Action]) -> ActionScore | None:
    changes = [score for score in scores if score.action in among - {Action.NOOP}]
    return _argmax(changes, among) if changes else None


# -- falling back ----------------------------------------------------------------------


def fallbacks(decision: DecisionRecord, config: PolicyConfig) -> list[ActionScore]:
    """The changes to try next, best first, when the chosen change's operator cannot help.

    Each is an allowed change (memory, harness, tool_schema, weights) other than the chosen
    one that scores above noop and expects at least `config.min_gain`, in the policy's
    order (on equal scores the less invasive first), each aimed at its own target. A forced
    decision has none (a person chose that action), nor has a rollback or a noop.
    """
    if decision.forced or decision.action not in _CHANGES:
        return []
    noop = next(score for score in decision.scores if score.action is Action.NOOP)
    permitted = _permitted(decision.allowed) - {decision.action}
    ranked = [
        score
        for score in decision.scores
        if score.action in _CHANGES
        and score.action in permitted
        and score.score > noop.score
        and score.expected_gain >= config.min_gain
    ]
    return sorted(ranked, key=lambda s: (-s.score, _PREFERENCE.index(s.action)))


def fall_back(decision: DecisionRecord, to: ActionScore, why: str) -> DecisionRecord:
    """The decision re-aimed at the fallback `to`: its action, its target, and a reason
    that says why the evolution moved on (`why`) and what `to` addresses."""
    reason = f"{to.action}, the next-best change ({why}): {to.evidence} (score {to.score:.3f})"
    return decision.model_copy(update={"action": to.action, "target": to.target, "reason": reason})


# -- reasons ---------------------------------------------------------------------------


def _reason(option: _Option, stats: WindowStats, config: PolicyConfig) -> str:
    if option.action is Action.ROLLBACK:
        return _rollback_reason(stats, config)
    return _change_reason(option)


def _change_reason(option: _Option) -> str:
    cluster = option.target
    if cluster is None:  # only a zero-gain change lacks a target, and those lose to noop
        return option.evidence
    wide = option.action is Action.WEIGHTS
    where = f"across {_breadth_text(cluster)}" if wide else _tenants_text(cluster)
    return (
        f"{cluster.share:.0%} of trajectories {_symptom(cluster)} {where}; {_REMEDY[option.action]}"
    )


def _rollback_reason(stats: WindowStats, config: PolicyConfig) -> str:
    """Only the confirmed findings, each with what the rollback does about it."""
    (regression_drop, regression), (canary_drop, canary) = _rollback_findings(stats, config)
    parts = []
    if regression_drop is not None and stats.regression is not None:
        parts.append(f"{regression}; restore {stats.regression.parent_id}")
    if canary_drop is not None:
        parts.append(f"{canary}; clear the canary")
    return "; and ".join(parts)


def _noop_reason(stats: WindowStats, config: PolicyConfig, change: ActionScore | None) -> str:
    """Why nothing changes: thin evidence, nothing recurring, or nothing worth its price."""
    if stats.trajectories < config.min_trajectories:
        return (
            f"only {stats.trajectories} trajectories in the window, below the "
            f"{config.min_trajectories} needed to act; too little evidence to change the agent"
        )
    if not any(c.trajectories >= config.min_cluster_trajectories for c in stats.failures):
        return (
            f"nothing to fix: success {_rate_text(stats.task_success)} over "
            f"{stats.trajectories} trajectories and no failure cluster reaches "
            f"{config.min_cluster_trajectories} trajectories"
        )
    if change is None:
        return "no change is allowed for this agent"
    if change.expected_gain < config.min_gain:
        return (
            f"the best allowed change, {change.action}, expects a gain of "
            f"{change.expected_gain:.3f}, below min_gain {config.min_gain:.3f}"
            f"{_drift_note(stats, config)}"
        )
    return (
        f"the best allowed change, {change.action}, does not pay for its cost and risk "
        f"(gain {change.expected_gain:.3f}, score {change.score:.3f}){_drift_note(stats, config)}"
    )


def _regression_note(stats: WindowStats, config: PolicyConfig) -> str:
    """After a promotion, why its comparison with the parent did not call for a rollback."""
    if stats.regression is None:
        return ""
    _, found = _regression_finding(stats.regression, config)
    return f"; {found}"


def _forced_reason(action: Action, best: ActionScore, scores: list[ActionScore]) -> str:
    own = next(score for score in scores if score.action is action)
    return (
        f"forced by the operator: {action} (score {own.score:.3f}); the policy would have "
        f"chosen {best.action} (score {best.score:.3f})"
    )


def _margin(chosen: ActionScore, scores: list[ActionScore], permitted: set[Action]) -> str:
    runner_up = _argmax(scores, permitted - {chosen.action})
    return f" (score {chosen.score:.3f} vs {runner_up.action} {runner_up.score:.3f})"


def _excluded(scores: list[ActionScore], permitted: set[Action]) -> str:
    """Name the action `allowed` ruled out, when it would have won."""
    best = _argmax(scores, set(Action))
    if best.action in permitted:
        return ""
    return f"; {best.action} would score higher ({best.score:.3f}) but is not allowed"


def _symptom(cluster: FailureCluster) -> str:
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
        case _:
            return f"fail the task ('{cluster.key}')"


def _tenants_text(cluster: FailureCluster) -> str:
    if len(cluster.tenants) == 1:
        return f"in tenant {cluster.tenants[0]}"
    return f"across {_count(len(cluster.tenants), 'tenant')}"


def _breadth_text(cluster: FailureCluster) -> str:
    return _span(len(cluster.tenants), len(cluster.task_types), len(cluster.tool_setups))


def _span(tenants: int, task_types: int, tool_setups: int) -> str:
    return (
        f"{_count(tenants, 'tenant')}, {_count(task_types, 'task type')} and "
        f"{_count(tool_setups, 'tool setup')}"
    )


def _nothing_to_address(
    action: Action, clusters: list[FailureCluster], config: PolicyConfig
) -> str:
    if action is not Action.WEIGHTS:
        kinds = ", ".join(sorted({str(c.kind) for c in clusters}))
        return f"no failure cluster of a kind {action} can address ({kinds})"
    widest = max(clusters, key=lambda c: _spread(c, config))
    needed = _span(
        config.weights_min_tenants, config.weights_min_task_types, config.weights_min_tool_setups
    )
    return f"the widest failure '{widest.key}' spans {_breadth_text(widest)}; weights need {needed}"


def _baseline(stats: WindowStats, config: PolicyConfig) -> str:
    return (
        f"change nothing: success {_rate_text(stats.task_success)} over "
        f"{stats.trajectories} trajectories{_drift_note(stats, config)}"
    )


def _drift_note(stats: WindowStats, config: PolicyConfig) -> str:
    divergence = _drift(stats, config)
    if divergence is None or divergence < _NOTABLE_DRIFT:
        return ""
    return f" (gains discounted for workload drift {divergence:.2f})"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _rate_text(rate: Rate) -> str:
    if rate.rate is None:
        return "unknown"
    return f"{rate.rate:.0%} [{rate.low:.0%}, {rate.high:.0%}]"


def _interval(mean: Mean) -> str:
    if mean.mean is None or mean.low is None or mean.high is None:
        return "n/a"
    return f"{mean.mean:.2f} [{mean.low:.2f}, {mean.high:.2f}]"


# -- signals ---------------------------------------------------------------------------


def _signals(stats: WindowStats) -> dict[str, Signal]:
    """Every window statistic the policy read, flat, so a person can check its arithmetic."""
    return {
        "trajectories": stats.trajectories,
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
        "tool_error_rate": stats.tool_error_rate.rate,
        "failure_clusters": len(stats.failures),
        **_top_cluster_signals(stats.failures[0] if stats.failures else None),
        "drift": stats.drift.divergence if stats.drift else None,
        "drift_previous_trajectories": stats.drift.previous_trajectories if stats.drift else None,
        "canary_delta": stats.canary.delta if stats.canary else None,
        "canary_samples": stats.canary.canary.n if stats.canary else None,
        "regression_delta": stats.regression.delta if stats.regression else None,
        "regression_samples": stats.regression.current.n if stats.regression else None,
        "regression_parent_samples": stats.regression.parent.n if stats.regression else None,
        "regression_design": stats.regression.design.value if stats.regression else None,
        "cost_usd": stats.cost_usd,
        "cost_per_success": stats.cost_per_success,
    }


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
