"""The shops' customers: tickets played through the support agents, a few at a time."""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Sequence

from evoplane.demo.agent import SupportAgent
from evoplane.demo.users import Customer, Outcome, TicketKind
from evoplane.simulation.traffic import play_sessions

__all__ = ["Traffic"]


class Traffic:
    """The shops' customers, `concurrency` at a time; every closed ticket goes to the ledger."""

    def __init__(
        self, agents: dict[str, SupportAgent], seed: int, concurrency: int, run: str
    ) -> None:
        self.agents, self.concurrency, self.run = agents, concurrency, run
        self.rng = random.Random(seed)
        self.seed = seed
        self.ledger: list[Outcome] = []
        self._count = 0
        self._lock = threading.Lock()

    def _next(self, mix: Sequence[tuple[TicketKind, float]]) -> tuple[TicketKind, str, int]:
        with self._lock:
            kinds = [kind for kind, _ in mix]
            kind = self.rng.choices(kinds, [weight for _, weight in mix])[0]
            tenant = self.rng.choice(kind.tenants)
            self._count += 1
            return kind, tenant, self.seed * 1_000_003 + self._count

    def _one(self, mix: Sequence[tuple[TicketKind, float]]) -> Outcome:
        kind, tenant, seed = self._next(mix)
        session = f"{self.run}-{seed % 1_000_003}"
        outcome = Customer(random.Random(seed)).visit(self.agents[tenant], kind, session, seed)
        with self._lock:
            self.ledger.append(outcome)
        return outcome

    def tickets(
        self,
        mix: Sequence[tuple[TicketKind, float]],
        count: int,
        *,
        on_ticket: Callable[[], None] = lambda: None,
        at_least: float = 0.0,
    ) -> list[Outcome]:
        """Play `count` tickets (and keep going for at least `at_least` seconds), with
        `concurrency` customers at the desk at any time: a new one comes as one leaves."""
        return play_sessions(
            lambda: self._one(mix),
            count,
            concurrency=self.concurrency,
            at_least=at_least,
            on_done=on_ticket,
        )
