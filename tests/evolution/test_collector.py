"""The garbage collector is paused while any window read is under way, and comes back as
it was when the last one ends, whatever the interleaving of reads on several threads."""

from __future__ import annotations

import gc
import threading
from contextlib import ExitStack

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evolution.analysis.collector import collection_paused


@pytest.fixture(autouse=True)
def _restore_collector():
    was = gc.isenabled()
    yield
    (gc.enable if was else gc.disable)()


@given(enabled=st.booleans(), steps=st.lists(st.booleans(), max_size=30))
def test_nested_pauses_end_as_the_collector_was(enabled: bool, steps: list[bool]) -> None:
    """Each step opens a pause (True) or closes the latest open one (False)."""
    (gc.enable if enabled else gc.disable)()
    open_: list[ExitStack] = []
    for opening in steps:
        if opening:
            stack = ExitStack()
            stack.enter_context(collection_paused())
            open_.append(stack)
        elif open_:
            open_.pop().close()
        assert gc.isenabled() == (enabled and not open_)
    for stack in open_:  # the rest end in the order they began
        stack.close()
    assert gc.isenabled() == enabled


def test_concurrent_reads_keep_it_paused_until_the_last_ends() -> None:
    gc.enable()
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    seen: dict[str, bool] = {}

    def first() -> None:
        with collection_paused():
            first_in.set()
            second_in.wait(5)
        first_out.set()

    def second() -> None:
        first_in.wait(5)
        with collection_paused():
            second_in.set()
            first_out.wait(5)
            seen["after the first ended"] = gc.isenabled()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert seen == {"after the first ended": False}
    assert gc.isenabled()
