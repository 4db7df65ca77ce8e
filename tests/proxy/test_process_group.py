"""Process groups: who is left in one, and when it has ended."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time

from proxy.process_group import group_alive, group_members, wait_for_group_to_end


def test_a_process_group_is_over_only_when_every_member_has_ended() -> None:
    """`group_members` sees a group's children as well as its leader, and not once they
    have ended (a zombie waiting to be reaped is over)."""
    sleeper = "import time; time.sleep(60)"
    child = f"import subprocess, sys; subprocess.Popen([sys.executable, '-c', {sleeper!r}]); "
    child += sleeper
    leader = subprocess.Popen([sys.executable, "-c", child], start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while len(group_members(leader.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        members = group_members(leader.pid)
        assert leader.pid in members and len(members) == 2
        assert group_alive(leader.pid)
        assert not wait_for_group_to_end(leader.pid, timeout=0.1)  # both still sleeping
        os.killpg(leader.pid, signal.SIGKILL)
        assert wait_for_group_to_end(leader.pid, timeout=10)
        # The leader is a zombie until waited for: over, all the same.
        assert group_members(leader.pid) == [] and not group_alive(leader.pid)
        assert leader.poll() is not None
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(leader.pid, signal.SIGKILL)
        leader.wait(10)
