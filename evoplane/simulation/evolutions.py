"""An evolution started and followed through the control API, as an operator's script does.

While a candidate is shadowed or canaried, the live gates judge real sessions, so traffic
goes on: the follower plays a few sessions at a time until the evolution ends.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from evoplane.control.client import ControlClient

__all__ = [
    "LIVE_STAGES",
    "Evolution",
    "Operator",
    "SimulationError",
    "persons_change",
    "stage_words",
]

LIVE_STAGES = frozenset({"shadow", "canary"})


class SimulationError(RuntimeError):
    """The run could not go on; the message says where it stopped and why."""


@dataclass(frozen=True)
class Evolution:
    """One evolution as the run followed it to its end."""

    id: str
    live: dict[str, Any]  # its last live state: action, decision, gates, outcome, reason
    began: float  # time.monotonic() when it was started
    seconds: float  # from its start to its end
    ui: str | None  # its workflow in the Temporal UI


def persons_change(
    action: str,
    candidate: dict[str, Any],
    *,
    actor: str | None = None,
    reason: str | None = None,
    gated: bool = True,
) -> dict[str, Any]:
    """An evolution's options for a person's own candidate (a spec) instead of the policy's
    choice: judged by the gates, or, `gated=False`, promoted with every gate skipped, as a
    hotfix is."""
    options: dict[str, Any] = {"force": action, "candidate": candidate}
    if not gated:
        options["skip_gates"] = ["replay", "shadow", "canary"]
    if actor is not None:
        options["actor"] = actor
    if reason is not None:
        options["reason"] = reason
    return options


@dataclass(frozen=True)
class Operator:
    """Starts and follows evolutions through the control API, as an operator's script does.

    Args:
        timeout: how long an evolution may take before the run stops.
        catalog_ttl: how long the gateway may still route by aliases an evolution moved.
    """

    control: ControlClient
    timeout: float
    catalog_ttl: float

    def evolve(
        self,
        agent: str,
        options: dict[str, Any],
        *,
        on_stage: Callable[[str], None],
        live_traffic: Callable[[], None],
    ) -> Evolution:
        """Start an evolution of `agent` with `options` and follow it to its end (see
        `follow`); then wait out the gateway's alias cache, so the next traffic is routed
        by the aliases the evolution left."""
        started = self.control.evolve(agent, options)
        began = time.monotonic()
        live = self.follow(started["id"], on_stage=on_stage, live_traffic=live_traffic)
        seconds = round(time.monotonic() - began, 1)
        # Until the gateway's cached aliases expire, it may route new sessions by those the
        # evolution moved (to a canary it rolled back, say): the next traffic waits.
        time.sleep(self.catalog_ttl)
        return Evolution(started["id"], live, began, seconds, started.get("ui"))

    def follow(
        self,
        evolution_id: str,
        *,
        on_stage: Callable[[str], None],
        live_traffic: Callable[[], None],
    ) -> dict[str, Any]:
        """Poll the evolution to its end, telling `on_stage` each new stage in words and
        calling `live_traffic` again and again while its live gates watch.

        Returns its last live state (with its `outcome`).

        Raises:
            SimulationError: it did not end within `timeout` seconds.
        """
        deadline = time.monotonic() + self.timeout
        shown = None
        while time.monotonic() < deadline:
            found = self.control.evolution(evolution_id)
            live = found.get("live") or {}
            stage = live.get("stage") or (found.get("record") or {}).get("stage")
            if stage != shown:
                on_stage(stage_words(stage, live))
                shown = stage
            if live.get("outcome"):
                return live
            if stage in LIVE_STAGES:
                live_traffic()
            else:
                time.sleep(0.4)
        raise SimulationError(
            f"evolution {evolution_id} did not finish within {self.timeout:.0f}s; "
            "see it in the Temporal UI"
        )


def stage_words(stage: str | None, live: dict[str, Any]) -> str:
    """An evolution's stage as a progress line says it."""
    words = {
        "started": "evolution started",
        "analysing": "analysing the window",
        "deciding": "deciding",
        "building": f"building a {live.get('action') or ''} candidate",
        "replay": "replay gate",
        "shadow": f"shadow gate on {live.get('candidate_version')}",
        "canary": f"canary gate on {live.get('candidate_version')}",
        "promoting": "promoting",
        "rolling_back": "rolling back",
        "done": f"done: {live.get('outcome')}",
    }
    return words.get(stage or "", stage or "starting")
