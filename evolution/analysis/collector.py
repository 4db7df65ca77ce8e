"""Python's cyclic garbage collector paused while a window's records are built and measured.

A day's window is hundreds of thousands of new objects (rows, dicts, records), none of
them in a cycle, and each full collection Python starts while they pile up walks them all
again: about a third of reading a 1M-event window went to it, 1.2 s of 3.7
(benchmarks/RESULTS.md).
Reference counting still frees everything the read drops; only cycles wait, and the
collector resumes as soon as the last paused read in the process finishes.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["collection_paused"]

_lock = threading.Lock()
_paused = 0  # reads under way in this process that paused the collector
_was_enabled = False


@contextmanager
def collection_paused() -> Iterator[None]:
    """The collector off for the block (shared by concurrent blocks on other threads), then
    back as it was before the first of them."""
    global _paused, _was_enabled
    with _lock:
        if _paused == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _paused += 1
    try:
        yield
    finally:
        with _lock:
            _paused -= 1
            if _paused == 0 and _was_enabled:
                gc.enable()
