"""Sessions played a few at a time, and the share of them solved first time."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import TypeVar

__all__ = ["first_time_success", "play_sessions"]

T = TypeVar("T")


def play_sessions(
    session: Callable[[], T],
    count: int,
    *,
    concurrency: int,
    at_least: float = 0.0,
    on_done: Callable[[], None] = lambda: None,
) -> list[T]:
    """Play `count` sessions (and keep going for at least `at_least` seconds), with
    `concurrency` users at it at any time: a new one comes as one leaves.

    Returns each session's result, in the order they ended.
    """
    started = time.monotonic()
    done: list[T] = []
    with ThreadPoolExecutor(concurrency) as pool:
        open_: set[Future[T]] = set()
        while True:
            while len(open_) < concurrency and (
                len(done) + len(open_) < count or time.monotonic() - started < at_least
            ):
                open_.add(pool.submit(session))
            if not open_:
                return done
            closed, open_ = wait(open_, return_when=FIRST_COMPLETED)
            for future in closed:
                done.append(future.result())
                on_done()


def first_time_success(solved: Iterable[bool]) -> float | None:
    """The share of sessions solved first time, to three places; None for no sessions."""
    flags = list(solved)
    if not flags:
        return None
    return round(sum(flags) / len(flags), 3)
