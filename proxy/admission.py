"""A request the gateway has admitted, as the pipeline serves it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from atdp import Traffic
from registry import ApiKeyIdentity, TenantPolicy

__all__ = ["Admitted"]


@dataclass(frozen=True)
class Admitted:
    """Who calls, which agent and session, under which tenant policy (what its capture may
    keep and how), and how the call is served.

    Evaluation traffic (replays, optimisers) may `pin` a version and leave out its
    `harness`; it is never shadowed and never training data.
    """

    identity: ApiKeyIdentity
    agent: str
    session: str
    training_opt_out: bool
    policy: TenantPolicy
    traffic: Traffic = Traffic.USER
    pin: str | None = None
    harness: bool = True
    minted: bool = False  # the request named no session: the gateway made its id up
    # The client's own retry of a request it sent before (the OpenAI and Anthropic SDKs
    # number their automatic retries in `x-stainless-retry-count`): not a user's re-ask.
    retry: int = 0
    # Whether the client has gone (it closed the connection): its answer was never received.
    gone: Callable[[], Awaitable[bool]] | None = field(default=None, compare=False)

    @property
    def tenant(self) -> str:
        return self.identity.tenant
