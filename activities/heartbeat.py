"""Heartbeats for synchronous activities whose work is one long call (reading a window,
a judge model's pass over it), which cannot heartbeat between steps of their own.

A thread beats while the work runs, so the workflow can give the activity a short heartbeat
timeout: a worker that dies, or a task the server marked started that never reached a
worker (seen under load: temporalio/temporal#1058), is retried after that timeout instead
of after the whole start-to-close timeout.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from temporalio import activity

__all__ = ["beating"]


@contextmanager
def beating(every: float = 10.0) -> Iterator[None]:
    """Heartbeat at once and every `every` seconds until the block ends (nothing outside
    an activity, where the same code also runs)."""
    if not activity.in_activity():
        yield
        return
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(every):
            activity.heartbeat()

    activity.heartbeat()  # the task has reached this worker
    # The activity's context travels with the thread: `activity.heartbeat` reads it.
    thread = threading.Thread(
        target=contextvars.copy_context().run, args=(beat,), name="heartbeat", daemon=True
    )
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
