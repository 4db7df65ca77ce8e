"""The gate judge: is the candidate at least as good as stable, overall and for every tenant?

In the spirit of Kayenta (Netflix's canary judge): each metric's candidate samples are compared
with the baseline's by a rank test, with a minimum number of samples, a tolerance and a
significance level, and a few critical metrics fail the gate on their own.
Unlike Kayenta it also judges each tenant: a candidate that helps most tenants must not
quietly hurt one of them. The replay gate judges paired replays of recorded trajectories
(`judge_replay`); the safety suite lives in `evolution.safety`. A failure the candidate
shares with its parent is a `Finding` about the agent, recorded but not held against it.

Everything here is a plain pydantic value or a pure function: results cross Temporal activity
boundaries and are stored as JSON with the evolution they decided.

    records.py   the settings, samples, judgements, findings and results
    live.py      the live judge of the shadow, canary and holdback gates (`judge`)
    canary.py    what a canary does after a look: the ramp moves while no harm is evident
    plan.py      a canary's plan before it starts: sessions and hours at today's traffic
    sequential.py  confidence sequences valid at every look, and the sessions they need
    estimate.py  the difference of means, with CUPED where a covariate is known
    replay_judge.py  the replay gate's judge of paired replays (`judge_replay`)
    verdict.py   how judgements become a gate's verdict
"""

from evolution.gates.live import judge, question_for
from evolution.gates.records import (
    Finding,
    Gate,
    GateConfig,
    GateResult,
    MetricJudgement,
    MetricSamples,
    Question,
    ReplayCase,
    Sample,
    Verdict,
)
from evolution.gates.replay_judge import judge_replay

__all__ = [
    "Finding",
    "Gate",
    "GateConfig",
    "GateResult",
    "MetricJudgement",
    "MetricSamples",
    "Question",
    "ReplayCase",
    "Sample",
    "Verdict",
    "judge",
    "judge_replay",
    "question_for",
]
