"""What the analysis keys a trajectory by: its task type, its tool setup, its rewards."""

from __future__ import annotations

import hashlib
import uuid
from collections import defaultdict
from collections.abc import Iterable

from atdp import Reward
from registry import WindowTrajectory

__all__ = ["by_trajectory", "task_type", "tool_setup"]


def by_trajectory(rewards: Iterable[Reward]) -> dict[uuid.UUID, list[Reward]]:
    grouped: dict[uuid.UUID, list[Reward]] = defaultdict(list)
    for reward in rewards:
        grouped[reward.trajectory_id].append(reward)
    return grouped


def task_type(trajectory: WindowTrajectory) -> str:
    return trajectory.task_type or "unknown"


def tool_setup(names: Iterable[str]) -> str:
    """A short stable fingerprint of a set of tool names; "none" for no tools.

    Spread across tool setups is evidence for a weights change: a failure seen with many
    different tool sets is not about one tool's schema.
    """
    unique = sorted(set(names))
    if not unique:
        return "none"
    return hashlib.sha256("\n".join(unique).encode()).hexdigest()[:12]
