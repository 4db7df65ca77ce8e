"""Process groups: signalling one, and telling when it has ended (Linux /proc).

A server that starts workers of its own (SGLang's scheduler and detokenizer, MLflow's job
consumers) is started as the leader of a new process group and stopped with the group.
A member killed is gone only once the kernel has run the kill; a zombie waiting to be
reaped is gone already (it holds no memory and runs nothing).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

__all__ = ["group_alive", "group_members", "signal_group", "wait_for_group_to_end"]


def signal_group(pgid: int, sig: signal.Signals) -> None:
    """Send `sig` to every process of group `pgid`, if any is left."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def group_members(pgid: int) -> list[int]:
    """The live (not zombie) processes of process group `pgid`."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # ended while being read
        state, group = fields[0], int(fields[2])
        if group == pgid and state not in ("Z", "X"):
            members.append(int(stat.parent.name))
    return members


def group_alive(pgid: int) -> bool:
    """Whether a live process is left in group `pgid`."""
    try:
        os.killpg(pgid, 0)  # cheap, but it also finds zombies: /proc tells them apart
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return bool(group_members(pgid))


def wait_for_group_to_end(pgid: int, timeout: float, interval: float = 0.02) -> bool:
    """Until no live process is left in group `pgid`, or `timeout` seconds: whether it
    ended."""
    deadline = time.monotonic() + timeout
    while group_alive(pgid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)
    return True
