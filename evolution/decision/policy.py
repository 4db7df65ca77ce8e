"""The decision: the best permitted action for a window, forced or fallen back to."""

from __future__ import annotations

from collections.abc import Collection

from evolution.decision.algorithm import choose_algorithm
from evolution.decision.reasons import (
    chosen_reason,
    excluded_note,
    forced_reason,
    margin_text,
    noop_reason,
    regression_note,
)
from evolution.decision.records import Action, ActionScore, DecisionRecord, PolicyConfig
from evolution.decision.scoring import (
    CHANGES,
    PREFERENCE,
    ActionCase,
    action_options,
    argmax,
    is_holdback_answered,
    removable_share,
    rounded_score,
)
from evolution.decision.signals import window_signals
from evolution.gates import GateConfig
from evolution.window import (
    FailureCluster,
    WindowStats,
)

__all__ = ["decide", "fall_back", "fallbacks"]


def decide(
    stats: WindowStats,
    config: PolicyConfig | None = None,
    *,
    allowed: Collection[Action] | None = None,
    force: Action | None = None,
    teacher: bool = False,
    distill_teacher: bool = False,
    gate: GateConfig | None = None,
) -> DecisionRecord:
    """Pick the action with the best gain - cost - risk for this window, and say why.

    Args:
        allowed: the actions this agent may take (noop is always allowed); None for all.
        force: take this action whatever the scores say (they are still recorded); it
            overrides `allowed`, because an operator's explicit choice outranks defaults.
        teacher: whether the agent has a teacher model configured (for weights' algorithm).
        distill_teacher: whether it has a local teacher that scores the student's tokens.
        gate: the agent's gate settings: each change's canary is planned at today's
            traffic, and one that cannot be answered within its budget costs more.
    """
    config = config or PolicyConfig()
    options = action_options(stats, config, gate)
    scores = [rounded_score(options[action]) for action in Action]
    if force is not None:
        action = Action(force)
        reason = forced_reason(action, argmax(scores, set(Action)), scores)
    else:
        action, reason = _choose(options, scores, _permitted(allowed), stats, config)
    target = options[action].target
    if force is not None and target is None:
        target = _forced_target(action, stats, config)
    algorithm, why = choose_algorithm(
        stats, config, teacher=teacher, distill_teacher=distill_teacher
    )
    return DecisionRecord(
        action=action,
        reason=reason,
        target=target,
        scores=scores,
        signals={**window_signals(stats), "weights_algorithm": algorithm},
        window=stats.spec,
        stable_version=stats.stable_version,
        forced=force is not None,
        allowed=None if allowed is None else _in_order(_permitted(allowed)),
        holdback_answered=is_holdback_answered(stats.regression, config),
        algorithm=algorithm if action is Action.WEIGHTS else None,
        algorithm_reason=why if action is Action.WEIGHTS else None,
    )


def _forced_target(
    action: Action, stats: WindowStats, config: PolicyConfig
) -> FailureCluster | None:
    """What a forced change should address when the evidence was too thin to score it:
    the cluster it fits best, however small (the operator chose to act anyway)."""
    if action not in CHANGES:
        return None
    if action is Action.SKILL:
        return stats.procedures[0].cluster() if stats.procedures else None
    fitting = [c for c in stats.failures if removable_share(action, c, config) > 0]
    return max(
        fitting, key=lambda c: (removable_share(action, c, config) * c.share, c.count), default=None
    )


def _choose(
    options: dict[Action, ActionCase],
    scores: list[ActionScore],
    permitted: set[Action],
    stats: WindowStats,
    config: PolicyConfig,
) -> tuple[Action, str]:
    """The best permitted action, unless its gain is too small to be worth a change."""
    chosen = argmax(scores, permitted)
    excluded = excluded_note(scores, permitted)
    if chosen.action is Action.NOOP or chosen.expected_gain < config.min_gain:
        change = _best_change(scores, permitted)
        reason = f"noop: {noop_reason(stats, config, change)}{regression_note(stats, config)}"
        return Action.NOOP, f"{reason}{excluded}"
    body = chosen_reason(options[chosen.action], stats, config)
    margin = margin_text(chosen, scores, permitted)
    return chosen.action, f"{chosen.action}: {body}{margin}{excluded}"


def _permitted(allowed: Collection[Action] | None) -> set[Action]:
    if allowed is None:
        return set(Action)
    return {Action(action) for action in allowed} | {Action.NOOP}


def _in_order(actions: set[Action]) -> list[Action]:
    return [action for action in Action if action in actions]


def _best_change(scores: list[ActionScore], among: set[Action]) -> ActionScore | None:
    changes = [score for score in scores if score.action in among - {Action.NOOP}]
    return argmax(changes, among) if changes else None


def fallbacks(decision: DecisionRecord, config: PolicyConfig) -> list[ActionScore]:
    """The changes to try next, best first, when the chosen change's operator cannot help.

    Each is an allowed change (memory, skill, harness, tool_schema, weights) other than the chosen
    one that scores above noop and expects at least `config.min_gain`, in the policy's
    order (on equal scores the less invasive first), each aimed at its own target. A forced
    decision has none (a person chose that action), nor has a rollback or a noop.
    """
    if decision.forced or decision.action not in CHANGES:
        return []
    noop = next(score for score in decision.scores if score.action is Action.NOOP)
    permitted = _permitted(decision.allowed) - {decision.action}
    ranked = [
        score
        for score in decision.scores
        if score.action in CHANGES
        and score.action in permitted
        and score.score > noop.score
        and score.expected_gain >= config.min_gain
    ]
    return sorted(ranked, key=lambda s: (-s.score, PREFERENCE.index(s.action)))


def fall_back(decision: DecisionRecord, to: ActionScore, why: str) -> DecisionRecord:
    """The decision re-aimed at the fallback `to`: its action, its target, and a reason
    that says why the evolution moved on (`why`) and what `to` addresses."""
    reason = f"{to.action}, the next-best change ({why}): {to.evidence} (score {to.score:.3f})"
    update = {"action": to.action, "target": to.target, "reason": reason}
    if to.action is Action.WEIGHTS:  # how weights would train was read with the window
        update["algorithm"] = decision.signals.get("weights_algorithm")
    return decision.model_copy(update=update)
