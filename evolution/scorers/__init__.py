"""Code scorers: their settings, what they are sent, and how their answers are read.

Calling them (importing a function, posting to an endpoint) is I/O, done by the scoring
activity (`activities.scorers`); here are the plain parts it uses.
"""

from evolution.scorers.readings import (
    ScoreReading,
    ScorerOutputError,
    read_batch,
    read_score,
    scorer_input,
    scorer_reward,
)
from evolution.scorers.settings import ScorerSpec

__all__ = [
    "ScoreReading",
    "ScorerOutputError",
    "ScorerSpec",
    "read_batch",
    "read_score",
    "scorer_input",
    "scorer_reward",
]
