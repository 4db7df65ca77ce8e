"""What a canary does after a look: the ramp moves on the absence of evident harm.

A step before the last is there to stop harm while few sessions see the candidate, not to
answer the question: it advances at its first look that judged enough sessions and found
no harm. The last step looks until the question is answered (promote), harm is evident
(stop), or the budget is spent (inconclusive: what then is the agent's setting,
`GateConfig.when_inconclusive`). Every look judges all of the canary's sessions with
confidence sequences, so looking at every step costs the guarantee nothing.

The workflow and the benchmark both walk a canary through `canary_move`.
"""

from __future__ import annotations

from enum import StrEnum

from evolution.gates.records import GateConfig, GateResult, Verdict

__all__ = ["Move", "canary_move", "harm_checked"]


class Move(StrEnum):
    STOP = "stop"  # harm is evident: take the candidate off now
    PROMOTE = "promote"  # the last step answered the question, and no harm is evident
    ADVANCE = "advance"  # a step before the last judged enough sessions and saw no harm
    LOOK_AGAIN = "look_again"  # keep the share and look again
    INCONCLUSIVE = "inconclusive"  # the budget is spent and the question still open


def canary_move(verdict: Verdict, *, checked: bool, last_step: bool, spent: bool) -> Move:
    """The move after a look.

    Args:
        verdict: the look's verdict (`judge`): fail is evident harm, pass an answer.
        checked: the look judged enough sessions to see harm (`harm_checked`).
        last_step: the canary is at its last (largest) share.
        spent: the canary's budget is spent.
    """
    if verdict is Verdict.FAIL:
        return Move.STOP
    if last_step and verdict is Verdict.PASS:
        return Move.PROMOTE
    if spent:
        return Move.INCONCLUSIVE
    if not last_step and checked:
        return Move.ADVANCE
    return Move.LOOK_AGAIN


def harm_checked(result: GateResult, config: GateConfig) -> bool:
    """The look judged the primary metric on `min_samples` sessions a side: had there been
    evident harm, it could have seen it."""
    return result.sessions is not None and result.sessions >= config.min_samples
