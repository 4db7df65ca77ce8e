"""The scheduled drifts: what changes in the shops' world each round, and what should follow.

Each round changes the world the same way real deployments change, and each change leaves a
different trace in the traffic, which the control plane's window analysis reads:

1. memory: Acme starts a holiday-returns policy; its customers keep asking, and correct the
   agent ("No, holiday purchases can be returned until January 31."). One tenant, one topic:
   a narrow missing fact (`evolution.decision`: memory).
2. tool_schema: the commerce platform's release 2 renames `cancel_order`'s `order_id` to `id`;
   every cancellation's first call is refused with a validation error naming `id`. One tool
   parameter (tool schema).
3. harness: Initech and Umbrella adopt an invoice policy the agent's instructions never
   stated; customers report answers as against policy (feedback category `policy`): an
   instruction failure (harness).
4. weights: a new wave of customers writes tersely, in slang or German; the model picks the
   wrong tool for them in every shop, for every kind of request and with both tool setups:
   a failure spread across tenants, task types and tool setups (weights).
5. gate: a person proposes a cost cut, a 24-token cap on answers; it reaches the canary,
   which must stop it with stable unchanged.
6. rollback: a person hot-fixes the instructions (shorter, so cheaper) and skips the gates;
   the facts the old instructions held are gone and rewards fall below the parent's: a
   regression after a promotion (rollback).
7. review: Globex starts shipping to Norway; its customers do not correct the agent's answer,
   they tell of their own parcels ("My sister in Oslo gets her orders from you all the
   time."). No reading of the words alone can tell that from a customer's own circumstance,
   so the evolution leaves the agent as it was and queues them for a person; a
   support lead at Globex labels each with the policy it shows, and the next evolution
   acts on the labels (memory).

Each round's traffic keeps the same steady base (usual tool requests and questions), so the
workload mix moves only by the round's own scenario. A drift starts the moment the round
before it ends. A version the policy promoted keeps its parent on a holdback, so the next
evolution's regression check compares the two on the drifted traffic itself; a before/after
comparison would read the drift as the promoted version's regression.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from evoplane.demo.users import TicketKind
from evoplane.demo.world import COMPANIES, Intent, intents_of

__all__ = ["ROUNDS", "Round", "by_name"]

ALL = tuple(COMPANIES)
Plan = Literal["policy", "cost_cut", "hotfix", "review"]


def _requests(words: str, weight: float, tenants: tuple[str, ...] = ALL):
    """Tool requests of every intent a shop has, `weight` shared among them."""
    kinds = []
    for intent in (Intent.ORDER_STATUS, Intent.REFUND, Intent.CANCEL, Intent.COMPLAINT):
        shops = tuple(t for t in tenants if intent in intents_of(t))
        label = f"{intent.value.replace('_', ' ')}" + (" (new wave)" if words == "hard" else "")
        kinds.append((TicketKind(label, intent, shops, words=words), weight / 4))
    return kinds


def _question(topic: str, tenants: tuple[str, ...], weight: float, report: str = "thumbs"):
    return (
        TicketKind(f"{topic} question", Intent.QUESTION, tenants, topic=topic, report=report),
        weight,
    )


# The steady base every round has: usual requests and the facts every agent was given.
_BASE = (
    *_requests("normal", 0.5),
    _question("hotline", ALL, 0.08),
    _question("giftcard", ALL, 0.07),
)
_HOLIDAY = ("acme",)
_INVOICE = ("initech", "umbrella")
_NORWAY = ("globex",)


@dataclass(frozen=True)
class Round:
    """One round: the drift, the traffic it produces, and the outcome the demo expects.

    Args:
        expected: the action the policy should choose ("memory", ... "rollback"), or for a
            person's candidate, the gate that should stop it.
        plan: "policy" lets the control plane decide; "cost_cut" evaluates a person's
            candidate through the gates; "hotfix" promotes a person's candidate with the
            gates skipped, then lets the control plane decide; "review" lets the control
            plane decide, has a person label what it queued for review, then lets it
            decide again.
    """

    name: str
    drift: str
    expected: str
    mix: tuple[tuple[TicketKind, float], ...]
    release: int = 1  # the platform release this round brings; later rounds keep it
    plan: Plan = "policy"
    scenario: tuple[str, ...] = ()  # the ticket labels the round is about
    # The drift's traffic before its evolution (for a hotfix, before and after it), in the
    # scale's tickets.
    window: float = 1.0
    # How long the canary watches, in the scale's canary steps.
    canary_length: float = 1.0


ROUNDS: tuple[Round, ...] = (
    Round(
        name="memory",
        drift="Acme starts holiday returns; customers ask and correct the agent",
        expected="memory",
        mix=(*_BASE, _question("holiday", _HOLIDAY, 0.35, "correct")),
        scenario=("holiday question",),
    ),
    Round(
        name="tool_schema",
        drift="platform release 2 renames cancel_order.order_id to id",
        expected="tool_schema",
        release=2,
        mix=(
            *_BASE,
            _question("holiday", _HOLIDAY, 0.05, "correct"),
            (TicketKind("cancel", Intent.CANCEL, ("acme", "globex", "umbrella")), 0.35),
        ),
        scenario=("cancel",),
    ),
    Round(
        name="harness",
        drift="Initech and Umbrella adopt an invoice policy the instructions never stated",
        expected="harness",
        # The lesson lifts the demo model's invoice answers from about 7% to 40% (sampled
        # as the bot samples, temperature 1): with invoice questions 30% of the traffic, the
        # canary's reward gain was within its noise in one full run of two.
        mix=(
            *_BASE,
            _question("holiday", _HOLIDAY, 0.05, "correct"),
            _question("invoice", _INVOICE, 0.5, "policy"),
        ),
        scenario=("invoice question",),
    ),
    Round(
        name="weights",
        drift="a new wave of customers writes tersely, in slang and in German, in every shop",
        expected="weights",
        # Mostly the new wave: the model gets about a third of its requests wrong, and a
        # cluster under a quarter of the window is too small to pay for training (a run with
        # half new wave and invoice questions chose harness for the invoice answers instead).
        mix=(
            *_requests("normal", 0.2),
            _question("hotline", ALL, 0.05),
            _question("giftcard", ALL, 0.05),
            *_requests("hard", 0.7),
        ),
        scenario=tuple(kind.label for kind, _ in _requests("hard", 1.0)),
        # More traffic before the evolution (68 tickets at the full scale): the window is
        # the training data. Trained offline on one run's traffic (30 steps), the right-tool
        # rate over every distinct new-wave prompt that run served rose from 0.36 to
        # 0.50-0.52 on a window of 34 tickets (about 29 training prompts), 0.61-0.62 on 68
        # (training seeds 0 and 1), and 0.66 on 136 (seed 0).
        window=1.7,
        # Its tickets take longer (tool calls, retries, a second model in the gateway): a
        # 10 s canary saw 41 and 42 sessions where the memory round's saw 124 and 122, and
        # measured one candidate whose held-out right-tool rate went 0.38 -> 0.88 at -0.05.
        # At 25 s it saw 47 to 69 a side on a fast host and read gains from +0.02 to +0.23
        # (p from 0.68 to 0.0005): the gain is real but about one standard error of a
        # canary that size, so it watches 40 s.
        canary_length=4.0,
    ),
    Round(
        name="gate",
        drift="a person proposes capping answers at 24 tokens to cut cost",
        expected="canary",
        plan="cost_cut",
        mix=(*_BASE, _question("invoice", _INVOICE, 0.1, "policy"), *_requests("hard", 0.2)),
    ),
    Round(
        name="rollback",
        drift="a person hot-fixes the instructions, shorter, and skips the gates",
        expected="rollback",
        plan="hotfix",
        mix=(
            *_requests("normal", 0.4),
            _question("hotline", ALL, 0.2),
            _question("giftcard", ALL, 0.2),
            _question("invoice", _INVOICE, 0.1, "policy"),
            _question("holiday", _HOLIDAY, 0.1, "correct"),
        ),
        scenario=("hotline question", "giftcard question"),
        # The policy needs 30 rewards on each side of the promotion (its default); 34
        # tickets left one side at 28 in a clean run, which then chose noop.
        window=1.3,
    ),
    Round(
        name="review",
        drift="Globex starts shipping to Norway; customers tell of their own parcels",
        expected="memory",
        plan="review",
        mix=(*_BASE, _question("shipping", _NORWAY, 0.35, "tell")),
        scenario=("shipping question",),
    ),
)


def by_name(names: list[str] | None = None, count: int | None = None) -> list[Round]:
    """The rounds to run: by name, in the demo's order, or the first `count`."""
    known = {round_.name: round_ for round_ in ROUNDS}
    if names:
        unknown = [name for name in names if name not in known]
        if unknown:
            raise ValueError(f"unknown rounds {unknown}; the demo has {list(known)}")
        return [round_ for round_ in ROUNDS if round_.name in names]
    return list(ROUNDS[: count or len(ROUNDS)])
