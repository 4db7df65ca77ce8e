"""The decision policy: whether and where to change an agent, read off one window of traffic.

    u* = argmax over {memory, skill, harness, tool_schema, weights, rollback, noop}
         of expected_gain(u | window) - cost(u) - risk(u)

Gains, costs and risks share one unit: the share of trajectories expected to stop failing.
A change's gain is the confident share of its best target cluster (Wilson lower bound) times
how much of that failure the change can remove, discounted by workload drift; its risk is
its invasiveness, shrinking like a standard error as the cluster's evidence grows. Noop
scores 0, so a change must pay for itself. Everything is a pure function of `WindowStats`
and `PolicyConfig`: the same window always gives the same `DecisionRecord`, which a Temporal
activity result and an audit trail both need.

    records.py   the actions, the policy's settings, each action's score, the record kept
    scoring.py   each action's expected gain, cost and risk for a window, with its evidence
    policy.py    the choice: the best permitted action, forced or fallen back to
    reasons.py   why, in a sentence a person can check
    words.py     how numbers and clusters are said
    signals.py   the window statistics the policy read, flat, for the record
"""

from evolution.decision.policy import decide, fall_back, fallbacks
from evolution.decision.records import Action, ActionScore, DecisionRecord, PolicyConfig

__all__ = [
    "Action",
    "ActionScore",
    "DecisionRecord",
    "PolicyConfig",
    "decide",
    "fall_back",
    "fallbacks",
]
