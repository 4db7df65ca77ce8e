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

__all__ = ["LIVE_STAGES", "Evolution", "SimulationError", "evolve", "follow", "stage_words"]

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


def evolve(
    control: ControlClient,
    agent: str,
    options: dict[str, Any],
    *,
    timeout: float,
    catalog_ttl: float,
    on_stage: Callable[[str], None],
    live_traffic: Callable[[], None],
) -> Evolution:
    """Start an evolution of `agent` with `options` and follow it to its end (see `follow`);
    then wait out the gateway's alias cache, so the next traffic is routed by the aliases
    the evolution left."""
    started = control.evolve(agent, options)
    began = time.monotonic()
    live = follow(
        control, started["id"], timeout=timeout, on_stage=on_stage, live_traffic=live_traffic
    )
    seconds = round(time.monotonic() - began, 1)
    # Until the gateway's cached aliases expire, it may route new sessions by those the
    # evolution moved (to a canary it rolled back, say): the next traffic waits.
    time.sleep(catalog_ttl)
    return Evolution(started["id"], live, began, seconds, started.get("ui"))


def follow(
    control: ControlClient,
    evolution_id: str,
    *,
    timeout: float,
    on_stage: Callable[[str], None],
    live_traffic: Callable[[], None],
) -> dict[str, Any]:
    """Poll the evolution to its end, telling `on_stage` each new stage in words and
    calling `live_traffic` again and again while its live gates watch.

    Returns its last live state (with its `outcome`).

    Raises:
        SimulationError: it did not end within `timeout` seconds.
    """
    deadline = time.monotonic() + timeout
    shown = None
    while time.monotonic() < deadline:
        found = control.evolution(evolution_id)
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
        f"evolution {evolution_id} did not finish within {timeout:.0f}s; see it in the Temporal UI"
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
